import NIOCore
import Synchronization

/// Who holds the daemon's connection slots, and whether a new connection gets one.
///
/// A client that opens connections and then does nothing with them (sends nothing, trickles a frame,
/// or sends a hello now and then to stay under the idle timeout) must not be able to lock the other
/// apps out, nor the operator. Three rules keep slots for them:
/// - **A share per user.** One peer uid holds at most `perUser` slots (a quarter by default), so it
///   takes several users to fill the daemon (a peer without credentials counts as one user).
/// - **A reserve for the operator.** The last `reserved` slots are only for the `privileged` uids:
///   root and the daemon's own user, whose registryctl, backup and metrics timers must get in when
///   every other user is at its share. They have no share of their own.
/// - **Room made from idle slots.** When the limit that applies is reached, the holder that has had
///   no request in progress the longest is asked to close: one that has been inside an unfinished
///   frame, or has never completed one, for `graces.unproductive` (half a second: a trickler, or a
///   client that connects and waits); else one that has completed requests but has had none in
///   progress for `graces.idle` (ten seconds: a pooled connection between its uses, or one kept
///   alive by hellos). At the per-user limit only that user's connections are candidates; an
///   unprivileged newcomer never closes a privileged holder's connection. A connection with a
///   request in progress is never closed, so no request that was read goes unanswered; the holder
///   decides on its own event loop, where that is known for sure.
///
/// Only when no holder can be asked is the new connection refused (`TOO_MANY_CONNECTIONS`, which
/// clients retry).
final class ConnectionSlots: Sendable {
    struct Limits: Sendable {
        var total: Int
        var perUser: Int
        /// Of `total`, the slots only `privileged` peers may take.
        var reserved = 0
        var privileged: Set<UInt32> = []
        var graces = Graces()
    }

    /// How long a holder must have done nothing useful before it is closed to make room.
    struct Graces: Sendable {
        /// Inside an unfinished frame, or connected without completing one.
        var unproductive: TimeAmount = .milliseconds(500)
        /// Between requests, having completed some.
        var idle: TimeAmount = .seconds(10)
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
        let privileged = uid.map { self.limits.privileged.contains($0) } ?? false
        // The privileged may take every slot; the others all but the reserve.
        let limit = privileged ? self.limits.total : self.limits.total - self.limits.reserved
        // A few tries: a holder asked to close may have become busy meanwhile; the next is asked.
        var declined: Set<ObjectIdentifier> = []
        for _ in 0..<4 {
            let step = self.holders.withLock { holders -> (Admission?, ObjectIdentifier?, ConnectionAccount?) in
                let staying = holders.values.filter { !$0.leaving }
                let atUserLimit = !privileged && staying.count { $0.uid == uid } >= self.limits.perUser
                guard atUserLimit || staying.count >= limit else {
                    holders[key] = Holder(uid: uid, account: account)
                    return (.admitted, nil, nil)
                }
                let now = NIODeadline.now().uptimeNanoseconds
                let unproductive = UInt64(self.limits.graces.unproductive.nanoseconds)
                let idle = UInt64(self.limits.graces.idle.nanoseconds)
                let candidate = holders.filter { entry in
                    !entry.value.leaving && !declined.contains(entry.key) && (!atUserLimit || entry.value.uid == uid)
                        && (privileged || !(entry.value.uid.map { self.limits.privileged.contains($0) } ?? false))
                }
                .compactMap { entry in entry.value.account.idleSince.map { (entry.key, entry.value.account, $0) } }
                // The shorter grace is a lower bound: the holder applies the one that fits it.
                .filter { now >= $0.2 && now - $0.2 >= min(unproductive, idle) }
                .min { $0.2 < $1.2 }
                guard let (victim, victimAccount, _) = candidate else {
                    let reason =
                        atUserLimit
                        ? "this user holds its maximum of \(self.limits.perUser) connections, none of them idle; try again later"
                        : "the daemon serves its maximum of \(limit) connections for this user's kind, none of them idle; try again later"
                    return (.refused(reason), nil, nil)
                }
                holders[victim]?.leaving = true
                return (nil, victim, victimAccount)
            }
            if let decided = step.0 { return decided }
            guard let victim = step.1, let victimAccount = step.2 else { continue }
            if await victimAccount.closeToMakeRoom(self.limits.graces) { continue }
            // Busy again, not idle long enough for its kind, or already gone: it keeps its slot,
            // and the next candidate is tried.
            self.holders.withLock { holders in holders[victim]?.leaving = false }
            declined.insert(victim)
        }
        return .refused("the daemon serves its maximum of \(limit) connections; try again later")
    }

    func leave(_ key: ObjectIdentifier) {
        _ = self.holders.withLock { $0.removeValue(forKey: key) }
    }
}
