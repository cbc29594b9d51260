import CoreMetrics
import LMDB
import Synchronization

/// Erasure: what a delete removes leaves no byte behind in `data.mdb` (docs/security.md, *Erasure*).
///
/// LMDB copies a page before changing it, so a delete's commit frees the old copy, which still holds
/// the deleted bytes; LMDB itself never wipes it. The writer wipes free pages after each batch
/// (``Environment/eraseFreePages(sync:)``), but a page freed by commit N may be wiped only once a
/// later commit exists (a crash could fall back to N − 1, which reads it) and no reader of a snapshot
/// before N is open. So after a removal, when no other write follows, the writer makes that later
/// commit itself (a lazy request: it joins the next batch, or runs alone after 100 ms), and polls the
/// same way while an older reader (a hot backup) holds the pages.
extension Engine {
    /// Finishes every erasure, reading every erasable free page not known to be zero: at open,
    /// before serving, what the previous process may have left (it stopped between a removal and its
    /// erasure); at close, once the writer has stopped, so that the store is left with no erasable
    /// page holding data (what an offline verify checks). Returns false when it could not (a full
    /// disk refuses the commit it needs): at open the writer then keeps trying
    /// (``queueErasureCommit()``), so that a store that needs deletes to free space still opens.
    func finishErasure() -> Bool {
        let environment = self.store.environment
        do {
            if environment.removalAwaitsCommit {
                try environment.write { txn in
                    try self.store.writeInteger(txn, Keys.erasureCommit, UInt64(environment.lastCommittedTransaction + 1))
                }
            }
            return !(try environment.eraseFreePages(sync: true)).removalPending
        } catch {
            self.metrics.erasureFailures.increment()
            return false
        }
    }

    /// After each batch, on the writer thread: wipes what earlier commits freed, and keeps a removal's
    /// erasure going until it is finished. The zeros reach the disk with the next commit's sync; a
    /// sync of its own only in a batch the lazy delay started (no other write came within 0.1 s), so
    /// that erasure never adds a sync to a busy writer.
    func eraseAfterBatch(sync: Bool, always: Bool = false) {
        guard always || self.store.environment.erasureOutstanding else { return }
        let pending: Bool
        do {
            let free = try self.store.environment.eraseFreePages(sync: sync)
            if free.holdingData > 0 { self.metrics.erasedPages.increment(by: free.holdingData) }
            pending = free.removalPending || free.unsynced
        } catch {
            // A disk that cannot be read or written now: the next batch or poll tries again.
            self.metrics.erasureFailures.increment()
            pending = true
        }
        if pending { self.queueErasureCommit() }
    }

    /// Queues (once) the lazy request that makes the commit a removal's erasure waits for, if no other
    /// write has made it by then; when an older reader is what holds the erasure back, it writes
    /// nothing and only brings the writer back to try again.
    func queueErasureCommit() {
        guard !self.erasureCommitQueued.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let environment = self.store.environment
        let request = WriteQueue.Request(
            exclusive: false,
            useReserve: true,
            { txn, _ in
                self.erasureCommitQueued.store(false, ordering: .releasing)
                // Lazy requests run last in their batch: anything written before makes the commit.
                if txn.changeCount == 0 && environment.removalAwaitsCommit(within: txn) {
                    try self.store.writeInteger(txn, Keys.erasureCommit, UInt64(environment.lastCommittedTransaction + 1))
                }
            },
            completion: { _ in })
        if !self.writerQueue.submitLazily(request) { self.erasureCommitQueued.store(false, ordering: .releasing) }
    }
}
