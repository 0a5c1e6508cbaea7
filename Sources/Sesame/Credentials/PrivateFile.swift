package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Files that hold secrets (credentials, DPoP keys): read only as regular files of this user, never through a
/// symbolic link, and without blocking on a FIFO; written 0600 to a temporary file that is flushed and renamed over
/// the old one, so that a crash never leaves half a file.
package enum PrivateFile {
    /// What to do with a file that other users can read.
    package enum Exposure {
        /// Make it 0600 and read it (credentials: the next write would anyway).
        case tighten
        /// Refuse it (a private key others could read may have been copied).
        case refuse
    }

    /// The file's bytes and identity, or nil when it does not exist.
    ///
    /// - Parameters:
    ///   - path: the file.
    ///   - limit: the largest size read.
    ///   - exposure: what to do with a file others can read.
    ///   - unsafe: the code for a file that is not safe to read — a symbolic link, not a regular file (a FIFO),
    ///     another user's, or exposed with `.refuse`.
    /// - Returns: the bytes and the file's device and inode, or nil.
    /// - Throws: ``AuthError`` — ``AuthError/Code/storeUnavailable`` for an I/O error, `unsafe` as said,
    ///   ``AuthError/Code/storeCorrupt`` when over `limit` bytes.
    package static func read(
        _ path: String, limit: Int = 1 << 20, exposure: Exposure = .tighten,
        unsafe: AuthError.Code = .storeUnavailable
    ) throws
        -> (data: Data, identity: (device: UInt64, inode: UInt64))?
    {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw AuthError(unsafe, "\(path) is a symbolic link; refusing to follow it")
            }
            throw AuthError(.storeUnavailable, "cannot read \(path) (\(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw AuthError(unsafe, "\(path) is not a regular file of this user; refusing to read it")
        }
        guard Int64(info.st_size) <= Int64(limit) else {
            throw AuthError(.storeCorrupt, "\(path) is larger than \(limit) bytes")
        }
        if info.st_mode & 0o077 != 0 {
            guard exposure == .tighten else {
                throw AuthError(
                    unsafe,
                    "\(path) can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))); "
                        + "it is kept, not used")
            }
            fchmod(fd, 0o600)
        }
        let identity = (device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw AuthError(.storeUnavailable, "cannot read \(path) (\(String(cString: strerror(errno))))")
            }
            if count == 0 { return (data, identity) }
            guard data.count + count <= limit else { throw AuthError(.storeCorrupt, "\(path) grew while read") }
            data.append(contentsOf: chunk[0..<count])
        }
    }

    /// Replaces `url` with `data` (0600) atomically, and flushes the folder.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    package static func write(_ data: Data, to url: URL) throws {
        let temporary = url.path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AuthError(.storeUnavailable, "cannot write \(url.path)") }
        var ok = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
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
        guard ok, rename(temporary, url.path) == 0 else {
            unlink(temporary)
            throw AuthError(.storeUnavailable, "cannot write \(url.path)")
        }
        let directoryFD = open(url.deletingLastPathComponent().path, O_RDONLY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// Renames `path` to `target` only if it is still the file `identity` names (another process may have replaced
    /// it since it was read).
    ///
    /// - Returns: whether it was renamed.
    package static func renameIfSame(_ path: String, identity: (device: UInt64, inode: UInt64), to target: String)
        -> Bool
    {
        var now = stat()
        guard lstat(path, &now) == 0, UInt64(now.st_dev) == identity.device, UInt64(now.st_ino) == identity.inode
        else { return false }
        return rename(path, target) == 0
    }

    /// Deletes `url` (no error when it is absent).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    package static func delete(_ url: URL) throws {
        if unlink(url.path) != 0 && errno != ENOENT {
            throw AuthError(.storeUnavailable, "cannot delete \(url.path) (\(String(cString: strerror(errno))))")
        }
    }
}
