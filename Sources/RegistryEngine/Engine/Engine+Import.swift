import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Import

    /// Stores templates without the register checks (source `imported`), all in one transaction or
    /// none: for loading a trusted existing set, such as another registry's export.
    /// - Returns: the new template ids, in `items` order.
    /// - Throws: ``RegistryError`` for the first invalid item (nothing is stored).
    public func importTemplates(gallery name: String = GalleryConfiguration.defaultName, _ items: [ImportItem]) async throws -> [UInt64] {
        try await self.importTemplates(gallery: name, items, skipExisting: false).templateIds
    }

    /// Stores templates without the register checks, all in one transaction or none, keeping what
    /// each item says of its time, source and quality (an export's record; by default now,
    /// `imported`, none).
    /// - Parameter skipExisting: an item whose identifier already holds the same template (the same
    ///   prepared row) in its registry, or that repeats an earlier item, is not stored again: its id
    ///   is the stored one's. Importing an export twice then stores it once. A profile equal to the
    ///   one stored is skipped too.
    /// - Parameter profiles: liveness profiles set after the items, in the same transaction; each
    ///   identifier must then hold a template in the gallery. A profile already there is replaced.
    /// - Throws: ``RegistryError`` for the first invalid item or profile, named by position and
    ///   identifier (nothing is stored).
    public func importTemplates(
        gallery name: String = GalleryConfiguration.defaultName, _ items: [ImportItem], skipExisting: Bool, profiles: [ProfileEntry] = []
    ) async throws -> ImportOutcome {
        try Names.validateGallery(name)
        for (index, entry) in profiles.enumerated() {
            do throws(RegistryError) {
                try Names.validateIdentifier(entry.identifier)
            } catch {
                throw RegistryError(error.code, "import liveness profile \(index): \(error.message)", details: error.details)
            }
            // What the store could not read back is refused here, by the reading rules themselves.
            let readable = entry.profile.encoded().withUnsafeBytes { (try? LivenessProfile(decoding: $0)) != nil }
            guard readable, entry.profile.k <= LivenessProfile.maximumK else {
                throw RegistryError.malformedRequest(
                    "import liveness profile \(index) ('\(entry.identifier)'): k must be within (0, \(LivenessProfile.maximumK)] "
                        + "and every range finite, non-negative and ordered")
            }
        }
        let (galleryId, prepared) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            var prepared: [(ImportItem, PreparedTemplate)] = []
            prepared.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                do throws(RegistryError) {
                    try Names.validateIdentifier(item.identifier)
                    let templates = try self.prepare(Face(templates: [item.template]), for: gallery)
                    prepared.append((item, templates[item.template.algorithm]!))
                } catch {
                    // Which of thousands of items is wrong: its position and identifier (identifiers
                    // are printable once validated; an invalid one is named only by position).
                    let valid = (try? Names.validateIdentifier(item.identifier)) != nil
                    let which = valid ? "import item \(index) ('\(item.identifier)')" : "import item \(index)"
                    throw RegistryError(error.code, "\(which): \(error.message)", details: error.details)
                }
            }
            return (gallery.id, prepared)
        }
        return try await self.write { txn, context in
            let gallery = try self.currentGallery(name, id: galleryId)
            var skipped = 0
            // This batch's own templates, for repeats within it: (registry, identifier, row, mask) → id.
            var batch: [BatchKey: UInt64] = [:]
            let ids = try prepared.map { item, template in
                guard let registry = gallery.registry(algorithm: template.algorithm.version) else {
                    throw RegistryError(.unknownAlgorithm, "gallery '\(name)' has no registry for \(template.algorithm)")
                }
                let key = BatchKey(registry: registry.id, identifier: IdentifierKey(item.identifier), row: template.row, mask: template.mask)
                if skipExisting {
                    let stored: UInt64?
                    do throws(RowFault) {
                        stored = try Self.storedCopy(of: template, identifier: item.identifier, in: gallery, registry)
                    } catch {
                        throw self.refusal(error)
                    }
                    if let id = batch[key] ?? stored {
                        skipped += 1
                        return id
                    }
                }
                let id = try self.storeTemplate(
                    txn, context, gallery: gallery, registry: registry, identifier: item.identifier, template: template,
                    source: item.source ?? .imported, quality: item.quality, registeredAt: item.registeredAt
                ).id
                if skipExisting { batch[key] = id }
                return id
            }
            var outcome = ImportOutcome(templateIds: ids, skipped: skipped)
            for (index, entry) in profiles.enumerated() {
                guard Matching.holdsAnywhere(gallery, identifier: entry.identifier, batch: context.batch) else {
                    throw RegistryError(
                        .identifierNotRegistered,
                        "import liveness profile \(index) ('\(entry.identifier)'): '\(entry.identifier)' holds no template in gallery '\(name)'")
                }
                if skipExisting && gallery.profile(of: entry.identifier) == entry.profile {
                    outcome.profilesSkipped += 1
                    continue
                }
                try txn.put(self.store.profiles, key: Keys.profile(gallery.id, entry.identifier), value: entry.profile.encoded())
                context.record(.setProfile(galleryId: gallery.id, identifier: entry.identifier, profile: entry.profile))
                outcome.profilesStored += 1
            }
            return outcome
        }
    }

    private struct BatchKey: Hashable {
        var registry: UInt32
        /// By bytes: canonically-equivalent spellings are two people.
        var identifier: IdentifierKey
        var row: [Float]
        var mask: UInt32
    }

    /// The id of a committed template of `identifier` in `registry` whose prepared row (and landmark
    /// mask) equals `template`'s, if any. Runs on the writer thread, which alone changes the index.
    private static func storedCopy(of template: PreparedTemplate, identifier: String, in gallery: GalleryIndex, _ registry: RegistryIndex)
        throws(RowFault) -> UInt64?
    {
        guard let ordinal = gallery.ordinal(of: identifier) else { return nil }
        var found: UInt64?
        guard registry.holds(ordinal) else { return nil }
        try template.row.withUnsafeBufferPointer { row throws(RowFault) in
            try registry.withRows { rows in
                registry.forEachRow(of: ordinal) { index in
                    guard found == nil, !registry.isLandmarks || registry.masks[index] == template.mask, let stored = rows(index) else { return }
                    if (0..<row.count).allSatisfy({ stored[$0].bitPattern == row[$0].bitPattern }) { found = registry.templateIds[index] }
                }
            }
        }
        return found
    }
}
