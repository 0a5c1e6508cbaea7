import Foundation

@testable import Sesame
@testable import sesame

#if canImport(Glibc)
    import Glibc
#endif

/// The stored-files target: the files a store, the account index, a DPoP key store and the CLI read back.
extension Fixtures {
    /// The folders the stored-files target writes into, made once (0700).
    static let stores: URL = {
        let url = folder.appendingPathComponent("stores")
        made {
            try FileManager.default.createDirectory(
                at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        return url
    }()
    static let tokenStore = made { try FileTokenStore(directory: stores) }
    static let keyStore = made { try FileDPoPKeyStore(directory: stores) }
    static let profile: Profile = {
        _ = folder
        let profile = made { try Profile(try ParsedArguments(["--profile", "fuzz"], for: StatusCommand.spec)) }
        made {
            try FileManager.default.createDirectory(
                at: profile.settingsURL.deletingLastPathComponent(), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        chmod(profile.home.path, 0o700)
        return profile
    }()

    /// The stored-files target's paths, spelled once (building them per input was a tenth of its time).
    static let tokenFile = stores.appendingPathComponent("fuzz.json").path
    static let indexFile = stores.appendingPathComponent("accounts.json")
    static let settingsFile = profile.settingsURL.path
    static let cleared = [stores.path, profile.settingsURL.deletingLastPathComponent().path]

    /// Writes `bytes` to a new file at `path` (0600), as a store or the user would have left it.
    static func write(_ bytes: [UInt8], to path: String) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return bytes.withUnsafeBytes { buffer in
            guard let start = buffer.baseAddress else { return true }
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, start + offset, buffer.count - offset)
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }

    static func storedFiles(_ bytes: [UInt8]) {
        let data = Data(bytes)
        _ = try? StoredFormat.decodeTokens(data, from: "fuzz")
        let fileManager = FileManager.default
        defer {
            // Everything written or moved aside, so that each input starts from the same folders.
            for folder in cleared {
                for name in (try? fileManager.contentsOfDirectory(atPath: folder)) ?? [] where name != ".lock" {
                    unlink(folder + "/" + name)
                }
            }
        }
        blocking {
            // The token store's file: parsed, or refused, and never lost: what was read is still there (an older
            // format may have been rewritten in the current one), or an unreadable file's bytes were moved aside.
            guard write(bytes, to: tokenFile) else { return }
            if let loaded = try? await tokenStore.load(profile: "fuzz") {
                let now = fileManager.contents(atPath: tokenFile)
                require(
                    now.flatMap { try? StoredFormat.decodeTokens($0, from: "fuzz").tokens } == loaded,
                    "the credentials read are no longer in the file")
            } else {
                let kept = ((try? fileManager.contentsOfDirectory(atPath: stores.path)) ?? [])
                    .filter { $0 == "fuzz.json" || $0.hasPrefix("fuzz.json.corrupt-") }
                    .compactMap { fileManager.contents(atPath: stores.appendingPathComponent($0).path) }
                require(kept.contains(data), "reading a stored file lost its bytes")
            }
            // The account index and a DPoP key file.
            _ = write(bytes, to: indexFile.path)
            _ = try? await FileAccountIndexStore(url: indexFile).load()
            if let keyFile = try? keyStore.keyFile(profile: "fuzz") {
                _ = write(bytes, to: keyFile.path)
                _ = try? await keyStore.key(profile: "fuzz")
            }
        }
        // The CLI's profile settings.
        _ = write(bytes, to: settingsFile)
        _ = try? profile.settings()
    }
}
