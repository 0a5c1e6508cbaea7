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
    ///   - authorization: how each request is authorized (default: Bearer for every credentialed request).
    public init(
        session: AuthSession, origins: [URL], authorization: @escaping AuthorizationChoice = { _ in .bearer }
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

    /// An ``AuthorizationChoice`` that reads ``authorizationKindHeader``: `bearer` (also when absent), `basic`
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
            default: return .bearer
            }
        }
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
        guard mayReceiveCredentials(urlRequest.url), let authenticator = choice.authenticator,
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
            mayReceiveCredentials(urlRequest.url), let authenticator = choose(urlRequest).authenticator,
            let sent = SesameHTTP.Request(urlRequest), issued.claimRetry(for: request.id)
        else { return completion(.doNotRetry) }
        switch authenticator.classify(SesameHTTP.Response(http), for: sent) {
        case .done:
            completion(.doNotRetry)
        case .retry(let nonce):
            issued.setNonce(nonce, for: request.id)
            completion(.retry)
        case .refreshAndRetry:
            guard authenticator.usesSessionCredentials, let rejected = issued.accessToken(for: request.id) else {
                return completion(.doNotRetry)
            }
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

/// Drops `Authorization`, `DPoP`, `Cookie` and `Proxy-Authorization` from a redirect to an origin outside the
/// credential origins (URLSession would otherwise carry them along).
public struct SesameRedirectHandler: RedirectHandler {
    /// The origins credentials may go to.
    public let credentialOrigins: Set<SesameHTTP.Origin>

    /// Creates the handler.
    public init(credentialOrigins: Set<SesameHTTP.Origin>) { self.credentialOrigins = credentialOrigins }

    /// Follows the redirect, without credentials when it leaves the credential origins.
    public func task(
        _ task: URLSessionTask, willBeRedirectedTo request: URLRequest, for response: HTTPURLResponse,
        completion: @escaping (URLRequest?) -> Void
    ) {
        guard let target = request.url.flatMap(SesameHTTP.Origin.init), credentialOrigins.contains(target) else {
            var stripped = request
            for name in ["Authorization", "DPoP", "Cookie", "Proxy-Authorization"] {
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

    private let entries = Protected<[UUID: Entry]>([:])
    private static let limit = 4096

    func remember(_ accessToken: String, for id: UUID) {
        entries.mutate { entries in
            if entries.count >= Self.limit { entries.removeAll(keepingCapacity: true) }
            entries[id, default: Entry()].accessToken = accessToken
        }
    }

    func accessToken(for id: UUID) -> String? { entries.read { $0[id]?.accessToken } }

    func nonce(for id: UUID?) -> String? { id.flatMap { id in entries.read { $0[id]?.nonce } } }

    func setNonce(_ nonce: String, for id: UUID) { entries.mutate { $0[id, default: Entry()].nonce = nonce } }

    /// True the first time it is asked for `id`.
    func claimRetry(for id: UUID) -> Bool {
        entries.mutate { entries in
            guard entries[id]?.retried != true else { return false }
            entries[id, default: Entry()].retried = true
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
