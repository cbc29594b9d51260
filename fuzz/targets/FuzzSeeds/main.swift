import Glibc
import RegistryCtlInput
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

// Writes the generated seed corpora of the fuzz targets (`tools/fuzz --seeds`): requests made with the
// generated protobuf types from the walkthrough's example files. Run from the repository's root.
// The configuration seeds are hand-written JSON and the registryctl input seeds the example files:
// tools/fuzz copies those.

func face(_ file: String) -> Registry_V1_Face {
    do {
        let contents = try TemplateJSON.faceFile(in: file)
        return Registry_V1_Face(Face(templates: contents.templates, capture: contents.capture, depthFrames: contents.depthFrames))
    } catch {
        fatalError("\(error)")
    }
}

let alice = face("examples/alice.json")
let aliceAgain = face("examples/alice-again.json")
let bob = face("examples/bob.json")
let aliceCapture = face("examples/alice-capture.json")
let aliceLive = face("examples/alice-live.json")
let landmarkNames = [
    "LEFT_EYE", "RIGHT_EYE", "LEFT_EYE_LEFT_CORNER", "LEFT_EYE_RIGHT_CORNER", "RIGHT_EYE_LEFT_CORNER", "RIGHT_EYE_RIGHT_CORNER",
    "NOSE_TIP", "MIDPOINT_BETWEEN_EYES", "NOSE_BOTTOM_CENTER", "NOSE_BOTTOM_LEFT", "NOSE_BOTTOM_RIGHT", "MOUTH_LEFT", "MOUTH_RIGHT",
    "UPPER_LIP", "LOWER_LIP", "MOUTH_CENTER", "CHIN_GNATHION", "LEFT_CHEEK_CENTER", "RIGHT_CHEEK_CENTER", "FOREHEAD_GLABELLA",
]
let landmarkFace = Registry_V1_Face.with {
    $0.templates = [
        .with { template in
            template.algorithm = 1000
            template.landmarks = landmarkNames.enumerated().map { index, name in
                .with {
                    $0.name = name
                    $0.x = Float(index % 5) * 10 + Float(index) * 0.5
                    $0.y = Float(index / 5) * 12
                    $0.z = Float(index % 3)
                }
            }
        }
    ]
}
let poses: [Registry_V1_EnrolLivenessProfileRequest.Pose] = {
    do {
        let frames = try TemplateJSON.enrolmentFrames(in: "examples/alice-poses.json")
        return EnrolmentPose.allCases.map { pose in
            .with {
                $0.pose = pose.rawValue
                $0.frames = (frames[pose] ?? []).prefix(5).map(Registry_V1_DepthFrame.init)
            }
        }
    } catch {
        fatalError("\(error)")
    }
}()

func request(_ id: UInt64, _ operation: Registry_V1_Request.OneOf_Operation) -> Registry_V1_Request {
    .with {
        $0.id = id
        $0.operation = operation
    }
}

// Requests with fields and counts exactly at a bound of RequestBounds (the largest accepted); the
// custom mutator (fuzz/targets/FuzzDriver/LimitMutator.swift) tries one less and one more. None holds
// a field past 65,535 bytes: finding those is the mutator's job.
let boundIdentifier = String(repeating: "i", count: RequestBounds.maximumIdentifierBytes)
let boundGallery = String(repeating: "g", count: RequestBounds.maximumGalleryBytes)
// 64 small templates (a vector of 4: too short for any algorithm, refused after the bounds pass).
let tinyTemplate = Registry_V1_Template.with {
    $0.algorithm = 24
    $0.vector = [0.5, -0.5, 0.25, 0]
}
let atTheBounds: [(String, Registry_V1_Request)] = [
    (
        "bound-hello-client-name",
        request(
            40,
            .hello(
                .with {
                    $0.protocolMajor = 1
                    $0.clientName = String(repeating: "c", count: RequestBounds.maximumClientNameBytes)
                }))
    ),
    (
        "bound-authenticate-identifier",
        request(
            41,
            .authenticate(
                .with {
                    $0.identifier = boundIdentifier
                    $0.face = aliceAgain
                }))
    ),
    (
        "bound-register-gallery",
        request(
            42,
            .register(
                .with {
                    $0.gallery = boundGallery
                    $0.identifier = "bob"
                    $0.face = bob
                }))
    ),
    (
        "bound-register-templates",
        request(
            43,
            .register(
                .with {
                    $0.gallery = "default"
                    $0.identifier = "many"
                    $0.face = .with { $0.templates = Array(repeating: tinyTemplate, count: 64) }
                }))
    ),
    (
        "bound-get-templates",
        request(
            44,
            .getTemplates(
                .with {
                    $0.gallery = boundGallery
                    $0.identifier = boundIdentifier
                }))
    ),
    (
        "bound-list-identifiers-after",
        request(
            45,
            .listIdentifiers(
                .with {
                    $0.gallery = boundGallery
                    $0.after = boundIdentifier
                }))
    ),
    (
        "bound-audit-outcome",
        request(
            46,
            .audit(
                .with {
                    $0.identifier = boundIdentifier
                    $0.outcome = String(repeating: "o", count: RequestBounds.maximumNameBytes)
                }))
    ),
    ("bound-backup-path", request(47, .backup(.with { $0.directory = String(repeating: "p", count: RequestBounds.maximumPathBytes) }))),
]

let requests: [(String, Registry_V1_Request)] = [
    (
        "hello",
        request(
            1,
            .hello(
                .with {
                    $0.protocolMajor = 1
                    $0.clientName = "fuzz"
                }))
    ),
    ("hello-v2", request(2, .hello(.with { $0.protocolMajor = 2 }))),
    (
        "register-alice",
        request(
            3,
            .register(
                .with {
                    $0.identifier = "alice"
                    $0.face = alice
                }))
    ),
    (
        "register-bob",
        request(
            4,
            .register(
                .with {
                    $0.gallery = "default"
                    $0.identifier = "bob"
                    $0.face = bob
                }))
    ),
    (
        "register-carol-force",
        request(
            5,
            .register(
                .with {
                    $0.identifier = "carol"
                    $0.face = alice
                    $0.force = true
                }))
    ),
    (
        "register-capture",
        request(
            6,
            .register(
                .with {
                    $0.gallery = "door"
                    $0.identifier = "alice"
                    $0.face = aliceCapture
                }))
    ),
    (
        "register-landmarks",
        request(
            7,
            .register(
                .with {
                    $0.identifier = "dave"
                    $0.face = landmarkFace
                }))
    ),
    (
        "identify",
        request(
            8,
            .identify(
                .with {
                    $0.face = aliceAgain
                    $0.limit = 3
                }))
    ),
    (
        "identify-unsafe",
        request(
            9,
            .identify(
                .with {
                    $0.face = landmarkFace
                    $0.safe = false
                    $0.autoEnrol = false
                }))
    ),
    (
        "authenticate",
        request(
            10,
            .authenticate(
                .with {
                    $0.identifier = "alice"
                    $0.face = aliceAgain
                }))
    ),
    (
        "authenticate-live",
        request(
            11,
            .authenticate(
                .with {
                    $0.gallery = "door"
                    $0.identifier = "alice"
                    $0.face = aliceLive
                }))
    ),
    (
        "authenticate-no-auto-enrol",
        request(
            12,
            .authenticate(
                .with {
                    $0.identifier = "bob"
                    $0.face = aliceAgain
                    $0.autoEnrol = false
                }))
    ),
    ("list-galleries", request(13, .listGalleries(.init()))),
    ("list-algorithms", request(14, .listAlgorithms(.init()))),
    (
        "list-identifiers",
        request(
            15,
            .listIdentifiers(
                .with {
                    $0.after = "a"
                    $0.limit = 2
                }))
    ),
    (
        "get-templates",
        request(
            16,
            .getTemplates(
                .with {
                    $0.identifier = "alice"
                    $0.includeData = true
                }))
    ),
    ("delete-template", request(17, .deleteTemplate(.with { $0.templateID = 2 }))),
    ("delete-identifier", request(18, .deleteIdentifier(.with { $0.identifier = "bob" }))),
    ("delete-gallery", request(19, .deleteGallery(.with { $0.gallery = "door" }))),
    (
        "define-gallery",
        request(
            20,
            .defineGallery(
                .with {
                    $0.gallery = "door"
                    $0.registries = [
                        .with {
                            $0.algorithm = 24
                            $0.thresholds = .with {
                                $0.authentication = 0.6
                                $0.identification = 0.65
                                $0.autoEnrolment = 0.7
                            }
                            $0.minimumQuality = 0.6
                            $0.minimumAutoEnrolmentQuality = 0.7
                        },
                        .with { $0.algorithm = 1000 },
                    ]
                    $0.liveness = .with {
                        $0.authenticate = true
                        $0.strict = true
                    }
                    $0.livenessK = 2.5
                }))
    ),
    ("migration-status", request(21, .migrationStatus(.init()))),
    ("stats", request(22, .stats(.init()))),
    (
        "export",
        request(
            23,
            .export(
                .with {
                    $0.afterTemplateID = 1
                    $0.limit = 10
                }))
    ),
    (
        "import",
        request(
            24,
            .import(
                .with {
                    $0.items = [
                        .with {
                            $0.identifier = "erin"
                            $0.template = bob.templates[0]
                        },
                        .with {
                            $0.identifier = "frank"
                            $0.template = landmarkFace.templates[0]
                        },
                    ]
                }))
    ),
    ("backup", request(25, .backup(.with { $0.directory = "backup" }))),
    ("verify", request(26, .verify(.init()))),
    (
        "enrol-liveness-profile",
        request(
            27,
            .enrolLivenessProfile(
                .with {
                    $0.gallery = "door"
                    $0.identifier = "alice"
                    $0.poses = poses
                    $0.k = 2
                }))
    ),
    (
        "get-liveness-profile",
        request(
            28,
            .getLivenessProfile(
                .with {
                    $0.gallery = "door"
                    $0.identifier = "alice"
                }))
    ),
    (
        "delete-liveness-profile",
        request(
            29,
            .deleteLivenessProfile(
                .with {
                    $0.gallery = "door"
                    $0.identifier = "alice"
                }))
    ),
    (
        "audit",
        request(
            30,
            .audit(
                .with {
                    $0.identifier = "alice"
                    $0.sinceMicros = 1
                    $0.outcome = "match"
                    $0.limit = 5
                }))
    ),
    ("set-encryption-key", request(31, .setEncryptionKey(.with { $0.keyFile = "store.key" }))),
]

func write(_ bytes: [UInt8], to path: String) {
    guard let file = fopen(path, "wb"), fwrite(bytes, 1, bytes.count, file) == bytes.count, fclose(file) == 0 else {
        fatalError("cannot write \(path)")
    }
}

func framed(_ message: some SwiftProtobuf.Message) -> [UInt8] {
    guard let body: [UInt8] = try? message.serializedBytes() else { fatalError("cannot encode") }
    let length = UInt32(body.count)
    return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
}

let corpus = "fuzz/corpus"
for directory in [corpus + "/dispatch", corpus + "/frame", corpus + "/ctl-input"] { mkdir(directory, 0o755) }
for (name, message) in requests + atTheBounds {
    guard let body: [UInt8] = try? message.serializedBytes() else { fatalError("cannot encode \(name)") }
    write(body, to: "\(corpus)/dispatch/\(name).bin")
}
// Frame seeds: byte 0 picks the maximum frame length (3: 4 MiB), byte 1 the read size minus one.
let byName = Dictionary(uniqueKeysWithValues: requests + atTheBounds)
let pipelined = ["hello", "list-galleries", "authenticate", "stats"].flatMap { framed(byName[$0]!) }
write([3, 255] + pipelined, to: "\(corpus)/frame/pipelined.bin")
write([3, 6] + pipelined, to: "\(corpus)/frame/pipelined-small-reads.bin")
write([2, 63] + framed(byName["register-alice"]!) + framed(byName["identify"]!), to: "\(corpus)/frame/register-identify.bin")
write([1, 0] + framed(byName["hello"]!) + [0, 0, 0, 0] + framed(byName["register-bob"]!), to: "\(corpus)/frame/too-large.bin")
write(
    [3, 255] + ["bound-hello-client-name", "bound-authenticate-identifier", "bound-register-gallery"].flatMap { framed(byName[$0]!) },
    to: "\(corpus)/frame/at-the-bounds.bin")
write([3, 15] + framed(byName["define-gallery"]!) + Array(framed(byName["stats"]!).dropLast(1)), to: "\(corpus)/frame/truncated.bin")
// An export stream for `registryctl import`.
let stored = [("alice", alice.templates[0]), ("dave", landmarkFace.templates[0])].enumerated().map { index, item in
    Registry_V1_StoredTemplate.with {
        $0.id = UInt64(index + 1)
        $0.identifier = item.0
        $0.algorithm = item.1.algorithm
        $0.template = item.1
    }
}
write(stored.flatMap { framed($0) }, to: "\(corpus)/ctl-input/export.pb")
// A dump for `registryctl import`: a gallery's definition, its templates and the trailer. And the same
// records as written before the trailer (REGDUMP1): mutations of its records are read on, where the
// trailer's checksum stops those of a REGDUMP2 dump.
let dumpGallery = Registry_V1_DefineGalleryRequest.with {
    $0.gallery = "default"
    $0.registries = [.with { $0.algorithm = 24 }, .with { $0.algorithm = 1000 }]
}
var dump = DumpFile.Writer()
var dumpBytes = dump.header()
for record in [.with { $0.gallery = dumpGallery }] + stored.map { stored in Registry_V1_DumpRecord.with { $0.template = stored } } {
    guard let bytes = try? dump.record(record) else { fatalError("cannot encode a dump record") }
    dumpBytes += bytes
}
guard let trailer = try? dump.trailer() else { fatalError("cannot encode the dump trailer") }
write(dumpBytes + trailer, to: "\(corpus)/ctl-input/export.dump")
write(DumpFile.uncheckedMagic + dumpBytes.dropFirst(DumpFile.magic.count), to: "\(corpus)/ctl-input/export-regdump1.dump")
