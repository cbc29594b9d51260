import CLMDB

/// A live LMDB transaction (an `MDB_txn *`), lent to the body of ``Environment/read(_:)`` or
/// ``Environment/write(_:)`` and never available outside it.
///
/// It is non-copyable and only ever borrowed, so it cannot outlive the closure: the environment commits
/// or aborts it when the body returns or throws. Buffers returned by ``get(_:key:)`` and passed to
/// cursor walks point into LMDB's memory map and are valid only until the body returns; copy them out.
public struct Transaction: ~Copyable {
    let handle: OpaquePointer
    /// Whether this is a read-only transaction (writes throw `EACCES` from LMDB).
    public let isReadOnly: Bool
    /// Counts the calls that may have changed a write transaction (shared with its nested children).
    private let changes: ChangeCounter?

    init(handle: OpaquePointer, isReadOnly: Bool, changes: ChangeCounter? = nil) {
        self.handle = handle
        self.isReadOnly = isReadOnly
        self.changes = isReadOnly ? nil : changes ?? ChangeCounter()
    }

    /// How many calls so far may have changed the store through this transaction or its nested
    /// children (puts, deletes, empties; counted when called, so a failed one counts too). Lets a
    /// caller tell whether a body that failed left changes behind.
    public var changeCount: Int { self.changes?.count ?? 0 }

    /// Opens (or, in a write transaction with `create`, creates) a named database (`mdb_dbi_open`).
    /// - Throws: ``LMDBError``; `MDB_NOTFOUND` when it does not exist and `create` is false.
    public func openDatabase(_ name: String, create: Bool = false) throws -> Database {
        var dbi: MDB_dbi = 0
        if create { self.changes?.count += 1 }
        let flags = create ? UInt32(MDB_CREATE) : 0
        try check(mdb_dbi_open(self.handle, name, flags, &dbi), "mdb_dbi_open(\(name))")
        return Database(dbi: dbi, name: name)
    }

    /// Reads the value of `key` (`mdb_get`), or `nil` when absent. The buffer is valid until the
    /// transaction ends.
    /// - Throws: ``LMDBError`` for anything but absence.
    public func get(_ db: Database, key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(self.handle, db.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get(\(db.name))")
        return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    }

    /// Convenience over ``get(_:key:)`` for byte-array keys.
    public func get(_ db: Database, key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        try key.withUnsafeBytes { k in try self.get(db, key: k) }
    }

    /// Stores `value` under `key` (`mdb_put`).
    /// - Throws: ``LMDBError``: `MDB_MAP_FULL` when the map must grow (``Environment/write(_:)``
    ///   grows it and retries), `MDB_KEYEXIST` under `.noOverwrite`/`.append`.
    public func put(
        _ db: Database,
        key: UnsafeRawBufferPointer,
        value: UnsafeRawBufferPointer,
        flags: PutFlags = []
    ) throws {
        self.changes?.count += 1
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(mdb_put(self.handle, db.dbi, &k, &v, flags.rawValue), "mdb_put(\(db.name))")
    }

    /// Convenience over ``put(_:key:value:flags:)`` for byte arrays.
    public func put(_ db: Database, key: [UInt8], value: [UInt8], flags: PutFlags = []) throws {
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in try self.put(db, key: k, value: v, flags: flags) }
        }
    }

    /// Reserves `count` bytes for `key` and lets `fill` write them in place (`MDB_RESERVE`), which
    /// saves encoding a value into a temporary buffer first. `fill` must write every byte.
    public func putReserving(
        _ db: Database,
        key: UnsafeRawBufferPointer,
        count: Int,
        flags: PutFlags = [],
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws {
        self.changes?.count += 1
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: count, mv_data: nil)
        try check(
            mdb_put(self.handle, db.dbi, &k, &v, flags.rawValue | UInt32(MDB_RESERVE)),
            "mdb_put(\(db.name), reserve)"
        )
        fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
    }

    /// Deletes `key` (`mdb_del`). Returns whether it existed.
    @discardableResult
    public func delete(_ db: Database, key: UnsafeRawBufferPointer) throws -> Bool {
        self.changes?.count += 1
        self.changes?.removals += 1
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let rc = mdb_del(self.handle, db.dbi, &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try check(rc, "mdb_del(\(db.name))")
        return true
    }

    /// Convenience over ``delete(_:key:)`` for byte-array keys.
    @discardableResult
    public func delete(_ db: Database, key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { k in try self.delete(db, key: k) }
    }

    /// Number of entries in `db` (`mdb_stat`).
    public func count(_ db: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(self.handle, db.dbi, &stat), "mdb_stat(\(db.name))")
        return stat.ms_entries
    }

    /// Removes every entry of `db`, keeping the database itself (`mdb_drop` with `del = 0`).
    public func empty(_ db: Database) throws {
        self.changes?.count += 1
        self.changes?.removals += 1
        try check(mdb_drop(self.handle, db.dbi, 0), "mdb_drop(\(db.name))")
    }

    /// The last (greatest) key of `db`, copied, or `nil` when empty.
    public func lastKey(_ db: Database) throws -> [UInt8]? {
        var result: [UInt8]?
        try self.withCursor(db) { cursor in
            var k = MDB_val()
            var v = MDB_val()
            let rc = mdb_cursor_get(cursor, &k, &v, MDB_LAST)
            if rc == MDB_NOTFOUND { return }
            try check(rc, "mdb_cursor_get(\(db.name), last)")
            result = Array(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size))
        }
        return result
    }

    /// Walks `db` in key order from the first key ≥ `start` (or from the beginning when `start` is nil
    /// or empty), calling `body`
    /// with each key and value until it returns `.stop` or the database ends.
    /// - Throws: ``LMDBError`` from the cursor, or whatever `body` throws (the walk stops).
    public func forEach(
        _ db: Database,
        from start: UnsafeRawBufferPointer? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> IterationControl
    ) throws {
        try self.withCursor(db) { cursor in
            var k = MDB_val(mv_size: start?.count ?? 0, mv_data: UnsafeMutableRawPointer(mutating: start?.baseAddress))
            var v = MDB_val()
            // An empty start key means the beginning (LMDB refuses zero-length keys).
            var op = (start?.count ?? 0) == 0 ? MDB_FIRST : MDB_SET_RANGE
            while true {
                let rc = mdb_cursor_get(cursor, &k, &v, op)
                if rc == MDB_NOTFOUND { return }
                try check(rc, "mdb_cursor_get(\(db.name))")
                let control = try body(
                    UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
                    UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
                )
                if case .stop = control { return }
                op = MDB_NEXT
            }
        }
    }

    /// Convenience over ``forEach(_:from:_:)`` with a byte-array start key.
    public func forEach(
        _ db: Database,
        from start: [UInt8],
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> IterationControl
    ) throws {
        try start.withUnsafeBytes { s in try self.forEach(db, from: s, body) }
    }

    /// Runs `body` with one cursor on `db` for many ``Cursor/walk(from:_:)`` calls (a cursor opened
    /// once instead of one per walk).
    public func withCursor<T>(_ db: Database, _ body: (borrowing Cursor) throws -> T) throws -> T {
        try self.withCursor(db) { cursor in try body(Cursor(handle: cursor, name: db.name)) }
    }

    /// Runs `body` in a child transaction of this write transaction (`mdb_txn_begin` with a parent):
    /// its writes join this transaction when `body` returns and are undone when it throws, leaving the
    /// parent usable. This is how one failed operation of a group commit is rolled back alone.
    public func nested<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        precondition(!self.isReadOnly, "nested transactions exist only for write transactions")
        var child: OpaquePointer?
        try check(mdb_txn_begin(mdb_txn_env(self.handle), self.handle, 0, &child), "mdb_txn_begin(nested)")
        let txn = Transaction(handle: child!, isReadOnly: false, changes: self.changes)
        let result: T
        do {
            result = try body(txn)
        } catch {
            mdb_txn_abort(child)
            throw error
        }
        // mdb_txn_commit frees the handle even when it fails: never abort after it.
        try check(mdb_txn_commit(child), "mdb_txn_commit(nested)")
        return result
    }

    private func withCursor<T>(_ db: Database, _ body: (OpaquePointer) throws -> T) throws -> T {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(self.handle, db.dbi, &cursor), "mdb_cursor_open(\(db.name))")
        defer { mdb_cursor_close(cursor) }
        return try body(cursor!)
    }
}

/// A write transaction's count of changing calls (``Transaction/changeCount``); used by one thread
/// at a time, as the transaction is.
final class ChangeCounter {
    var count = 0
    /// Of those, deletes and drops: a commit that made any leaves removed data on the pages it frees,
    /// to be erased (``Environment/eraseFreePages(sync:)``).
    var removals = 0
}

/// A cursor lent to the body of ``Transaction/withCursor(_:_:)``, valid only inside it.
public struct Cursor: ~Copyable {
    let handle: OpaquePointer
    let name: String

    /// Walks the database in key order from the first key ≥ `start`, calling `body` with each key and
    /// value until it returns `.stop` or the database ends (``Transaction/forEach(_:from:_:)`` on this cursor).
    public func walk(
        from start: UnsafeRawBufferPointer, _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> IterationControl
    ) throws {
        var k = MDB_val(mv_size: start.count, mv_data: UnsafeMutableRawPointer(mutating: start.baseAddress))
        var v = MDB_val()
        var op = MDB_SET_RANGE
        while true {
            let rc = mdb_cursor_get(self.handle, &k, &v, op)
            if rc == MDB_NOTFOUND { return }
            try check(rc, "mdb_cursor_get(\(self.name))")
            let control = try body(
                UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size), UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
            if case .stop = control { return }
            op = MDB_NEXT
        }
    }
}
