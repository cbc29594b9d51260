import Crypto
import Foundation
import RegistryModel

/// Seals the fleet log's entries with the fleet key before they reach PostgreSQL, so that no
/// template is ever there in the clear (docs/fleet.md, "Erasure and the fleet key"). The key is a
/// file every node has (32 bytes, or 64 hex characters), never stored in the database.
///
/// An entry is AES-256-GCM over the node's payload, with the fleet's id as associated data: an
/// entry copied into another fleet's database does not open there.
///
/// `@unchecked Sendable`: SymmetricKey is an immutable value (swift-crypto does not mark it Sendable).
public struct FleetSeal: @unchecked Sendable {
    private let key: SymmetricKey
    private let fleetId: Int64

    /// The first byte of every sealed entry: the format, so that a later one can be told apart.
    static let format: UInt8 = 1

    public init(key: [UInt8], fleetId: Int64) {
        self.key = SymmetricKey(data: key)
        self.fleetId = fleetId
    }

    /// The fleet's id, then `context` (empty for log entries; a snapshot part's position, number and
    /// count, so that parts cannot be moved between snapshots or reordered).
    private func associatedData(_ context: [UInt8]) -> [UInt8] { withUnsafeBytes(of: self.fleetId.bigEndian, Array.init) + context }

    public func seal(_ payload: [UInt8], context: [UInt8] = []) throws -> [UInt8] {
        let box = try AES.GCM.seal(payload, using: self.key, authenticating: self.associatedData(context))
        guard let combined = box.combined else { throw FleetSealError(problem: "AES-GCM gave no combined form") }
        return [Self.format] + Array(combined)
    }

    /// The payload of a sealed entry; throws when it was not sealed with this key for this fleet,
    /// or was changed since.
    public func open(_ sealed: [UInt8], context: [UInt8] = []) throws(FleetSealError) -> [UInt8] {
        guard sealed.first == Self.format else {
            throw FleetSealError(problem: "an entry of an unknown format (\(sealed.first.map(String.init) ?? "empty"))")
        }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed.dropFirst())
            return Array(try AES.GCM.open(box, using: self.key, authenticating: self.associatedData(context)))
        } catch {
            throw FleetSealError(
                problem: "an entry does not open with this node's fleet key: the key differs from the node that wrote it, or the entry was changed")
        }
    }

    /// The context of part `part` of `parts` of the snapshot at `position`.
    public static func snapshotContext(position: Int64, part: Int, parts: Int) -> [UInt8] {
        Array("snapshot".utf8) + withUnsafeBytes(of: position.bigEndian, Array.init) + withUnsafeBytes(of: Int32(part).bigEndian, Array.init)
            + withUnsafeBytes(of: Int32(parts).bigEndian, Array.init)
    }
}

public struct FleetSealError: Error, Sendable, Equatable, CustomStringConvertible {
    public let problem: String
    public var description: String { self.problem }
}
