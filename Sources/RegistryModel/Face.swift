/// What one request carries: the templates of one capture, at most one per algorithm, and optionally
/// what the client measured about the capture (quality inputs, depth frames for liveness).
public struct Face: Sendable, Hashable, CustomStringConvertible {
    public var templates: [FaceTemplate]
    /// The detector's report on the capture (the quality inputs of the capture quality design).
    public var capture: CaptureMetadata?
    /// Depth frames in capture order (for the depth liveness gate).
    public var depthFrames: [DepthFrame]

    public init(templates: [FaceTemplate], capture: CaptureMetadata? = nil, depthFrames: [DepthFrame] = []) {
        self.templates = templates
        self.capture = capture
        self.depthFrames = depthFrames
    }

    public init(_ templates: FaceTemplate...) {
        self.init(templates: templates)
    }

    public var description: String {
        var parts = self.templates.map(\.description)
        if self.capture != nil { parts.append("capture metadata") }
        if !self.depthFrames.isEmpty { parts.append("\(self.depthFrames.count) depth frames") }
        return "Face(\(parts.joined(separator: ", ")))"
    }
}
