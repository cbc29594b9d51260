import Crypto
import RegistryModel

/// AES-256-GCM for template payloads at rest. Each payload is sealed with a fresh random nonce and the
/// template id as associated data, so a payload moved to another id fails to open.
///
/// Stored form: nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes): 28 bytes more than the payload.
/// `@unchecked Sendable`: SymmetricKey is an immutable value (swift-crypto does not mark it Sendable).
struct PayloadCipher: @unchecked Sendable {
    private let key: SymmetricKey

    /// Bytes a sealed payload has beyond the plain one (nonce and tag).
    static let overhead = 12 + 16

    /// The plaintext sealed under id 0 in the store's metadata, to tell a right key from a wrong one.
    static let checkPlaintext = Array("registryd template key check v1".utf8)

    /// A cipher from 32 key bytes, or 64 hexadecimal characters (white space ignored). The copies made
    /// on the way are wiped before they are freed (swift-crypto's key wipes its own storage); the
    /// caller wipes `keyMaterial` (``KeyMaterial/wipe(_:)``).
    /// - Throws: ``RegistryError`` (`malformedRequest`) for any other key material.
    init(keyMaterial: [UInt8]) throws(RegistryError) {
        var bytes = try KeyMaterial.keyBytes(keyMaterial)
        defer { KeyMaterial.wipe(&bytes) }
        self.key = SymmetricKey(data: bytes)
    }

    func seal(_ payload: [UInt8], templateId: UInt64) throws -> [UInt8] {
        let box = try AES.GCM.seal(payload, using: self.key, authenticating: [UInt8](bigEndian: templateId))
        guard let combined = box.combined else { throw RegistryError(.internal, "AES-GCM produced no combined form") }
        return Array(combined)
    }

    /// - Throws: when the key, the id or the bytes do not match (a wrong key, or tampering).
    func open(_ sealed: [UInt8], templateId: UInt64) throws -> [UInt8] {
        let box = try AES.GCM.SealedBox(combined: sealed)
        return Array(try AES.GCM.open(box, using: self.key, authenticating: [UInt8](bigEndian: templateId)))
    }
}
