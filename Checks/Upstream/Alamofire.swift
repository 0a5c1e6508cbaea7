// Stand-in for Alamofire 5.10 (the API SesameAlamofire's interceptor was written against; unchanged in 5.12), for
// type-checking only: the declarations Integrations/SesameAlamofire/Sources touches, written from Alamofire's
// published API (its documentation and public declarations of RequestInterceptor, RedirectHandler, Session and
// Request), with their labels, Sendable requirements and optionality; no code of Alamofire's is in this file. It proves that the adapter compiles against these
// declarations — not that Alamofire calls it as documented: that needs Alamofire itself
// (SESAME_ALAMOFIRE_PATH=DIR Scripts/check-integrations.sh runs the adapter's tests against it).
// Nothing here runs: every body traps.
public import Foundation

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

@inline(never) func stub() -> Never { fatalError("Alamofire stand-in: type-checking only") }

/// The session requests run in (Alamofire: `open class Session`); only the initializer parameters Sesame passes.
open class Session: @unchecked Sendable {
    public init(
        configuration: URLSessionConfiguration = URLSessionConfiguration.af.default,
        interceptor: (any RequestInterceptor)? = nil,
        redirectHandler: (any RedirectHandler)? = nil
    ) { stub() }
}

/// A request in flight (Alamofire: `public class Request`).
public class Request: @unchecked Sendable {
    public let id: UUID
    public var request: URLRequest? { stub() }
    public var response: HTTPURLResponse? { stub() }
    public let uploadProgress: Progress
    public let downloadProgress: Progress
    init() { stub() }
}

/// What an adapter knows of the request it adapts.
public struct RequestAdapterState: Sendable {
    public let requestID: UUID
    public let session: Session
}

public protocol RequestAdapter: Sendable {
    func adapt(
        _ urlRequest: URLRequest, for session: Session,
        completion: @escaping @Sendable (_ result: Result<URLRequest, any Error>) -> Void)
    func adapt(
        _ urlRequest: URLRequest, using state: RequestAdapterState,
        completion: @escaping @Sendable (_ result: Result<URLRequest, any Error>) -> Void)
}

/// Whether and how a failed request is retried.
public enum RetryResult: Sendable {
    case retry
    case retryWithDelay(TimeInterval)
    case doNotRetry
    case doNotRetryWithError(any Error)
}

public protocol RequestRetrier: Sendable {
    func retry(
        _ request: Request, for session: Session, dueTo error: any Error,
        completion: @escaping @Sendable (RetryResult) -> Void)
}

public protocol RequestInterceptor: RequestAdapter, RequestRetrier {}

public protocol RedirectHandler: Sendable {
    func task(
        _ task: URLSessionTask, willBeRedirectedTo request: URLRequest, for response: HTTPURLResponse,
        completion: @escaping (URLRequest?) -> Void)
}

/// The `af` namespace (Alamofire: `AlamofireExtension`, reached through `AlamofireExtended.af`).
public struct AlamofireExtension<ExtendedType> {}

extension URLSessionConfiguration {
    public static var af: AlamofireExtension<URLSessionConfiguration>.Type { stub() }
}

extension AlamofireExtension where ExtendedType: URLSessionConfiguration {
    /// Alamofire's default configuration (its default headers added).
    public static var `default`: URLSessionConfiguration { stub() }
}
