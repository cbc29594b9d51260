import Glibc
import LMDB
import RegistryModel

/// Storage failures in the terms a client or an operator acts on.
extension RegistryError {
    /// Maps a storage failure; LMDB messages carry codes and operations, never data.
    static func storage(_ error: LMDBError) -> RegistryError {
        if error.isEnvironmentClosed {
            return RegistryError(.shuttingDown, "the registry is shutting down")
        }
        if error.isMapFull {
            return RegistryError(.storageFull, "the store reached its maximum size (\(error))")
        }
        if error.isDiskFull {
            // EIO included: a full file system often fails the commit's write or fsync with it, and a
            // disk that fails writes leaves the client in the same place (retry later, elsewhere).
            return RegistryError(.storageFull, "the disk holding the store is full or failing (\(error))")
        }
        if error.isNotWritable {
            let what = error.code == EROFS ? "is on a read-only file system" : "is not writable (permission denied)"
            return RegistryError(.internal, "the store \(what): \(error)")
        }
        if error.isDamaged { return .damagedStore("\(error)") }
        return RegistryError(.internal, "storage error: \(error)")
    }

    /// A row a scan needed and could not read as registered (``RowFault``): the request is not
    /// answered from a partial scan. The message names the template (never its values).
    static func damagedRow(_ fault: RowFault) -> RegistryError {
        guard fault.templateId != nil else { return RegistryError(.internal, "\(fault) while scanning: the request was not carried out") }
        // The token first: what an operator's alert or a client's log search keys on.
        return RegistryError(.internal, "STORE_DAMAGED: " + RegistryError.damagedStore("\(fault)").message)
    }

    /// Why a store could not be opened, in the terms an operator acts on: damage (restore from a
    /// backup), permissions, another process holding it; `RegistryError`s as they are.
    static func opening(_ path: String, _ error: any Error) -> any Error {
        switch error {
        case let error as StoreCorruption:
            return RegistryError(.internal, "cannot open the store in \(path): \(RegistryError.damagedStore("\(error)").message)")
        case let error as LMDBError where error.isDamaged || error.isNotWritable || error.isDiskFull:
            let mapped = RegistryError.storage(error)
            return RegistryError(mapped.code, "cannot open the store in \(path): \(mapped.message)")
        case let error as LMDBError where error.code == EFBIG:
            // What a damaged free list or page number does to the opening transaction's commit: a
            // write far beyond any real file. A file size limit below the store's size says the same.
            return RegistryError(
                .internal,
                "cannot open the store in \(path): writing it failed (\(error)): the store is probably damaged (a page "
                    + "number far beyond the file), unless a file size limit (ulimit -f) is below its size. \(RegistryError.restoreAdvice)")
        case let error as LMDBError where error.code == ENOENT && error.detail != nil:
            return RegistryError(.internal, "cannot open the store in \(path): \(error)")
        default:
            return error
        }
    }
}
