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

    /// A cipher from 32 key bytes, or 64 hexadecimal characters (surrounding white space ignored).
    /// - Throws: ``RegistryError`` (`malformedRequest`) for any other key material.
    init(keyMaterial: [UInt8]) throws(RegistryError) {
        var bytes = keyMaterial
        if bytes.count != 32 {
            let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
            var decoded: [UInt8] = []
            var index = text.startIndex
            while index < text.endIndex, let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex),
                let byte = UInt8(text[index..<next], radix: 16)
            {
                decoded.append(byte)
                index = next
            }
            guard decoded.count == 32, index == text.endIndex else {
                throw .malformedRequest("an encryption key is 32 bytes, or 64 hexadecimal characters")
            }
            bytes = decoded
        }
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
