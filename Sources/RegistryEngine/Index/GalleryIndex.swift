import RegistryModel

/// The in-memory state of one gallery: its registries in priority order and its identifiers.
///
/// Identifiers are interned to dense ordinals so that index rows carry a 4-byte number instead of a
/// string, and per-identifier work can use integer keys.
final class GalleryIndex {
    let id: UInt32
    let name: String
    var registries: [RegistryIndex]
    /// Which operations require a live face, and k for new liveness profiles.
    var liveness: LivenessPolicy = .none
    var livenessK: Float = GalleryConfiguration.defaultLivenessK
    /// Liveness profiles by identifier (small; kept here so authentication never reads LMDB).
    private var profilesByIdentifier: [IdentifierKey: LivenessProfile] = [:]

    /// An identifier's liveness profile.
    func profile(of identifier: String) -> LivenessProfile? { self.profilesByIdentifier[IdentifierKey(identifier)] }

    func setProfile(_ profile: LivenessProfile?, of identifier: String) {
        self.profilesByIdentifier[IdentifierKey(identifier)] = profile
    }

    // Interned on every append, under the same discipline as RegistryIndex's row properties, and
    // likewise without dynamic exclusivity checks (see there).
    @exclusivity(unchecked) private(set) var names: [String] = []
    @exclusivity(unchecked) private var ordinals = OrdinalTable()
    /// Templates per identifier ordinal across all registries; 0 = no longer in the gallery.
    @exclusivity(unchecked) private var templateCounts: [UInt32] = []
    /// Identifiers with at least one template in any registry.
    @exclusivity(unchecked) private(set) var identifierCount = 0

    init(id: UInt32, name: String, registries: [RegistryIndex]) {
        self.id = id
        self.name = name
        self.registries = registries
    }

    /// Takes a stored definition: its registries in its order (one the gallery already has keeps its
    /// rows; a new one starts empty), thresholds, rules and liveness policy. The one place a gallery
    /// is built from its record, at start-up and when a definition commits.
    /// - Parameter rows: where new vector registries read their rows (nil: they keep them in memory).
    func define(_ record: GalleryRecord, algorithms: [Algorithm], rows: StoredRows? = nil) {
        self.registries = zip(record.registries, algorithms).map { entry, algorithm in
            let registry =
                self.registry(id: entry.id) ?? RegistryIndex(id: entry.id, algorithm: algorithm, thresholds: entry.thresholds, source: rows)
            registry.configure(entry)
            return registry
        }
        self.liveness = record.liveness
        self.livenessK = record.livenessK
    }

    func registry(id: UInt32) -> RegistryIndex? { self.registries.first { $0.id == id } }

    func registry(algorithm: UInt32) -> RegistryIndex? { self.registries.first { $0.algorithm.version == algorithm } }

    /// The ordinal of an identifier that has (or had) templates here.
    func ordinal(of identifier: String) -> UInt32? { self.ordinals.find(identifier, in: self.names) }

    /// Whether any registry holds the identifier.
    func contains(_ identifier: String) -> Bool { self.presentOrdinal(of: identifier) != nil }

    /// The ordinal of an identifier that any registry holds now (one lookup for both questions).
    func presentOrdinal(of identifier: String) -> UInt32? {
        guard let ordinal = self.ordinals.find(identifier, in: self.names), self.templateCounts[Int(ordinal)] > 0 else { return nil }
        return ordinal
    }

    func name(of ordinal: UInt32) -> String { self.names[Int(ordinal)] }

    /// Makes room for `count` identifiers (start-up, when the template count bounds it).
    func reserveIdentifiers(_ count: Int) {
        self.names.reserveCapacity(count)
        self.templateCounts.reserveCapacity(count)
        self.ordinals.reserve(count, names: self.names)
    }

    /// Interns an identifier, returning its ordinal.
    /// - Parameter hash: the identifier's ``OrdinalTable/hash(_:)``, when the caller has it already.
    func intern(_ identifier: String, hash: Int? = nil) -> UInt32 {
        let hash = hash ?? OrdinalTable.hash(identifier)
        if let ordinal = self.ordinals.find(identifier, hash: hash, in: self.names) { return ordinal }
        let ordinal = UInt32(self.names.count)
        self.names.append(identifier)
        self.templateCounts.append(0)
        self.ordinals.insert(ordinal, hash: hash, names: self.names)
        return ordinal
    }

    /// Starts fetching what interning an identifier of this ``OrdinalTable/hash(_:)`` reads first.
    func prefetchIdentifier(hash: Int) { self.ordinals.prefetch(hash: hash) }

    /// Adds a template row to a registry, counting it for its identifier.
    /// - Parameter hash: the identifier's ``OrdinalTable/hash(_:)``, when the caller has it already.
    func add(
        to registry: RegistryIndex,
        templateId: UInt64,
        identifier: String,
        hash: Int? = nil,
        mask: UInt32,
        encodes: Bool = true,
        fill: (UnsafeMutablePointer<Float>) -> Void
    ) {
        let ordinal = self.intern(identifier, hash: hash)
        registry.append(templateId: templateId, ordinal: ordinal, mask: mask, encodes: encodes, fill: fill)
        if self.templateCounts[Int(ordinal)] == 0 { self.identifierCount += 1 }
        self.templateCounts[Int(ordinal)] += 1
    }

    /// Removes a template row from a registry.
    func remove(templateId: UInt64, from registry: RegistryIndex) {
        guard let ordinal = registry.remove(templateId: templateId) else { return }
        self.templateCounts[Int(ordinal)] -= 1
        if self.templateCounts[Int(ordinal)] == 0 { self.identifierCount -= 1 }
    }
}
