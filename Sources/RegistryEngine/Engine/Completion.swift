/// Receives the outcome of work started without a task, exactly once. A value type can be one, so
/// that work finished at once (an authentication that writes nothing: most of a daemon's traffic)
/// costs no allocation, where a closure would cost one for its captures.
public protocol Completion<Value>: Sendable {
    associatedtype Value: Sendable
    func complete(_ result: Result<Value, any Error>)
}

/// A closure as a ``Completion`` (callers that allocate anyway: a task, a continuation).
public struct CompletionClosure<Value: Sendable>: Completion {
    private let body: @Sendable (Result<Value, any Error>) -> Void

    public init(_ body: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        self.body = body
    }

    public func complete(_ result: Result<Value, any Error>) {
        self.body(result)
    }
}

extension Engine {
    /// The one bridge from the engine's completion style to `async` callers (tools, tests, the
    /// daemon's operations that run on a task): every `async` method of the engine's surface is
    /// this over the method that takes a ``Completion``, so the two cannot drift apart.
    func awaiting<T: Sendable>(_ start: (CompletionClosure<T>) -> Void) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in start(CompletionClosure { continuation.resume(with: $0) }) }
    }
}
