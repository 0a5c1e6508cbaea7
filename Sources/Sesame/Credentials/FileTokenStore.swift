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
/// a half-written file. The directory must belong to the current user and be writable by no one else, and the
/// credentials file is never read through a symbolic link: both are refused with a typed error. An unreadable
/// file is renamed aside (`PROFILE.json.corrupt-TIMESTAMP`) and reported as ``AuthError/Code/storeCorrupt`` with
/// that path: never silently deleted. ``withExclusiveAccess(profile:_:)`` holds a ``ProfileLock`` on
/// `PROFILE.lock` in the same directory, so processes sharing it refresh one at a time.
///
/// > Note: On Linux this is the default store when no keyring is available. On Apple platforms prefer the
/// > Keychain store in `SesameApple`.
public struct FileTokenStore: TokenStore {
    /// The directory holding the files.
    public let directory: URL
    private let lock: ProfileLock

    /// Uses `directory`, creating it with mode 0700 when needed.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/storeUnavailable`` when it cannot be created;
    ///   ``AuthError/Code/configuration`` when it belongs to someone else or others can write to it.
    public init(directory: URL) throws {
        self.directory = directory
        lock = ProfileLock(directory: directory)
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
        guard let (data, identity) = try Self.readRegularFile(url.path) else { return nil }
        do {
            return try JSONDecoder().decode(TokenSet.self, from: data)
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

    /// The file's bytes and identity, or nil when it does not exist; never through a symbolic link.
    ///
    /// A file that others can read is made 0600 first.
    private static func readRegularFile(_ path: String) throws -> (Data, (device: UInt64, inode: UInt64))? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw AuthError(.storeUnavailable, "\(path) is a symbolic link; refusing to follow it")
            }
            throw AuthError(.storeUnavailable, "cannot read \(path) (\(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw AuthError(.storeUnavailable, "\(path) is not a regular file of this user; refusing to read it")
        }
        guard info.st_size <= 1 << 20 else { throw AuthError(.storeCorrupt, "\(path) is larger than 1 MiB") }
        if info.st_mode & 0o077 != 0 { fchmod(fd, 0o600) }
        let identity = (device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw AuthError(.storeUnavailable, "cannot read \(path) (\(String(cString: strerror(errno))))")
            }
            if count == 0 { return (data, identity) }
            data.append(contentsOf: chunk[0..<count])
        }
    }

    /// Writes the profile's file atomically with mode 0600.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    public func save(_ tokens: TokenSet, profile: String) async throws {
        let url = try fileURL(profile)
        try SecureDirectory.prepare(directory)
        let temporary = try fileURL(profile, ".json.tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        let data = try JSONEncoder().encode(tokens)
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AuthError(.storeUnavailable, "cannot write \(url.path)") }
        var ok = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
        ok = ok && fsync(fd) == 0
        close(fd)
        // rename(2) replaces a symbolic link itself, never its target.
        guard ok, rename(temporary.path, url.path) == 0 else {
            unlink(temporary.path)
            throw AuthError(.storeUnavailable, "cannot write \(url.path)")
        }
        let directoryFD = open(directory.path, O_RDONLY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// Deletes the profile's file.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    public func delete(profile: String) async throws {
        let url = try fileURL(profile)
        if unlink(url.path) != 0 && errno != ENOENT {
            throw AuthError(.storeUnavailable, "cannot delete \(url.path) (\(String(cString: strerror(errno))))")
        }
    }

    /// Holds the profile's ``ProfileLock`` (in this directory) while `body` runs.
    ///
    /// - Throws: as ``ProfileLock/withLock(profile:_:)``.
    public func withExclusiveAccess<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        try await lock.withLock(profile: profile, body)
    }
}
