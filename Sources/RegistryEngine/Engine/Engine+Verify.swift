import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {

    /// Checks the store against itself, then the index against the store. Runs between group commits,
    /// so the store and the index are at the same point.
    ///
    /// First the structure of `data.mdb`'s trees, as the open checks it (page numbers, headers, node
    /// offsets, key order, counts, free-page lists); damage there is the one problem reported, since
    /// the record passes would walk into it.
    ///
    /// The store: every template record matches its checksum and belongs to a stored gallery's
    /// registry; its payload parts run 0, 1, … and match the record's payload checksum, open with the
    /// store's key and have the algorithm's size; no payload part lacks a record; the identifier index
    /// and the template records list the same templates with the same identifier and registry. The
    /// index: every template has its row, with the same data, and no row lacks a template. Problems
    /// name template ids, identifiers and registries, never template data.
    /// - Returns: the number of templates checked and a description of each problem found.
    public func verify() async throws -> (checked: Int, problems: [String]) {
        if self.isReadOnly { return try await self.readStore { txn in try self.verify(txn) } }
        return try await self.write(exclusive: true, useReserve: true, local: true) { txn, _ in try self.verify(txn) }
    }

    private func verify(_ txn: borrowing Transaction) throws -> (checked: Int, problems: [String]) {
        // The trees' structure first, as at open: liblmdb follows page numbers without bounds checks,
        // so the passes below are not made over a damaged tree. A read-only store was checked by its
        // open, and nothing has written to it since.
        if !self.isReadOnly, let damage = try self.store.environment.treeDamage(within: txn) {
            return (0, ["the structure of data.mdb is damaged: \(damage.message)"])
        }
        var problems: [String] = []
        // The registries as the store defines them (not as the index loaded them).
        var storedRegistries: [UInt32: (galleryId: UInt32, algorithm: Algorithm?)] = [:]
        for (name, gallery) in try self.store.storedGalleries(txn) {
            for entry in gallery.registries {
                let algorithm = try? self.catalog.algorithm(version: entry.algorithm)
                if algorithm == nil { problems.append("gallery '\(name)' has a registry of unknown algorithm \(entry.algorithm)") }
                storedRegistries[entry.id] = (gallery.id, algorithm)
            }
        }
        var records: [UInt64: TemplateRecord] = [:]
        var checked = 0
        try txn.forEach(self.store.templates) { key, value in
            checked += 1
            do {
                let id = try Store.templateId(key)
                records[id] = try TemplateRecord(decoding: value, id: id)
            } catch let corruption as StoreCorruption {
                problems.append(corruption.description)
            }
            return .continue
        }
        for (id, record) in records.sorted(by: { $0.key < $1.key }) {
            guard let (galleryId, algorithm) = storedRegistries[record.registryId], galleryId == record.galleryId else {
                problems.append("template \(id) belongs to registry \(record.registryId), which its gallery does not have")
                continue
            }
            do {
                let payload = try self.store.payload(txn, id: id)
                if let algorithm, payload.count != PreparedTemplate.payloadSize(of: algorithm) {
                    problems.append("template \(id) has \(payload.count) payload bytes, expected \(PreparedTemplate.payloadSize(of: algorithm))")
                }
            } catch let corruption as StoreCorruption {
                problems.append(corruption.description)
            } catch let error as LMDBError {
                throw error  // the writer must see it (a map to grow, a closed store)
            } catch {
                problems.append("template \(id) does not open with the store's key")
            }
        }
        try txn.forEach(self.store.vectors) { key, _ in
            guard let (id, part) = try? Store.vectorPart(key) else {
                problems.append("a payload key of \(key.count) bytes")
                return .continue
            }
            if part == 0 && records[id] == nil { problems.append("payload of template \(id) has no record") }
            return .continue
        }
        var indexed = Set<UInt64>()
        try txn.forEach(self.store.identifiers) { key, value in
            guard key.count >= 14, key[key.count - 9] == 0, value.count == 4 else {
                problems.append("an identifier-index entry of \(key.count) bytes does not decode")
                return .continue
            }
            let galleryId = key.loadBigEndian(as: UInt32.self)
            let identifier = String(decoding: UnsafeRawBufferPointer(rebasing: key[4..<(key.count - 9)]), as: UTF8.self)
            let id = key.loadBigEndian(at: key.count - 8, as: UInt64.self)
            let registryId = UInt32(littleEndian: value.loadUnaligned(as: UInt32.self))
            indexed.insert(id)
            guard let record = records[id] else {
                problems.append("the identifier index lists template \(id) of '\(identifier)', which has no record")
                return .continue
            }
            if record.galleryId != galleryId || !record.identifier.sameIdentifier(as: identifier) || record.registryId != registryId {
                problems.append("the identifier index and the record of template \(id) disagree on its gallery, identifier or registry")
            }
            return .continue
        }
        for id in records.keys.sorted() where !indexed.contains(id) {
            problems.append("template \(id) is missing from the identifier index")
        }
        problems += self.compareIndex(with: records, txn)
        // Erasure: every page the last erasure pass could wipe is zero (docs/security.md).
        let residue = try self.store.environment.freePageResidue(within: txn)
        if residue.holdingData > 0 {
            problems.append(
                "\(residue.holdingData) of \(residue.erasable) free pages of data.mdb still hold data that erasure should have wiped"
                    + (self.isReadOnly ? " (the daemon stopped before it finished erasing; its next start does)" : ""))
        }
        return (checked, problems)
    }

    /// The index against the (checked) store: every template record has its row with the same data,
    /// and every registry has as many rows as the store has records for it.
    private func compareIndex(with records: [UInt64: TemplateRecord], _ txn: borrowing Transaction) -> [String] {
        var problems: [String] = []
        var registries: [UInt32: RegistryIndex] = [:]
        for gallery in self.state.values {
            for registry in gallery.registries { registries[registry.id] = registry }
        }
        var seen: [UInt32: Int] = [:]
        let rowsByTemplate = registries.mapValues { $0.rowsByTemplate() }
        for (id, record) in records.sorted(by: { $0.key < $1.key }) {
            guard let registry = registries[record.registryId], let row = rowsByTemplate[record.registryId]?[id] else {
                problems.append("template \(id) is stored but not in the index")
                continue
            }
            seen[registry.id, default: 0] += 1
            // A payload that fails its checks was reported by the store pass.
            guard let payload = try? self.store.payload(txn, id: id), payload.count == PreparedTemplate.payloadSize(of: registry.algorithm) else {
                continue
            }
            let expected: [Float] = payload.withUnsafeBytes { bytes in
                switch PreparedTemplate.decodePayload(bytes, algorithm: registry.algorithm) {
                case .vector(let values): return values  // stored prepared
                case .landmarks: return registry.landmarkMatcher.map { Self.preparedLandmarks(bytes, $0) } ?? []
                }
            }
            if registry.rows != nil, !Array(UnsafeBufferPointer(start: registry.row(row), count: registry.stride)).elementsEqual(expected) {
                problems.append("template \(id) differs between the store and the index")
            } else if registry.codes != nil && !Self.codesMatch(expected, registry, row: row) {
                // The prefilter's copy: wrong codes or terms would make it skip rows it must not.
                problems.append("template \(id) differs between the store and the index's codes")
            }
        }
        for (id, registry) in registries where registry.count != seen[id, default: 0] {
            problems.append("the \(registry.algorithm) registry indexes \(registry.count) templates, the store has \(seen[id, default: 0])")
        }
        return problems
    }

    /// Whether row `row` of `registry` holds the codes and bound terms `values` encode to.
    private static func codesMatch(_ values: [Float], _ registry: RegistryIndex, row: Int) -> Bool {
        guard case .vector(let dimension) = registry.algorithm.kind, values.count == dimension, let held = registry.code(row: row) else {
            return false
        }
        var codes = [Int8](repeating: 0, count: registry.codeStride)
        var terms = rk_row_terms()
        rk_encode_row(values, dimension, registry.codeStride, &codes, &terms)
        return codes.elementsEqual(held.codes) && withUnsafeBytes(of: terms) { a in withUnsafeBytes(of: held.terms) { a.elementsEqual($0) } }
    }

    /// A stored landmark payload (mask, raw coordinates) prepared as the index holds it.
    private static func preparedLandmarks(_ bytes: UnsafeRawBufferPointer, _ matcher: LandmarkMatcher) -> [Float] {
        let mask = bytes.loadUnaligned(as: UInt32.self)
        let raw = stride(from: 4, to: bytes.count, by: 4).map { bytes.loadUnaligned(fromByteOffset: $0, as: Float.self) }
        return matcher.prepared(DenseLandmarks(mask: mask, coordinates: raw))
    }
}

extension Engine {
}
