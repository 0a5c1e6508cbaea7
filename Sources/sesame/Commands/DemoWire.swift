import Foundation
import Sesame
import SesameJOSE

/// What went over the wire during a step of `sesame demo`, one line per exchange, with every secret cut to a
/// prefix and its length; and a switch that makes the token endpoint unreachable (fault injection at the
/// transport seam, for the "network fails during a refresh" step).
final class DemoWire: HTTPTransport, @unchecked Sendable {
    private let inner: any HTTPTransport
    // `lines`, `unreachable` and `nonceDemands` are only touched under `lock`.
    private let lock = NSLock()
    private var lines: [String] = []
    private var unreachable = false
    private var nonceDemands = 0

    /// How many answers so far demanded a DPoP nonce (`use_dpop_nonce` with a `DPoP-Nonce` header, RFC 9449 §8-9).
    var dpopNonceDemands: Int { lock.withLock { nonceDemands } }

    init(_ inner: any HTTPTransport = SesameHTTP.platformTransport) { self.inner = inner }

    /// Makes `POST …/token` fail as an unreachable server until called with false.
    func cutTokenEndpoint(_ cut: Bool) { lock.withLock { unreachable = cut } }

    /// The lines recorded since the last call; repeated ones once, with their count.
    func drain() -> [String] {
        let recorded = lock.withLock {
            defer { lines = [] }
            return lines
        }
        var order: [String] = []
        var counts: [String: Int] = [:]
        for line in recorded {
            if counts[line] == nil { order.append(line) }
            counts[line, default: 0] += 1
        }
        return order.map { line in counts[line, default: 1] > 1 ? "\(counts[line, default: 1]) × \(line)" : line }
    }

    func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response {
        let summary = "\(request.method) \(request.url.path)\(Self.requestDetails(request))"
        if lock.withLock({ unreachable }), request.url.path.hasSuffix("/token") {
            lock.withLock { lines.append("→ \(summary)  ← no answer: connection refused (injected)") }
            throw AuthError(.transport, "the token endpoint is unreachable (the demo cut it)")
        }
        let response = try await inner.send(request)
        let demandsNonce =
            [400, 401].contains(response.status) && response.header("DPoP-Nonce") != nil
            && ((response.header("WWW-Authenticate") ?? "").contains("use_dpop_nonce")
                || String(decoding: response.body, as: UTF8.self).contains("use_dpop_nonce"))
        lock.withLock {
            lines.append("→ \(summary)  ← \(response.status)\(Self.responseDetails(response))")
            if demandsNonce { nonceDemands += 1 }
        }
        return response
    }

    /// A secret as the demo shows it: its first 6 characters and its length (a short one, its length only).
    static func peek(_ secret: String) -> String {
        secret.utf8.count < 16 ? "…(\(secret.utf8.count))" : "\(secret.prefix(6))…(\(secret.utf8.count))"
    }

    /// Form and query names whose values are not secret.
    static let plain: Set<String> = [
        "grant_type", "client_id", "response_type", "scope", "code_challenge_method", "token_type_hint", "action",
        "email", "token_type", "expires_in", "error", "iss", "prompt", "redirect_uri", "tokenType", "id",
        "post_logout_redirect_uri", "name", "preferred_username", "error_description", "sub", "email_verified",
    ]

    static func pairs(_ text: String) -> [(String, String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            return (parts.first ?? "", parts.count > 1 ? parts[1] : "")
        }
    }

    static func shown(_ pairs: [(String, String)]) -> String {
        pairs.map { plain.contains($0.0) ? "\($0.0)=\($0.1)" : "\($0.0)=\(peek($0.1))" }.joined(separator: " ")
    }

    static func requestDetails(_ request: SesameHTTP.Request) -> String {
        var parts: [String] = []
        if let query = request.url.query, !query.isEmpty { parts.append(shown(pairs(query))) }
        if let authorization = request.headers["Authorization"] {
            let scheme = authorization.prefix { $0 != " " }
            parts.append("Authorization: \(scheme) \(peek(String(authorization.dropFirst(scheme.count + 1))))")
        }
        if let proof = request.headers["DPoP"] { parts.append("DPoP: \(peek(proof))") }
        if let body = request.body, !body.isEmpty,
            request.headers["Content-Type"]?.hasPrefix("application/x-www-form-urlencoded") == true
        {
            parts.append(shown(pairs(String(decoding: body, as: UTF8.self))))
        } else if let body = request.body, let json = try? JOSEValue.parse(body).objectValue {
            parts.append(
                json.names.map {
                    plain.contains($0)
                        ? "\($0)=\(json[$0]?.stringValue ?? "…")" : "\($0)=\(peek(json[$0]?.stringValue ?? ""))"
                }.joined(separator: " "))
        }
        return parts.isEmpty ? "" : "  " + parts.joined(separator: " ")
    }

    /// `text` up to `limit` characters, with "…" when it was longer.
    static func cut(_ text: String, _ limit: Int) -> String {
        text.count > limit ? text.prefix(limit) + "…" : text
    }

    static func responseDetails(_ response: SesameHTTP.Response) -> String {
        var parts: [String] = []
        if let location = response.headers["Location"], let url = URL(string: location) {
            parts.append("Location: …\(url.path)" + (url.query.map { "?" + shown(pairs($0)) } ?? ""))
        }
        if let nonce = response.headers["DPoP-Nonce"] { parts.append("DPoP-Nonce: \(peek(nonce))") }
        if let challenge = response.headers["WWW-Authenticate"] {
            parts.append("WWW-Authenticate: \(cut(challenge, 60))")
        }
        if let json = try? JOSEValue.parse(response.body).objectValue, json["jwks_uri"] != nil {
            parts.append("(the provider's metadata: \(json.names.count) members)")
        } else if let json = try? JOSEValue.parse(response.body).objectValue, json["keys"] != nil {
            let count = json["keys"]?.arrayValue?.count ?? 0
            parts.append("(the JWKS: \(count) public key\(count == 1 ? "" : "s"))")
        } else if let json = try? JOSEValue.parse(response.body).objectValue {
            for name in json.names {
                guard let value = json[name] else { continue }
                if let text = value.stringValue {
                    parts.append(
                        plain.contains(name) || name == "sub" ? "\(name)=\(cut(text, 40))" : "\(name)=\(peek(text))")
                } else if case .integer(let number) = value, plain.contains(name) {
                    parts.append("\(name)=\(number)")
                }
            }
        } else if response.headers["Content-Type"]?.hasPrefix("text/html") == true {
            parts.append("(a page, \(response.body.count) bytes)")
        }
        return parts.isEmpty ? "" : "  " + parts.prefix(8).joined(separator: " ")
    }
}
