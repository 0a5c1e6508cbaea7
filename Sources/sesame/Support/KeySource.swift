import Foundation
import Sesame
import SesameJOSE

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Loads keys for the CLI from a file or an http(s) URL.
enum KeySource {
    static let maxDocumentSize = 512 * 1024

    /// A JWK Set (or a single JWK, treated as a one-key set) from a path or URL.
    static func load(_ source: String, allowSymmetric: Bool) async throws -> JWKSet {
        let data: Data
        if startsWithScheme(source) {
            data = try await fetch(source)
        } else {
            data = try read(source)
        }
        let document = try JOSEValue.parse(data)
        if document["keys"] != nil { return try JWKSet(json: data, allowSymmetric: allowSymmetric) }
        return try JWKSet(keys: [try JWK(value: document, allowSymmetric: allowSymmetric)])
    }

    /// A private JWK from a file.
    static func privateKey(at path: String) throws -> JWK {
        let key = try JWK(json: try read(path), allowSymmetric: true)
        guard key.isPrivate else {
            throw CLIError(
                status: .failure, code: "invalid_key",
                message: "\(path) holds a public key; signing needs a private one")
        }
        return key
    }

    private static func read(_ path: String) throws -> Data {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CLIError(status: .failure, code: "io", message: "cannot read \(path)")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maxDocumentSize + 1)) ?? Data()
        guard data.count <= maxDocumentSize else {
            throw CLIError(
                status: .failure, code: "too_large", message: "\(path) is larger than \(maxDocumentSize) bytes")
        }
        return data
    }

    private static func fetch(_ source: String) async throws -> Data {
        guard let url = URL(string: source), url.host?.isEmpty == false else {
            throw CLIError.usage("not a URL: \(printable(source))")
        }
        // Keys fetched over plain http could be swapped by anyone on the path: https, or http to loopback only
        // (the same rule as `login --issuer`).
        guard ["http", "https"].contains(url.scheme?.lowercased()) else {
            throw CLIError.usage("--jwks takes a file, or an https URL (got '\(printable(source))')")
        }
        guard url.scheme?.lowercased() == "https" || OIDCProviderMetadata.isLoopback(url) else {
            throw CLIError.usage(
                "--jwks over plain http is allowed only on loopback (127.0.0.1, [::1], localhost); use https or a file")
        }
        // The size limit is enforced while the body arrives (after decompression), not after it is all in memory.
        let transport: any HTTPTransport
        #if canImport(FoundationNetworking)
            transport = CurlTransport(maximumResponseSize: maxDocumentSize)
        #else
            transport = URLSessionTransport()
        #endif
        let response: SesameHTTP.Response
        do {
            response = try await transport.send(
                SesameHTTP.Request(method: "GET", url: url, headers: ["Accept": "application/json"], timeout: 10))
        } catch let error as AuthError where error.message.contains("larger than") {
            throw CLIError(
                status: .failure, code: "too_large", message: "the JWKS is larger than \(maxDocumentSize) bytes")
        } catch {
            throw CLIError(
                status: .transient, code: "network",
                message: "could not fetch the JWKS from \(url.host ?? "the server")")
        }
        guard response.status == 200 else {
            throw CLIError(
                status: response.status >= 500 ? .transient : .failure, code: "http_status",
                message: "the JWKS URL answered \(response.status)")
        }
        guard response.body.count <= maxDocumentSize else {
            throw CLIError(
                status: .failure, code: "too_large", message: "the JWKS is larger than \(maxDocumentSize) bytes")
        }
        return response.body
    }
}
