/// Finds the first syntax error of a JSON document (RFC 8259) and where it is, for messages: the
/// decoder only says that a document is not valid. The messages name the position and the kind of
/// problem, never the offending text (it may be template data).
public enum JSONSyntaxChecker {
    public struct Problem: Error, Equatable {
        public var offset: Int
        public var what: String

        public init(offset: Int, what: String) {
            self.offset = offset
            self.what = what
        }
    }

    /// Deeper nesting is reported rather than recursed into.
    static let maximumDepth = 512

    /// The first problem, or nil for a well-formed document.
    public static func firstProblem(in bytes: [UInt8]) -> Problem? {
        var parser = Parser(bytes: bytes)
        do {
            parser.skipWhitespace()
            try parser.value(depth: 0)
            parser.skipWhitespace()
            if parser.index < bytes.count { return Problem(offset: parser.index, what: "unexpected text after the document") }
            return nil
        } catch {
            return error
        }
    }

    /// 1-based line and column (in bytes) of an offset.
    public static func position(of offset: Int, in bytes: [UInt8]) -> (line: Int, column: Int) {
        var line = 1
        var lineStart = 0
        for index in 0..<min(offset, bytes.count) where bytes[index] == 0x0A {
            line += 1
            lineStart = index + 1
        }
        return (line, offset - lineStart + 1)
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        var current: UInt8? { self.index < self.bytes.count ? self.bytes[self.index] : nil }

        mutating func skipWhitespace() {
            while let byte = self.current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { self.index += 1 }
        }

        func fail(_ what: String) -> Problem {
            Problem(offset: self.index, what: self.current == nil ? "unexpected end of file" : what)
        }

        mutating func value(depth: Int) throws(Problem) {
            guard let byte = self.current else { throw self.fail("a value is missing") }
            switch byte {
            case UInt8(ascii: "{"): try self.object(depth: depth + 1)
            case UInt8(ascii: "["): try self.array(depth: depth + 1)
            case UInt8(ascii: "\""): try self.string()
            case UInt8(ascii: "t"): try self.literal("true")
            case UInt8(ascii: "f"): try self.literal("false")
            case UInt8(ascii: "n"): try self.literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                if self.startsWith("-Infinity") { throw self.fail(Self.notANumber("-Infinity")) }
                try self.number()
            default:
                for word in ["NaN", "Infinity"] where self.startsWith(word) { throw self.fail(Self.notANumber(word)) }
                throw self.fail("unexpected character where a value should be")
            }
        }

        /// Python's `json.dumps` writes these for float('nan') and float('inf') unless told
        /// `allow_nan=False`; JSON has no such numbers, and a template's values must be finite.
        static func notANumber(_ word: String) -> String {
            "\(word) is not a JSON number (Python's json.dumps writes it for a value that is not finite unless allow_nan=False); "
                + "every value must be a finite number"
        }

        func startsWith(_ word: String) -> Bool {
            let utf8 = Array(word.utf8)
            return self.bytes.count - self.index >= utf8.count && self.bytes[self.index..<self.index + utf8.count].elementsEqual(utf8)
        }

        mutating func object(depth: Int) throws(Problem) {
            guard depth <= JSONSyntaxChecker.maximumDepth else { throw self.fail("nested too deeply") }
            self.index += 1
            self.skipWhitespace()
            if self.current == UInt8(ascii: "}") {
                self.index += 1
                return
            }
            while true {
                guard self.current == UInt8(ascii: "\"") else { throw self.fail("expected a key in double quotes") }
                try self.string()
                self.skipWhitespace()
                guard self.current == UInt8(ascii: ":") else { throw self.fail("expected ':' after a key") }
                self.index += 1
                self.skipWhitespace()
                try self.value(depth: depth)
                self.skipWhitespace()
                switch self.current {
                case UInt8(ascii: ","):
                    self.index += 1
                    self.skipWhitespace()
                case UInt8(ascii: "}"):
                    self.index += 1
                    return
                default: throw self.fail("expected ',' or '}' in an object")
                }
            }
        }

        mutating func array(depth: Int) throws(Problem) {
            guard depth <= JSONSyntaxChecker.maximumDepth else { throw self.fail("nested too deeply") }
            self.index += 1
            self.skipWhitespace()
            if self.current == UInt8(ascii: "]") {
                self.index += 1
                return
            }
            while true {
                try self.value(depth: depth)
                self.skipWhitespace()
                switch self.current {
                case UInt8(ascii: ","):
                    self.index += 1
                    self.skipWhitespace()
                case UInt8(ascii: "]"):
                    self.index += 1
                    return
                default: throw self.fail("expected ',' or ']' in an array")
                }
            }
        }

        mutating func string() throws(Problem) {
            self.index += 1
            while let byte = self.current {
                switch byte {
                case UInt8(ascii: "\""):
                    self.index += 1
                    return
                case UInt8(ascii: "\\"):
                    self.index += 1
                    guard let escaped = self.current else { throw self.fail("") }
                    if escaped == UInt8(ascii: "u") {
                        for _ in 0..<4 {
                            self.index += 1
                            guard let hex = self.current, hex.isHexDigit else { throw self.fail("invalid \\u escape in a string") }
                        }
                    } else if !"\"\\/bfnrt".utf8.contains(escaped) {
                        throw self.fail("invalid escape in a string")
                    }
                    self.index += 1
                case 0..<0x20:
                    throw self.fail("control character in a string")
                default:
                    self.index += 1
                }
            }
            throw self.fail("")
        }

        mutating func literal(_ word: String) throws(Problem) {
            for expected in word.utf8 {
                guard self.current == expected else { throw self.fail("unexpected character where a value should be") }
                self.index += 1
            }
        }

        mutating func number() throws(Problem) {
            let start = self.index
            if self.current == UInt8(ascii: "-") { self.index += 1 }
            guard let first = self.current, first.isDigit else { throw self.fail("malformed number") }
            self.index += 1
            if first != UInt8(ascii: "0") { self.skipDigits() }
            if self.current == UInt8(ascii: ".") {
                self.index += 1
                guard self.current?.isDigit == true else { throw self.fail("malformed number") }
                self.skipDigits()
            }
            if self.current == UInt8(ascii: "e") || self.current == UInt8(ascii: "E") {
                self.index += 1
                if self.current == UInt8(ascii: "+") || self.current == UInt8(ascii: "-") { self.index += 1 }
                guard self.current?.isDigit == true else { throw self.fail("malformed number") }
                self.skipDigits()
            }
            let text = String(decoding: self.bytes[start..<self.index], as: UTF8.self)
            guard let value = Double(text), value.isFinite else {
                throw Problem(offset: start, what: "number out of range")
            }
        }

        mutating func skipDigits() {
            while self.current?.isDigit == true { self.index += 1 }
        }
    }
}

extension UInt8 {
    fileprivate var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    fileprivate var isHexDigit: Bool {
        self.isDigit || (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "f")) || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F"))
    }
}
