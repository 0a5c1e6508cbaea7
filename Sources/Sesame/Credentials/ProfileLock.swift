public import Foundation
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A per-profile, cross-process lock: an advisory `flock` on `PROFILE.lock` in a directory that every process
/// sharing the credentials can reach.
///
/// ``FileTokenStore`` keeps it next to its files; ``SecretServiceTokenStore`` and ``KeychainTokenStore`` take a
/// lock directory (on Apple platforms, the app group's shared container, so an app and its extensions refresh
/// once between them). The kernel releases the lock when its holder dies, so a crash never wedges other
/// processes; a holder that hangs makes waiters give up after ``timeout`` with
/// ``AuthError/Code/storeUnavailable``.
public struct ProfileLock: Sendable {
    /// The directory holding the lock files (created 0700 when missing).
    public let directory: URL
    /// How long to wait for the lock before giving up.
    public let timeout: Duration

    /// Creates a lock in `directory`.
    public init(directory: URL, timeout: Duration = .seconds(30)) {
        self.directory = directory
        self.timeout = timeout
    }

    /// A private per-user folder for the lock files of a store whose data is not in files, where you give none.
    ///
    /// ``SecretServiceTokenStore`` uses it by default; the Keychain store does not (without an app group or a lock
    /// directory it takes no cross-process lock).
    /// - Linux and macOS: `$XDG_RUNTIME_DIR/sesame-locks` when set, else `~/.cache/sesame/locks` (a sandboxed Mac
    ///   app's home is its container).
    /// - iOS, tvOS, watchOS and visionOS: `Library/Caches/SesameLocks` in the app's own container (an app there has
    ///   no user home to write in, and tvOS keeps no other local folder). That serializes refreshes between the
    ///   app's own processes only. An app and its extensions share a lock only in their app group's container: give
    ///   SesameApple's `KeychainTokenStore.keychain(service:appGroup:)` the group (it uses the same
    ///   `Library/Caches/SesameLocks` there), or pass such a folder as a store's lock directory. The system empties
    ///   Caches only while the app is not running, and a lock file that is gone is made again.
    public static var defaultDirectory: URL {
        #if os(Linux) || os(macOS) || os(Android) || os(OpenBSD) || os(FreeBSD) || os(Windows)
            let environment = ProcessInfo.processInfo.environment
            if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
                return URL(fileURLWithPath: runtime).appendingPathComponent("sesame-locks")
            }
            return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/sesame/locks")
        #else
            return containerDefaultDirectory
        #endif
    }

    /// The default on iOS, tvOS, watchOS and visionOS (see ``defaultDirectory``): compiled on every platform, so
    /// that Linux builds and tests it too.
    static var containerDefaultDirectory: URL {
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
        return caches.appendingPathComponent("SesameLocks", isDirectory: true)
    }

    /// Runs `body` while holding the lock of `profile`.
    ///
    /// Waiting polls with a growing interval (1–20 ms), so no thread blocks.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` when the lock file cannot be opened or the
    ///   lock is not had within ``timeout``; `body`'s errors; `CancellationError`.
    public func withLock<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        try ProfileName.validate(profile)
        try SecureDirectory.prepare(directory)
        let path = directory.appendingPathComponent(profile + ".lock").path
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw AuthError(
                .storeUnavailable, "cannot open the lock file \(path) (\(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        let deadline = ContinuousClock.now + timeout
        var pause = Duration.milliseconds(1)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw AuthError(.storeUnavailable, "cannot lock \(path) (\(String(cString: strerror(errno))))")
            }
            guard ContinuousClock.now < deadline else {
                throw AuthError(.storeUnavailable, "another process has held \(path) for over \(timeout)")
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(20))
        }
        return try await Self.holding(path, fd, body)
    }

    /// A lock file held, for as long as ``active``: a task created inside the holder's scope inherits the
    /// task-local and may run on after the lock is released, when it must not count as holding it.
    private final class Holding: Sendable {
        let path: String
        private let state = LockedValue(true)
        init(_ path: String) { self.path = path }
        var active: Bool { state.withLock { $0 } }
        func release() { state.withLock { $0 = false } }
    }

    /// The lock files the current task holds: set while `body` runs, seen by the tasks it creates meanwhile.
    @TaskLocal private static var held: [Holding] = []

    /// Runs `body` as the holder of the flock on `fd` (taken), then releases it.
    private static func holding<Result: Sendable>(
        _ path: String, _ fd: Int32, _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        let holding = Holding(path)
        defer {
            holding.release()
            flock(fd, LOCK_UN)
        }
        return try await $held.withValue(held + [holding]) { try await body() }
    }

    /// Whether the current task runs inside ``withLock(profile:_:)`` or ``withLockIfFree(profile:_:)`` of this
    /// profile's lock (the same file, named the same way), and that lock is still held.
    package func isHeld(profile: String) -> Bool {
        let path = directory.appendingPathComponent(profile + ".lock").path
        return Self.held.contains { $0.path == path && $0.active }
    }

    /// Runs `body` holding the lock of `profile` if it is free right now; else returns nil at once.
    ///
    /// For work that may as well wait for a later turn, such as a format migration. A lock this process holds
    /// already — through another open file, in this task or any other — is not free.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` when the lock file cannot be opened;
    ///   `body`'s errors.
    package func withLockIfFree<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result? {
        try ProfileName.validate(profile)
        let path = directory.appendingPathComponent(profile + ".lock").path
        try SecureDirectory.prepare(directory)
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AuthError(.storeUnavailable, "cannot open the lock file \(path)") }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return nil }
        return try await Self.holding(path, fd, body)
    }
}

/// Profile names: 1–64 of `A-Z a-z 0-9 . _ -`, not starting with a dot (DESIGN §4), so that they are safe as
/// file names and keyring attributes.
package enum ProfileName {
    /// Whether `profile` is a valid name.
    package static func isValid(_ profile: String) -> Bool {
        !profile.isEmpty && profile.utf8.count <= 64 && !profile.hasPrefix(".")
            && profile.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == 0x2D || byte == 0x5F || byte == 0x2E
            }
    }

    /// Throws for an invalid name.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/configuration``.
    package static func validate(_ profile: String) throws {
        guard isValid(profile) else {
            throw AuthError(
                .configuration, "a profile name is 1-64 letters, digits, '.', '-' or '_', not starting with '.'")
        }
    }
}

/// Folders that hold secrets: created 0700, and refused when someone else owns them or can write to them.
package enum SecureDirectory {
    /// Checks an existing `directory` (no error when it does not exist).
    ///
    /// - Throws: as ``prepare(_:)``.
    package static func check(_ directory: URL) throws {
        var info = stat()
        guard lstat(directory.path, &info) == 0 else { return }
        try prepare(directory)
    }

    /// Creates `directory` (0700) when missing, then checks it.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/storeUnavailable`` when it cannot be created,
    ///   ``AuthError/Code/configuration`` when it is not a directory, belongs to another user, or is group- or
    ///   world-writable.
    package static func prepare(_ directory: URL) throws {
        let path = directory.path
        var info = stat()
        if lstat(path, &info) != 0 {
            do {
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw AuthError(.storeUnavailable, "cannot create the directory \(path)")
            }
        }
        guard stat(path, &info) == 0 else { throw AuthError(.storeUnavailable, "cannot read the directory \(path)") }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw AuthError(.configuration, "\(path) is not a directory")
        }
        guard info.st_uid == geteuid() else {
            throw AuthError(.configuration, "\(path) belongs to another user; refusing to keep credentials there")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw AuthError(
                .configuration,
                "\(path) is writable by other users (mode \(String(info.st_mode & 0o777, radix: 8))); "
                    + "refusing to keep credentials there (chmod 700 it)")
        }
    }
}
