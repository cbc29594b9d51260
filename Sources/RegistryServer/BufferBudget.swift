import NIOCore
import Synchronization

/// The bytes of requests and replies the daemon holds across all connections: frames read but not
/// yet answered, and replies produced but not yet handed to the socket.
///
/// Above the limit, connections that already hold bytes are not read from until enough is released
/// (``ConnectionHandler`` parks their reads). A connection holding nothing may still read, so a
/// client that fills the budget and never reads its replies cannot lock the others out; the worst
/// case is therefore the limit plus one read per idle connection.
final class BufferBudget: Sendable {
    let limit: Int
    private let used = Atomic<Int>(0)
    /// Parked connections to wake once usage falls below the limit.
    private let waiters = Mutex<[ObjectIdentifier: @Sendable () -> Void]>([:])
    private let waiterCount = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    var bytesInUse: Int { self.used.load(ordering: .relaxed) }
    var isExhausted: Bool { self.used.load(ordering: .relaxed) > self.limit }

    func charge(_ bytes: Int) {
        self.used.add(bytes, ordering: .relaxed)
    }

    func release(_ bytes: Int) {
        let now = self.used.subtract(bytes, ordering: .relaxed).newValue
        guard now <= self.limit, self.waiterCount.load(ordering: .relaxed) > 0 else { return }
        let wake = self.waiters.withLock { waiters in
            defer {
                waiters.removeAll()
                self.waiterCount.store(0, ordering: .relaxed)
            }
            return Array(waiters.values)
        }
        for resume in wake { resume() }
    }

    /// Registers `resume` to run once usage falls below the limit. Returns false, registering
    /// nothing, when there is room already (the caller reads at once).
    func waitForRoom(_ id: ObjectIdentifier, _ resume: @escaping @Sendable () -> Void) -> Bool {
        self.waiters.withLock { waiters in
            // Checked under the lock that `release` takes to collect waiters: no wake-up is lost.
            guard self.isExhausted else { return false }
            if waiters.updateValue(resume, forKey: id) == nil { self.waiterCount.add(1, ordering: .relaxed) }
            return true
        }
    }

    func cancelWait(_ id: ObjectIdentifier) {
        self.waiters.withLock { waiters in
            if waiters.removeValue(forKey: id) != nil { self.waiterCount.subtract(1, ordering: .relaxed) }
        }
    }
}

/// One connection's share of the ``BufferBudget``: what it holds, released in full when it ends so
/// a connection that leaves with requests unread or replies unwritten returns its bytes.
final class ConnectionAccount: Sendable {
    let budget: BufferBudget
    private let held = Atomic<Int>(0)
    /// Since when (``NIODeadline`` uptime nanoseconds) the connection has had no request in progress;
    /// `UInt64.max` while it has one. Written by its ``ConnectionHandler``, read by ``ConnectionSlots``
    /// to pick whom to ask to make room.
    private let quietSince = Atomic<UInt64>(.max)
    /// Asks the connection, on its event loop, to close itself if it has done nothing for the grace
    /// given (``ConnectionHandler``); nil once it has ended.
    private let makeRoom = Mutex<(@Sendable (ConnectionSlots.Graces) -> EventLoopFuture<Bool>)?>(nil)

    init(budget: BufferBudget) {
        self.budget = budget
    }

    var bytesHeld: Int { self.held.load(ordering: .relaxed) }

    /// Whether the connection may read more: it holds nothing, or the budget has room.
    var mayRead: Bool { self.bytesHeld == 0 || !self.budget.isExhausted }

    func charge(_ bytes: Int) {
        self.held.add(bytes, ordering: .relaxed)
        self.budget.charge(bytes)
    }

    func release(_ bytes: Int) {
        self.held.subtract(bytes, ordering: .relaxed)
        self.budget.release(bytes)
    }

    /// Records whether a request is in progress (from the connection's event loop).
    func noteBusy(_ busy: Bool) {
        if busy {
            self.quietSince.store(.max, ordering: .relaxed)
        } else if self.quietSince.load(ordering: .relaxed) == .max {
            self.quietSince.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed)
        }
    }

    /// Since when the connection has had no request in progress (uptime nanoseconds); nil while it has one.
    var idleSince: UInt64? {
        let since = self.quietSince.load(ordering: .relaxed)
        return since == .max ? nil : since
    }

    func setMakeRoom(_ body: (@Sendable (ConnectionSlots.Graces) -> EventLoopFuture<Bool>)?) {
        self.makeRoom.withLock { $0 = body }
    }

    /// Asks the connection to close if it has done nothing for its grace: true when it did; nil when
    /// it has ended already.
    func askToMakeRoom(_ graces: ConnectionSlots.Graces) -> EventLoopFuture<Bool>? {
        self.makeRoom.withLock { $0 }?(graces)
    }

    /// ``askToMakeRoom(_:)``, awaited; false when the connection did not close or has ended.
    func closeToMakeRoom(_ graces: ConnectionSlots.Graces) async -> Bool {
        guard let answer = self.askToMakeRoom(graces) else { return false }
        return (try? await answer.get()) ?? false
    }

    /// Returns whatever is still held (the connection ended).
    func releaseAll() {
        let remaining = self.held.exchange(0, ordering: .relaxed)
        if remaining != 0 { self.budget.release(remaining) }
    }
}
