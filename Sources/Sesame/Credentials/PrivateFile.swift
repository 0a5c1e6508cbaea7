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
    /// The data goes first to `NAME.tmp-PID-RANDOM` beside `url`; a process killed before the rename leaves that
    /// file behind (see ``unfinishedWrites(of:)``).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    package static func write(_ data: Data, to url: URL) throws {
        let temporary = url.path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        writesInProgress.insert(temporary)
        defer { writesInProgress.remove(temporary) }
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
        flushFolder(of: url.path)
    }

    /// Flushes the folder holding `path`, so that a rename or a link in it survives a power cut.
    private static func flushFolder(of path: String) {
        let directoryFD = open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// This process's writes in progress: their temporary files are never taken for a killed writer's.
    private static let writesInProgress = PathSet()

    /// The temporary files that writes of `url` left unfinished, with their writers' process IDs.
    ///
    /// They are `NAME.tmp-PID-RANDOM` beside it (exactly: digits, a dash, digits, so never another file whose name
    /// begins the same way), and never one of this process's writes in progress. A file whose PID is this process's
    /// is a killed process's that had the same ID (in a container every run may be PID 1).
    package static func unfinishedWrites(of url: URL) -> [(path: String, pid: Int32)] {
        let prefix = url.lastPathComponent + ".tmp-"
        let folder = url.deletingLastPathComponent().path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
        return names.compactMap { name in
            guard name.hasPrefix(prefix) else { return nil }
            let parts = name.dropFirst(prefix.count).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2,
                parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
                let pid = Int32(parts[0]), pid > 0
            else { return nil }
            // Spelled as `write(_:to:)` spells it, to compare with the writes in progress.
            let path = url.path + name.dropFirst(url.lastPathComponent.count)
            return writesInProgress.contains(path) ? nil : (path, pid)
        }
    }

    /// Deletes what writes of `url` left unfinished: by default whoever wrote them (a sign-out: nothing of it may
    /// come back; a write still going on in another process then fails instead of renaming its file into place);
    /// with `onlyDeadWriters`, only those of processes that are gone.
    package static func deleteUnfinishedWrites(of url: URL, onlyDeadWriters: Bool = false) {
        for (path, pid) in unfinishedWrites(of: url) {
            if onlyDeadWriters, isAlive(pid) { continue }
            unlink(path)
        }
    }

    /// Whether process `pid` may be running: a process other than this one that exists, or one we cannot tell of.
    package static func isAlive(_ pid: Int32) -> Bool {
        pid != getpid() && (kill(pid, 0) == 0 || errno == EPERM)
    }

    /// Moves `path` aside to `PATH.corrupt-TIMESTAMP` (`-2`, `-3`… when taken: an earlier file moved aside is never
    /// replaced), only if it is still the file `identity` names.
    ///
    /// - Returns: where it went, or nil when it was not moved (replaced meanwhile, or the folder refuses).
    package static func moveAside(_ path: String, identity: (device: UInt64, inode: UInt64)) -> String? {
        guard let (aside, linked) = linkAside(path, identity: identity) else { return nil }
        if linked { removeName(path, ifItNames: identity) }  // the original name goes once the second is in place
        return aside
    }

    /// Removes the name `path` if it names the file `identity` names; a file another writer renamed into its place
    /// since the caller looked is put back, never unlinked.
    ///
    /// POSIX has no "unlink if still this inode". So the name is first renamed — atomically, whatever it names by
    /// then — to a temporary name of this process, checked there, and unlinked when it is that file; another file is
    /// linked back under `path` (and the folder flushed, as its writer had), unless yet another took `path`
    /// meanwhile, which then wins as the later write. For a few microseconds a reader finds no file, and a kill
    /// inside them leaves the other file under the temporary name, where the next recovery, finding no file, deletes
    /// it as a sign-out's leftover. Only for folders whose recovery runs under the profile's lock, as this does: the
    /// temporary name would otherwise be another process's to judge.
    package static func removeName(_ path: String, ifItNames identity: (device: UInt64, inode: UInt64)) {
        let held = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        writesInProgress.insert(held)
        defer { writesInProgress.remove(held) }
        guard rename(path, held) == 0 else { return }
        if isFile(held, identity) {
            unlink(held)
        } else if link(held, path) == 0 || errno == EEXIST {
            unlink(held)
            flushFolder(of: path)
        } else {
            rename(held, path)  // it cannot get a second name: back by its one
            flushFolder(of: path)
        }
    }

    /// Gives `path` a second name, `PATH.corrupt-TIMESTAMP` (`-2`, `-3`… when taken), only if it is still the file
    /// `identity` names; on a file system without hard links it moves it there instead (`linked` false).
    ///
    /// - Returns: the second name, or nil when there is none (replaced meanwhile, or the folder refuses).
    package static func linkAside(_ path: String, identity: (device: UInt64, inode: UInt64)) -> (
        aside: String, linked: Bool
    )? {
        let base = path + ".corrupt-\(Int(Date().timeIntervalSince1970))"
        for attempt in 1...100 {
            let aside = attempt == 1 ? base : base + "-\(attempt)"
            // link(2) never replaces an existing name.
            if link(path, aside) == 0 {
                guard isFile(path, identity), isFile(aside, identity) else {
                    unlink(aside)
                    return nil
                }
                return (aside, true)
            }
            if errno == EEXIST { continue }
            // A file system without hard links: rename, still never over an existing name.
            guard errno == EPERM || errno == EOPNOTSUPP || errno == EXDEV, !exists(aside), isFile(path, identity)
            else { return nil }
            return rename(path, aside) == 0 ? (aside, false) : nil
        }
        return nil
    }

    /// The identity of `path` when it is a regular file of this user (never following a link), else nil.
    package static func regularFile(_ path: String) -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// Whether `path` names the file `identity` names (false when it names another, or nothing).
    package static func isFile(_ path: String, _ identity: (device: UInt64, inode: UInt64)) -> Bool {
        var now = stat()
        return lstat(path, &now) == 0 && UInt64(now.st_dev) == identity.device && UInt64(now.st_ino) == identity.inode
    }

    private static func exists(_ path: String) -> Bool {
        var now = stat()
        return lstat(path, &now) == 0 || errno != ENOENT
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

/// A set of paths shared by threads.
private final class PathSet: @unchecked Sendable {
    private let lock = NSLock()
    private var paths: Set<String> = []

    func insert(_ path: String) { lock.withLock { _ = paths.insert(path) } }
    func remove(_ path: String) { lock.withLock { _ = paths.remove(path) } }
    func contains(_ path: String) -> Bool { lock.withLock { paths.contains(path) } }
}
