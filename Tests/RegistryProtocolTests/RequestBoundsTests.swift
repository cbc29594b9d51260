import NIOCore
import SwiftProtobuf
import Testing

@testable import RegistryProtocol

// The bounds a request frame is held to before it is decoded: each limit at and just past it, the
// envelope the access check reads, and the frames a hostile peer would send (fields far past a limit,
// millions of empty items, groups) refused from their first bytes.

private func bounds(_ request: Registry_V1_Request) throws -> Result<RequestBounds.Envelope, RequestBounds.Violation> {
    RequestBounds.check(ByteBuffer(bytes: try request.serializedBytes() as [UInt8]))
}

private func authenticate(gallery: String = "", identifier: String) -> Registry_V1_Request {
    .with {
        $0.id = 7
        $0.authenticate = .with {
            $0.gallery = gallery
            $0.identifier = identifier
            $0.face.templates = [
                .with {
                    $0.algorithm = 24
                    $0.vector = [Float](repeating: 0.1, count: 128)
                }
            ]
        }
    }
}

/// A varint's bytes.
private func varint(_ value: Int) -> [UInt8] {
    var value = UInt64(value)
    var bytes: [UInt8] = []
    while value >= 0x80 {
        bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
        value >>= 7
    }
    return bytes + [UInt8(value)]
}

/// A length-delimited field.
private func field(_ number: Int, _ body: [UInt8]) -> [UInt8] {
    varint(number << 3 | 2) + varint(body.count) + body
}

@Suite struct RequestBoundsTests {
    @Test("an identifier of 256 bytes passes, 257 and every longer one (65,535, 65,536, 70,000, 1 MiB) is refused naming the field")
    func identifierLength() throws {
        let envelope = try bounds(authenticate(identifier: String(repeating: "é", count: 128))).get()
        #expect(envelope == RequestBounds.Envelope(id: 7, operation: 12, gallery: "", identifier: String(repeating: "é", count: 128)))
        for length in [257, 65_535, 65_536, 70_000, 1 << 20] {
            guard case .failure(let violation) = try bounds(authenticate(gallery: "default", identifier: String(repeating: "a", count: length)))
            else {
                Issue.record("an identifier of \(length) bytes passed")
                continue
            }
            #expect(violation.reason == "identifier is \(length) bytes long, at most 256 are allowed")
            // What the refusal's audit entry names: the request's gallery, its identifier cut to the bound.
            #expect(
                violation.envelope == RequestBounds.Envelope(id: 7, operation: 12, gallery: "default", identifier: String(repeating: "a", count: 256))
            )
        }
    }

    @Test("a gallery name of 64 bytes passes, 65 and 65,536 are refused; a long name is cut at a character boundary")
    func galleryLength() throws {
        #expect(try bounds(authenticate(gallery: String(repeating: "g", count: 64), identifier: "x")).get().gallery.utf8.count == 64)
        for gallery in [String(repeating: "g", count: 65), String(repeating: "g", count: 65_536), "a" + String(repeating: "€", count: 30)] {
            guard case .failure(let violation) = try bounds(authenticate(gallery: gallery, identifier: "x")) else {
                Issue.record("a gallery of \(gallery.utf8.count) bytes passed")
                continue
            }
            #expect(violation.reason.hasPrefix("gallery is \(gallery.utf8.count) bytes long"))
            #expect(violation.envelope.gallery.utf8.count <= 64 && gallery.hasPrefix(violation.envelope.gallery))
        }
    }

    @Test("paths (backup directory, key file) up to 4,096 bytes; a client name up to 256")
    func otherStrings() throws {
        let backup = { (length: Int) in Registry_V1_Request.with { $0.backup.directory = "/" + String(repeating: "d", count: length - 1) } }
        #expect((try? bounds(backup(4_096)).get()) != nil)
        #expect((try? bounds(backup(4_097)).get()) == nil)
        let hello = { (length: Int) in Registry_V1_Request.with { $0.hello.clientName = String(repeating: "c", count: length) } }
        #expect((try? bounds(hello(256)).get()) != nil)
        #expect((try? bounds(hello(257)).get()) == nil)
        let landmark = { (length: Int) in
            Registry_V1_Request.with {
                $0.register.identifier = "x"
                $0.register.face.templates = [.with { $0.landmarks = [.with { $0.name = String(repeating: "L", count: length) }] }]
            }
        }
        #expect((try? bounds(landmark(64)).get()) != nil)
        #expect((try? bounds(landmark(65)).get()) == nil)
    }

    @Test("repeated messages at and just past their maximum: templates 64, depth frames 256, import items 10,000")
    func repeatedCounts() throws {
        let face = { (templates: Int, frames: Int) in
            Registry_V1_Request.with {
                $0.identify.face.templates = Array(repeating: Registry_V1_Template.with { $0.algorithm = 1 }, count: templates)
                $0.identify.face.depthFrames = Array(repeating: Registry_V1_DepthFrame.with { $0.depths = [1] }, count: frames)
            }
        }
        #expect((try? bounds(face(64, 256)).get()) != nil)
        guard case .failure(let templates) = try bounds(face(65, 0)), case .failure(let frames) = try bounds(face(1, 257)) else {
            Issue.record("a face over its counts passed")
            return
        }
        #expect(templates.reason == "more than 64 templates in one message")
        #expect(frames.reason == "more than 256 depth_frames in one message")
        let imports = { (count: Int) in
            Registry_V1_Request.with { $0.import.items = Array(repeating: .with { $0.identifier = "p" }, count: count) }
        }
        #expect((try? bounds(imports(10_000)).get()) != nil)
        #expect((try? bounds(imports(10_001)).get()) == nil)
    }

    @Test("two million empty templates in a 4 MB frame are refused after the 65th, without walking the rest")
    func aFloodOfEmptyItems() {
        // Request { register { face { templates: "" ×2,000,000 } } }: the frame of the report.
        let face = [UInt8](repeating: 0, count: 4_000_000).enumerated().map { $0.offset % 2 == 0 ? UInt8(0x0a) : 0 }
        let frame = field(10, field(3, face))
        let result = RequestBounds.check(ByteBuffer(bytes: frame))
        guard case .failure(let violation) = result else {
            Issue.record("the flood passed")
            return
        }
        #expect(violation.reason == "more than 64 templates in one message")
        #expect(violation.envelope.operation == 10)
    }

    @Test("the whole frame holds at most 262,144 messages, strings and unknown fields")
    func elementBudget() {
        // Unknown length-delimited fields (number 15) of an empty list_galleries: each is one element.
        let unknown = field(15, [])
        let within = field(20, Array([[UInt8]](repeating: unknown, count: RequestBounds.maximumElements - 1).joined()))
        #expect((try? RequestBounds.check(ByteBuffer(bytes: within)).get()) != nil)
        let over = field(20, Array([[UInt8]](repeating: unknown, count: RequestBounds.maximumElements).joined()))
        guard case .failure(let violation) = RequestBounds.check(ByteBuffer(bytes: over)) else {
            Issue.record("a frame over the element budget passed")
            return
        }
        #expect(violation.reason == "the request holds more than 262144 messages and strings")
    }

    @Test("a vector's floats, packed or not, are not elements: a 4 MB vector passes the bounds")
    func scalarsAreNotCounted() throws {
        let packed = Registry_V1_Request.with {
            $0.register.identifier = "x"
            $0.register.face.templates = [.with { $0.vector = [Float](repeating: 0.5, count: 1_000_000) }]
        }
        #expect((try? bounds(packed).get()) != nil)
        // The same vector unpacked: field 2 as 1,000,000 fixed32 fields.
        var unpacked: [UInt8] = []
        unpacked.reserveCapacity(5_000_000)
        for _ in 0..<1_000_000 { unpacked += [0x15, 0, 0, 0, 0x3f] }
        let frame = field(10, field(2, [0x78]) + field(3, field(1, unpacked)))
        #expect((try? RequestBounds.check(ByteBuffer(bytes: frame)).get()) != nil)
    }

    @Test("a vector in up to 16 packed runs passes; 17, or the fuzzer's 8,144 runs of 128 floats, is refused before decoding")
    func packedRuns() {
        // A register whose one template gives its vector as `runs` packed runs (field 2, 128 floats each).
        func frame(runs: Int) -> [UInt8] {
            let run = field(2, [UInt8](repeating: 0, count: 512))
            let template = Array([[UInt8]](repeating: run, count: runs).joined())
            return field(10, field(2, [0x78]) + field(3, field(1, template)))
        }
        #expect((try? RequestBounds.check(ByteBuffer(bytes: frame(runs: 16))).get()) != nil)
        for runs in [17, 8_144] {
            guard case .failure(let violation) = RequestBounds.check(ByteBuffer(bytes: frame(runs: runs))) else {
                Issue.record("\(runs) packed runs passed")
                continue
            }
            #expect(violation.reason == "more than 16 packed runs of vector in one message")
        }
    }

    @Test("an operation given twice, a singular message given twice, and groups are refused")
    func shapesNoEncoderWrites() throws {
        let twice = field(12, []) + field(12, [])
        #expect((try? RequestBounds.check(ByteBuffer(bytes: twice)).get()) == nil)
        let twoFaces = field(10, field(3, []) + field(3, []))
        guard case .failure(let faces) = RequestBounds.check(ByteBuffer(bytes: twoFaces)) else {
            Issue.record("two faces passed")
            return
        }
        #expect(faces.reason == "face is given more than once")
        // A start-group tag (field 5, wire type 3) inside an identify.
        let group = field(11, [5 << 3 | 3, 5 << 3 | 4])
        #expect((try? RequestBounds.check(ByteBuffer(bytes: group)).get()) == nil)
    }

    @Test("malformed wire bytes are left to the decoder: the bounds pass what they cannot read")
    func malformedIsTheDecodersToRefuse() {
        // A length past the end: not a bound broken, and SwiftProtobuf refuses the frame.
        let frame: [UInt8] = [0x62, 0x7f, 0x00]
        #expect((try? RequestBounds.check(ByteBuffer(bytes: frame)).get()) != nil)
        #expect((try? Registry_V1_Request(serializedBytes: frame)) == nil)
    }

    @Test("the envelope reads the gallery and identifier SwiftProtobuf decodes, for every operation naming them")
    func envelopeAgreesWithTheDecoder() throws {
        let requests: [Registry_V1_Request] = [
            .with {
                $0.register = .with {
                    $0.gallery = "g1"
                    $0.identifier = "alice"
                }
            },
            .with { $0.identify = .with { $0.gallery = "g2" } },
            .with {
                $0.getTemplates = .with {
                    $0.gallery = "g3"
                    $0.identifier = "bob"
                }
            },
            .with {
                $0.deleteIdentifier = .with {
                    $0.gallery = "g4"
                    $0.identifier = "carol"
                }
            },
            .with {
                $0.enrolLivenessProfile = .with {
                    $0.gallery = "g5"
                    $0.identifier = "dave"
                }
            },
            .with { $0.deleteGallery = .with { $0.gallery = "g6" } },
            .with { $0.audit = .with { $0.identifier = "erin" } },
            .with {
                $0.listIdentifiers = .with {
                    $0.gallery = "g7"
                    $0.after = "zz"
                }
            },
        ]
        for request in requests {
            let envelope = try bounds(request).get()
            let decoded = try Registry_V1_Request(serializedBytes: try request.serializedBytes() as [UInt8])
            #expect(decoded == request)
            let (gallery, identifier): (String, String) =
                switch request.operation {
                case .register(let r): (r.gallery, r.identifier)
                case .identify(let r): (r.gallery, "")
                case .getTemplates(let r): (r.gallery, r.identifier)
                case .deleteIdentifier(let r): (r.gallery, r.identifier)
                case .enrolLivenessProfile(let r): (r.gallery, r.identifier)
                case .deleteGallery(let r): (r.gallery, "")
                case .audit(let r): ("", r.identifier)
                case .listIdentifiers(let r): (r.gallery, "")
                default: ("?", "?")
                }
            #expect(envelope.gallery == gallery && envelope.identifier == identifier, "\(request)")
        }
    }
}
