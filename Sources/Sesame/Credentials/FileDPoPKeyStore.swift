public import Foundation
public import SesameJOSE

/// DPoP keys in files, for Linux apps and command-line tools: one private JWK per profile (`PROFILE.dpop.jwk`), mode
/// 0600 in a folder of mode 0700, replaced atomically — so a DPoP session survives a relaunch exactly as long as its
/// tokens do.
///
/// Use the same folder as a ``FileTokenStore`` to keep a profile's key next to its credentials (`sesame` does). A
/// file that others can read, that is not a regular file of this user, or that holds no private key is
/// ``AuthError/Code/storeCorrupt`` and is left in place: never "no key", which would orphan the stored tokens, and
/// never used. A symbolic link is never followed; a FIFO in its place does not hang the reader. A key file an
/// earlier release wrote (a bare JWK) is read as it is (the next key is written in the current format); one a newer
/// release wrote is left as it is (``AuthError/Code/storeUnavailable``).
public struct FileDPoPKeyStore: DPoPKeyStore {
    /// The folder holding the key files.
    public let directory: URL

    /// Uses `directory`, creating it with mode 0700 when needed.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/storeUnavailable`` when it cannot be created;
    ///   ``AuthError/Code/configuration`` when it belongs to someone else or others can write to it.
    public init(directory: URL) throws {
        self.directory = directory
        try SecureDirectory.prepare(directory)
    }

    /// The file of `profile`'s key.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/configuration`` for an invalid profile name.
    public func keyFile(profile: String) throws -> URL {
        try ProfileName.validate(profile)
        return directory.appendingPathComponent(profile + ".dpop.jwk")
    }

    /// The profile's key; nil only when its file does not exist.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/storeCorrupt`` for a file that exists but is not a private key
    ///   only this user can read (it is kept); ``AuthError/Code/storeUnavailable`` for an I/O error.
    public func key(profile: String) async throws -> DPoPSigner? {
        let url = try keyFile(profile: profile)
        try SecureDirectory.prepare(directory)
        // A link, a FIFO, another user's or an exposed file: not a key this store wrote, and not one to use.
        guard let read = try PrivateFile.read(url.path, limit: 64 * 1024, exposure: .refuse, unsafe: .storeCorrupt)
        else { return nil }
        let corrupt = AuthError(
            .storeCorrupt, "\(url.path) holds no private DPoP key; it is kept: fix or delete it, or sign in again")
        guard let value = try? JOSEValue.parse(read.data) else { throw corrupt }
        // Format 1 (a bare JWK) and 2 read alike; a key file is never rewritten on read, since nothing locks it
        // against a sign-in replacing it: the next key is written in the current format.
        _ = try StoredFormat.keyFileFormat(value, at: url.path)
        guard let key = try? JWK(value: value), key.isPrivate, let signer = try? DPoPSigner(key: key) else {
            throw corrupt
        }
        return signer
    }

    /// A new software key for `profile`, replacing its file atomically.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/configuration`` for a symmetric algorithm,
    ///   ``AuthError/Code/storeUnavailable`` when the file cannot be written.
    public func createKey(profile: String, algorithm: JWSAlgorithm) async throws -> DPoPSigner {
        let url = try keyFile(profile: profile)
        guard !algorithm.isSymmetric else {
            throw AuthError(.configuration, "a DPoP key needs an asymmetric algorithm, not \(algorithm.name)")
        }
        let key: JWK
        let signer: DPoPSigner
        do {
            key = try JWK.generate(for: algorithm)
            signer = try DPoPSigner(key: key)
        } catch {
            throw AuthError(.configuration, "could not make a \(algorithm.name) DPoP key")
        }
        try SecureDirectory.prepare(directory)
        try PrivateFile.write(StoredFormat.keyFile(key), to: url)
        // A key a killed process was writing is never used: its file would only keep a private key on disk.
        PrivateFile.deleteUnfinishedWrites(of: url, onlyDeadWriters: true)
        return signer
    }

    /// Deletes the profile's key file (nothing when there is none), and any a killed process left half-written.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    public func deleteKey(profile: String) async throws {
        let url = try keyFile(profile: profile)
        PrivateFile.deleteUnfinishedWrites(of: url)
        try PrivateFile.delete(url)
    }
}
