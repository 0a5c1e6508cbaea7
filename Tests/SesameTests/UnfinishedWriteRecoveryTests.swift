import Foundation
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
        let read = try await store.withExclusiveAccess(profile: "default") { try await store.load(profile: "default") }
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
        let read = try await store.withExclusiveAccess(profile: "default") { try await store.load(profile: "default") }
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
        let read = try await store.withExclusiveAccess(profile: "default") { try await store.load(profile: "default") }
        #expect(read?.refreshToken == "refresh-current")
        #expect(!FileManager.default.fileExists(atPath: older.path))
        #expect(FileManager.default.fileExists(atPath: live.path))
        try FileManager.default.removeItem(at: live)
        // Signed out: a dead writer's newer file is not brought back.
        try await store.delete(profile: "default")
        _ = try orphan(tokens("after-sign-out", receivedAt: 4000), pid: dead)
        let after = try await store.withExclusiveAccess(profile: "default") { try await store.load(profile: "default") }
        #expect(after == nil)
        #expect(try leftovers().isEmpty)
    }
}
