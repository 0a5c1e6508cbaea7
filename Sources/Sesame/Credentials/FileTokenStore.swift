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
/// that path: never silently deleted. ``withExclusiveAccess(profile:_:)`` holds a ``ProfileLock`` on
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
    /// - Throws: ``AuthError``: ``AuthError/Code/storeUnavailable`` (I/O error, a symbolic link, not a regular
    ///   file, another owner) or ``AuthError/Code/storeCorrupt`` (moved aside; the message names where).
    public func load(profile: String) async throws -> TokenSet? {
        let url = try fileURL(profile)
        try SecureDirectory.prepare(directory)
        guard let (data, identity) = try PrivateFile.read(url.path) else { return nil }
        do {
            let (tokens, format) = try StoredFormat.decodeTokens(data, from: "the credentials file \(url.path)")
            if format < StoredFormat.tokens {
                await StoredFormat.migrate(profile: profile, lock: lock) {
                    // Only the very file that was read, still holding the same bytes.
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
            let aside = url.appendingPathExtension("corrupt-\(Int(Date().timeIntervalSince1970))")
            // Move aside exactly the file that was read: another process may have replaced it meanwhile.
            var now = stat()
            guard lstat(url.path, &now) == 0, UInt64(now.st_dev) == identity.device,
                UInt64(now.st_ino) == identity.inode
            else {
                throw AuthError(.storeUnavailable, "\(url.path) changed while it was read; try again")
            }
            guard rename(url.path, aside.path) == 0 else {
                throw AuthError(.storeCorrupt, "the credentials file \(url.path) is unreadable (left in place)")
            }
            throw AuthError(
                .storeCorrupt, "the credentials file \(url.path) was unreadable; it was moved to \(aside.path)")
        }
    }

    /// Writes the profile's file atomically with mode 0600.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    public func save(_ tokens: TokenSet, profile: String) async throws {
        let url = try fileURL(profile)
        try SecureDirectory.prepare(directory)
        try PrivateFile.write(try StoredFormat.encode(tokens), to: url)
    }

    /// Deletes the profile's file.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    public func delete(profile: String) async throws {
        try PrivateFile.delete(try fileURL(profile))
    }

    /// Holds the profile's ``ProfileLock`` (in this directory) while `body` runs.
    ///
    /// First, holding it, it recovers a write that a killed process left unfinished: a complete
    /// `PROFILE.json.tmp-PID-…` whose writer is dead and whose credentials were received after those of the file
    /// (which must still exist: a sign-out's deletion is never undone) is renamed over it (a refresh killed between the server's rotation and the rename would otherwise leave the store with
    /// the spent refresh token); incomplete or older ones are deleted.
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
    /// Runs under the profile's lock, so no live Sesame writer is between its write and its rename.
    static func recoverUnfinishedWrites(of url: URL) {
        let folder = url.deletingLastPathComponent()
        let prefix = url.lastPathComponent + ".tmp-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return }
        var newest: (path: String, tokens: TokenSet)?
        for name in names where name.hasPrefix(prefix) {
            let path = folder.appendingPathComponent(name).path
            // Exactly `PROFILE.json.tmp-PID-RANDOM` (digits, a dash, digits): never another profile's files, whose
            // names may begin the same way. A writer still alive (or a PID we cannot tell) is left alone.
            let parts = name.dropFirst(prefix.count).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2,
                parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
                let pid = Int32(parts[0]), pid > 0, pid != getpid()
            else { continue }
            if kill(pid, 0) == 0 || errno == EPERM { continue }
            guard let (data, _) = try? PrivateFile.read(path, limit: 1 << 20),
                let (tokens, _) = try? StoredFormat.decodeTokens(data, from: path)
            else {
                unlink(path)  // cut short before it was complete: nothing to recover
                continue
            }
            if let current = newest, (current.tokens.receivedAt ?? .distantPast) >= (tokens.receivedAt ?? .distantPast)
            {
                unlink(path)
            } else {
                if let current = newest { unlink(current.path) }
                newest = (path, tokens)
            }
        }
        guard let newest else { return }
        let stored = (try? PrivateFile.read(url.path)).flatMap { $0 }.flatMap {
            try? StoredFormat.decodeTokens($0.data, from: url.path).tokens
        }
        // Only a replacement of credentials still there (never a resurrection after a sign-out deleted them), and
        // only one received after them.
        guard let received = newest.tokens.receivedAt, let stored, received > (stored.receivedAt ?? .distantPast)
        else {
            unlink(newest.path)
            return
        }
        if rename(newest.path, url.path) == 0 {
            SesameLog.log(.info, .session, "recovered credentials a killed process had written but not yet renamed")
        }
    }
}
