import Foundation
import Sesame
import SesameJOSE
import SesameLoopback
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A small tmpfs of its own, for faults a real file system gives: full, read-only.
///
/// Needs the right to mount (root, as CI runs); elsewhere the tests that need it are skipped (`canMount`).
final class Tmpfs {
    let url: URL

    init?(kilobytes: Int) {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-tmpfs-\(UUID().uuidString)")
        guard (try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)) != nil else {
            return nil
        }
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(kilobytes)k,mode=0700", "tmpfs", url.path]) else {
            rmdir(url.path)
            return nil
        }
    }

    /// Remounts it read-only (true) or read-write.
    func readOnly(_ on: Bool) -> Bool {
        Self.run("/bin/mount", ["-o", "remount,\(on ? "ro" : "rw")", url.path])
    }

    /// Fills it up: a file of everything that is left.
    func fill() -> URL {
        let filler = url.appendingPathComponent("filler")
        let fd = open(filler.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let chunk = [UInt8](repeating: 0x41, count: 4096)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        // The last bytes of a page too.
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, 1) }) > 0 {}
        close(fd)
        return filler
    }

    deinit {
        _ = Self.run("/bin/umount", ["-l", url.path])
        rmdir(url.path)
    }

    static func run(_ tool: String, _ arguments: [String]) -> Bool {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = .null
        process.standardError = .null
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// Whether this process may mount one (root, as CI runs): the tests that need it are skipped, visibly, if not.
    static let canMount: Bool = Tmpfs(kilobytes: 16) != nil
}

/// A folder this user may not write to: mode 0500, or for root, whom mode bits do not stop, the immutable attribute
/// (`chattr +i`; root only, and the file system must support it).
enum DeniedFolder {
    static func deny(_ folder: URL, _ on: Bool) -> Bool {
        if geteuid() != 0 { return chmod(folder.path, on ? 0o500 : 0o700) == 0 }
        return Tmpfs.run("/usr/bin/chattr", [on ? "+i" : "-i", folder.path])
    }

    /// Whether ``deny(_:_:)`` works here: a file cannot be made in a denied folder.
    static let works: Bool = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-deny-\(UUID().uuidString)")
        guard (try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)) != nil else {
            return false
        }
        defer {
            _ = deny(folder, false)
            try? FileManager.default.removeItem(at: folder)
        }
        guard deny(folder, true) else { return false }
        let fd = open(folder.appendingPathComponent("probe").path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if fd >= 0 { close(fd) }
        return fd < 0
    }()
}

@Suite(.serialized) struct StorageFaultTests {
    let first = TokenSet(accessToken: "a-first", refreshToken: "r-first", expiresAt: Date(timeIntervalSince1970: 2e9))
    let second = TokenSet(
        accessToken: "a-second", refreshToken: "r-second", expiresAt: Date(timeIntervalSince1970: 2e9))

    static func expect(_ code: AuthError.Code, _ what: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("\(what): no error")
        } catch let error as AuthError {
            #expect(error.code == code, "\(what): \(error)")
            for secret in ["a-first", "r-first", "a-second", "r-second"] {
                #expect(!"\(error)".contains(secret), "\(what): the error shows a token")
            }
        } catch {
            Issue.record("\(what): untyped \(error)")
        }
    }

    @Test(
        "Disk full: saving credentials or a new DPoP key is store_unavailable, the stored ones stay whole, nothing half-written is left, and saving works once there is room",
        .enabled(if: Tmpfs.canMount, "needs the right to mount a tmpfs (root, as CI runs)")
    )
    func diskFull() async throws {
        let tmpfs = try #require(Tmpfs(kilobytes: 256))
        let folder = tmpfs.url.appendingPathComponent("credentials")
        let store = try FileTokenStore(directory: folder)
        let keys = try FileDPoPKeyStore(directory: folder)
        try await store.save(first, profile: "default")
        let key = try await keys.createKey(profile: "default", algorithm: .es256)
        let filler = tmpfs.fill()
        await Self.expect(.storeUnavailable, "save on a full disk") { try await store.save(second, profile: "default") }
        await Self.expect(.storeUnavailable, "a new key on a full disk") {
            _ = try await keys.createKey(profile: "other", algorithm: .es256)
        }
        #expect(try await store.load(profile: "default") == first)
        #expect(try await keys.key(profile: "default")?.thumbprint == key.thumbprint)
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(left == ["default.dpop.jwk", "default.json"], "nothing half-written: \(left)")
        try FileManager.default.removeItem(at: filler)
        try await store.save(second, profile: "default")
        #expect(try await store.load(profile: "default") == second)
        #expect(try await keys.createKey(profile: "other", algorithm: .es256).thumbprint != key.thumbprint)
    }

    @Test(
        "Read-only file system: saving, deleting and making a key are store_unavailable, what is stored is still read, nothing is deleted, and everything works again read-write",
        .enabled(if: Tmpfs.canMount, "needs the right to mount a tmpfs (root, as CI runs)")
    )
    func readOnly() async throws {
        let tmpfs = try #require(Tmpfs(kilobytes: 256))
        let folder = tmpfs.url.appendingPathComponent("credentials")
        let store = try FileTokenStore(directory: folder)
        let keys = try FileDPoPKeyStore(directory: folder)
        try await store.save(first, profile: "default")
        let key = try await keys.createKey(profile: "default", algorithm: .es256)
        try #require(tmpfs.readOnly(true))
        await Self.expect(.storeUnavailable, "save read-only") { try await store.save(second, profile: "default") }
        await Self.expect(.storeUnavailable, "delete read-only") { try await store.delete(profile: "default") }
        await Self.expect(.storeUnavailable, "key read-only") {
            _ = try await keys.createKey(profile: "other", algorithm: .es256)
        }
        await Self.expect(.storeUnavailable, "key delete read-only") { try await keys.deleteKey(profile: "default") }
        #expect(try await store.load(profile: "default") == first)
        #expect(try await keys.key(profile: "default")?.thumbprint == key.thumbprint)
        try #require(tmpfs.readOnly(false))
        try await store.save(second, profile: "default")
        #expect(try await store.load(profile: "default") == second)
        try await store.delete(profile: "default")
        #expect(try await store.load(profile: "default") == nil)
    }

    @Test(
        "Permission denied (a folder this user may not write): saving, deleting, making or deleting a DPoP key are store_unavailable, nothing is lost, and everything works once the folder is writable again",
        .enabled(if: DeniedFolder.works, "needs mode bits that stop this user, or chattr +i for root")
    )
    func permissionDenied() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-denied-\(UUID().uuidString)")
        defer {
            _ = DeniedFolder.deny(folder, false)
            try? FileManager.default.removeItem(at: folder)
        }
        let store = try FileTokenStore(directory: folder)
        let keys = try FileDPoPKeyStore(directory: folder)
        try await store.save(first, profile: "default")
        let key = try await keys.createKey(profile: "default", algorithm: .es256)
        try #require(DeniedFolder.deny(folder, true))
        await Self.expect(.storeUnavailable, "save denied") { try await store.save(second, profile: "default") }
        await Self.expect(.storeUnavailable, "delete denied") { try await store.delete(profile: "default") }
        await Self.expect(.storeUnavailable, "key denied") {
            _ = try await keys.createKey(profile: "other", algorithm: .es256)
        }
        await Self.expect(.storeUnavailable, "key delete denied") { try await keys.deleteKey(profile: "default") }
        #expect(try await store.load(profile: "default") == first)
        #expect(try await keys.key(profile: "default")?.thumbprint == key.thumbprint)
        try #require(DeniedFolder.deny(folder, false))
        try await store.save(second, profile: "default")
        #expect(try await store.load(profile: "default") == second)
        try await keys.deleteKey(profile: "default")
        #expect(try await keys.key(profile: "default") == nil)
    }

    /// A fresh folder holding `first` and a DPoP key for profile `default`, and the two files' paths.
    func storedProfile(_ name: String) async throws -> (
        folder: URL, store: FileTokenStore, keys: FileDPoPKeyStore, credentials: URL, keyFile: URL
    ) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-\(name)-\(UUID().uuidString)")
        let store = try FileTokenStore(directory: folder)
        let keys = try FileDPoPKeyStore(directory: folder)
        try await store.save(first, profile: "default")
        _ = try await keys.createKey(profile: "default", algorithm: .es256)
        return (
            folder, store, keys, folder.appendingPathComponent("default.json"), try keys.keyFile(profile: "default")
        )
    }

    @Test(
        "A FIFO or a symbolic link put where a credentials or key file was: refused at once (never blocking), left in place, and the real file works again once it is back"
    )
    func swappedFiles() async throws {
        let (folder, store, keys, credentials, keyFile) = try await storedProfile("swap")
        defer { try? FileManager.default.removeItem(at: folder) }
        let elsewhere = folder.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: false)
        for file in [credentials, keyFile] {
            let saved = elsewhere.appendingPathComponent(file.lastPathComponent)
            try FileManager.default.moveItem(at: file, to: saved)
            // A FIFO: opening it for reading would wait for a writer forever.
            #expect(mkfifo(file.path, 0o600) == 0)
            let started = Date()
            if file == credentials {
                await Self.expect(.storeUnavailable, "a FIFO for credentials") {
                    _ = try await store.load(profile: "default")
                }
            } else {
                await Self.expect(.storeCorrupt, "a FIFO for a key") { _ = try await keys.key(profile: "default") }
            }
            #expect(Date().timeIntervalSince(started) < 5, "the read did not block")
            var info = stat()
            #expect(lstat(file.path, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the FIFO is left")
            unlink(file.path)
            // A symbolic link to a file an attacker controls.
            #expect(symlink(saved.path, file.path) == 0)
            if file == credentials {
                await Self.expect(.storeUnavailable, "a link for credentials") {
                    _ = try await store.load(profile: "default")
                }
            } else {
                await Self.expect(.storeCorrupt, "a link for a key") { _ = try await keys.key(profile: "default") }
            }
            #expect(lstat(file.path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "the link is left")
            #expect(FileManager.default.fileExists(atPath: saved.path), "the link's target is untouched")
            unlink(file.path)
            try FileManager.default.moveItem(at: saved, to: file)
        }
        #expect(try await store.load(profile: "default") == first)
        #expect(try await keys.key(profile: "default") != nil)
    }

    @Test(
        "A truncated credentials file or key file is store_corrupt; the bytes are kept (moved aside or left), and a new sign-in writes a good file"
    )
    func truncatedFiles() async throws {
        let (folder, store, keys, credentials, keyFile) = try await storedProfile("cut")
        defer { try? FileManager.default.removeItem(at: folder) }
        for file in [credentials, keyFile] {
            let whole = try Data(contentsOf: file)
            let cut = whole.prefix(whole.count / 2)
            try cut.write(to: file)
            chmod(file.path, 0o600)
        }
        await Self.expect(.storeCorrupt, "truncated credentials") { _ = try await store.load(profile: "default") }
        await Self.expect(.storeCorrupt, "a truncated key") { _ = try await keys.key(profile: "default") }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(names.contains { $0.hasPrefix("default.json.corrupt-") }, "the credentials' bytes are kept: \(names)")
        #expect(names.contains("default.dpop.jwk"), "the key file is left in place: \(names)")
        try await store.save(second, profile: "default")
        #expect(try await store.load(profile: "default") == second)
    }

    @Test(
        "A credentials file over the 1 MiB limit is store_corrupt and kept: moved aside by a read, named aside by a write"
    )
    func oversizedFileKept() async throws {
        let (folder, store, _, credentials, _) = try await storedProfile("big")
        defer { try? FileManager.default.removeItem(at: folder) }
        let big = Data(repeating: 0x7B, count: (1 << 20) + 1)
        func kept() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: folder.path).filter {
                $0.hasPrefix("default.json.corrupt-")
                    && (try? Data(contentsOf: folder.appendingPathComponent($0))) == big
            }.count
        }
        try big.write(to: credentials)
        let read = await #expect(throws: AuthError.self) { try await store.load(profile: "default") }
        #expect(
            read?.code == .storeCorrupt && read?.message.contains("moved to") == true, "\(String(describing: read))")
        #expect(try kept() == 1)
        // A sign-in over such a file (one a read left in place while another process held the lock).
        try big.write(to: credentials)
        try await store.save(second, profile: "default")
        #expect(try kept() == 2)
        #expect(try await store.load(profile: "default") == second)
    }

    @Test(
        "A DPoP key folder (with `--store keyring` the key is the only file on disk) is checked like the file store's: writable by others or another user's, it is refused"
    )
    func keyFolderChecked() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try FileDPoPKeyStore(directory: folder)
        chmod(folder.path, 0o777)
        #expect(throws: AuthError.self) { _ = try FileDPoPKeyStore(directory: folder) }
        chmod(folder.path, 0o700)
        if geteuid() == 0 {
            chown(folder.path, 65534, 65534)
            #expect(throws: AuthError.self) { _ = try FileDPoPKeyStore(directory: folder) }
            chown(folder.path, 0, 0)
        }
        _ = try FileDPoPKeyStore(directory: folder)
    }
}
