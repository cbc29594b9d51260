import FoundationEssentials
import Glibc
import RegistryModel
import RegistryServer

/// A configuration file's bytes through the daemon's reading of it: decoding, `validated()` and the
/// access policy. A decoded configuration must also survive encoding and decoding unchanged.
///
/// `keyFile` is cleared before validation, and the systemd credential directory unset: reading a key
/// opens a path, and a fuzzer must not open arbitrary files (a FIFO would block it).
enum ConfigFuzz {
    nonisolated(unsafe) static var prepared = false

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        if !Self.prepared {
            unsetenv("CREDENTIALS_DIRECTORY")
            Self.prepared = true
        }
        guard var configuration = try? ServerConfiguration.decode(Data(input), from: "fuzz.json") else { return }
        configuration.keyFile = nil
        guard let encoded = try? JSONEncoder().encode(configuration) else { preconditionFailure("a decoded configuration cannot be encoded") }
        guard let again = try? ServerConfiguration.decode(encoded, from: "again.json") else {
            preconditionFailure("an encoded configuration does not decode")
        }
        precondition(again == configuration, "a configuration changes through encoding and decoding")
        if let validated = try? configuration.validated() {
            precondition(validated.galleries.count == configuration.galleries.count, "a configured gallery was lost")
        }
        _ = try? AccessPolicy(configuration.access)
    }
}
