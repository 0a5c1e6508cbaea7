import Foundation
import Testing

@testable import Sesame

/// Where the profile lock lives when the app does not say: the iOS, tvOS, watchOS and visionOS default is computed
/// on every platform, so that Linux checks it (those platforms have no user home: `homeDirectoryForCurrentUser` is
/// macOS-only, and Scripts/check-apple.sh refuses it in code built for them).
@Suite struct ProfileLockDefaultsTests {
    @Test("Without a home to write in, the lock folder is Caches/Sesame/locks in the app's own container")
    func containerDefault() throws {
        let caches = try #require(FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first)
        let folder = ProfileLock.containerDefaultDirectory
        #expect(folder.standardizedFileURL == caches.appendingPathComponent("Sesame/locks").standardizedFileURL)
        #expect(folder.lastPathComponent == "locks" && folder.deletingLastPathComponent().lastPathComponent == "Sesame")
    }

}
