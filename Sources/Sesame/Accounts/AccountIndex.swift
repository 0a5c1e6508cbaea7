public import Foundation
import SesameJOSE

/// One signed-in account: who (issuer, client and subject — compared byte for byte) and where its credentials are
/// kept (a profile of its own in the store).
///
/// Its `description` shows the label (an email, when there is one) and the issuer, never a token. Equality and
/// hashing are the identity's (issuer, client, subject), the label aside: a label that changes keeps the account the
/// same in a `Set` or a SwiftUI `ForEach`.
public struct Account: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The provider's issuer.
    public let issuer: String
    /// The client the account signed in to.
    public let clientID: String
    /// The user (`sub`).
    public let subject: String
    /// For display: the email or name the ID token gave at the latest sign-in, when it gave one (kept in the index
    /// in plain text: personal data, though no secret).
    public var label: String?
    /// The store profile of this account's credentials: `acct-` and 22 characters of the SHA-256 of issuer,
    /// client and subject — the same account always lands in the same profile, and two never share one.
    public var profile: String { Self.profile(issuer: issuer, clientID: clientID, subject: subject) }

    /// An account.
    public init(issuer: String, clientID: String, subject: String, label: String? = nil) {
        self.issuer = issuer
        self.clientID = clientID
        self.subject = subject
        self.label = label
    }

    /// The profile for `issuer`, `clientID` and `subject`.
    static func profile(issuer: String, clientID: String, subject: String) -> String {
        let key = Array("\(issuer)\u{0}\(clientID)\u{0}\(subject)".utf8)
        return "acct-" + Base64URL.encode(JOSECrypto.sha256(key)).prefix(22)
    }

    /// Whether two accounts are the same user of the same client at the same issuer (the label aside).
    public func isSame(as other: Account) -> Bool {
        ByteExact.equals(issuer, other.issuer) && ByteExact.equals(clientID, other.clientID)
            && ByteExact.equals(subject, other.subject)
    }

    /// The same user of the same client at the same issuer (``isSame(as:)``).
    public static func == (lhs: Account, rhs: Account) -> Bool { lhs.isSame(as: rhs) }

    /// Hashes the identity (issuer, client, subject).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(issuer)
        hasher.combine(clientID)
        hasher.combine(subject)
    }

    /// The label (or the subject) and the issuer.
    public var description: String {
        "Account(\(PrintableText.sanitized(label ?? subject, limit: 200)) at \(PrintableText.sanitized(issuer, limit: 200)))"
    }
}

/// The accounts and which one is current: what an ``AccountIndexStore`` keeps (no secret in it).
public struct AccountIndex: Sendable, Codable, Equatable {
    /// The format's version (1).
    public var version = 1
    /// The accounts, in the order they were added.
    public var accounts: [Account] = []
    /// The current account's profile, if any.
    public var current: String?

    /// An empty index.
    public init() {}

    /// Equal when the same accounts (by identity and label) are in the same order with the same current one.
    public static func == (lhs: AccountIndex, rhs: AccountIndex) -> Bool {
        lhs.version == rhs.version && lhs.current == rhs.current && lhs.accounts.count == rhs.accounts.count
            && zip(lhs.accounts, rhs.accounts).allSatisfy { $0.isSame(as: $1) && $0.label == $1.label }
    }
}

/// Where the list of accounts is kept: anything that holds a small JSON document.
///
/// ``FileAccountIndexStore`` (a 0600 file) and ``InMemoryAccountIndexStore`` come with Sesame.
public protocol AccountIndexStore: Sendable {
    /// The index, or nil when none was saved.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/storeUnavailable``, ``AuthError/Code/storeCorrupt``.
    func load() async throws -> AccountIndex?
    /// Replaces the index.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    func save(_ index: AccountIndex) async throws
}

/// The account index in memory only.
public actor InMemoryAccountIndexStore: AccountIndexStore {
    private var index: AccountIndex?

    /// An empty store.
    public init() {}

    /// The index.
    public func load() async throws -> AccountIndex? { index }

    /// Keeps the index.
    public func save(_ index: AccountIndex) async throws { self.index = index }
}

/// The account index in a 0600 file (written atomically, never through a symbolic link; its folder is created 0700
/// when missing).
///
/// An unreadable file is moved aside (`accounts.json.corrupt-TIMESTAMP`) and reported as
/// ``AuthError/Code/storeCorrupt``; one a newer release wrote (a higher `version`) is left as it is and reported as
/// ``AuthError/Code/storeUnavailable``.
public struct FileAccountIndexStore: AccountIndexStore {
    /// The file.
    public let url: URL

    /// The index in `url`.
    public init(url: URL) { self.url = url }

    /// Reads the file.
    public func load() async throws -> AccountIndex? {
        guard let (data, identity) = try PrivateFile.read(url.path, limit: 1 << 20) else { return nil }
        // The version first: a newer release's index may have another shape, and is not corrupt.
        if let value = try? JOSEValue.parse(data), let version = value["version"] {
            _ = try StoredFormat.version(version, at: "the account index \(url.path)", reads: 1)
        }
        do {
            return try JSONDecoder().decode(AccountIndex.self, from: data)
        } catch {
            guard let aside = PrivateFile.moveAside(url.path, identity: identity) else {
                throw AuthError(.storeCorrupt, "the account index \(url.path) is unreadable; it was left in place")
            }
            throw AuthError(.storeCorrupt, "the account index \(url.path) was unreadable; it was moved to \(aside)")
        }
    }

    /// Writes the file.
    public func save(_ index: AccountIndex) async throws {
        try SecureDirectory.prepare(url.deletingLastPathComponent())
        try PrivateFile.write(try JSONEncoder().encode(index), to: url)
    }
}
