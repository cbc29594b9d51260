/// Escaping for mdoc(7) source: text lines, macro arguments, and the discussion texts of the help.
enum MDoc {
    /// mdoc's callable macros: a macro line's argument spelled like one of them would be run as it.
    static let callableMacros: Set<String> = [
        "Ac", "Ad", "An", "Ao", "Ap", "Aq", "Ar", "At", "Bc", "Bo", "Bq", "Brc", "Bro", "Brq", "Bsx", "Bx", "Cd", "Cm", "Dc", "Do",
        "Dq", "Dv", "Dx", "Ec", "Em", "En", "Eo", "Er", "Es", "Ev", "Fa", "Fc", "Fl", "Fn", "Fo", "Fr", "Fx", "Ic", "Li", "Lk", "Ms",
        "Mt", "Nm", "No", "Ns", "Nx", "Oc", "Oo", "Op", "Ox", "Pa", "Pc", "Pf", "Po", "Pq", "Qc", "Ql", "Qo", "Qq", "Sc", "So", "Sq",
        "St", "Sx", "Sy", "Ta", "Tn", "Ux", "Va", "Vt", "Xc", "Xo", "Xr",
    ]
    /// Words a macro line treats as delimiters when they stand alone.
    static let delimiters: Set<String> = [".", ",", ";", ":", "?", "!", "(", ")", "[", "]", "|"]

    /// Backslashes as `\e`, and the dashes that begin a word (`--json`, `-g`) as `\-`, so that
    /// options render as the hyphen-minus a reader can copy; a hyphen inside a word stays one.
    static func escapeCharacters(_ text: String) -> String {
        var result = ""
        var previous: Character = " "
        for character in text {
            switch character {
            case "\\": result += "\\e"
            case "-" where previous == "-" || previous.isWhitespace || "([\"'/=".contains(previous): result += "\\-"
            case _ where !character.isASCII:
                // groff reads Latin-1 unless preconv runs first (man does, groff alone does not).
                for scalar in character.unicodeScalars { result += "\\[u" + Self.hex(scalar.value) + "]" }
            default: result.append(character)
            }
            previous = character
        }
        return result
    }

    /// A code point as groff's `\[uXXXX]` wants it: upper-case hexadecimal, at least four digits.
    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// One line of running text: never read as a request (a leading `.` or `'`), no leading space
    /// (which would break the line).
    static func textLine(_ text: String) -> String {
        let trimmed = String(text.drop(while: { $0 == " " || $0 == "\t" }))
        let escaped = Self.escapeCharacters(trimmed)
        return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
    }

    /// A line of a literal display: its spaces kept.
    static func literalLine(_ text: String) -> String {
        let escaped = Self.escapeCharacters(text)
        return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
    }

    /// Words for a macro line (`.Nd`, `.Ar`): each escaped, a word that is a macro's name or a lone
    /// delimiter made plain with `\&`, double quotes as `\(dq`.
    static func arguments(_ text: String) -> String {
        text.split(separator: " ", omittingEmptySubsequences: true).map { word in
            let word = String(word)
            let escaped = Self.escapeCharacters(word).replacingAll("\"", with: "\\(dq")
            return Self.callableMacros.contains(word) || Self.delimiters.contains(word) ? "\\&" + escaped : escaped
        }.joined(separator: " ")
    }

    /// A help text as mdoc: paragraphs (blank lines) separated by `.Pp`; a paragraph whose later lines
    /// are indented (a table) becomes a literal display, any other is filled text.
    static func discussion(_ text: String) -> [String] {
        var lines: [String] = []
        for paragraph in Self.paragraphs(text) {
            if !lines.isEmpty { lines.append(".Pp") }
            let paragraphLines = paragraph.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if paragraphLines.dropFirst().contains(where: { $0.hasPrefix(" ") }) {
                lines.append(".Bd -literal -offset indent")
                lines += paragraphLines.map(Self.literalLine)
                lines.append(".Ed")
            } else {
                lines += paragraphLines.map(Self.textLine).filter { !$0.isEmpty }
            }
        }
        return lines
    }

    /// The paragraphs of a help text (separated by blank lines), without surrounding blank lines.
    static func paragraphs(_ text: String) -> [String] {
        var paragraphs: [String] = []
        var current: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) {
                if !current.isEmpty { paragraphs.append(current.joined(separator: "\n")) }
                current = []
            } else {
                current.append(String(line))
            }
        }
        if !current.isEmpty { paragraphs.append(current.joined(separator: "\n")) }
        return paragraphs
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self {
            if character == target { result += replacement } else { result.append(character) }
        }
        return result
    }
}
