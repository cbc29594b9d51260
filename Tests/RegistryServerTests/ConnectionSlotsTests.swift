import NIOCore
import NIOPosix
import Testing

@testable import RegistryServer

/// Who gets a connection slot: a share per user, and room made from holders doing nothing.
@Suite struct ConnectionSlotsTests {
    /// A real loop: the slots ask holders from whatever thread admits (an EmbeddedEventLoop may only
    /// be used from the thread that made it).
    let loop = NIOSingletons.posixEventLoopGroup.next()
    let budget = BufferBudget(limit: 1 << 20)

    /// A holder that answers a request to make room with `closes` (as its connection would: true
    /// when it was idle long enough and closed), counting the requests.
    final class Holder: @unchecked Sendable {
        let account: ConnectionAccount
        /// Alive as long as the holder, so that no two holders share a key.
        private let token = Token()
        var key: ObjectIdentifier { ObjectIdentifier(self.token) }
        var asked = 0

        init(budget: BufferBudget, loop: any EventLoop, busy: Bool, closes: Bool) {
            self.account = ConnectionAccount(budget: budget)
            self.account.noteBusy(busy)
            self.account.setMakeRoom { [unowned self] _ in
                self.asked += 1
                return loop.makeSucceededFuture(closes)
            }
        }
    }

    final class Token {}

    func holder(busy: Bool = false, closes: Bool = true) -> Holder {
        Holder(budget: self.budget, loop: self.loop, busy: busy, closes: closes)
    }

    @Test func oneUserCannotTakeTheSlotsOfAnother() async {
        let slots = ConnectionSlots(limits: .init(total: 4, perUser: 2, graces: .init(unproductive: .zero)))
        let holders = (0..<3).map { _ in self.holder(busy: true) }
        #expect(await slots.admit(holders[0].key, uid: 1000, account: holders[0].account) == .admitted)
        #expect(await slots.admit(holders[1].key, uid: 1000, account: holders[1].account) == .admitted)
        let third = await slots.admit(holders[2].key, uid: 1000, account: holders[2].account)
        guard case .refused(let reason) = third else {
            Issue.record("a user took more than its share: \(third)")
            return
        }
        #expect(reason.contains("this user holds its maximum of 2"))
        let other = self.holder()
        #expect(await slots.admit(other.key, uid: 2000, account: other.account) == .admitted)
    }

    @Test func atTheLimitTheLongestIdleHolderMakesRoom() async throws {
        let slots = ConnectionSlots(limits: .init(total: 2, perUser: 2, graces: .init(unproductive: .zero)))
        let busy = self.holder(busy: true)
        let idle = self.holder()
        #expect(await slots.admit(busy.key, uid: 1, account: busy.account) == .admitted)
        #expect(await slots.admit(idle.key, uid: 2, account: idle.account) == .admitted)
        let newcomer = self.holder()
        #expect(await slots.admit(newcomer.key, uid: 3, account: newcomer.account) == .admitted)
        #expect(idle.asked == 1 && busy.asked == 0, "a busy holder was asked, or the idle one was not")
        // The idle one left (its connection ended) and the newcomer holds its slot.
        slots.leave(idle.key)
        #expect(slots.count == 2)
    }

    @Test func busyHoldersAreNeverAskedAndTheNewcomerIsRefused() async {
        let slots = ConnectionSlots(limits: .init(total: 2, perUser: 2, graces: .init(unproductive: .zero)))
        let holders = [self.holder(busy: true), self.holder(busy: true)]
        for holder in holders { #expect(await slots.admit(holder.key, uid: 1, account: holder.account) == .admitted) }
        let newcomer = self.holder()
        let admission = await slots.admit(newcomer.key, uid: 2, account: newcomer.account)
        #expect(admission != .admitted)
        #expect(holders.allSatisfy { $0.asked == 0 })
    }

    @Test func aHolderThatBecameBusyKeepsItsSlotAndTheNextIsAsked() async {
        let slots = ConnectionSlots(limits: .init(total: 2, perUser: 2, graces: .init(unproductive: .zero)))
        let declines = self.holder(closes: false)
        #expect(await slots.admit(declines.key, uid: 1, account: declines.account) == .admitted)
        try? await Task.sleep(for: .milliseconds(2))  // idle longer than the next
        let closes = self.holder()
        #expect(await slots.admit(closes.key, uid: 1, account: closes.account) == .admitted)
        let newcomer = self.holder()
        #expect(await slots.admit(newcomer.key, uid: 1, account: newcomer.account) == .admitted)
        #expect(declines.asked == 1 && closes.asked == 1)
        #expect(slots.count == 3, "the holder that declined keeps its slot; the one that closed holds it until it ends")
    }

    @Test func atTheUserLimitOnlyThatUsersHoldersAreAsked() async {
        let slots = ConnectionSlots(limits: .init(total: 10, perUser: 1, graces: .init(unproductive: .zero)))
        let otherUser = self.holder()
        let mine = self.holder()
        #expect(await slots.admit(otherUser.key, uid: 1, account: otherUser.account) == .admitted)
        #expect(await slots.admit(mine.key, uid: 2, account: mine.account) == .admitted)
        let newcomer = self.holder()
        #expect(await slots.admit(newcomer.key, uid: 2, account: newcomer.account) == .admitted)
        #expect(mine.asked == 1 && otherUser.asked == 0)
    }

    @Test func aHolderIdleForLessThanTheGraceIsNotAsked() async {
        let slots = ConnectionSlots(limits: .init(total: 1, perUser: 1, graces: .init(unproductive: .seconds(60))))
        let idle = self.holder()
        #expect(await slots.admit(idle.key, uid: 1, account: idle.account) == .admitted)
        let newcomer = self.holder()
        #expect(await slots.admit(newcomer.key, uid: 1, account: newcomer.account) != .admitted)
        #expect(idle.asked == 0)
    }

    @Test("the last slots are kept for root and the daemon's user: other users at their shares cannot lock the operator out")
    func theReserveIsForThePrivileged() async {
        let slots = ConnectionSlots(limits: .init(total: 4, perUser: 2, reserved: 1, privileged: [0, 999], graces: .init(unproductive: .zero)))
        let users = (0..<3).map { _ in self.holder(busy: true) }
        #expect(await slots.admit(users[0].key, uid: 1000, account: users[0].account) == .admitted)
        #expect(await slots.admit(users[1].key, uid: 1000, account: users[1].account) == .admitted)
        #expect(await slots.admit(users[2].key, uid: 2000, account: users[2].account) == .admitted)
        // Three of four taken: the fourth is the reserve, which a third user may not take.
        let third = self.holder(busy: true)
        #expect(await slots.admit(third.key, uid: 3000, account: third.account) != .admitted)
        let root = self.holder(busy: true)
        #expect(await slots.admit(root.key, uid: 0, account: root.account) == .admitted)
        // Root has no share of its own to run out of, but the total still bounds it.
        let daemon = self.holder(busy: true)
        #expect(await slots.admit(daemon.key, uid: 999, account: daemon.account) != .admitted)
    }

    @Test("an unprivileged newcomer never closes root's idle connection to make room")
    func aPrivilegedHolderIsNotAVictim() async {
        let slots = ConnectionSlots(limits: .init(total: 2, perUser: 2, privileged: [0], graces: .init(unproductive: .zero, idle: .zero)))
        let root = self.holder()
        let busy = self.holder(busy: true)
        #expect(await slots.admit(root.key, uid: 0, account: root.account) == .admitted)
        #expect(await slots.admit(busy.key, uid: 1000, account: busy.account) == .admitted)
        let newcomer = self.holder()
        #expect(await slots.admit(newcomer.key, uid: 2000, account: newcomer.account) != .admitted)
        #expect(root.asked == 0)
        // Root itself may make room from another user's idle connection (root's own is busy now).
        root.account.noteBusy(true)
        let idle = self.holder()
        slots.leave(busy.key)
        #expect(await slots.admit(idle.key, uid: 1000, account: idle.account) == .admitted)
        let root2 = self.holder()
        #expect(await slots.admit(root2.key, uid: 0, account: root2.account) == .admitted)
        #expect(idle.asked == 1)
    }
}
