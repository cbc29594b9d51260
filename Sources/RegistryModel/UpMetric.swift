/// The `registryd_up` series: 1 in every scrape the daemon answers, 0 in the file `registryctl metrics
/// --output` writes when it cannot reach the daemon. Both sides name and describe it from here, so
/// that the textfile collector sees one series whichever wrote it.
public enum UpMetric {
    public static let name = "registryd_up"
    public static let help = "1: the daemon answered this scrape; 0 (written by registryctl metrics): it could not be reached."
}
