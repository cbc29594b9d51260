/// A row a scan needed and could not read as it was registered: the scan's answer would not be exact,
/// so the request that ran it fails instead (``RegistryError/damagedRow(_:)``) rather than skip the
/// row. A template removed after the scan's view of the index was taken is not a fault: the removal
/// committed first, and the scan answers as of just after it.
struct RowFault: Error, Sendable, Equatable, CustomStringConvertible {
    /// The template whose row it is; nil when the store could not be read at all.
    let templateId: UInt64?
    /// What is wrong, in an operator's terms (never row values).
    let problem: String

    var description: String {
        self.templateId.map { "template \($0): \(self.problem)" } ?? self.problem
    }
}
