import Foundation
import SesameJOSE

@testable import Sesame

#if canImport(Glibc)
    import Glibc
#endif

/// What the targets share, made once (the targets are in the Fixtures+*.swift files).
enum Fixtures {
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let issuer = "https://op.example"
    static let signingKey = made { try JWK.generate(for: .es256, keyID: "fuzz") }
    static let keySet = made { try JWKSet(keys: [try signingKey.publicKey()]) }
    static let jwks = Data(keySet.jsonValue.jsonBytes)
    static let verifier = JWTVerifier(keys: keySet)
    static let metadataJSON = """
        {"issuer":"https://op.example","authorization_endpoint":"https://op.example/authorize",
        "token_endpoint":"https://op.example/token","jwks_uri":"https://op.example/jwks",
        "userinfo_endpoint":"https://op.example/userinfo","revocation_endpoint":"https://op.example/revoke",
        "device_authorization_endpoint":"https://op.example/device",
        "pushed_authorization_request_endpoint":"https://op.example/par",
        "response_types_supported":["code"],"subject_types_supported":["public"],
        "id_token_signing_alg_values_supported":["ES256"],"code_challenge_methods_supported":["S256"]}
        """
    static let metadata = made { try OIDCProviderMetadata(json: try JOSEValue.parse(Data(metadataJSON.utf8))) }
    /// An ID token the provider could have issued, for a refresh to compare the new one against.
    static let idToken = made {
        try JWT.sign(
            JWTClaims([
                "iss": .string(issuer), "sub": .string("user-1"), "aud": .string("fuzz-client"),
                "iat": .integer(1_750_000_000), "exp": .integer(1_750_003_600), "nonce": .string("n"),
            ]), key: signingKey, algorithm: .es256)
    }
    static let folder: URL = {
        let base = ProcessInfo.processInfo.environment["SESAME_FUZZ_SCRATCH"] ?? NSTemporaryDirectory()
        // A new folder of an unguessable name, made by this process (mkdir fails on anything already there, a link
        // included): what the harness writes and deletes is only ever in it.
        let url = URL(fileURLWithPath: base).appendingPathComponent("sesame-fuzz-\(UUID().uuidString)")
        guard mkdir(url.path, 0o700) == 0 else {
            FileHandle.standardError.write(Data("fuzz harness: cannot make \(url.path)\n".utf8))
            exit(2)
        }
        setenv("SESAME_HOME", url.appendingPathComponent("home").path, 1)
        atexit { try? FileManager.default.removeItem(at: Fixtures.folder) }
        return url
    }()

    /// The client's DPoP key, for inputs that turn DPoP on.
    static let dpopKey = made { try JWK.generate(for: .es256, keyID: "fuzz-dpop") }

    static func provider(_ answer: FuzzResponse, pushed: Bool = false, dpop: Bool = false) -> OIDCAuthProvider {
        provider(FuzzTransport(answer: answer), pushed: pushed, dpop: dpop)
    }

    static func provider(_ transport: FuzzTransport, pushed: Bool = false, dpop: Bool = false) -> OIDCAuthProvider {
        var configuration = OIDCAuthProvider.Configuration(
            clientID: "fuzz-client", redirectURI: "http://127.0.0.1:8765/callback")
        // The fixtures' provider advertises PAR: without `.whenRequired`, every authorization request would be pushed
        // and take the fuzz response as PAR's answer (so the redirect target never reached a code exchange).
        configuration.pushedRequests = pushed ? .always : .whenRequired
        if dpop { configuration.dpopKey = dpopKey }
        return OIDCAuthProvider(
            metadata: metadata, configuration: configuration, transport: transport, timeSource: FixedTime(),
            sleep: { _ in })
    }

    /// An authorization request of the fixtures' client, made once, and one with DPoP on.
    ///
    /// Made outside any task (it blocks on one). Each input's provider is new, so the state is unused there; a
    /// request per input gave no parser coverage and cost a sixth of the token-response and redirect targets' time.
    static let pending = authorizationRequest(dpop: false)
    static let dpopPending = authorizationRequest(dpop: true)
    /// A step-up request: max_age 600 s and acr_values mfa (OIDC Core §3.1.2.1, RFC 9470).
    static let stepUpPending = authorizationRequest(dpop: false, AuthorizationOptions(maxAge: 600, acrValues: ["mfa"]))

    static func authorizationRequest(dpop: Bool, _ options: AuthorizationOptions = AuthorizationOptions())
        -> PendingAuthorization
    {
        nonisolated(unsafe) var made: Result<PendingAuthorization, any Error>?
        blocking {
            do {
                made = .success(try await provider(FuzzResponse([0]), dpop: dpop).authorizationRequest(options))
            } catch {
                made = .failure(error)
            }
        }
        switch made {
        case .success(let pending): return pending
        case .failure(let error):
            FileHandle.standardError.write(Data("fuzz harness: no authorization request: \(error)\n".utf8))
            exit(2)
        case nil:
            FileHandle.standardError.write(Data("fuzz harness: the authorization request did not finish\n".utf8))
            exit(2)
        }
    }

    /// The redirect of `pending` with a code.
    static func codeRedirect(_ pending: PendingAuthorization) -> URL {
        url("http://127.0.0.1:8765/callback?code=c&state=\(pending.state)&iss=\(issuer)")
    }
}

/// https, or http with a loopback host: 127.0.0.0/8 as a dotted quad, localhost or ::1, in any letter case.
func isWebOrLoopback(_ url: URL) -> Bool {
    let scheme = url.scheme?.lowercased()
    if scheme == "https" { return true }
    guard scheme == "http", let host = url.host?.lowercased() else { return false }
    if host == "localhost" || host == "::1" || host == "[::1]" { return true }
    let parts = host.split(separator: ".", omittingEmptySubsequences: false)
    return parts.count == 4 && parts[0] == "127"
        && parts.allSatisfy { part in
            (1...3).contains(part.utf8.count) && part.utf8.allSatisfy { (0x30...0x39).contains($0) }
                && (Int(part) ?? 256) <= 255
        }
}

/// `bytes` with each `%XX` decoded (and `+` as a space when asked), byte for byte, or nil for a bad escape.
///
/// The harness's own reading, apart from Foundation's (which drops a leading U+FEFF) and the product's.
func percentDecoded(_ bytes: ArraySlice<UInt8>, plusIsSpace: Bool = false) -> [UInt8]? {
    func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x37
        case 0x61...0x66: byte - 0x57
        default: nil
        }
    }
    var decoded: [UInt8] = []
    var index = bytes.startIndex
    while index < bytes.endIndex {
        let byte = bytes[index]
        if byte == UInt8(ascii: "%") {
            guard index + 2 < bytes.endIndex, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2])
            else { return nil }
            decoded.append(high << 4 | low)
            index += 3
        } else {
            decoded.append(plusIsSpace && byte == UInt8(ascii: "+") ? 0x20 : byte)
            index += 1
        }
    }
    return decoded
}

/// A fixture that must be made: the harness cannot run without it.
func made<T>(_ body: () throws -> T) -> T {
    do {
        return try body()
    } catch {
        FileHandle.standardError.write(Data("fuzz harness: a fixture failed: \(error)\n".utf8))
        exit(2)
    }
}

/// A URL the harness spells itself.
func url(_ text: String) -> URL {
    guard let url = URL(string: text) else {
        FileHandle.standardError.write(Data("fuzz harness: not a URL: \(text)\n".utf8))
        exit(2)
    }
    return url
}

/// The fixtures' clock: always ``Fixtures/now``.
struct FixedTime: TimeSource {
    var now: Date { Fixtures.now }
}
