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
        hasher.combine(self.string.utf8.count)
        for byte in self.string.utf8 { hasher.combine(byte) }
    }
}

extension String {
    /// Byte-wise identifier equality (see ``IdentifierKey``).
    func sameIdentifier(as other: String) -> Bool {
        self.utf8.elementsEqual(other.utf8)
    }
}
