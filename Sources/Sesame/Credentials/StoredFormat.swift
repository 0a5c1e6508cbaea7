import Foundation
import SesameJOSE

/// The versions of what Sesame keeps between launches, and the reading of older ones.
///
/// Every stored item says which format it is in. This release reads every format an earlier release wrote and
/// rewrites credentials in the current one in place (``migrate(profile:lock:_:)``), so an upgrade never signs anyone
/// out; other items take the current format at their next write. An item from a *newer* release — or with a format
/// member this release does not understand — is never taken for corrupt: it is left exactly as it is and reported
/// as ``AuthError/Code/storeUnavailable`` with the reason `newer_format`, so that going back to an older app loses
/// nothing either.
///
/// | Item | Format 1 (up to 0.2.0) | Format 2 (this release) |
/// | --- | --- | --- |
/// | Credentials (file, keyring, Keychain) | `TokenSet`'s members | the same and `"format": 2` |
/// | DPoP key file | a private JWK | the same and `"sesame_format": 2` (JWKs allow extra members), at creation |
/// | Keychain DPoP key item | `"version": 1` | unchanged |
/// | Account index | — (new) | `"version": 1` |
/// | CLI profile settings | no `format` | `"format": 2`, at the next save |
enum StoredFormat {
    /// The credentials' format this release writes.
    static let tokens = 2
    /// The DPoP key file's format this release writes.
    static let dpopKeyFile = 2

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
        // The strict parser: a duplicated member (a second "format" that Foundation would let win) is no format.
        let value = try JOSEValue.parse(data)
        let format = try version(value["format"], at: place, reads: tokens)
        return (try JSONDecoder().decode(TokenSet.self, from: data), format)
    }

    /// The format a version member names: 1 when absent, the number when it is a whole number this release reads.
    ///
    /// - Throws: ``newer(_:found:reads:)`` for a higher number or a member that is not a positive whole number.
    static func version(_ member: JOSEValue?, at place: String, reads: Int) throws -> Int {
        guard let member else { return 1 }
        guard case .integer(let number) = member, number >= 1 else {
            throw newer(place, found: nil, reads: reads)
        }
        guard number <= reads else { throw newer(place, found: Int(clamping: number), reads: reads) }
        return Int(number)
    }

    /// The error for an item a newer release wrote (`found`), or whose format this release cannot tell (nil).
    static func newer(_ place: String, found: Int?, reads: Int) -> AuthError {
        var error = AuthError(
            .storeUnavailable,
            "\(place) was written in \(found.map { "format \($0)" } ?? "a format this release does not know") (this "
                + "one reads up to format \(reads)); it is left as it is: update the app to use it")
        error.reason = "newer_format"
        return error
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
    /// - Throws: ``AuthError/Code/storeUnavailable`` (`newer_format`) for a newer or unknown format.
    static func keyFileFormat(_ value: JOSEValue, at place: String) throws -> Int {
        try version(value["sesame_format"], at: place, reads: dpopKeyFile)
    }

    /// Rewrites an item read in an older format, once nothing else can be writing it.
    ///
    /// `rewrite` runs under the profile's cross-process lock, taken only if it is free right now (so never inside a
    /// refresh, which holds it), and must check that the item still holds what was read. Without a lock nothing is
    /// rewritten. A migration that cannot run now is left for the
    /// next read or write (every write is in the current format); the item stays readable, and a failed migration
    /// never fails the read.
    static func migrate(
        profile: String, lock: ProfileLock?, _ rewrite: @Sendable () async throws -> Void
    ) async {
        guard let lock else { return }
        do {
            _ = try await lock.withLockIfFree(profile: profile, rewrite)
        } catch {
            SesameLog.log(
                .debug, .session, "migrating profile \(public: profile) to the current format is left for later")
        }
    }
}
