public import Alamofire
public import Foundation
public import Sesame

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// An Alamofire `RequestInterceptor` backed by a Sesame ``AuthSession``: it sits exactly where a hand-written
/// `AuthInterceptor` sits (`Session(interceptor:)`, and so `MoyaProvider(session:)`).
///
/// - **Adapt:** for a request to one of `credentialOrigins`, the endpoint's ``AuthorizedClient/Authorization``
///   (Bearer by default; Basic, none or a custom async signer per request) applies the session's credentials.
///   Requests to any other origin pass through untouched.
/// - **Retry:** a response is read by the same authenticator. When it says the credentials were rejected, the
///   session refreshes — once for every concurrent request, and across processes, since the refresh is
///   `AuthSession`'s — and the request is retried once. Only a definitive refusal signs the user out; a network
///   error or a 5xx never does.
///
/// ```swift
/// let interceptor = SesameInterceptor(session: authSession, origins: [URL(string: "https://api.example.com")!])
/// let session = Session(interceptor: interceptor, redirectHandler: interceptor.redirectHandler)
/// ```
public final class SesameInterceptor: RequestInterceptor, Sendable {
    /// Chooses how a request is authorized (Moya's per-target `AccessTokenAuthorizable`).
    public typealias AuthorizationChoice = @Sendable (URLRequest) -> AuthorizedClient.Authorization

    /// The session that owns the credentials.
    public let session: AuthSession
    /// The origins credentials may go to.
    public let credentialOrigins: Set<SesameHTTP.Origin>
    private let choose: AuthorizationChoice
    private let issued = IssuedCredentials()

    /// Creates an interceptor.
    ///
    /// - Parameters:
    ///   - session: the Sesame session.
    ///   - origins: URLs whose origins receive credentials; every other origin gets none.
    ///   - authorization: how each request is authorized (default: the session's credentials in its provider's
    ///     scheme — Bearer, or DPoP when the tokens are bound — for every credentialed request).
    public init(
        session: AuthSession, origins: [URL], authorization: @escaping AuthorizationChoice = { _ in .session }
    ) {
        self.session = session
        self.credentialOrigins = Set(origins.compactMap(SesameHTTP.Origin.init))
        self.choose = authorization
    }

    /// The header through which a request names its authorization kind (`bearer`, `basic` or `none`).
    ///
    /// For stacks like Moya whose per-target choice (`AccessTokenAuthorizable`) is known only where the request is built. It
    /// is removed before the request is sent.
    public static let authorizationKindHeader = "X-Sesame-Authorization"

    /// An ``AuthorizationChoice`` that reads ``authorizationKindHeader``: `bearer` (also when absent: the session's
    /// scheme), `basic`
    /// (with `basic` credentials, else none) or `none`.
    public static func markedAuthorization(basic: (user: String, password: String)? = nil) -> AuthorizationChoice {
        let basicUser = basic?.user
        let basicPassword = basic?.password
        return { request in
            switch request.value(forHTTPHeaderField: authorizationKindHeader)?.lowercased() {
            case "none"?: return .none
            case "basic"?:
                guard let basicUser, let basicPassword else { return .none }
                return .basic(user: basicUser, password: basicPassword)
            default: return .session
            }
        }
    }

    /// An Alamofire `Session` with this interceptor *and* its redirect handler — use it (or pass both yourself):
    /// without the redirect handler URLSession would carry credentials along a redirect to another origin.
    public func makeSession(configuration: URLSessionConfiguration = URLSessionConfiguration.af.default)
        -> Alamofire.Session
    {
        Alamofire.Session(configuration: configuration, interceptor: self, redirectHandler: redirectHandler)
    }

    /// A redirect handler that drops credentials on a redirect to an origin outside ``credentialOrigins``.
    public var redirectHandler: SesameRedirectHandler { SesameRedirectHandler(credentialOrigins: credentialOrigins) }

    /// Whether `url`'s origin receives credentials.
    public func mayReceiveCredentials(_ url: URL?) -> Bool {
        url.flatMap(SesameHTTP.Origin.init).map(credentialOrigins.contains) ?? false
    }

    // MARK: RequestAdapter

    /// Applies the credentials (see the type's discussion).
    public func adapt(
        _ urlRequest: URLRequest, for session: Alamofire.Session,
        completion: @escaping @Sendable (Result<URLRequest, any Error>) -> Void
    ) {
        adapt(urlRequest, requestID: nil, completion: completion)
    }

    /// Applies the credentials, remembering which access token this request carried.
    public func adapt(
        _ urlRequest: URLRequest, using state: RequestAdapterState,
        completion: @escaping @Sendable (Result<URLRequest, any Error>) -> Void
    ) {
        adapt(urlRequest, requestID: state.requestID, completion: completion)
    }

    private func adapt(
        _ original: URLRequest, requestID: UUID?,
        completion: @escaping @Sendable (Result<URLRequest, any Error>) -> Void
    ) {
        var urlRequest = original
        let choice = choose(original)
        urlRequest.setValue(nil, forHTTPHeaderField: Self.authorizationKindHeader)
        guard mayReceiveCredentials(urlRequest.url), let authenticator = choice.authenticator(for: session),
            let request = SesameHTTP.Request(urlRequest)
        else { return completion(.success(urlRequest)) }
        let session = self.session
        let issued = self.issued
        Task {
            do {
                let tokens = authenticator.usesSessionCredentials ? try await session.validTokens() : nil
                if let requestID, let tokens { issued.remember(tokens.accessToken, for: requestID) }
                let signed = try await authenticator.authenticate(
                    request, context: AuthenticationContext(tokens: tokens, nonce: issued.nonce(for: requestID)))
                completion(.success(urlRequest.applying(signed)))
            } catch {
                completion(.failure(error))
            }
        }
    }

    // MARK: RequestRetrier

    /// Refreshes and retries once when the authenticator reads the response as a credential rejection.
    public func retry(
        _ request: Alamofire.Request, for session: Alamofire.Session, dueTo error: any Error,
        completion: @escaping @Sendable (RetryResult) -> Void
    ) {
        Self.prepareProgressForRetry(request)
        // The response's own URL decides (after a redirect it is not the request's): a foreign answer never
        // refreshes the session.
        guard let urlRequest = request.request, let http = request.response, mayReceiveCredentials(http.url),
            mayReceiveCredentials(urlRequest.url),
            let authenticator = choose(urlRequest).authenticator(for: self.session),
            let sent = SesameHTTP.Request(urlRequest)
        else { return completion(.doNotRetry) }
        // The one credential retry is claimed only for a credential verdict: a 5xx retried by another retrier
        // (RetryPolicy) does not use it up.
        switch authenticator.classify(SesameHTTP.Response(http), for: sent) {
        case .done:
            completion(.doNotRetry)
        case .retry(let nonce):
            guard issued.claimRetry(for: request.id) else { return completion(.doNotRetry) }
            issued.setNonce(nonce, for: request.id)
            completion(.retry)
        case .refreshAndRetry:
            guard authenticator.usesSessionCredentials, let rejected = issued.accessToken(for: request.id),
                issued.claimRetry(for: request.id)
            else { return completion(.doNotRetry) }
            let authSession = self.session
            Task {
                do {
                    _ = try await authSession.refreshTokens(rejectedAccessToken: rejected)
                    completion(.retry)
                } catch {
                    completion(.doNotRetryWithError(error))
                }
            }
        }
    }
}

extension SesameInterceptor {
    /// Keeps Alamofire's retry from trapping on Linux.
    ///
    /// Alamofire's retry resets a request's progress with `totalUnitCount = 0`, and swift-corelibs-foundation's
    /// `Progress` traps when a known total changes to 0 (any retry of a response with a body). Making the totals indeterminate (-1) first keeps that reset harmless. It runs on every retry
    /// decision — before Alamofire's own `RetryPolicy` further down an `Interceptor` chain retries too — and only
    /// on Linux; a failed request that nobody retries then reports an indeterminate total.
    static func prepareProgressForRetry(_ request: Alamofire.Request) {
        #if canImport(FoundationNetworking)
            request.downloadProgress.totalUnitCount = -1
            request.uploadProgress.totalUnitCount = -1
        #endif
    }
}

/// Keeps only a small allow-list of harmless headers on a redirect that leaves the credential origins (or started
/// outside them): URLSession would otherwise carry `Authorization`, cookies and a custom signer's headers along.
public struct SesameRedirectHandler: RedirectHandler {
    /// The origins credentials may go to.
    public let credentialOrigins: Set<SesameHTTP.Origin>
    private static let crossOriginHeaders: Set<String> = [
        "accept", "accept-encoding", "accept-language", "content-type", "user-agent", "cache-control",
    ]

    /// Creates the handler.
    public init(credentialOrigins: Set<SesameHTTP.Origin>) { self.credentialOrigins = credentialOrigins }

    /// Follows the redirect, without credentials when it leaves the credential origins.
    public func task(
        _ task: URLSessionTask, willBeRedirectedTo request: URLRequest, for response: HTTPURLResponse,
        completion: @escaping (URLRequest?) -> Void
    ) {
        // The redirecting response's URL, not the task's properties (corelibs holds the task's lock during this
        // callback, so reading them here deadlocks on Linux).
        let from = response.url.flatMap(SesameHTTP.Origin.init)
        guard let target = request.url.flatMap(SesameHTTP.Origin.init), credentialOrigins.contains(target),
            from.map(credentialOrigins.contains) ?? false
        else {
            // Only headers that carry no secret cross origins (a custom signer's headers may be credentials).
            // Every header the request carries except the harmless ones (a signer's headers may be credentials).
            var stripped = request
            let set =
                Array((request.allHTTPHeaderFields ?? [:]).keys)
                + ["Authorization", "DPoP", "Cookie", "Proxy-Authorization"]
            for name in Set(set.map { $0.lowercased() }) where !Self.crossOriginHeaders.contains(name) {
                stripped.setValue(nil, forHTTPHeaderField: name)
            }
            return completion(stripped)
        }
        completion(request)
    }
}

/// What the adapter handed out, per Alamofire request.
///
/// The access token (to name the rejected one), whether the
/// request was retried for credentials already (once per request), and a server nonce. Bounded.
final class IssuedCredentials: Sendable {
    private struct Entry {
        var accessToken: String?
        var retried = false
        var nonce: String?
    }

    private let entries = Protected<(map: [UUID: Entry], order: [UUID])>(([:], []))
    /// The most requests remembered: the oldest are forgotten first, one at a time (never all at once).
    private static let limit = 65_536

    func remember(_ accessToken: String, for id: UUID) {
        entries.mutate { state in
            if state.map[id] == nil {
                state.order.append(id)
                if state.order.count > Self.limit {
                    let dropped = state.order.count - Self.limit
                    for old in state.order.prefix(dropped) { state.map[old] = nil }
                    state.order.removeFirst(dropped)
                }
            }
            state.map[id, default: Entry()].accessToken = accessToken
        }
    }

    func accessToken(for id: UUID) -> String? { entries.read { $0.map[id]?.accessToken } }

    func nonce(for id: UUID?) -> String? { id.flatMap { id in entries.read { $0.map[id]?.nonce } } }

    func setNonce(_ nonce: String, for id: UUID) { entries.mutate { $0.map[id]?.nonce = nonce } }

    /// True the first time it is asked for `id` (and only for a request the adapter signed).
    func claimRetry(for id: UUID) -> Bool {
        entries.mutate { state in
            guard let entry = state.map[id], !entry.retried else { return false }
            state.map[id]?.retried = true
            return true
        }
    }
}

/// A value behind a lock.
final class Protected<Value>: @unchecked Sendable {
    // `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func read<Result>(_ body: (Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(value)
    }

    func mutate<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

extension SesameHTTP.Request {
    /// The request as Sesame's authenticators see it.
    init?(_ urlRequest: URLRequest) {
        guard let url = urlRequest.url else { return nil }
        var headers = SesameHTTP.Headers()
        for (name, value) in urlRequest.allHTTPHeaderFields ?? [:] { headers.add(name, value) }
        self.init(
            method: urlRequest.httpMethod ?? "GET", url: url, headers: headers, body: urlRequest.httpBody,
            timeout: urlRequest.timeoutInterval)
    }
}

extension SesameHTTP.Response {
    /// A response's status and headers (the body is not needed to classify it).
    init(_ response: HTTPURLResponse) {
        var headers = SesameHTTP.Headers()
        for (name, value) in response.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers.add(name, value) }
        }
        self.init(status: response.statusCode, headers: headers)
    }
}

extension URLRequest {
    /// This request with the headers (and body) an authenticator produced.
    func applying(_ signed: SesameHTTP.Request) -> URLRequest {
        var request = self
        var names = Set<String>()
        for field in signed.headers {
            let lowered = field.name.lowercased()
            if names.insert(lowered).inserted {
                request.setValue(field.value, forHTTPHeaderField: field.name)
            } else {
                request.addValue(field.value, forHTTPHeaderField: field.name)
            }
        }
        if signed.body != httpBody { request.httpBody = signed.body }
        return request
    }
}
