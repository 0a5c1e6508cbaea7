public import Foundation

/// What ``AuthorizedClient`` sends: endpoints, how each is authorized, and what happens to redirects.
extension AuthorizedClient {
    /// An API call: method, path, query, headers, body, and how it is authorized.
    public struct Endpoint: Sendable, CustomStringConvertible, CustomReflectable {
        /// The method.
        public var method: String
        /// The path, relative to the client's base URL; or an absolute `http(s)` URL.
        public var path: String
        /// Query items.
        public var query: [URLQueryItem]
        /// Extra headers.
        public var headers: SesameHTTP.Headers
        /// The body.
        public var body: Data?
        /// How the request proves who is calling.
        public var authorization: Authorization
        /// The timeout.
        public var timeout: TimeInterval

        /// Creates an endpoint.
        public init(
            _ method: String = "GET",
            _ path: String,
            query: [URLQueryItem] = [],
            headers: SesameHTTP.Headers = [:],
            body: Data? = nil,
            authorization: Authorization = .session,
            timeout: TimeInterval = 30
        ) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.body = body
            self.authorization = authorization
            self.timeout = timeout
        }

        /// An endpoint with a JSON body encoded by `encoder`.
        ///
        /// - Throws: the encoder's error.
        public static func json(
            _ method: String,
            _ path: String,
            body: some Encodable,
            encoder: JSONEncoder = JSONEncoder(),
            authorization: Authorization = .session
        ) throws -> Endpoint {
            Endpoint(
                method, path, headers: ["Content-Type": "application/json"], body: try encoder.encode(body),
                authorization: authorization)
        }

        /// `GET path`.
        public static func get(_ path: String, query: [URLQueryItem] = [], authorization: Authorization = .session)
            -> Endpoint
        {
            Endpoint("GET", path, query: query, authorization: authorization)
        }

        /// `POST path` with `body` (sent as `contentType`, JSON by default).
        public static func post(
            _ path: String, body: Data? = nil, contentType: String = "application/json",
            authorization: Authorization = .session
        ) -> Endpoint {
            Endpoint(
                "POST", path, headers: body == nil ? [:] : ["Content-Type": contentType], body: body,
                authorization: authorization)
        }

        /// `DELETE path`.
        public static func delete(_ path: String, authorization: Authorization = .session) -> Endpoint {
            Endpoint("DELETE", path, authorization: authorization)
        }

        /// Method and path without its query or user info; never a header value, query value or the body.
        public var description: String {
            "Endpoint(\(method) \(Redaction.path(path)), body: \(body?.count ?? 0) bytes)"
        }

        /// A mirror without header values or the body, for `dump()`.
        public var customMirror: Mirror {
            Mirror(
                self,
                children: [
                    "method": method, "path": Redaction.path(path), "query": query.map(\.name),
                    "headers": headers.fields.map(\.name), "body": "\(body?.count ?? 0) bytes", "timeout": timeout,
                ], displayStyle: .struct)
        }
    }

    /// How an endpoint is authorized: the session's credentials in the session's scheme, a given
    /// ``Authenticator``, or none.
    public struct Authorization: Sendable {
        /// The authenticator given; nil for ``none`` and for ``session`` (whose scheme the session's provider
        /// chooses when the request is sent).
        public let authenticator: (any Authenticator)?
        /// Whether this is ``session``.
        let usesSessionScheme: Bool

        /// The authenticator this authorization uses with `session`: for ``session``, the scheme of the session's
        /// provider (``AuthProvider/credentialScheme``); nil for ``none``.
        public func authenticator(for session: AuthSession) -> (any Authenticator)? {
            usesSessionScheme ? session.provider.credentialScheme : authenticator
        }

        /// Uses `authenticator` (nil: no credentials).
        public init(_ authenticator: (any Authenticator)?) {
            self.authenticator = authenticator
            usesSessionScheme = false
        }

        private init(sessionScheme: Void) {
            authenticator = nil
            usesSessionScheme = true
        }

        /// The session's credentials in the scheme its provider uses: the default.
        ///
        /// Bearer, or DPoP when the tokens are bound to a key (``AuthProvider/credentialScheme``); refreshed and
        /// retried once on a rejection.
        public static let session = Authorization(sessionScheme: ())
        /// `Authorization: Bearer` from the session, whatever the provider's scheme; prefer ``session``.
        ///
        /// DPoP-bound tokens are refused, never sent as Bearer; refreshed and retried once on a rejection.
        public static let bearer = Authorization(BearerAuthenticator())
        /// No credentials; a 401 never starts a refresh.
        public static let none = Authorization(nil)
        /// `Authorization: Basic` with fixed credentials; never refreshes.
        public static func basic(user: String, password: String) -> Authorization {
            Authorization(BasicAuthenticator(user: user, password: password))
        }
        /// A custom async signer (see ``CustomAuthenticator``).
        public static func custom(_ sign: @escaping CustomAuthenticator.Sign) -> Authorization {
            Authorization(CustomAuthenticator(sign: sign))
        }
    }

    /// What to do with a 3xx response.
    public enum RedirectPolicy: Sendable {
        /// Follow: with credentials within the credential origins, without them anywhere else (the default).
        case follow
        /// Follow within the credential origins; a redirect anywhere else throws
        /// ``AuthError/Code/redirectRefused``.
        case refuseCrossOrigin
        /// Return 3xx responses as they are.
        case never
    }
}
