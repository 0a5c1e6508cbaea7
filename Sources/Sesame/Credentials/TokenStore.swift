/// Where a session's credentials persist between launches, keyed by profile.
///
/// Stores are async and `Sendable`. A store that several processes share (an app and its extension, two CLI
/// invocations) implements ``withExclusiveAccess(profile:_:)`` — usually with a ``ProfileLock`` — so that
/// ``AuthSession`` refreshes once across all of them: it holds the lock around read-refresh-persist and re-reads
/// the store inside it.
///
/// A store reports what went wrong rather than hiding it: a read that fails is an error, never "no credentials"
/// (the session stays unavailable and tries again), and a failed delete is an error too (the session keeps the
/// deletion pending).
public protocol TokenStore: Sendable {
    /// The stored credentials, or nil when there are none.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` (try later) or
    ///   ``AuthError/Code/storeCorrupt`` (the data is unreadable; it is kept aside, not deleted).
    func load(profile: String) async throws -> TokenSet?

    /// Replaces the stored credentials atomically.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    func save(_ tokens: TokenSet, profile: String) async throws

    /// Deletes the stored credentials (no error when there are none).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable``.
    func delete(profile: String) async throws

    /// Runs `body` while holding the profile's cross-process lock (the default holds none).
    func withExclusiveAccess<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result
}

extension TokenStore {
    /// No cross-process lock: for stores that only one process uses.
    public func withExclusiveAccess<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        try await body()
    }
}

/// Credentials in memory only: for tests, previews, and apps that must not persist anything.
public actor InMemoryTokenStore: TokenStore {
    private var tokens: [String: TokenSet] = [:]

    /// An empty store.
    public init() {}

    /// The stored credentials.
    public func load(profile: String) async throws -> TokenSet? { tokens[profile] }

    /// Stores the credentials.
    public func save(_ tokens: TokenSet, profile: String) async throws { self.tokens[profile] = tokens }

    /// Deletes the credentials.
    public func delete(profile: String) async throws { tokens[profile] = nil }
}
