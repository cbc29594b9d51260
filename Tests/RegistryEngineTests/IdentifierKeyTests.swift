import RegistryModel
import Testing

/// Identifiers are equal when their UTF-8 bytes are, and ordered by them, whatever Swift's canonical
/// equivalence says (RegistryModel's IdentifierBytes.swift, which every module compares them with).
@Suite struct IdentifierKeyTests {
    @Test func equalityIsByteWise() {
        let long = String(repeating: "person-", count: 6)  // past the 15 bytes a small string holds inline
        let pairs: [(String, String, Bool)] = [
            ("", "", true), ("a", "", false), ("ab", "abc", false), ("abc", "abd", false), ("zoë", "zoë", true),
            ("Jos\u{E9}", "Jose\u{301}", false),  // equal to Swift, different keys in the store
            ("\u{212A}", "K", false),  // KELVIN SIGN: a singleton NFC turns into K
            (long + "1", long + "1", true), (long + "1", long + "2", false),
            (String(decoding: Array((long + "x").utf8), as: UTF8.self), long + "x", true),
        ]
        for (a, b, equal) in pairs {
            #expect(a.sameIdentifier(as: b) == equal, "\(a) vs \(b)")
            #expect(b.sameIdentifier(as: a) == equal, "\(b) vs \(a)")
            #expect((IdentifierKey(a) == IdentifierKey(b)) == equal)
        }
        // Hashed by bytes too: a set of identifiers keeps both spellings.
        #expect(Set(["Jos\u{E9}", "Jose\u{301}", "Jos\u{E9}"].map(IdentifierKey.init)).count == 2)
        #expect(Set(["Jos\u{E9}", "Jose\u{301}"]).count == 1, "what String would do")
    }

    @Test func orderIsTheStoresByteOrder() {
        // Ascending UTF-8 bytes, unsigned, a prefix first: "Josf" falls between the two spellings of
        // José, as e (0x65) < f (0x66) < é (0xC3 0xA9).
        let ordered = ["", "Jos", "Jose", "Jose\u{301}", "Josf", "Jos\u{E9}", "Z", "a", "\u{7F}", "\u{E9}", "\u{1112}\u{1161}\u{11AB}", "\u{D55C}"]
        for (i, a) in ordered.enumerated() {
            for (j, b) in ordered.enumerated() {
                #expect(a.identifierPrecedes(b) == (i < j), "\(Array(a.utf8)) vs \(Array(b.utf8))")
            }
        }
        #expect("Josf" < "Jose\u{301}", "what String would do: it compares é as one scalar, U+00E9")
        #expect(ordered.reversed().sorted { $0.identifierPrecedes($1) }.map { Array($0.utf8) } == ordered.map { Array($0.utf8) })
    }
}
