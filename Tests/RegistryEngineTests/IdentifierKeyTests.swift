import Testing

@testable import RegistryEngine

/// Identifiers are equal when their UTF-8 bytes are, whatever Swift's canonical equivalence says.
@Suite struct IdentifierKeyTests {
    @Test func equalityIsByteWise() {
        let long = String(repeating: "person-", count: 6)  // past the 15 bytes a small string holds inline
        let pairs: [(String, String, Bool)] = [
            ("", "", true), ("a", "", false), ("ab", "abc", false), ("abc", "abd", false), ("zoë", "zoë", true),
            ("Jos\u{E9}", "Jose\u{301}", false),  // equal to Swift, different keys in the store
            (long + "1", long + "1", true), (long + "1", long + "2", false),
            (String(decoding: Array((long + "x").utf8), as: UTF8.self), long + "x", true),
        ]
        for (a, b, equal) in pairs {
            #expect(a.sameIdentifier(as: b) == equal, "\(a) vs \(b)")
            #expect(b.sameIdentifier(as: a) == equal, "\(b) vs \(a)")
            #expect((IdentifierKey(a) == IdentifierKey(b)) == equal)
        }
    }
}
