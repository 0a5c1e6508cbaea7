internal import SesameJOSE

/// What happened to a session, for observers.
///
/// Events carry no secrets.
public enum AuthEvent: Sendable, Equatable {
    /// The store was read: credentials were found (`signedIn: true`) or not.
    case loaded(signedIn: Bool)
    /// The store could not be read; the session stays unavailable and reads it again on the next call.
    case storeUnavailable
    /// Credentials were stored for a new sign-in.
    case signedIn
    /// The credentials changed: this process refreshed them, or adopted those another process refreshed.
    case refreshed(generation: Int)
    /// A refresh failed for a transient reason; credentials were kept.
    case refreshFailed(AuthError.Code)
    /// Credentials could not be persisted (or deleted); the operation is retried on the next call.
    case persistenceFailed
    /// The session ended.
    case signedOut(SignOutReason)

    /// Why a session ended.
    public enum SignOutReason: Sendable, Equatable {
        /// The app or user signed out.
        case userInitiated
        /// The server definitively rejected the refresh token.
        case sessionExpired
        /// Another process sharing the store signed out (the stored credentials are gone).
        case signedOutElsewhere
        /// The credentials were bound (DPoP) to a key this app no longer has — a lost or replaced key, or DPoP
        /// turned on or off since they were issued; they were deleted, as no request could use them.
        case dpopKeyLost
    }
}

/// Hands every event to every subscriber, each through its own stream; a subscriber that goes away is dropped
/// without affecting the others.
final class EventBroadcaster: Sendable {
    private let subscribers = LockedValue<(next: Int, continuations: [Int: AsyncStream<AuthEvent>.Continuation])>(
        (0, [:]))

    /// A new subscription.
    func subscribe(bufferingNewest limit: Int) -> AsyncStream<AuthEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: AuthEvent.self, bufferingPolicy: .bufferingNewest(limit))
        let id = subscribers.withLock { state in
            state.next += 1
            state.continuations[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// How many subscriptions are open (tests wait for a subscriber before causing an event).
    var subscriberCount: Int { subscribers.withLock { $0.continuations.count } }

    /// Sends `event` to every subscriber.
    func yield(_ event: AuthEvent) {
        let continuations = subscribers.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    /// Ends every subscription.
    func finish() {
        let continuations = subscribers.withLock { state in
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
