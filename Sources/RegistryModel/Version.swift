/// The release of this code: `--version` of every binary, and the server version a daemon reports
/// (hello, stats). Raised with each release that changes what users see.
public enum RegistryVersion {
    public static let current = "0.3.0"
}
