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
/// a half-written file. An unreadable file is renamed aside (`PROFILE.json.corrupt-TIMESTAMP`) and reported as
/// ``AuthError/Code/storeCorrupt``: never silently deleted. ``withExclusiveAccess(profile:_:)`` holds an advisory
/// `flock` on `PROFILE.lock`, so processes sharing the directory refresh one at a time.
///
/// > Note: On Linux this is the default store when no keyring is available. On Apple platforms prefer the
/// > Keychain store in `SesameApple`.
public struct FileTokenStore: TokenStore {
    /// The directory holding the files.
    public let directory: URL

    /// Uses `directory`, creating it with mode 0700 when needed.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` when it cannot be created.
    public init(directory: URL) throws {
        self.directory = directory
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw AuthError(.storeUnavailable, "cannot create the credentials directory")
        }
    }

    private func fileURL(_ profile: String, _ suffix: String) throws -> URL {
        guard !profile.isEmpty, profile.count <= 64,
            profile.utf8.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x2D
                    || byte == 0x5F || byte == 0x2E
            }), !profile.hasPrefix(".")
        else { throw AuthError(.configuration, "a profile name is 1-64 letters, digits, '.', '-' or '_'") }
        return directory.appendingPathComponent(profile + suffix)
    }

    /// Reads the profile's file.
    public func load(profile: String) async throws -> TokenSet? {
        let url = try fileURL(profile, ".json")
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch CocoaError.fileReadNoSuchFile {
            return nil
        } catch let error as NSError where error.domain == NSCocoaErrorDomain && error.code == NSFileReadNoSuchFileError
        {
            return nil
        } catch {
            if !FileManager.default.fileExists(atPath: url.path) { return nil }
            throw AuthError(.storeUnavailable, "cannot read the credentials file")
        }
        do {
            return try JSONDecoder().decode(TokenSet.self, from: data)
        } catch {
            let aside = url.appendingPathExtension("corrupt-\(Int(Date().timeIntervalSince1970))")
            try? FileManager.default.moveItem(at: url, to: aside)
            throw AuthError(
                .storeCorrupt, "the credentials file is unreadable; it was kept as \(aside.lastPathComponent)")
        }
    }

    /// Writes the profile's file atomically with mode 0600.
    public func save(_ tokens: TokenSet, profile: String) async throws {
        let url = try fileURL(profile, ".json")
        let temporary = try fileURL(profile, ".json.tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        let data = try JSONEncoder().encode(tokens)
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw AuthError(.storeUnavailable, "cannot write the credentials file") }
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
        guard ok, rename(temporary.path, url.path) == 0 else {
            unlink(temporary.path)
            throw AuthError(.storeUnavailable, "cannot write the credentials file")
        }
        let directoryFD = open(directory.path, O_RDONLY)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// Deletes the profile's file.
    public func delete(profile: String) async throws {
        let url = try fileURL(profile, ".json")
        if unlink(url.path) != 0 && errno != ENOENT {
            throw AuthError(.storeUnavailable, "cannot delete the credentials file")
        }
    }

    /// Holds `flock(LOCK_EX)` on the profile's lock file while `body` runs (polling, so no thread blocks).
    public func withExclusiveAccess<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        let url = try fileURL(profile, ".lock")
        let fd = open(url.path, O_RDWR | O_CREAT, 0o600)
        guard fd >= 0 else { throw AuthError(.storeUnavailable, "cannot open the lock file") }
        defer { close(fd) }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw AuthError(.storeUnavailable, "cannot lock the credentials")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        defer { flock(fd, LOCK_UN) }
        return try await body()
    }
}
