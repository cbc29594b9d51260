import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension FleetNode {
    /// A client's write in fleet mode: appended to the log as the client sent it, then applied here
    /// in the log's order with its own operation, whose result answers the client.
    func submit<Operation: RegistryOperation, Done: Completion<Operation.Result>>(
        _ operation: Operation, frame: ByteBuffer, context: OperationContext, completion: Done
    ) {
        self.submit(
            FleetWrite(
                kind: Operation.erases ? .erasure : .request, pipelined: Operation.isPipelinedInTheFleet, gallery: operation.scope.galleryName,
                frame: Array(buffer: frame),
                apply: { application, ticket in
                    FleetApplication.$current.withValue(application) {
                        operation.start(in: context, completion: FleetCompletion(inner: completion, ticket: ticket))
                    }
                },
                refuse: { completion.complete(.failure($0)) }))
    }
}

extension RequestDispatcher {
    /// The request of an entry another node wrote (or this one, before a restart); nil when this
    /// registryd cannot read it.
    func fleetOperation(_ frame: [UInt8]) -> Registry_V1_Request.OneOf_Operation? {
        (try? Registry_V1_Request(serializedBytes: frame))?.operation
    }

    /// Applies an entry's request (``fleetOperation(_:)``; nil: it could not be read): its
    /// operation, run as if this node had been asked, bound to the entry. Nobody is answered; the
    /// audit trail is the writing node's.
    func applyFleetEntry(_ operation: Registry_V1_Request.OneOf_Operation?, application: FleetApplication, ticket: FleetTicket) {
        guard let operation else {
            // The writing node decoded it before appending: only a newer registryd writes what this
            // one cannot read. Every node of this version refuses it alike.
            return ticket.finished(
                Result<Void, any Error>.failure(
                    RegistryError.malformedRequest("fleet entry \(application.position) is not a request this registryd reads")))
        }
        operation.accept(Applying(dispatcher: self, application: application, ticket: ticket))
    }

    private struct Applying: OperationVisitor {
        let dispatcher: RequestDispatcher
        let application: FleetApplication
        let ticket: FleetTicket

        func visit<Operation: RegistryOperation>(_ operation: Operation) {
            guard Operation.isReplicated else {
                return self.ticket.finished(
                    Result<Void, any Error>.failure(
                        RegistryError.malformedRequest("fleet entry \(self.application.position) is a \(Operation.name), which is not a write")))
            }
            FleetApplication.$current.withValue(self.application) {
                operation.start(in: self.dispatcher.context, completion: FleetTicketCompletion<Operation.Result>(ticket: self.ticket))
            }
        }
    }
}
