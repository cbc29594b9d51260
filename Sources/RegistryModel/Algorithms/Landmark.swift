/// One named 3-D facial landmark as a client sends it (e.g. from MediaPipe or ML Kit), in any
/// coordinate frame; the landmark algorithm normalises position and scale itself.
public struct Landmark: Sendable, Hashable {
    public var name: String
    public var x: Float
    public var y: Float
    public var z: Float

    public init(name: String, x: Float, y: Float, z: Float) {
        self.name = name
        self.x = x
        self.y = y
        self.z = z
    }
}
