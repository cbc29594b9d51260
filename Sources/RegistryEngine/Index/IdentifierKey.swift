import RegistryModel

/// An identifier compared and hashed by its UTF-8 bytes, as the store's keys are.
///
/// Swift's `String` equality is canonical equivalence: "José" with a precomposed é and with e plus a
/// combining accent are equal strings but different keys in LMDB. Keyed by `String`, the index would
/// merge two stored identities that deletion treats as two, so an erasure could leave one behind.
struct IdentifierKey: Hashable, Sendable {
    let string: String

    init(_ string: String) {
        self.string = string
    }

    static func == (a: IdentifierKey, b: IdentifierKey) -> Bool {
        a.string.utf8.elementsEqual(b.string.utf8)
    }

    func hash(into hasher: inout Hasher) {
        // One bulk combine over the UTF-8 bytes (native strings are contiguous): a byte-at-a-time
        // combine made interning a million identifiers at start-up several times slower.
        var string = self.string
        string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

extension String {
    /// Byte-wise identifier equality (see ``IdentifierKey``).
    func sameIdentifier(as other: String) -> Bool {
        self.utf8.elementsEqual(other.utf8)
    }
}
