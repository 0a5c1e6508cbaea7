import Foundation
import SesameJOSE
import SesameLoopback
import Testing

@testable import Sesame

/// A write a killed process left between its `fsync` and its `rename` (issue 24): recovered under the lock when it
/// is complete, newer, and its writer is dead; never a resurrection, never a live writer's file.
@Suite struct UnfinishedWriteRecoveryTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-recover-\(UUID().uuidString)")

    /// The PID of a process that has exited.
    static func deadPID() throws -> Int32 {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/true")
        try process.run()
        process.waitUntilExit()
        return process.processIdentifier
    }

    func tokens(_ label: String, receivedAt seconds: TimeInterval) -> TokenSet {
        TokenSet(
            accessToken: "access-\(label)", refreshToken: "refresh-\(label)",
            receivedAt: Date(timeIntervalSince1970: seconds))
    }

    func orphan(_ tokens: TokenSet, pid: Int32, bytes: Int? = nil) throws -> URL {
        let url = directory.appendingPathComponent("default.json.tmp-\(pid)-\(UInt32.random(in: 0...UInt32.max))")
        var data = try StoredFormat.encode(tokens)
        if let bytes { data = data.prefix(bytes) }
        try data.write(to: url)
        return url
    }

    /// What an access under the profile's lock reads, after the recovery it runs first.
    func lockedRead(_ store: FileTokenStore) async throws -> TokenSet? {
        try await store.withExclusiveAccess(profile: "default") { try await store.load(profile: "default") }
    }

    /// Dates `url`'s last modification `seconds` ago.
    func age(_ url: URL, _ seconds: TimeInterval) throws {
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -seconds)], ofItemAtPath: url.path)
    }

    func leftovers() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp-") }
    }

    @Test("a complete, newer write of a dead process is adopted under the lock; the rest of the dead ones deleted")
    func adoptsNewest() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("spent", receivedAt: 1000), profile: "default")
        let dead = try Self.deadPID()
        _ = try orphan(tokens("rotated", receivedAt: 2000), pid: dead)
        _ = try orphan(tokens("older", receivedAt: 1500), pid: dead)
        _ = try orphan(tokens("cut", receivedAt: 3000), pid: dead, bytes: 20)  // killed mid-write
        // A plain read outside the lock changes nothing.
        #expect(try await store.load(profile: "default")?.refreshToken == "refresh-spent")
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-rotated")
        #expect(try leftovers().isEmpty)
    }

    @Test("a plain read that rewrites an older release's file in the current format does not cost a killed write")
    func migrationKeepsWrite() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("default.json")
        let old = try Data(contentsOf: StoredFormatMigrationTests.fixtures.appendingPathComponent("default.json"))
        try old.write(to: file)
        let spent = try StoredFormat.decodeTokens(old, from: "a 0.2.0 file").tokens
        let received = try #require(spent.receivedAt).timeIntervalSince1970
        let write = try orphan(tokens("rotated", receivedAt: received + 1000), pid: try Self.deadPID())
        // The file, then the killed write, both before this read: a refresh killed just after an upgrade.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        try age(file, 100)
        try age(write, 50)
        // A plain read takes the lock when it is free to rewrite the file; it must recover the write first, or the
        // rewrite is newer than the write, which is then refused as stale.
        #expect(try await store.load(profile: "default")?.refreshToken == spent.refreshToken)
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-rotated")
        #expect(try leftovers().isEmpty)
    }

    @Test("a write older than a minute is adopted even when its PID is in use now (reused, another PID namespace's)")
    func abandonedUnderLiveNumber() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("spent", receivedAt: 1000), profile: "default")
        let write = try orphan(tokens("rotated", receivedAt: 2000), pid: getppid())
        try age(directory.appendingPathComponent("default.json"), 300)
        try age(write, FileTokenStore.abandonedAfter + 60)
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-rotated")
        #expect(try leftovers().isEmpty)
    }

    @Test("another profile whose name begins like a temporary file is never taken for one")
    func otherProfilesUntouched() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let dead = try Self.deadPID()
        let lookalike = "default.json.tmp-\(dead)-1"
        try await store.save(tokens("alice", receivedAt: 1000), profile: "default")
        try await store.save(tokens("bob", receivedAt: 2000), profile: lookalike)
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-alice")
        #expect(try await store.load(profile: lookalike)?.refreshToken == "refresh-bob")
    }

    @Test("never: an older write, a live writer's file, or credentials a sign-out deleted")
    func refuses() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("current", receivedAt: 2000), profile: "default")
        let dead = try Self.deadPID()
        let older = try orphan(tokens("older", receivedAt: 1000), pid: dead)
        let live = try orphan(tokens("live", receivedAt: 3000), pid: getppid())
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-current")
        #expect(!FileManager.default.fileExists(atPath: older.path))
        #expect(FileManager.default.fileExists(atPath: live.path))
        try FileManager.default.removeItem(at: live)
        // Signed out: a dead writer's newer file is not brought back.
        try await store.delete(profile: "default")
        _ = try orphan(tokens("after-sign-out", receivedAt: 4000), pid: dead)
        let after = try await lockedRead(store)
        #expect(after == nil)
        #expect(try leftovers().isEmpty)
    }

    var file: URL { directory.appendingPathComponent("default.json") }

    @Test(
        "a file that cannot be read for now (a FIFO in its place) costs no write; once it is back, the write is adopted"
    )
    func unreadableFileKeepsWrite() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("spent", receivedAt: 1000), profile: "default")
        let rotated = try orphan(tokens("rotated", receivedAt: 2000), pid: try Self.deadPID())
        let kept = directory.appendingPathComponent("kept")
        try FileManager.default.moveItem(at: file, to: kept)
        #expect(mkfifo(file.path, 0o600) == 0)
        await #expect(throws: AuthError.self) {
            try await lockedRead(store)
        }
        #expect(FileManager.default.fileExists(atPath: rotated.path))
        unlink(file.path)
        try FileManager.default.moveItem(at: kept, to: file)
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-rotated")
    }

    @Test("an unreadable file is replaced by a complete write made after it; its bytes are kept aside")
    func replacesCorruptFile() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("spent", receivedAt: 1000), profile: "default")
        try Data("{\"format\": 2, \"acc".utf8).write(to: file)
        _ = try orphan(tokens("rotated", receivedAt: 2000), pid: try Self.deadPID())
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-rotated")
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasPrefix("default.json.corrupt-")
        }
        #expect(aside.count == 1)
        let bytes = try aside.first.map { try Data(contentsOf: directory.appendingPathComponent($0)) }
        #expect(bytes == Data("{\"format\": 2, \"acc".utf8))
        #expect(try leftovers().isEmpty)
    }

    @Test("a plain read of an unreadable file recovers a killed write before moving the file aside, and returns it")
    func plainReadKeepsWrite() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("spent", receivedAt: 1000), profile: "default")
        try Data("{\"format\": 2, \"acc".utf8).write(to: file)
        _ = try orphan(tokens("rotated", receivedAt: 2000), pid: try Self.deadPID())
        // Moved aside first, the file would be missing at the next recovery, which reads that as a sign-out and
        // deletes the write: the rotated refresh token's only copy.
        #expect(try await store.load(profile: "default")?.refreshToken == "refresh-rotated")
        #expect(try await lockedRead(store)?.refreshToken == "refresh-rotated")
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasPrefix("default.json.corrupt-")
        }
        #expect(aside.count == 1)
        #expect(try leftovers().isEmpty)
    }

    @Test("an unreadable file is never moved aside while another holds the lock (its rename could land in between)")
    func busyLockLeavesFile() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("x", receivedAt: 1000), profile: "default")
        try Data("broken".utf8).write(to: file)
        // Another process's refresh holds the lock (its flock, taken here as that process would): it may rename its
        // new file into place at any moment.
        let other = open(directory.appendingPathComponent("default.lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(other >= 0 && flock(other, LOCK_EX) == 0)
        let busy = await #expect(throws: AuthError.self) { try await store.load(profile: "default") }
        #expect(busy?.code == .storeCorrupt && busy?.message.contains("left in place") == true)
        #expect(try Data(contentsOf: file) == Data("broken".utf8))
        // Unlocked explicitly, as the store does: a close alone leaves the lock held while a child process another
        // test spawns at that moment still has a copy of the descriptor (between the child's fork and its exec,
        // which closes it: it is O_CLOEXEC).
        flock(other, LOCK_UN)
        close(other)
        let free = await #expect(throws: AuthError.self) { try await store.load(profile: "default") }
        #expect(free?.message.contains("moved to") == true)
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }

    @Test("a task created inside a locked access, reading after the lock is released, does not count as holding it")
    func lateTaskHoldsNothing() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("x", receivedAt: 1000), profile: "default")
        try Data("broken".utf8).write(to: file)
        let (go, signal) = AsyncStream<Void>.makeStream()
        // The task inherits the locked access's task-local; it reads only once the access has ended.
        let late = try await store.withExclusiveAccess(profile: "default") {
            Task {
                for await _ in go { break }
                return try await store.load(profile: "default")
            }
        }
        // By then another process holds the lock, and may rename its new file into place at any moment.
        let other = open(directory.appendingPathComponent("default.lock").path, O_RDWR | O_CLOEXEC)
        #expect(other >= 0 && flock(other, LOCK_EX) == 0)
        defer {
            flock(other, LOCK_UN)
            close(other)
        }
        signal.yield()
        signal.finish()
        let error = await #expect(throws: AuthError.self) { try await late.value }
        #expect(error?.message.contains("left in place") == true)
        #expect(try Data(contentsOf: file) == Data("broken".utf8))
    }

    @Test("moving a file aside never removes one a writer renamed into its place since it was looked at")
    func removeNameKeepsReplacement() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("looked-at", receivedAt: 1000), profile: "default")
        let looked = try #require(try PrivateFile.read(file.path)).identity
        // A locked writer's rename lands after the caller's check, before the name is removed.
        try await store.save(tokens("renamed-in", receivedAt: 2000), profile: "default")
        PrivateFile.removeName(file.path, ifItNames: looked)
        #expect(try await store.load(profile: "default")?.refreshToken == "refresh-renamed-in")
        #expect(try leftovers().isEmpty)
        // The very file looked at: its name goes.
        let current = try #require(try PrivateFile.read(file.path)).identity
        PrivateFile.removeName(file.path, ifItNames: current)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(try leftovers().isEmpty)
    }

    @Test("a write over an unreadable file left in place keeps its bytes under a second name; a readable one gets none")
    func writeKeepsUnreadable() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("first", receivedAt: 1000), profile: "default")
        try await store.save(tokens("second", receivedAt: 2000), profile: "default")
        try Data("broken".utf8).write(to: file)
        try await store.save(tokens("signed-in", receivedAt: 3000), profile: "default")
        #expect(try await store.load(profile: "default")?.refreshToken == "refresh-signed-in")
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasPrefix("default.json.corrupt-")
        }
        #expect(aside.count == 1)
        let bytes = try aside.first.map { try Data(contentsOf: directory.appendingPathComponent($0)) }
        #expect(bytes == Data("broken".utf8))
    }

    @Test("a write a killed process with this process's ID left (every run is PID 1 in a container) is recovered")
    func samePIDKilledEarlier() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("spent", receivedAt: 1000), profile: "default")
        _ = try orphan(tokens("rotated", receivedAt: 2000), pid: getpid())
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-rotated")
        #expect(try leftovers().isEmpty)
    }

    @Test("a write made before the file was (a reused PID, a clock set back since) never replaces it, whatever it says")
    func staleWriteRefused() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(
            TokenSet(accessToken: "access-current", refreshToken: "refresh-current"), profile: "default")
        let stale = try orphan(tokens("stale", receivedAt: Date().timeIntervalSince1970), pid: try Self.deadPID())
        try age(stale, 3600)
        let read = try await lockedRead(store)
        #expect(read?.refreshToken == "refresh-current")
        #expect(try leftovers().isEmpty)
    }

    @Test("a sign-out deletes every unfinished write of the profile; a new DPoP key deletes the dead writers' keys")
    func leftoversDeleted() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await store.save(tokens("current", receivedAt: 1000), profile: "default")
        let dead = try Self.deadPID()
        _ = try orphan(tokens("dead", receivedAt: 2000), pid: dead)
        _ = try orphan(tokens("live", receivedAt: 3000), pid: getppid())
        try await store.delete(profile: "default")
        #expect(try leftovers().isEmpty)
        let keys = try FileDPoPKeyStore(directory: directory)
        let killed = directory.appendingPathComponent("default.dpop.jwk.tmp-\(dead)-1")
        let writing = directory.appendingPathComponent("default.dpop.jwk.tmp-\(getppid())-2")
        try Data("{}".utf8).write(to: killed)
        try Data("{}".utf8).write(to: writing)
        _ = try await keys.createKey(profile: "default", algorithm: .es256)
        #expect(!FileManager.default.fileExists(atPath: killed.path))
        #expect(FileManager.default.fileExists(atPath: writing.path))
        try await keys.deleteKey(profile: "default")
        #expect(try leftovers().isEmpty)
    }

    @Test("two unreadable files moved aside within one second both keep their bytes")
    func asideNeverReplaced() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        for attempt in ["first", "second"] {
            try await store.save(tokens("x", receivedAt: 1000), profile: "default")
            try Data("broken \(attempt)".utf8).write(to: file)
            await #expect(throws: AuthError.self) { try await store.load(profile: "default") }
        }
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasPrefix("default.json.corrupt-")
        }
        let contents = try Set(
            aside.map { String(decoding: try Data(contentsOf: directory.appendingPathComponent($0)), as: UTF8.self) })
        #expect(contents == ["broken first", "broken second"])
    }
}
