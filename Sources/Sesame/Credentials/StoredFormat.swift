import Foundation
import SesameJOSE

/// The versions of what Sesame keeps between launches, and the reading of older ones.
///
/// Every stored item says which format it is in. This release reads every format an earlier release wrote and
/// rewrites it in the current one in place (``migrate(_:)``), so an upgrade never signs anyone out; an item from
/// a *newer* release is never taken for corrupt — it is left exactly as it is and reported as
/// ``AuthError/Code/storeUnavailable``, so that going back to an older app loses nothing either.
///
/// | Item | Format 1 (up to 0.2.0) | Format 2 (this release) |
/// | --- | --- | --- |
/// | Credentials (file, keyring, Keychain) | `TokenSet`'s members | the same and `"format": 2` |
/// | DPoP key file | a private JWK | the same and `"sesame_format": 2` (JWKs allow extra members) |
/// | Keychain DPoP key item | `"version": 1` | unchanged |
/// | Account index | `"version": 1` | unchanged |
/// | CLI profile settings | no `format` | `"format": 2` |
enum StoredFormat {
    /// The credentials' format this release writes.
    static let tokens = 2
    /// The DPoP key file's format this release writes.
    static let dpopKeyFile = 2

    private struct Marker: Decodable {
        let format: Int?
    }

    private struct Versioned: Encodable {
        let tokens: TokenSet
        enum Key: String, CodingKey { case format }

        func encode(to encoder: any Encoder) throws {
            try tokens.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(StoredFormat.tokens, forKey: .format)
        }
    }

    /// The credentials in the current format.
    ///
    /// - Throws: an encoding error (not expected for a `TokenSet`).
    static func encode(_ tokens: TokenSet) throws -> Data {
        try JSONEncoder().encode(Versioned(tokens: tokens))
    }

    /// Stored credentials of any format this release reads, and that format.
    ///
    /// - Parameters:
    ///   - data: the stored bytes.
    ///   - place: what holds them, for the error message.
    /// - Returns: the credentials and the format they were in.
    /// - Throws: ``AuthError/Code/storeUnavailable`` for a format newer than this release's (left as it is);
    ///   `DecodingError` for data that is no format at all.
    static func decodeTokens(_ data: Data, from place: String) throws -> (tokens: TokenSet, format: Int) {
        let format = try JSONDecoder().decode(Marker.self, from: data).format ?? 1
        guard format >= 1 else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "format")) }
        guard format <= tokens else { throw newer(place, found: format, reads: tokens) }
        return (try JSONDecoder().decode(TokenSet.self, from: data), format)
    }

    /// The error for an item a newer release wrote.
    static func newer(_ place: String, found: Int, reads: Int) -> AuthError {
        AuthError(
            .storeUnavailable,
            "\(place) was written by a newer release of Sesame (format \(found); this one reads up to \(reads)); "
                + "it is left as it is: update the app to use it")
    }

    /// A DPoP key file's bytes in the current format.
    static func keyFile(_ key: JWK) -> Data {
        guard case .object(var members) = key.jsonValue(includingPrivate: true) else {
            return Data(key.jsonValue(includingPrivate: true).jsonBytes)
        }
        members["sesame_format"] = .integer(Int64(dpopKeyFile))
        return Data(JOSEValue.object(members).jsonBytes)
    }

    /// The format of a parsed DPoP key file.
    ///
    /// - Throws: ``AuthError/Code/storeUnavailable`` for a newer format; ``AuthError/Code/storeCorrupt`` for a
    ///   format member that is not a positive whole number.
    static func keyFileFormat(_ value: JOSEValue, at place: String) throws -> Int {
        guard let member = value["sesame_format"] else { return 1 }
        guard case .integer(let number) = member, number >= 1, number < 1_000_000 else {
            throw AuthError(.storeCorrupt, "\(place) has a malformed sesame_format; it is kept")
        }
        guard number <= dpopKeyFile else { throw newer(place, found: Int(number), reads: dpopKeyFile) }
        return Int(number)
    }

    /// Rewrites an item read in an older format, once nothing else can be writing it.
    ///
    /// `rewrite` runs under the profile's cross-process lock (taken only if free right now, or already held by this task) and must check
    /// that the item still holds what was read. A migration that cannot run now is simply left for the next read
    /// or write — the item stays readable as it is — and its failure never fails the read.
    static func migrate(
        profile: String, lock: ProfileLock?, _ rewrite: @Sendable () async throws -> Void
    ) async {
        do {
            if let lock {
                _ = try await lock.withLockIfFree(profile: profile, rewrite)
            } else {
                try await rewrite()
            }
        } catch {
            SesameLog.log(
                .debug, .session, "migrating profile \(public: profile) to the current format is left for later")
        }
    }
}
