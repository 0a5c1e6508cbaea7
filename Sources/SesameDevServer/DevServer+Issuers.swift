import Foundation
import SesameLoopback

/// Several issuers on one server (``DevServer/Configuration/issuers``): each a `DevServer` of its own, reached
/// under `/NAME/`.
extension DevServer {
    /// The issuer named `name` of ``Configuration/issuers`` (served under `/NAME/` once this server has started).
    public func issuer(named name: String) -> DevServer? { children[name] }

    /// The child issuer a request is for, with the request as that issuer sees it (its path without `/NAME`).
    static func child(
        of request: HTTPServerRequest, in routes: [String: (DevServer, HTTPRouter)]
    ) -> (DevServer, HTTPRouter, HTTPServerRequest)? {
        let path = request.path
        var name: Substring
        var rest: Substring
        let wellKnown = "/.well-known/oauth-authorization-server/"
        if path.hasPrefix(wellKnown) {
            // RFC 8414 §3.1: the well-known segment goes before the issuer's path.
            name = path.dropFirst(wellKnown.count)
            rest = "/.well-known/oauth-authorization-server"
        } else {
            guard path.hasPrefix("/") else { return nil }
            let tail = path.dropFirst()
            name = tail.prefix { $0 != "/" }
            rest = tail.dropFirst(name.count)
            guard rest.hasPrefix("/") else { return nil }
        }
        guard let (child, router) = routes[String(name)] else { return nil }
        let target = String(rest) + (request.query.map { "?" + $0 } ?? "")
        return (
            child, router,
            HTTPServerRequest(method: request.method, target: target, headers: request.headers, body: request.body)
        )
    }

    /// The servers of ``Configuration/issuers``, each with this server's shared settings.
    static func children(of configuration: Configuration) throws -> [String: DevServer] {
        var children: [String: DevServer] = [:]
        for (name, var child) in configuration.issuers {
            guard (1...64).contains(name.utf8.count),
                name.utf8.allSatisfy({ byte in
                    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                        || byte == UInt8(ascii: "_")
                }), !reservedSegments.contains(name)
            else {
                throw DevServerError(
                    "the issuer name \(name) must be 1 to 64 of a-z 0-9 - _ and not one of the server's own paths")
            }
            guard child.issuers.isEmpty else { throw DevServerError("issuer \(name): issuers do not nest") }
            child.host = configuration.host
            child.port = configuration.port
            child.issuer = nil
            child.http = configuration.http
            child.clock = configuration.clock
            if let log = configuration.log {
                let prefix = "[\(name)] "
                child.log = { @Sendable line in log(prefix + line) }
            } else {
                child.log = nil
            }
            if child.databasePath == ":memory:", configuration.databasePath != ":memory:" {
                child.databasePath = configuration.databasePath + "." + name
            }
            children[name] = try DevServer(configuration: child, pathPrefix: "/" + name)
        }
        return children
    }

    /// First path segments of this server's own routes, which no issuer name may take.
    static let reservedSegments: Set<String> = [
        "register", "login", "refresh-token", "logout", "me", "auth", "jwks", ".well-known", "authorize", "par",
        "token", "userinfo", "revoke", "end-session", "device_authorization", "device", "connect", "_dev",
    ]
}
