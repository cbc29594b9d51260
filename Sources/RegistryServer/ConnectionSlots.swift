import NIOCore
import Synchronization

/// Who holds the daemon's connection slots, and whether a new connection gets one.
///
/// A client that opens connections and then does nothing with them (sends nothing, or trickles a
/// frame) must not be able to lock the other apps out. Two rules keep slots for them:
/// - **A share per user.** One peer uid holds at most `perUser` slots, so another user's app always
///   finds some (a peer without credentials counts as one user).
/// - **Room made from unproductive slots.** When the limit that applies is reached, the holder that
///   has had no request in progress the longest is asked to close, if for half a second it has been
///   inside an unfinished frame or has never completed one (a trickler, or a client that connects
///   and waits). A connection that has made requests and is idle between them (an app's pooled
///   connection) is left to the idle timeout: closing it would surprise a client that does not
///   reconnect, and its user's share already bounds what it holds. At the per-user limit only that
///   user's connections are candidates. A connection with a request in progress is never closed,
///   so no request that was read goes unanswered; the holder decides on its own event loop, where
///   that is known for sure.
///
/// Only when no holder can be asked is the new connection refused (`TOO_MANY_CONNECTIONS`, which
/// clients retry).
final class ConnectionSlots: Sendable {
    struct Limits: Sendable {
        var total: Int
        var perUser: Int
        var graces = Graces()
    }

    /// How long a holder must have done nothing useful before it is closed to make room.
    struct Graces: Sendable {
        /// Inside an unfinished frame, or connected without completing one.
        var unproductive: TimeAmount = .milliseconds(500)
    }

    enum Admission: Equatable, Sendable {
        case admitted
        /// Refused, with the sentence for the client.
        case refused(String)
    }

    private struct Holder {
        var uid: UInt32?
        var account: ConnectionAccount
        /// Asked to close to make room: no longer counted, and not asked twice.
        var leaving = false
    }

    let limits: Limits
    private let holders = Mutex<[ObjectIdentifier: Holder]>([:])

    init(limits: Limits) {
        self.limits = limits
    }

    /// Slots held, counting those asked to close until they have.
    var count: Int { self.holders.withLock { $0.count } }

    /// Gives `key` a slot for a connection of `uid`, closing an idle holder first when the limit is
    /// reached and one can be closed. Call ``leave(_:)`` when an admitted connection ends.
    func admit(_ key: ObjectIdentifier, uid: UInt32?, account: ConnectionAccount) async -> Admission {
        // A few tries: a holder asked to close may have become busy meanwhile; the next is asked.
        var declined: Set<ObjectIdentifier> = []
        for _ in 0..<4 {
            let step = self.holders.withLock { holders -> (Admission?, ObjectIdentifier?, ConnectionAccount?) in
                let staying = holders.values.filter { !$0.leaving }
                let mine = staying.filter { $0.uid == uid }.count
                let atUserLimit = mine >= self.limits.perUser
                guard atUserLimit || staying.count >= self.limits.total else {
                    holders[key] = Holder(uid: uid, account: account)
                    return (.admitted, nil, nil)
                }
                let now = NIODeadline.now().uptimeNanoseconds
                let grace = UInt64(self.limits.graces.unproductive.nanoseconds)
                let candidate = holders.filter { !$0.value.leaving && !declined.contains($0.key) && (!atUserLimit || $0.value.uid == uid) }
                    .compactMap { entry in entry.value.account.idleSince.map { (entry.key, entry.value.account, $0) } }
                    .filter { now >= $0.2 && now - $0.2 >= grace }
                    .min { $0.2 < $1.2 }
                guard let (victim, victimAccount, _) = candidate else {
                    let reason =
                        atUserLimit
                        ? "this user holds its maximum of \(self.limits.perUser) connections, none of them idle; try again later"
                        : "the daemon serves its maximum of \(self.limits.total) connections, none of them idle; try again later"
                    return (.refused(reason), nil, nil)
                }
                holders[victim]?.leaving = true
                return (nil, victim, victimAccount)
            }
            if let decided = step.0 { return decided }
            guard let victim = step.1, let victimAccount = step.2 else { continue }
            if await victimAccount.closeToMakeRoom(self.limits.graces) { continue }
            // Busy again (or already gone): it keeps its slot, and the next candidate is tried.
            self.holders.withLock { holders in holders[victim]?.leaving = false }
            declined.insert(victim)
        }
        return .refused("the daemon serves its maximum of \(self.limits.total) connections; try again later")
    }

    func leave(_ key: ObjectIdentifier) {
        _ = self.holders.withLock { $0.removeValue(forKey: key) }
    }
}
