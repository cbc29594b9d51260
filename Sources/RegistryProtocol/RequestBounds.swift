import NIOCore
import RegistryModel

/// The bounds every request frame is held to before anything else is done with it: before it is
/// decoded into messages, before the access check, before it is audited or logged.
///
/// A frame may be up to the frame limit (4 MiB by default), and protobuf lets a peer spend those bytes
/// however it likes: one 4 MiB identifier, or two million empty repeated messages that a generic
/// decoder turns into two million objects (measured: about 650 ms of an event loop and 200 MB). So
/// the frame is first walked as wire bytes against the shape of the request messages (``Shape``),
/// allocating nothing: every string field has a maximum length, every repeated message or string
/// field a maximum count, a singular message may not be given twice, and the frame as a whole holds at
/// most ``maximumElements`` messages, strings and unknown fields. The walk stops at the first count
/// over its maximum, so refusing costs at most a walk of the fields up to there; a packed array is
/// stepped over whole. What passes is decoded as before, and costs in proportion to what it holds.
///
/// The walk also picks out what the access check and the audit trail need — the operation, and the
/// gallery and identifier it names — so that a peer without the right is refused without its request
/// ever being decoded. Names in a frame that breaks a bound come back cut to their maximum, for the
/// refusal's audit entry.
///
/// The maxima are part of the protocol (PROTOCOL.md, "Limits"). They are well above what any
/// operation uses (registryctl imports 1,000 items a request), and a request over one is refused with
/// `MALFORMED_REQUEST` and a message that names the field and its maximum, never its content.
public enum RequestBounds {
    /// Messages, strings and unknown fields one frame may hold, all levels together: room for an
    /// import of 1,000 landmark templates of 100 named points each, with margin.
    public static let maximumElements = 262_144
    public static let maximumIdentifierBytes = 256
    public static let maximumGalleryBytes = 64
    /// A file path the daemon is asked to use (backup directory, key file): Linux's PATH_MAX.
    public static let maximumPathBytes = 4_096
    /// Free text for the log (hello's client name).
    public static let maximumClientNameBytes = 256
    /// Short names: a landmark, a pose, a statistic, an outcome filter.
    public static let maximumNameBytes = 64
    /// Packed runs of one repeated scalar field (a vector, a frame's depths) in one message: encoders
    /// write one.
    public static let maximumPackedRuns = 16

    /// What the access check and the audit trail need of a request, read from its wire bytes.
    public struct Envelope: Sendable, Equatable {
        /// The request id (0 when absent).
        public var id: UInt64 = 0
        /// The field number of the operation in `Request` (nil: none, or one this build does not know).
        public var operation: Int?
        /// The operation's gallery field as sent ("" when absent), cut to its maximum when longer.
        public var gallery = ""
        /// The identifier the operation names ("" when none), cut to its maximum when longer.
        public var identifier = ""

        public init(id: UInt64 = 0, operation: Int? = nil, gallery: String = "", identifier: String = "") {
            self.id = id
            self.operation = operation
            self.gallery = gallery
            self.identifier = identifier
        }
    }

    /// A frame that breaks a bound: what is known of it, and why it is refused.
    public struct Violation: Error, Sendable, Equatable {
        public var envelope: Envelope
        /// Names the field and its bound, never the field's content.
        public var reason: String
    }

    /// Walks `frame` (one request message) against the request shapes. Returns what the access check
    /// needs, or the first bound it breaks. Malformed wire bytes (a varint past the end, a length past
    /// its message) are left to the decoder, which refuses them as before: only bounds are checked here.
    public static func check(_ frame: ByteBuffer) -> Result<Envelope, Violation> {
        frame.withUnsafeReadableBytes { bytes in
            var walk = Walk(bytes: bytes)
            walk.request()
            if let reason = walk.violation { return .failure(Violation(envelope: walk.envelope, reason: reason)) }
            return .success(walk.envelope)
        }
    }

    /// The request messages as the bounds see them: for each, its length-delimited fields.
    /// Fields not listed are stepped over (scalars) or counted as unknown elements (length-delimited).
    enum Shape {
        case request, empty, hello, register, identify, authenticate, face, template, landmark, capture, faceBox, depthFrame
        case listIdentifiers, galleryAndIdentifier, galleryOnly, defineGallery, registrySpec, export
        case importRequest, importItem, livenessProfileEntry, livenessProfile, livenessRange, enrolLiveness, pose, audit, path

        /// What a field number holds in this message.
        func field(_ number: UInt64) -> Field? {
            switch (self, number) {
            case (.hello, 3): .string("client_name", RequestBounds.maximumClientNameBytes, .none)
            case (.register, 1), (.identify, 1), (.authenticate, 1), (.listIdentifiers, 1), (.galleryAndIdentifier, 1), (.galleryOnly, 1),
                (.defineGallery, 1), (.export, 1), (.importRequest, 1), (.enrolLiveness, 1):
                .string("gallery", RequestBounds.maximumGalleryBytes, .gallery)
            case (.register, 2), (.authenticate, 2), (.galleryAndIdentifier, 2), (.enrolLiveness, 2), (.audit, 1):
                .string("identifier", RequestBounds.maximumIdentifierBytes, .identifier)
            case (.listIdentifiers, 2): .string("after", RequestBounds.maximumIdentifierBytes, .none)
            case (.export, 5): .string("after_identifier", RequestBounds.maximumIdentifierBytes, .none)
            case (.register, 3), (.authenticate, 3), (.identify, 2): .message("face", .face, maximumCount: 1)
            case (.face, 1): .message("templates", .template, maximumCount: 64)
            case (.face, 2): .message("capture", .capture, maximumCount: 1)
            case (.face, 3): .message("depth_frames", .depthFrame, maximumCount: 256)
            case (.capture, 2), (.depthFrame, 3): .message("face_box", .faceBox, maximumCount: 1)
            case (.depthFrame, 1): .scalars("depths")
            case (.template, 2): .scalars("vector")
            case (.template, 3): .message("landmarks", .landmark, maximumCount: 1_024)
            case (.landmark, 1): .string("landmark name", RequestBounds.maximumNameBytes, .none)
            case (.defineGallery, 2): .message("registries", .registrySpec, maximumCount: 64)
            case (.defineGallery, 3): .message("liveness", .empty, maximumCount: 1)
            case (.registrySpec, 2): .message("thresholds", .empty, maximumCount: 1)
            case (.importRequest, 2): .message("items", .importItem, maximumCount: 10_000)
            case (.importRequest, 4): .message("liveness_profiles", .livenessProfileEntry, maximumCount: 10_000)
            case (.importItem, 1), (.livenessProfileEntry, 1): .string("identifier", RequestBounds.maximumIdentifierBytes, .none)
            case (.importItem, 2): .message("template", .template, maximumCount: 1)
            case (.livenessProfileEntry, 2): .message("profile", .livenessProfile, maximumCount: 1)
            case (.livenessProfile, 1): .message("ranges", .livenessRange, maximumCount: 64)
            case (.livenessRange, 1): .string("statistic", RequestBounds.maximumNameBytes, .none)
            case (.enrolLiveness, 3): .message("poses", .pose, maximumCount: 16)
            case (.pose, 1): .string("pose", RequestBounds.maximumNameBytes, .none)
            case (.pose, 2): .message("frames", .depthFrame, maximumCount: 256)
            case (.audit, 4): .string("outcome", RequestBounds.maximumNameBytes, .none)
            case (.path, 1): .string("path", RequestBounds.maximumPathBytes, .none)
            default: nil
            }
        }

        /// The shape of `Request`'s operation field `number` (nil: not an operation this build knows).
        static func operation(_ number: UInt64) -> Shape? {
            switch number {
            case 2: .hello
            case 10: .register
            case 11: .identify
            case 12: .authenticate
            case 20, 21, 29, 33: .empty  // list_galleries, list_algorithms, stats, verify
            case 22: .listIdentifiers
            case 23, 25, 41, 42: .galleryAndIdentifier  // get_templates, delete_identifier, get/delete_liveness_profile
            case 24, 26, 28: .galleryOnly  // delete_template, delete_gallery, migration_status
            case 27: .defineGallery
            case 30: .export
            case 31: .importRequest
            case 32, 44: .path  // backup's directory, set_encryption_key's key file
            case 40: .enrolLiveness
            case 43: .audit
            default: nil
            }
        }
    }

    enum Role { case none, gallery, identifier }

    enum Field {
        case string(StaticString, Int, Role)
        case message(StaticString, Shape, maximumCount: Int)
        /// A repeated scalar: cheap to decode whatever its count of values, but at most
        /// ``maximumPackedRuns`` packed runs (length-delimited occurrences) a message. SwiftProtobuf
        /// reserves room for exactly each run's values as it meets it, copying the array so far every
        /// time: 8,144 runs of 128 floats in one template cost seconds (found by the fuzzer).
        case scalars(StaticString)
    }

    /// One walk over a frame.
    struct Walk {
        let bytes: UnsafeRawBufferPointer
        var envelope = Envelope()
        var violation: String?
        /// Set with a violation that makes going on unbounded work (a count over its maximum).
        var stopped = false
        var elements = 0

        init(bytes: UnsafeRawBufferPointer) {
            self.bytes = bytes
        }

        mutating func request() {
            var reader = WireReader(bytes: self.bytes, range: 0..<self.bytes.count)
            var operations = 0
            while !reader.atEnd && !self.stopped {
                guard let (number, wireType) = reader.tag() else { return }
                if number == 1, wireType == .varint {
                    guard let id = reader.varint() else { return }
                    self.envelope.id = id
                    continue
                }
                if wireType == .lengthDelimited, let shape = Shape.operation(number) {
                    guard let range = reader.lengthDelimited() else { return }
                    operations += 1
                    guard operations == 1 else { return self.stop("the request carries more than one operation") }
                    self.envelope.operation = Int(number)
                    guard self.count() else { return }
                    self.message(shape, range, top: true)
                    continue
                }
                guard self.step(over: wireType, &reader) else { return }
            }
        }

        /// Walks one message of `shape` over `range`; `top`: the operation's own message, whose gallery
        /// and identifier fields fill the envelope.
        mutating func message(_ shape: Shape, _ range: Range<Int>, top: Bool = false) {
            var reader = WireReader(bytes: self.bytes, range: range)
            // Occurrences of each repeated or singular message field, by field number (all below 16).
            var counts = InlineArray<16, Int32>(repeating: 0)
            while !reader.atEnd && !self.stopped {
                guard let (number, wireType) = reader.tag() else { return }
                guard wireType == .lengthDelimited, let field = shape.field(number) else {
                    guard self.step(over: wireType, &reader) else { return }
                    continue
                }
                guard let range = reader.lengthDelimited() else { return }
                switch field {
                case .scalars(let name):
                    let index = Int(number)
                    counts[index] += 1
                    guard counts[index] <= RequestBounds.maximumPackedRuns else {
                        return self.stop("more than \(RequestBounds.maximumPackedRuns) packed runs of \(name) in one message")
                    }
                case .string(let name, let maximum, let role):
                    guard self.count() else { return }
                    if range.count > maximum {
                        self.note("\(name) is \(range.count) bytes long, at most \(maximum) are allowed")
                    }
                    if top && role != .none {
                        let text = self.text(range, cutTo: maximum)
                        if role == .gallery { self.envelope.gallery = text } else { self.envelope.identifier = text }
                    }
                case .message(let name, let nested, let maximumCount):
                    guard self.count() else { return }
                    let index = Int(number)
                    counts[index] += 1
                    guard counts[index] <= maximumCount else {
                        return self.stop(
                            maximumCount == 1 ? "\(name) is given more than once" : "more than \(maximumCount) \(name) in one message")
                    }
                    self.message(nested, range)
                }
            }
        }

        /// Steps over a field this walk does not look into; false when the bytes end inside it or a
        /// bound is broken (a group: this protocol has none, and decoders walk them recursively).
        mutating func step(over wireType: WireReader.WireType, _ reader: inout WireReader) -> Bool {
            switch wireType {
            case .varint: return reader.varint() != nil
            case .fixed32: return reader.fixed(4) != nil
            case .fixed64: return reader.fixed(8) != nil
            case .lengthDelimited: return self.count() && reader.lengthDelimited() != nil
            case .startGroup, .endGroup:
                self.stop("the request uses protobuf groups, which this protocol does not")
                return false
            }
        }

        /// Counts one element against ``maximumElements``; false (and stopped) beyond it.
        mutating func count() -> Bool {
            self.elements += 1
            guard self.elements <= RequestBounds.maximumElements else {
                self.stop("the request holds more than \(RequestBounds.maximumElements) messages and strings")
                return false
            }
            return true
        }

        /// The first violation is the one reported.
        mutating func note(_ reason: String) {
            if self.violation == nil { self.violation = reason }
        }

        mutating func stop(_ reason: String) {
            self.note(reason)
            self.stopped = true
        }

        /// The field's text, cut to `maximum` bytes at a character boundary (invalid UTF-8 repaired:
        /// the decoder refuses it later, and an audit entry of a refusal needs only a readable name).
        func text(_ range: Range<Int>, cutTo maximum: Int) -> String {
            let bytes = UnsafeRawBufferPointer(rebasing: self.bytes[range])
            if bytes.count <= maximum { return String(decoding: bytes, as: UTF8.self) }
            return Names.cut(String(decoding: bytes.prefix(maximum + 4), as: UTF8.self), toBytes: maximum)
        }
    }
}
