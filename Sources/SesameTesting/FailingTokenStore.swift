public import Sesame

/// A ``TokenStore`` whose operations fail while you say so, over a real store (in memory by default, or a
/// ``FileTokenStore`` whose cross-process lock it keeps): for testing that a locked device or a full disk never
/// signs anyone out.
///
/// ```swift
/// let store = FailingTokenStore()
/// await store.fail([.load])          // a locked device at launch
/// // … the session says store_unavailable and stays loading, not signed out
/// await store.heal()
/// ```
public actor FailingTokenStore: TokenStore {
    /// A store operation.
    public enum Operation: Hashable, Sendable {
        case load, save, delete
    }

    private let inner: any TokenStore
    private var failing: Set<Operation> = []
    private var code = AuthError.Code.storeUnavailable
    /// Every operation asked for, failed or not, in order.
    public private(set) var calls: [Operation] = []

    /// Fails on demand in front of `inner`.
    public init(wrapping inner: any TokenStore = InMemoryTokenStore()) { self.inner = inner }

    /// Makes `operations` throw an ``AuthError`` with `code` until ``heal()``.
    public func fail(_ operations: Set<Operation>, with code: AuthError.Code = .storeUnavailable) {
        failing = operations
        self.code = code
    }

    /// Lets every operation through again.
    public func heal() { failing = [] }

    /// What the inner store holds for `profile`, whatever is failing.
    public func peek(profile: String = "default") async -> TokenSet? { try? await inner.load(profile: profile) }

    /// Reads, unless failing.
    ///
    /// - Throws: the injected ``AuthError``, or the inner store's.
    public func load(profile: String) async throws -> TokenSet? {
        try check(.load)
        return try await inner.load(profile: profile)
    }

    /// Writes, unless failing.
    ///
    /// - Throws: the injected ``AuthError``, or the inner store's.
    public func save(_ tokens: TokenSet, profile: String) async throws {
        try check(.save)
        try await inner.save(tokens, profile: profile)
    }

    /// Deletes, unless failing.
    ///
    /// - Throws: the injected ``AuthError``, or the inner store's.
    public func delete(profile: String) async throws {
        try check(.delete)
        try await inner.delete(profile: profile)
    }

    /// The inner store's lock.
    ///
    /// - Throws: what the lock or `body` throws.
    public nonisolated func withExclusiveAccess<Result: Sendable>(
        profile: String, _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        try await inner.withExclusiveAccess(profile: profile, body)
    }

    private func check(_ operation: Operation) throws {
        calls.append(operation)
        if failing.contains(operation) { throw AuthError(code, "injected \(operation) failure") }
    }
}
