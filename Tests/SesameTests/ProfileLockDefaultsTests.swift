import Foundation
import Testing

@testable import Sesame

/// Where the profile lock lives when the app does not say: the iOS, tvOS, watchOS and visionOS default is computed
/// on every platform, so that Linux checks it (those platforms have no user home: `homeDirectoryForCurrentUser` is
/// macOS-only, and Scripts/check-apple.sh refuses it in code built for them).
@Suite struct ProfileLockDefaultsTests {
    @Test("Without a home to write in, the lock folder is Caches/SesameLocks in the app's own container")
    func containerDefault() throws {
        let caches = try #require(FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first)
        let folder = ProfileLock.containerDefaultDirectory
        // The name the Keychain store gives the app group's lock folder (SecItemKeychain.swift), so that an app
        // that moves to an app group keeps one naming.
        #expect(
            folder.standardizedFileURL.path == caches.appendingPathComponent("SesameLocks").standardizedFileURL.path)
    }

}
