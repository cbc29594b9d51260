import Testing

@testable import registryctl

/// Tables stay aligned on a terminal whatever the identifiers are written in: padded by the columns
/// each character takes, not by how many characters there are.
@Suite struct DisplayWidthTests {
    @Test func charactersTakeTheColumnsATerminalGivesThem() {
        let cases: [(String, Int)] = [
            ("alice", 5), ("Zoe\u{308}", 3), ("Zo\u{EB}", 3), ("中文名", 6), ("한", 2), ("\u{1112}\u{1161}\u{11AB}", 2), ("ｆｕｌｌ", 8),
            ("😀", 2), ("👨\u{200D}👩\u{200D}👧", 2), ("\u{1F1EF}\u{1F1F5}", 2), ("❤\u{FE0F}", 2), ("a\u{200B}b", 2),
        ]
        for (text, columns) in cases { #expect(DisplayWidth.of(text) == columns, "\(text.unicodeScalars.map { String($0.value, radix: 16) })") }
    }

    @Test func aTableOfWideIdentifiersIsAligned() {
        var table = Table(header: ["IDENTIFIER", "TEMPLATES"])
        for name in ["alice", "中文名", "😀x", "👨\u{200D}👩\u{200D}👧", "Zoe\u{308}"] { table.append([name, "1"]) }
        let lines = table.lines()
        // The second column starts in the same terminal column on every line.
        let starts = lines.map { line in DisplayWidth.of(line) - (line.hasSuffix("TEMPLATES") ? "TEMPLATES".count : 1) }
        #expect(Set(starts).count == 1, "\(lines)")
    }
}
