/// Validation of the names clients send. Identifiers and gallery names are not biometric data, so they
/// may appear in error messages (truncated, so a hostile 1 MB name does not flood a log).
package enum Names {
    static let maximumIdentifierBytes = 256
    static let maximumGalleryBytes = 64

    /// An identifier is UTF-8 of 1…256 bytes with no control characters (PROTOCOL.md, names).
    package static func validateIdentifier(_ identifier: String) throws(RegistryError) {
        let bytes = identifier.utf8.count
        guard bytes > 0 else { throw .malformedRequest("identifier is empty") }
        guard bytes <= Self.maximumIdentifierBytes else {
            throw .malformedRequest("identifier is \(bytes) bytes long, at most \(Self.maximumIdentifierBytes) are allowed")
        }
        // C0 and C1 controls and DEL: they would corrupt logs and terminals, and the identifier index
        // uses 0x00 as its separator.
        if identifier.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
            throw .malformedRequest("identifier contains a control character")
        }
    }

    /// A gallery name is 1…64 bytes of ASCII letters, digits, '.', '_' or '-'.
    package static func validateGallery(_ name: String) throws(RegistryError) {
        guard !name.isEmpty, name.utf8.count <= Self.maximumGalleryBytes,
            name.utf8.allSatisfy({ b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                    || b == 0x2E || b == 0x5F || b == 0x2D
            })
        else {
            throw .malformedRequest(
                "gallery name '\(name.prefix(64))' is invalid: use 1-64 ASCII letters, digits, '.', '_' or '-'")
        }
    }

    /// `text` cut to at most `maximum` UTF-8 bytes, whole Unicode scalars only (a name in a log line,
    /// an audit entry or a message, where a request may have carried far more).
    public static func cut(_ text: String, toBytes maximum: Int) -> String {
        guard text.utf8.count > maximum else { return text }
        var count = 0
        var kept = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            count += UTF8.width(scalar)
            guard count <= maximum else { break }
            kept.append(scalar)
        }
        return String(kept)
    }

    /// `text` for a log line: cut to `maximum` bytes, control characters and line breaks shown as
    /// `\u{…}` escapes, so a name from a request can neither flood a line nor forge another one.
    public static func loggable(_ text: String, maximum: Int = 64) -> String {
        var escaped = ""
        for scalar in Self.cut(text, toBytes: maximum).unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.properties.isPatternWhitespace && scalar != " " {
                escaped += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + (text.utf8.count > maximum ? "…" : "")
    }
}
