import RegistryModel
import RegistryProtocol
import SwiftProtobuf

/// What the dispatcher needs to know of a kind of request before decoding it — its name, right,
/// scope and metrics — by the field number of its operation in `Request`, so that a peer without the
/// right is refused from the wire bytes alone (``RequestBounds/Envelope``).
///
/// Made from the operations themselves rather than written out a second time: each field number the
/// generated `Request` decodes to an operation is decoded once, as an empty message, at start, and
/// the operation it gives says its name, right and scope (``RegistryOperation``). A request kind
/// added to the protocol joins the table by itself; one the wire bounds do not know yet is still
/// checked for its right after decoding. It is the one table of rights and scopes: OperationTableTests
/// holds docs/operations.md's table and docs/security.md's list to it.
struct OperationTable: Sendable {
    struct Kind: Sendable {
        let name: String
        let right: OperationClass?
        let metrics: OperationMetrics
        /// Whether it works on the whole store, or on what the peer may see, rather than one gallery.
        let wholeStore: OperationScope?

        /// Where a request of this kind works: the gallery its envelope names, or its fixed scope.
        func scope(_ envelope: RequestBounds.Envelope) -> OperationScope {
            self.wholeStore ?? .gallery(envelope.gallery)
        }
    }

    private let kinds: [Int: Kind]

    /// Field numbers looked at: the operations are numbered well below it (proto/registry.proto).
    static let highestFieldNumber = 127

    init(metrics: ServerMetrics) {
        var kinds: [Int: Kind] = [:]
        for number in 2...Self.highestFieldNumber {
            // The field as an empty message: its tag (one or two varint bytes), then length 0.
            let key = number << 3 | 2
            let bytes: [UInt8] = key < 0x80 ? [UInt8(key), 0] : [UInt8(key & 0x7f | 0x80), UInt8(key >> 7), 0]
            guard let operation = (try? Registry_V1_Request(serializedBytes: bytes))?.operation else { continue }
            kinds[number] = operation.accept(Describe(metrics: metrics))
        }
        self.kinds = kinds
    }

    subscript(number: Int) -> Kind? { self.kinds[number] }

    /// The field numbers of every kind (for tests).
    var numbers: [Int] { self.kinds.keys.sorted() }

    private struct Describe: OperationVisitor {
        let metrics: ServerMetrics

        func visit<Operation: RegistryOperation>(_ operation: Operation) -> Kind {
            let scope = operation.scope
            let wholeStore: OperationScope? = if case .gallery = scope { nil } else { scope }
            return Kind(name: Operation.name, right: Operation.right, metrics: Operation.metrics(in: self.metrics), wholeStore: wholeStore)
        }
    }
}
