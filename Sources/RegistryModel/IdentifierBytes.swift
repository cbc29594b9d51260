import Glibc

// Identifiers are their UTF-8 bytes (PROTOCOL.md, names): what the client sent is the identity, never
// normalised. Swift's `String` `==`, `<` and hashing follow canonical equivalence instead, under
// which "Zo\u{EB}" (precomposed ë) and "Zoe\u{308}" (e + combining diaeresis) are equal, while the
// store's LMDB keys, which compare bytes, hold them as two people. Code that compares identifiers
// with `String`'s operators merges what the store keeps apart: a listing that drops one of two
// twins, an erasure or an audit that misses one. Compare, order, hash and deduplicate identifiers
// with these instead, in every module. Gallery names are ASCII by validation
// (``Names/validateGallery(_:)``), for which both agree; a name a client sends is compared the same
// way before validation has vouched for it (KELVIN SIGN is canonically equivalent to K).

extension String {
    /// Byte-wise identifier equality: the lengths, then one `memcmp` of the contiguous bytes (native
    /// strings' are). `elementsEqual` walked the views a byte at a time, and the writer compares
    /// identifiers for every registration of a batch with every other.
    @inlinable
    package func sameIdentifier(as other: String) -> Bool {
        let (mine, theirs) = (self.utf8, other.utf8)
        guard mine.count == theirs.count else { return false }
        let compared = mine.withContiguousStorageIfAvailable { a in
            theirs.withContiguousStorageIfAvailable { b in a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
        }
        if case .some(.some(let equal)) = compared { return equal }
        return mine.elementsEqual(theirs)  // a bridged string without contiguous bytes
    }

    /// Whether this identifier sorts before `other` in the store's order: its UTF-8 bytes compared
    /// as unsigned numbers, a prefix before what extends it (as LMDB orders keys, and as
    /// `list_identifiers` pages them).
    @inlinable
    package func identifierPrecedes(_ other: String) -> Bool {
        self.utf8.lexicographicallyPrecedes(other.utf8)
    }
}

/// An identifier compared and hashed by its UTF-8 bytes, as the store's keys are: the key for a
/// `Set` or `Dictionary` of identifiers (a `Set<String>` would count canonically equivalent twins as
/// one).
package struct IdentifierKey: Hashable, Sendable {
    package let string: String

    @inlinable
    package init(_ string: String) {
        self.string = string
    }

    @inlinable
    package static func == (a: IdentifierKey, b: IdentifierKey) -> Bool {
        a.string.sameIdentifier(as: b.string)
    }

    @inlinable
    package func hash(into hasher: inout Hasher) {
        // One bulk combine over the UTF-8 bytes (native strings are contiguous): a byte-at-a-time
        // combine made interning a million identifiers at start-up several times slower.
        var string = self.string
        string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
