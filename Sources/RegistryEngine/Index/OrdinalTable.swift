import CPrefetch
import RegistryModel

/// Identifier → ordinal for a gallery's interned identifiers: open addressing whose slots hold only
/// the ordinal (+1; 0 is empty), compared through the gallery's name list. A `[IdentifierKey: UInt32]`
/// for a million identifiers took 2²¹ buckets of 20 bytes (42 MB, measured as 2 % of a 1M x 512 index);
/// this takes 8 MB. Ordinals are never removed (an identifier without templates keeps its ordinal),
/// so the table only grows. Equality is byte-wise, as ``IdentifierKey``'s (RegistryModel).
struct OrdinalTable {
    private var slots: [UInt32] = []
    private(set) var count = 0

    func find(_ identifier: String, in names: [String]) -> UInt32? {
        self.find(identifier, hash: Self.hash(identifier), in: names)
    }

    /// ``find(_:in:)`` with the identifier's ``hash(_:)`` already computed.
    func find(_ identifier: String, hash: Int, in names: [String]) -> UInt32? {
        guard !self.slots.isEmpty else { return nil }
        let mask = self.slots.count - 1
        var index = hash & mask
        while true {
            let slot = self.slots[index]
            if slot == 0 { return nil }
            if names[Int(slot - 1)].sameIdentifier(as: identifier) { return slot - 1 }
            index = (index + 1) & mask
        }
    }

    /// Adds an ordinal whose name (`names[ordinal]`, of ``hash(_:)`` `hash`) is not in the table yet.
    mutating func insert(_ ordinal: UInt32, hash: Int, names: [String]) {
        if 2 * (self.count + 1) > self.slots.count { self.rebuild(capacity: 2 * (self.count + 1), names: names) }
        self.place(ordinal, hash: hash)
        self.count += 1
    }

    /// Starts fetching the slot where a lookup of ``hash(_:)`` `hash` begins: a load that interns many
    /// identifiers asks for several slots before probing the first (each probe is a cache miss in a
    /// table of a million identifiers, most of the load's time when taken one at a time).
    func prefetch(hash: Int) {
        guard !self.slots.isEmpty else { return }
        self.slots.withUnsafeBufferPointer { rk_prefetch($0.baseAddress! + (hash & ($0.count - 1))) }
    }

    /// Makes room for `count` identifiers in all.
    mutating func reserve(_ count: Int, names: [String]) {
        if 2 * count > self.slots.count { self.rebuild(capacity: 2 * count, names: names) }
    }

    private mutating func place(_ ordinal: UInt32, hash: Int) {
        let mask = self.slots.count - 1
        var index = hash & mask
        while self.slots[index] != 0 { index = (index + 1) & mask }
        self.slots[index] = ordinal + 1
    }

    /// Load factor at most one half: probes stay short.
    private mutating func rebuild(capacity: Int, names: [String]) {
        var size = 16
        while size < capacity { size <<= 1 }
        let ordinals = self.slots.filter { $0 != 0 }
        self.slots = [UInt32](repeating: 0, count: size)
        for slot in ordinals { self.place(slot - 1, hash: Self.hash(names[Int(slot - 1)])) }
    }

    static func hash(_ identifier: String) -> Int {
        var hasher = Hasher()
        var identifier = identifier
        // One bulk combine over the UTF-8 bytes (see ``IdentifierKey/hash(into:)``).
        identifier.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        return hasher.finalize()
    }
}
