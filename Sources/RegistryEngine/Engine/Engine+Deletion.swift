import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Deletion

    /// Deletes one template of a gallery.
    /// - Returns: whether it existed (in that gallery).
    public func deleteTemplate(gallery name: String = GalleryConfiguration.defaultName, id: UInt64) async throws -> Bool {
        try Names.validateGallery(name)
        return try await self.write(useReserve: true) { txn, context in
            let gallery = try self.gallery(named: name)
            guard let record = try self.store.templateRecord(txn, id: id), record.galleryId == gallery.id else { return false }
            let plan = DeletionPlan(deleting: [id], of: try self.store.templateIds(txn, galleryId: gallery.id, identifier: record.identifier))
            try self.carryOut(plan, txn, context, gallery: gallery.id, identifier: record.identifier)
            return true
        }
    }

    /// Erases an identifier from a gallery: its templates in every registry and its liveness profile.
    /// - Returns: the number of templates erased (0 when it was not registered).
    public func deleteIdentifier(gallery name: String = GalleryConfiguration.defaultName, identifier: String) async throws -> Int {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        return try await self.write(useReserve: true) { txn, context in
            let gallery = try self.gallery(named: name)
            let ids = try self.store.templateIds(txn, galleryId: gallery.id, identifier: identifier)
            try self.carryOut(DeletionPlan(deleting: ids, of: ids), txn, context, gallery: gallery.id, identifier: identifier)
            return ids.count
        }
    }

    /// Deletes what `plan` says, recording each index change (on the writer thread).
    private func carryOut(
        _ plan: DeletionPlan, _ txn: borrowing Transaction, _ context: OperationContext, gallery: UInt32, identifier: String
    ) throws {
        for id in plan.templates {
            guard let record = try self.store.deleteTemplate(txn, id: id) else { continue }
            context.record(.remove(id: id, galleryId: gallery, registryId: record.registryId))
        }
        if plan.erasesProfile {
            try self.store.deleteProfile(txn, galleryId: gallery, identifier: identifier)
            context.record(.setProfile(galleryId: gallery, identifier: identifier, profile: nil))
        }
    }

    // MARK: Liveness profiles

    /// Enrols (or re-enrols) an identifier's liveness profile from depth frames captured over the
    /// enrolment poses (the liveness enrolment design), with the gallery's k unless `k` is given.
    /// - Throws: ``RegistryError``: `identifierNotRegistered`; `malformedRequest` naming the pose and
    ///   the problem when the frames are too few or fail the fixed checks.
    @discardableResult
    public func enrolLivenessProfile(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        frames: [EnrolmentPose: [DepthFrame]],
        k: Float? = nil
    ) async throws -> LivenessProfile {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        let (galleryId, galleryK) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            guard gallery.contains(identifier) else {
                throw RegistryError(.identifierNotRegistered, "'\(identifier)' is not registered in gallery '\(name)'")
            }
            return (gallery.id, gallery.livenessK)
        }
        let profile: LivenessProfile
        do {
            profile = try LivenessProfile.enrol(frames, k: k ?? galleryK)
        } catch {
            throw RegistryError.malformedRequest("liveness enrolment refused: \(error)")
        }
        try await self.write { txn, context in
            let gallery = try self.gallery(named: name)
            guard gallery.id == galleryId, Matching.holdsAnywhere(gallery, identifier: identifier, batch: context.batch) else {
                throw RegistryError(.identifierNotRegistered, "'\(identifier)' is not registered in gallery '\(name)'")
            }
            try txn.put(self.store.profiles, key: Keys.profile(galleryId, identifier), value: profile.encoded())
            context.record(.setProfile(galleryId: galleryId, identifier: identifier, profile: profile))
        }
        return profile
    }

    /// An identifier's liveness profile, if it enrolled one.
    public func livenessProfile(gallery name: String = GalleryConfiguration.defaultName, identifier: String) throws(RegistryError) -> LivenessProfile?
    {
        try self.indexLock.withReadLock { () throws(RegistryError) in try self.gallery(named: name).profile(of: identifier) }
    }

    /// Erases an identifier's liveness profile (its templates stay). Returns whether it had one.
    public func deleteLivenessProfile(gallery name: String = GalleryConfiguration.defaultName, identifier: String) async throws -> Bool {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        return try await self.write(useReserve: true) { txn, context in
            let gallery = try self.gallery(named: name)
            let existed = try txn.delete(self.store.profiles, key: Keys.profile(gallery.id, identifier))
            context.record(.setProfile(galleryId: gallery.id, identifier: identifier, profile: nil))
            return existed
        }
    }
}

extension Engine {
}
