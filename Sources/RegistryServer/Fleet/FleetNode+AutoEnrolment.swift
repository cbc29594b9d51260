import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension FleetNode {
    // MARK: Auto-enrolment through the log

    /// Carries a replica's auto-enrolments through the log: the engine hands them here instead of
    /// writing them, and hears what applying the entry gave (or the refusal to append it).
    func routeAutoEnrolments() {
        self.engine.routeAutoEnrolments { [weak self] entry, answer in
            guard let self else { return answer(.failure(RegistryError(.shuttingDown, "the daemon is stopping"))) }
            let frame: [UInt8]
            do {
                frame = try FleetAutoEnrolment.encode(entry)
            } catch {
                return answer(.failure(error))
            }
            self.submit(
                FleetWrite(
                    kind: .autoEnrolment, gallery: entry.gallery, frame: frame,
                    apply: { application, ticket in
                        self.applyAutoEnrolment(frame, application: application, ticket: ticket, answer: answer)
                    },
                    refuse: { answer(.failure($0)) }))
        }
    }

    /// Applies an auto-enrolment entry bound to its position; `answer` (the node that recognised the
    /// face) hears the outcome.
    func applyAutoEnrolment(
        _ frame: [UInt8], application: FleetApplication, ticket: FleetTicket,
        answer: (@Sendable (Result<[AutoEnrolmentOutcome], any Error>) -> Void)?
    ) {
        guard let entry = FleetAutoEnrolment.decode(frame) else {
            let error = RegistryError.malformedRequest("fleet entry \(application.position) is not an auto-enrolment this registryd reads")
            ticket.failed(error)
            answer?(.failure(error))
            return
        }
        FleetApplication.$current.withValue(application) {
            self.engine.applyAutoEnrolment(entry) { result in
                ticket.finished(result)
                answer?(result)
            }
        }
    }
}

/// An auto-enrolment entry's bytes: the gallery and identifier, the decider's algorithm and score,
/// the quality and liveness (each flagged when present), then the face's templates as a
/// `registry.v1.Face`.
enum FleetAutoEnrolment {
    static func encode(_ entry: AutoEnrolmentEntry) throws -> [UInt8] {
        var bytes: [UInt8] = []
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { bytes += $0 } }
        func append(_ text: String) {
            append(UInt32(text.utf8.count))
            bytes += text.utf8
        }
        append(entry.gallery)
        append(entry.identifier)
        append(entry.deciderAlgorithm)
        append(entry.score.bitPattern)
        append(UInt8((entry.quality == nil ? 0 : 1) | (entry.live == nil ? 0 : 2) | (entry.live == true ? 4 : 0)))
        append((entry.quality ?? 0).bitPattern)
        bytes += try Registry_V1_Face(entry.face).serializedBytes() as [UInt8]
        return bytes
    }

    static func decode(_ bytes: [UInt8]) -> AutoEnrolmentEntry? {
        var offset = 0
        func read<T: FixedWidthInteger>(_: T.Type) -> T? {
            guard bytes.count - offset >= MemoryLayout<T>.size else { return nil }
            defer { offset += MemoryLayout<T>.size }
            return bytes[offset..<(offset + MemoryLayout<T>.size)].reduce(T(0)) { $0 << 8 | T($1) }
        }
        func text() -> String? {
            guard let count = read(UInt32.self).map(Int.init), bytes.count - offset >= count else { return nil }
            defer { offset += count }
            return String(decoding: bytes[offset..<(offset + count)], as: UTF8.self)
        }
        guard let gallery = text(), let identifier = text(), let algorithm = read(UInt32.self), let score = read(UInt32.self),
            let flags = read(UInt8.self), let quality = read(UInt32.self),
            let face = try? Registry_V1_Face(serializedBytes: Array(bytes[offset...]))
        else { return nil }
        return AutoEnrolmentEntry(
            gallery: gallery, identifier: identifier, face: Face(face), deciderAlgorithm: algorithm, score: Float(bitPattern: score),
            quality: flags & 1 != 0 ? Float(bitPattern: quality) : nil, live: flags & 2 != 0 ? flags & 4 != 0 : nil)
    }
}
