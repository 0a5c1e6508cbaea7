public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Credentials in files: one JSON file per profile, mode 0600, in a directory of mode 0700.
///
/// Writes go to a temporary file that is flushed (`fsync`) and renamed over the old one, so a crash never leaves
/// a half-written file. The directory is created 0700; an existing one is used as it is, provided it belongs to the
/// current user and no one else can write to it (others may then see the file names, never read them); the
/// credentials file is never read through a symbolic link: both are refused with a typed error. An unreadable
/// file is renamed aside (`PROFILE.json.corrupt-TIMESTAMP`) and reported as ``AuthError/Code/storeCorrupt`` with
/// that path, or left in place while another process or task holds the profile's lock (a write over it first
/// gives it that second name): never silently deleted. ``withExclusiveAccess(profile:_:)`` holds a ``ProfileLock`` on
/// `PROFILE.lock` in the same directory, so processes sharing it refresh one at a time.
///
/// A file an earlier release wrote is read and rewritten in the current format in place; one a newer release
/// wrote is left as it is (``AuthError/Code/storeUnavailable``), never taken for corrupt.
///
/// > Note: On Linux this is the default store when no keyring is available. On Apple platforms prefer the
/// > Keychain store in `SesameApple`.
public struct FileTokenStore: TokenStore {
    /// The directory holding the files.
    public let directory: URL
    private let lock: ProfileLock

    /// Uses `directory`, creating it with mode 0700 when needed.
    ///
    /// - Parameters:
    ///   - directory: the folder of the credentials files.
    ///   - lockTimeout: how long ``withExclusiveAccess(profile:_:)`` waits for another holder before giving up
    ///     with ``AuthError/Code/storeUnavailable``.
    /// - Throws: ``AuthError``: ``AuthError/Code/storeUnavailable`` when it cannot be created;
    ///   ``AuthError/Code/configuration`` when it belongs to someone else or others can write to it.
    public init(directory: URL, lockTimeout: Duration = .seconds(30)) throws {
        self.directory = directory
        lock = ProfileLock(directory: directory, timeout: lockTimeout)
        try SecureDirectory.prepare(directory)
    }

    private func fileURL(_ profile: String, _ suffix: String = ".json") throws -> URL {
        try ProfileName.validate(profile)
        return directory.appendingPathComponent(profile + suffix)
    }

    /// Reads the profile's file.
    ///
    /// A file that cannot be decoded is moved aside, holding the profile's lock when it is free, after the
    /// recovery ``withExclusiveAccess(profile:_:)`` runs: if a killed writer's newer credentials replace it, they
    /// are returned. While another process (or another task) holds the lock, it is left in place.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/storeUnavailable`` (I/O error, a symbolic link, not a regular
    ///   file, another owner) or ``AuthError/Code/storeCorrupt`` (the message says whether, and where, the file
    ///   was moved).
    public func load(profile: String) async throws -> TokenSet? {
        try await load(profile: profile, settingAside: true)
    }

    /// `settingAside` false: the file was just replaced under the lock, and is read once more as it is.
    private func load(profile: String, settingAside: Bool) async throws -> TokenSet? {
        let url = try fileURL(profile)
        try SecureDirectory.prepare(directory)
        let (data, identity): (Data, (device: UInt64, inode: UInt64))
        switch try Self.readStored(url) {
        case .absent: return nil
        case .oversized(let identity):  // as unreadable as a corrupt file, and as worth keeping
            return try await unreadable(url, identity, profile: profile, settingAside: settingAside)
        case .bytes(let read, let readIdentity): (data, identity) = (read, readIdentity)
        }
        do {
            let (tokens, format) = try StoredFormat.decodeTokens(data, from: "the credentials file \(url.path)")
            if format < StoredFormat.tokens {
                await StoredFormat.migrate(profile: profile, lock: lock) {
                    // Holding the lock, a killed writer's newer credentials first (the rewrite would otherwise
                    // be newer than them, and they would be refused as stale); then only the very file that was
                    // read, still holding the same bytes.
                    Self.recoverUnfinishedWrites(of: url)
                    guard let (now, still) = try PrivateFile.read(url.path), now == data,
                        still.device == identity.device, still.inode == identity.inode
                    else { return }
                    try PrivateFile.write(try StoredFormat.encode(tokens), to: url)
                }
            }
            return tokens
        } catch let error as AuthError {
            throw error  // a newer release's file: left exactly as it is
        } catch {
            return try await unreadable(url, identity, profile: profile, settingAside: settingAside)
        }
    }

    /// The stored file: its bytes, or only its identity when it is over the size limit (a regular file of this
    /// user, not read), or absent.
    private enum Stored {
        case absent
        case bytes(Data, (device: UInt64, inode: UInt64))
        case oversized((device: UInt64, inode: UInt64))
    }

    /// Reads the stored file.
    ///
    /// - Throws: as `PrivateFile.read`, but for a regular file over the size limit, which is `.oversized`.
    private static func readStored(_ url: URL) throws -> Stored {
        do {
            guard let (data, identity) = try PrivateFile.read(url.path) else { return .absent }
            return .bytes(data, identity)
        } catch let error as AuthError where error.code == .storeCorrupt {
            guard let identity = PrivateFile.regularFile(url.path) else { throw error }
            return .oversized(identity)
        }
    }

    /// An unreadable file (corrupt, or over the size limit): moved aside when it can be, and said so.
    ///
    /// - Returns: the credentials read after it was replaced meanwhile.
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeCorrupt`` saying where the file is now.
    private func unreadable(
        _ url: URL, _ identity: (device: UInt64, inode: UInt64), profile: String, settingAside: Bool
    ) async throws -> TokenSet? {
        switch settingAside ? await setAside(url, read: identity, profile: profile) : .left {
        case .replaced: return try await load(profile: profile, settingAside: false)
        case .moved(let aside):
            throw AuthError(.storeCorrupt, "the credentials file \(url.path) was unreadable; it was moved to \(aside)")
        case .left:
            throw AuthError(
                .storeCorrupt,
                "the credentials file \(url.path) is unreadable; it was left in place (another process or task "
                    + "holds the profile's lock, or the folder refused): a later read moves it aside")
        }
    }

    /// What became of an unreadable credentials file.
    private enum Unreadable: Sendable {
        /// Replaced meanwhile: by a killed writer's recovered credentials, another process's write, or a sign-out.
        case replaced
        /// Moved aside, to this path.
        case moved(String)
        /// Left where it is: the lock was busy, the folder refused, or the replacement is unreadable too.
        case left
    }

    /// Moves aside the unreadable file `read` names, holding the profile's lock if it is free.
    ///
    /// Only under the lock: a locked writer renames its file into place, so without it the name checked could be
    /// that writer's file by the time it is unlinked. And first the recovery of a killed writer's newer complete
    /// write, which replaces the file: with the file gone, the next recovery would take it for a sign-out and
    /// delete that write, the only copy of a rotated refresh token. Inside this task's own locked access it goes
    /// ahead; a lock held elsewhere (another process's refresh) leaves the file for a later read.
    private func setAside(_ url: URL, read: (device: UInt64, inode: UInt64), profile: String) async -> Unreadable {
        @Sendable func locked() -> Unreadable {
            Self.recoverUnfinishedWrites(of: url)
            guard PrivateFile.isFile(url.path, read) else { return .replaced }
            return PrivateFile.moveAside(url.path, identity: read).map(Unreadable.moved) ?? .left
        }
        if lock.isHeld(profile: profile) { return locked() }  // a refresh reading the store inside its lock
        return (try? await lock.withLockIfFree(profile: profile, locked)) ?? .left
    }

    /// Writes the profile's file atomically with mode 0600.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    public func save(_ tokens: TokenSet, profile: String) async throws {
        let url = try fileURL(profile)
        try SecureDirectory.prepare(directory)
        Self.keepUnreadable(url)
        try PrivateFile.write(try StoredFormat.encode(tokens), to: url)
    }

    /// Gives an unreadable file about to be replaced a second name, `PROFILE.json.corrupt-…`.
    ///
    /// So a write never deletes bytes the store could not read (a sign-in over a file ``load(profile:)`` left in
    /// place). Adding a name is safe without the lock: nothing is unlinked but the name just made, and that only if
    /// it names another file.
    private static func keepUnreadable(_ url: URL) {
        let (data, identity): (Data, (device: UInt64, inode: UInt64))
        switch try? readStored(url) {
        case .none, .absent: return
        case .oversized(let identity):
            _ = PrivateFile.linkAside(url.path, identity: identity)
            return
        case .bytes(let read, let readIdentity): (data, identity) = (read, readIdentity)
        }
        do {
            _ = try StoredFormat.decodeTokens(data, from: "the credentials file \(url.path)")
        } catch is AuthError {
            return  // a newer release's file: decoded far enough to know it is not corrupt
        } catch {
            _ = PrivateFile.linkAside(url.path, identity: identity)
        }
    }

    /// Deletes the profile's file, and any write of it a killed process left unfinished.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    public func delete(profile: String) async throws {
        let url = try fileURL(profile)
        PrivateFile.deleteUnfinishedWrites(of: url)
        try PrivateFile.delete(url)
    }

    /// Holds the profile's ``ProfileLock`` (in this directory) while `body` runs.
    ///
    /// First, holding it, it recovers a write that a killed process left unfinished (a refresh killed between the
    /// server's rotation and the rename would otherwise leave the store with the spent refresh token): the newest
    /// complete `PROFILE.json.tmp-PID-…` of a dead writer (or of any, once over a minute old) replaces the file when
    /// its credentials were received after the file's and it was written after the file was; it also replaces an
    /// unreadable file, which is moved aside as ``load(profile:)`` would. Incomplete or older ones are deleted;
    /// nothing is when a file cannot be read for a reason that may pass (I/O, descriptors, a FIFO in its place).
    /// After a sign-out deleted the file nothing comes back.
    ///
    /// - Throws: as ``ProfileLock/withLock(profile:_:)``.
    public func withExclusiveAccess<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        let url = try fileURL(profile)
        return try await lock.withLock(profile: profile) {
            Self.recoverUnfinishedWrites(of: url)
            return try await body()
        }
    }

    /// Adopts the newest complete temporary file a dead writer left for `url`, deletes the rest of the dead ones.
    ///
    /// Runs under the profile's lock, so no Sesame writer that takes it is between its write and its rename.
    static func recoverUnfinishedWrites(of url: URL) {
        var newest: (path: String, tokens: TokenSet, modified: Date)?
        for (path, pid) in PrivateFile.unfinishedWrites(of: url) {
            // A writer still alive (or a PID we cannot tell) is left alone, unless its write is older than
            // `abandonedAfter`: no writer takes that long from its write to its rename, so the number is another
            // process's now (reused, or the writer was in another PID namespace sharing this folder).
            let modified = modificationDate(path)
            let abandoned = modified.map { Date().timeIntervalSince($0) > abandonedAfter } ?? false
            if PrivateFile.isAlive(pid) && !abandoned { continue }
            let tokens: TokenSet
            do {
                guard let (data, _) = try PrivateFile.read(path) else { continue }  // gone meanwhile
                do {
                    tokens = try StoredFormat.decodeTokens(data, from: path).tokens
                } catch is AuthError {
                    continue  // a newer release's write: not ours to judge
                } catch {
                    unlink(path)  // cut short before it was complete: nothing to recover
                    continue
                }
            } catch {
                continue  // unreadable for now (I/O, descriptors, not a regular file of this user): left in place
            }
            guard let modified else { continue }
            if let current = newest, (current.tokens.receivedAt ?? .distantPast) >= (tokens.receivedAt ?? .distantPast)
            {
                unlink(path)
            } else {
                if let current = newest { unlink(current.path) }
                newest = (path, tokens, modified)
            }
        }
        guard let newest, let received = newest.tokens.receivedAt else {
            if let newest { unlink(newest.path) }
            return
        }
        let stored: TokenSet
        do {
            guard let (data, identity) = try PrivateFile.read(url.path) else {
                // Signed out (or a first write that never finished): never brought back.
                unlink(newest.path)
                return
            }
            do {
                stored = try StoredFormat.decodeTokens(data, from: url.path).tokens
            } catch is AuthError {
                return  // a newer release's file: left exactly as it is, and the write with it
            } catch {
                // An unreadable file: the complete write made after it replaces it; its bytes are kept aside, by a
                // second name first, so that no moment leaves the profile without a file (and a kill there, the
                // next recovery without the file to replace).
                guard let storedModified = modificationDate(url.path), newest.modified >= storedModified,
                    let (aside, linked) = PrivateFile.linkAside(url.path, identity: identity)
                else { return }
                guard rename(newest.path, url.path) == 0 else {
                    if linked { unlink(aside) }  // the file's second name, undone
                    return
                }
                SesameLog.log(
                    .info, .session,
                    "recovered credentials a killed process had written; the unreadable file went to \(public: aside)")
                return
            }
        } catch {
            return  // the file cannot be read now (I/O, descriptors, a FIFO or link in its place): nothing deleted
        }
        // Only credentials received after the file's, in a write made after the file was written: a killed
        // process's old write (its PID since reused, the clock since set back) never replaces newer credentials.
        guard let storedModified = modificationDate(url.path) else { return }  // cannot tell now: nothing deleted
        guard received > (stored.receivedAt ?? .distantPast), newest.modified >= storedModified else {
            unlink(newest.path)
            return
        }
        if rename(newest.path, url.path) == 0 {
            SesameLog.log(.info, .session, "recovered credentials a killed process had written but not yet renamed")
        }
    }

    /// How old a write whose writer's PID is in use must be to count as abandoned.
    static let abandonedAfter: TimeInterval = 60

    private static func modificationDate(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }
}
