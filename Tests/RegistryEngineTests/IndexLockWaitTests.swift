import Glibc
import Locks
import MetricsTestKit
import Synchronization
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Where the engine blocks: its reads of the store on its read pool; an authentication or
/// registration that finds the index lock taken nowhere: the writer carries it on after its
/// publication. Never on the caller's thread (an event loop calls both).
@Suite struct IndexLockWaitTests {
    /// The outcome of a call made with a completion, once it arrives.
    final class Received<Value: Sendable>: Completion, Sendable {
        private let state = Mutex<(result: Result<Value, any Error>?, waiter: CheckedContinuation<Result<Value, any Error>, Never>?)>((nil, nil))

        func complete(_ result: Result<Value, any Error>) {
            let waiter = self.state.withLock { state in
                precondition(state.result == nil, "completed twice")
                state.result = result
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: result)
        }

        var arrived: Bool { self.state.withLock { $0.result != nil } }

        func value() async throws -> Value {
            try await withCheckedContinuation { continuation in
                let result = self.state.withLock { state in
                    if state.result == nil { state.waiter = continuation }
                    return state.result
                }
                if let result { continuation.resume(returning: result) }
            }.get()
        }
    }

    @Test func anAuthenticationThatFindsThePublicationUnderWayWaitsOffTheCallersThread() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let metrics = TestMetrics()
        let engine = try Engine(path: directory.path, metrics: metrics)
        defer { engine.close() }
        _ = try await engine.register(identifier: "alice", face: Face(arcface(flips(0, 2))))
        let expected = try await engine.authenticate(identifier: "alice", face: Face(arcface()), autoEnrol: false)

        let received = Received<Authentication>()
        engine.publish {
            // As the writer while it publishes: had the call waited for the lock here, it would
            // never have returned (or, glibc refusing a read lock to its writer, answered unlocked).
            engine.authenticate(identifier: "alice", face: Face(arcface()), autoEnrol: false, completion: received)
            #expect(!received.arrived)
        }
        // Carried on by the publisher, right after.
        #expect(received.arrived)
        let answer = try await received.value()
        #expect(answer.score == expected.score && answer.templateId == expected.templateId && answer.authenticated == expected.authenticated)
        #expect(try metrics.expectCounter(EngineMetrics.indexLockWaitsLabel).totalValue == 1)
    }

    @Test func aRegistrationThatFindsThePublicationUnderWayIsQueuedRightAfterIt() async throws {
        try await withEngine { engine in
            let received = Received<Registration>()
            engine.publish {
                engine.register(identifier: "bob", face: Face(arcface()), completion: CompletionClosure { received.complete($0) })
                #expect(!received.arrived)
            }
            let registration = try await received.value()
            #expect(try await engine.templates(identifier: "bob").map(\.id) == registration.stored.map(\.id))
            // Its checks ran against the index as published: a second registration of the same face
            // under another name, also sent while the lock is held, is refused.
            let refused = Received<Registration>()
            engine.publish {
                engine.register(identifier: "eve", face: Face(arcface()), completion: CompletionClosure { refused.complete($0) })
            }
            await expectRegistryError(.similarFaceRegistered) { _ = try await refused.value() }
        }
    }

    /// The lock prefers writers: while the writer waits for a scan to leave, a new reader would wait
    /// behind it. The authentication must see that and be carried on after the publication too.
    @Test func anAuthenticationArrivingWhileTheWriterWaitsForAScanDoesNotWaitEither() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "alice", face: Face(arcface()))
            let scanLeaves = ConditionLock()
            let scanning = Flag()
            let leave = Flag()
            let scan = Thread {
                engine.indexLock.withReadLock {
                    scanning.set()
                    scanLeaves.withLock(whenReady: { leave.isSet }) {}
                }
            }
            while !scanning.isSet { usleep(1000) }
            let writer = Thread { engine.publish {} }
            // Until the writer is queued: a read lock is then refused to newcomers.
            var polls = 0
            while engine.indexLock.withReadLockIfFree({}) != nil && polls < 5000 {
                usleep(1000)
                polls += 1
            }
            #expect(polls < 5000, "a waiting writer never turned new readers away")
            let received = Received<Authentication>()
            engine.authenticate(identifier: "alice", face: Face(arcface()), autoEnrol: false, completion: received)
            #expect(!received.arrived)
            leave.set()
            scanLeaves.withLock {}
            scanLeaves.broadcast()
            scan.join()
            writer.join()
            #expect(try await received.value().authenticated)
        }
    }

    @Test func theReadPoolRunsEveryJobWithAtMostItsThreads() async throws {
        let pool = ReadPool(maximumThreads: 3)
        defer { pool.stop() }
        let running = Count()
        let most = Count()
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for job in 0..<24 {
                group.addTask {
                    try await pool.run {
                        let now = running.value.add(1, ordering: .relaxed).newValue
                        most.value.max(now, ordering: .relaxed)
                        usleep(2000)
                        running.value.subtract(1, ordering: .relaxed)
                        return job
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.sorted() == Array(0..<24))
        #expect((1...3).contains(most.value.load(ordering: .relaxed)))
    }

    @Test func stoppingTheReadPoolFinishesWhatWasSubmittedAndRefusesTheRest() async throws {
        let pool = ReadPool(maximumThreads: 1)
        let order = Mutex<[Int]>([])
        for job in 0..<50 {
            #expect(
                pool.submit {
                    usleep(100)
                    order.withLock { $0.append(job) }
                })
        }
        pool.stop()
        #expect(order.withLock { $0 } == Array(0..<50))
        #expect(!pool.submit {})
        await expectRegistryError(.shuttingDown) { _ = try await pool.run { 1 } }
    }

    @Test func readsSubmittedBeforeTheEngineClosesAreAnswered() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let engine = try Engine(path: directory.path)
        _ = try await engine.register(identifier: "alice", face: Face(arcface()))
        // A read waiting in the pool when close begins still reads the open store: every thread
        // is held first, so that it waits.
        let gate = Flag()
        for _ in 0..<engine.reads.maximumThreads {
            #expect(engine.reads.submit { while !gate.isSet { usleep(1000) } })
        }
        while engine.reads.waitingJobs > 0 { usleep(1000) }
        let pending = Task { try await engine.identifiers().identifiers }
        while engine.reads.waitingJobs == 0 { usleep(1000) }
        let closing = Thread { engine.close() }
        while engine.reads.submit({}) { usleep(1000) }
        gate.set()
        closing.join()
        #expect(try await pending.value == ["alice"])
        await expectRegistryError(.shuttingDown) { _ = try await engine.identifiers() }
    }
}

/// A flag one thread sets and others poll.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { self.value.store(true, ordering: .releasing) }
    var isSet: Bool { self.value.load(ordering: .acquiring) }
}

private final class Count: Sendable {
    let value = Atomic<Int>(0)
}
