// A structure-aware mutator for the targets whose inputs are protobuf requests (dispatch, frame).
//
// Why: libFuzzer's own mutations change a few bytes at a time, and its default -max_len is 4,096 bytes,
// so a field longer than 65,535 bytes (the audit encoder's old UInt16 trap) or a repeated field past
// its maximum count is practically never produced with its length prefixes still consistent: four
// targets ran 10^7 inputs each without one. This mutator, for a share of the mutations, reads the
// input as protobuf wire bytes, picks one length-delimited field at any depth where the bytes parse as
// a message, and either resizes its content to a length at or around a limit, repeats one element of
// a repeated field up to or past a maximum count, or adds a field of such a length; then it rewrites
// every enclosing length prefix (and the frame's 4-byte prefix) so the input stays well-formed. The
// other mutations are libFuzzer's own (LLVMFuzzerMutate). Every output fits the size libFuzzer allows
// (-max_len): a length that does not fit is cut to what does, "just under the frame limit" when the
// run allows 4 MiB inputs.
import SyntheticFaces

#if REGISTRYD_FUZZING
    @_silgen_name("LLVMFuzzerMutate")
    private func llvmFuzzerMutate(_ data: UnsafeMutablePointer<UInt8>?, _ size: Int, _ maxSize: Int) -> Int
#endif

public enum LimitMutator {
    /// How a target's input holds its request messages.
    public enum Layout: Sendable {
        /// The whole input is one message (dispatch).
        case message
        /// Byte 0 and byte 1 are parameters, then 4-byte big-endian length-prefixed frames (frame).
        case frames
    }

    /// Content lengths tried: each request bound minus one, at, plus one (names 64, identifiers and
    /// client names 256, paths 4,096), then the old audit encoder's UInt16 edge, longer strings, and
    /// `nil`: as long as the input may be (just under the 4 MiB frame limit in the long-input phase).
    static let lengths: [Int?] = [63, 64, 65, 255, 256, 257, 4_095, 4_096, 4_097, 65_535, 65_536, 70_000, 1 << 20, nil]
    /// Element counts tried for a repeated field: a singular message given twice, the maximum counts
    /// of RequestBounds (16 poses, 64 templates/registries/ranges, 256 depth frames, 1,024 landmarks,
    /// 10,000 import items) around each, and the 262,144 elements a frame may hold.
    static let counts = [2, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1_023, 1_024, 1_025, 9_999, 10_000, 10_001, 262_144, 262_145]
    /// One mutation in this many is a limit mutation (the rest are libFuzzer's).
    static let share = 4

    #if REGISTRYD_FUZZING
        /// libFuzzer's custom mutator for `layout`: call it from the target's `LLVMFuzzerCustomMutator`.
        public static func mutate(_ data: UnsafeMutablePointer<UInt8>?, _ size: Int, _ maxSize: Int, _ seed: UInt32, layout: Layout) -> Int {
            var random = SeededRandom(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(size))
            if let data, size > 0, random.below(Self.share) == 0 {
                let input = Array(UnsafeBufferPointer(start: data, count: size))
                if let output = Self.mutate(input, maxSize: maxSize, layout: layout, random: &random), !output.isEmpty, output.count <= maxSize {
                    output.withUnsafeBufferPointer { data.update(from: $0.baseAddress!, count: output.count) }
                    return output.count
                }
            }
            return llvmFuzzerMutate(data, size, maxSize)
        }
    #endif

    /// One limit mutation of `input`, or nil when it holds no message to mutate (or nothing fits).
    public static func mutate(_ input: [UInt8], maxSize: Int, layout: Layout, random: inout SeededRandom) -> [UInt8]? {
        var buffer = input
        switch layout {
        case .message:
            guard let wire = Wire(buffer, root: 0..<buffer.count, prefix: nil) else { return nil }
            guard wire.mutate(&buffer, maxSize: maxSize, random: &random) else { return nil }
        case .frames:
            // The complete frames whose bodies parse as a non-empty message.
            var frames: [Wire] = []
            var offset = 2
            while offset + 4 <= buffer.count {
                let length = buffer[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                guard offset + 4 + length <= buffer.count else { break }
                if length > 0, let wire = Wire(buffer, root: offset + 4..<offset + 4 + length, prefix: offset) { frames.append(wire) }
                offset += 4 + length
            }
            guard !frames.isEmpty else { return nil }
            guard frames[random.below(frames.count)].mutate(&buffer, maxSize: maxSize, random: &random) else { return nil }
            // A frame over 4,096 bytes is only decoded when byte 0 picks the 4 MiB maximum: mostly do.
            if buffer.count > 4_096 + 6, random.below(8) != 0 { buffer[0] |= 3 }
        }
        return buffer
    }

    /// A length-delimited field found in the wire bytes.
    struct Field {
        var number: UInt64
        var tagStart: Int
        var lengthStart: Int
        var contentStart: Int
        var contentEnd: Int
        /// Indices (into `Wire.fields`) of the enclosing fields that parse as messages, outermost first.
        var chain: [Int]
        /// The content parses as a (non-empty) message, whose fields are in the list too.
        var isMessage = false
    }

    /// The length-delimited fields of one message (the root: the whole input or one frame's body).
    struct Wire {
        static let maximumDepth = 24
        static let maximumFields = 100_000
        var fields: [Field] = []
        let root: Range<Int>
        /// Where the root's 4-byte big-endian length prefix is (a frame), if it has one.
        let prefix: Int?

        init?(_ bytes: [UInt8], root: Range<Int>, prefix: Int?) {
            self.root = root
            self.prefix = prefix
            guard self.parse(bytes, root, chain: [], depth: 0) else { return nil }
        }

        /// Records the length-delimited fields of the message in `range`; false (recording nothing)
        /// when the bytes are not a message.
        mutating func parse(_ bytes: [UInt8], _ range: Range<Int>, chain: [Int], depth: Int) -> Bool {
            let recorded = self.fields.count
            var offset = range.lowerBound
            while offset < range.upperBound {
                let tagStart = offset
                guard let tag = Self.varint(bytes, &offset, range.upperBound), tag >> 3 != 0 else { break }
                switch tag & 7 {
                case 0:
                    guard Self.varint(bytes, &offset, range.upperBound) != nil else { break }
                    continue
                case 1:
                    offset += 8
                    if offset <= range.upperBound { continue }
                case 5:
                    offset += 4
                    if offset <= range.upperBound { continue }
                case 2:
                    let lengthStart = offset
                    guard let length = Self.varint(bytes, &offset, range.upperBound), length <= UInt64(range.upperBound - offset) else { break }
                    let content = offset..<offset + Int(length)
                    offset = content.upperBound
                    guard self.fields.count < Self.maximumFields else { continue }
                    self.fields.append(
                        Field(
                            number: tag >> 3, tagStart: tagStart, lengthStart: lengthStart, contentStart: content.lowerBound,
                            contentEnd: content.upperBound, chain: chain))
                    let index = self.fields.count - 1
                    if !content.isEmpty, depth < Self.maximumDepth, self.parse(bytes, content, chain: chain + [index], depth: depth + 1) {
                        self.fields[index].isMessage = true
                    }
                    continue
                default:
                    break
                }
                // Not a message: forget what this level recorded.
                self.fields.removeSubrange(recorded...)
                return false
            }
            if offset != range.upperBound {
                self.fields.removeSubrange(recorded...)
                return false
            }
            return true
        }

        static func varint(_ bytes: [UInt8], _ offset: inout Int, _ end: Int) -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while offset < end, shift < 64 {
                let byte = bytes[offset]
                offset += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }

        static func encode(_ value: Int) -> [UInt8] {
            var value = UInt64(value)
            var bytes: [UInt8] = []
            while value >= 0x80 {
                bytes.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
            return bytes
        }

        /// One limit mutation on `bytes`; false when there was nothing to do.
        func mutate(_ bytes: inout [UInt8], maxSize: Int, random: inout SeededRandom) -> Bool {
            switch random.below(8) {
            case 0..<5: self.resize(&bytes, maxSize: maxSize, random: &random)
            case 5, 6: self.repeatField(&bytes, maxSize: maxSize, random: &random)
            default: self.addField(&bytes, maxSize: maxSize, random: &random)
            }
        }

        /// A random field, shallow ones as likely as deep ones: a depth first, then a field at it.
        /// `leaves`: prefer fields that do not parse as messages (strings, bytes, packed arrays).
        func pick(_ random: inout SeededRandom, leaves: Bool) -> Field? {
            var candidates = self.fields
            if leaves, random.below(8) != 0 {
                let strings = candidates.filter { !$0.isMessage }
                if !strings.isEmpty { candidates = strings }
            }
            guard !candidates.isEmpty else { return nil }
            let depths = Array(Set(candidates.map(\.chain.count))).sorted()
            let depth = depths[random.below(depths.count)]
            let atDepth = candidates.filter { $0.chain.count == depth }
            return atDepth[random.below(atDepth.count)]
        }

        /// The room left for new bytes in place of `replaced` bytes, under `ancestors` prefixes.
        func room(_ bytes: [UInt8], replacing replaced: Int, ancestors: Int, maxSize: Int) -> Int {
            // A length prefix of at most 4 MiB takes at most 4 bytes: at most 3 more than before.
            maxSize - (bytes.count - replaced) - 3 * (ancestors + 1)
        }

        /// A length from ``lengths``, cut to `room` (nil: the room, less a few bytes).
        func length(_ random: inout SeededRandom, room: Int) -> Int {
            guard let length = LimitMutator.lengths[random.below(LimitMutator.lengths.count)] else {
                return max(0, room - random.below(8))
            }
            return min(length, max(0, room))
        }

        /// Resizes one field's content (its prefix kept, extended by repeating it or by filler text).
        func resize(_ bytes: inout [UInt8], maxSize: Int, random: inout SeededRandom) -> Bool {
            guard let field = self.pick(&random, leaves: true) else { return false }
            let old = Array(bytes[field.contentStart..<field.contentEnd])
            let room = self.room(bytes, replacing: old.count, ancestors: field.chain.count + 1, maxSize: maxSize)
            let length = self.length(&random, room: room)
            guard length != old.count else { return false }
            let content = length < old.count ? Array(old.prefix(length)) : Self.extend(old, to: length, random: &random)
            self.splice(&bytes, field.contentStart..<field.contentEnd, with: content, ancestors: field.chain.map { self.fields[$0] } + [field])
            return true
        }

        /// `prefix` extended to `length` bytes: the prefix repeated, one ASCII letter, or whole
        /// multi-byte UTF-8 characters (padded with ASCII), so that strings stay valid UTF-8.
        static func extend(_ prefix: [UInt8], to length: Int, random: inout SeededRandom) -> [UInt8] {
            var content = prefix
            content.reserveCapacity(length)
            switch random.below(3) {
            case 0 where !prefix.isEmpty:
                while content.count < length { content.append(prefix[(content.count - prefix.count) % prefix.count]) }
            case 1:
                let characters: [[UInt8]] = [Array("é".utf8), Array("€".utf8), Array("𝄞".utf8), Array("a".utf8)]
                var index = random.below(characters.count)
                while content.count < length {
                    let character = characters[index % characters.count]
                    content += content.count + character.count <= length ? character : [0x61]
                    index += 1
                }
            default:
                let letter = UInt8(ascii: "a") + UInt8(random.below(26))
                content += repeatElement(letter, count: length - content.count)
            }
            return content
        }

        /// Repeats one field (a repeated message's element, or any field) until its parent holds a
        /// count from ``counts`` of it, or as many as fit.
        func repeatField(_ bytes: inout [UInt8], maxSize: Int, random: inout SeededRandom) -> Bool {
            guard let field = self.pick(&random, leaves: false) else { return false }
            let element = Array(bytes[field.tagStart..<field.contentEnd])
            let present = self.fields.filter { $0.chain == field.chain && $0.number == field.number }.count
            let target = LimitMutator.counts[random.below(LimitMutator.counts.count)]
            let room = self.room(bytes, replacing: 0, ancestors: field.chain.count, maxSize: maxSize)
            let copies = min(target - present, room / element.count)
            guard copies > 0 else { return false }
            var inserted: [UInt8] = []
            inserted.reserveCapacity(copies * element.count)
            for _ in 0..<copies { inserted += element }
            self.splice(&bytes, field.contentEnd..<field.contentEnd, with: inserted, ancestors: field.chain.map { self.fields[$0] })
            return true
        }

        /// Adds a length-delimited field (number 1–6) of a limit length to
        /// the root or to a field that parses as a message: a gallery or identifier a seed left out.
        func addField(_ bytes: inout [UInt8], maxSize: Int, random: inout SeededRandom) -> Bool {
            let messages = self.fields.filter(\.isMessage)
            let parent: Field? = messages.isEmpty || random.below(4) == 0 ? nil : messages[random.below(messages.count)]
            let ancestors = parent.map { parent in parent.chain.map { self.fields[$0] } + [parent] } ?? []
            let number = UInt64(random.below(6) + 1)
            let tag = Self.encode(Int(number << 3 | 2))
            let room = self.room(bytes, replacing: 0, ancestors: ancestors.count, maxSize: maxSize) - tag.count - 4
            guard room > 0 else { return false }
            let length = self.length(&random, room: room)
            let content = Self.extend([], to: length, random: &random)
            let at = parent?.contentEnd ?? self.root.upperBound
            self.splice(&bytes, at..<at, with: tag + Self.encode(length) + content, ancestors: ancestors)
            return true
        }

        /// Replaces `range` with `new` and rewrites the length prefix of each of `ancestors` (outermost
        /// first) and of the root's frame, innermost first: each prefix lies before the ones inside it,
        /// so rewriting one does not move those still to do.
        func splice(_ bytes: inout [UInt8], _ range: Range<Int>, with new: [UInt8], ancestors: [Field]) {
            bytes.replaceSubrange(range, with: new)
            var delta = new.count - range.count
            for ancestor in ancestors.reversed() {
                let length = Self.encode(ancestor.contentEnd - ancestor.contentStart + delta)
                bytes.replaceSubrange(ancestor.lengthStart..<ancestor.contentStart, with: length)
                delta += length.count - (ancestor.contentStart - ancestor.lengthStart)
            }
            if let prefix = self.prefix {
                let length = UInt32(clamping: self.root.count + delta)
                bytes.replaceSubrange(
                    prefix..<prefix + 4, with: [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
            }
        }
    }
}

extension SeededRandom {
    /// A number in 0..<n (n > 0); the mutator draws its choices from the project's seedable generator,
    /// so that a mutation is determined by libFuzzer's seed.
    mutating func below(_ n: Int) -> Int { Int(self.next() % UInt64(n)) }
}
