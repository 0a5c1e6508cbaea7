import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// Catalog items that no other suite checks head-on: what every authorization request carries, where tokens go,
/// what a public client never sends, the order of revocation, and where the keys come from.
@Suite struct CatalogRuleTests {
    @Test(
        "BCP-02 BCP-12 BCP-18 NAT-03 NAT-04 RP-17: every authorization request is code + S256 for exactly the configured scopes, with its own verifier, state and nonce, whatever the app adds"
    )
    func freshCodeRequests() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider(scopes: ["openid", "email"])
        var hostile = AuthorizationOptions()
        hostile.additionalParameters = [
            "response_type": "token", "code_challenge_method": "plain", "scope": "openid admin", "state": "mine",
            "nonce": "mine", "code_challenge": "mine",
        ]
        let first = try await provider.authorizationRequest(hostile)
        let second = try await provider.authorizationRequest()
        for pending in [first, second] {
            let query = try #require(URLComponents(url: pending.url, resolvingAgainstBaseURL: false)?.queryItems)
            func values(_ name: String) -> [String?] { query.filter { $0.name == name }.map(\.value) }
            #expect(values("response_type") == ["code"])
            #expect(values("code_challenge_method") == ["S256"])
            #expect(values("code_challenge") == [pending.codeChallenge])
            #expect(values("scope") == ["openid email"])
            #expect(values("state") == [pending.state])
            #expect(values("nonce") == [pending.nonce])
        }
        #expect(first.codeVerifier != second.codeVerifier)
        #expect(first.state != second.state && first.nonce != second.nonce)
        // One request's answer never completes the other's: no code is exchanged for it.
        let redirect = try oidc.userAgent(second.url)
        await #expect(throws: AuthError.self) {
            _ = try await provider.completeAuthorization(redirect: redirect, pending: first)
        }
        #expect(try await oidc.counters()["codeExchanges"] == 0)
        let tokens = try await provider.completeAuthorization(redirect: redirect, pending: second)
        #expect(tokens.scope?.contains("admin") != true)
    }

    @Test(
        "RP-21 BCP-13: UserInfo and API calls send the access token in the Authorization header only, never in a URL or a body"
    )
    func tokenOnlyInTheHeader() async throws {
        let metadata = OIDCProviderMetadata(
            authorizationEndpoint: try #require(URL(string: "https://as.example/authorize")),
            tokenEndpoint: try #require(URL(string: "https://as.example/token")),
            userInfoEndpoint: URL(string: "https://as.example/userinfo"))
        let transport = ScriptedTransport()
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: .init(clientID: "c", redirectURI: "https://app.example/cb"),
            transport: transport)
        let secret = "at-\(UUID().uuidString)"
        transport.enqueue(.json(200, #"{"sub":"u"}"#), .json(200, #"{"ok":true}"#))
        _ = try await provider.userInfo(for: TokenSet(accessToken: secret))
        let session = AuthSession(provider: provider, store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet(accessToken: secret, expiresAt: Date().addingTimeInterval(3600)))
        let client = AuthorizedClient(
            session: session, baseURL: try #require(URL(string: "https://api.example")), transport: transport)
        _ = try await client.send(.get("/me?x=1"))
        #expect(transport.requests.count == 2)
        for request in transport.requests {
            #expect(request.headers["Authorization"] == "Bearer \(secret)")
            #expect(!request.url.absoluteString.contains(secret))
            #expect(!String(decoding: request.body ?? Data(), as: UTF8.self).contains(secret))
        }
    }

    @Test(
        "NAT-11: by default a native app is a public client: token, refresh and revocation requests carry client_id and no secret or assertion"
    )
    func publicClientByDefault() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let recorded = LockedBox<[SesameHTTP.Request]>([])
        let transport = RecordingTransport(recorded)
        let metadata = try await OIDCProviderMetadata.discover(issuer: oidc.issuer)
        let provider = OIDCAuthProvider(
            metadata: metadata,
            configuration: .init(
                clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
                scopes: ["openid", "offline_access"]),
            transport: transport, timeSource: oidc.clock)
        let tokens = try await oidc.signIn(provider)
        let refreshed = try await provider.refresh(tokens)
        try await provider.signOut(refreshed)
        let posts = recorded.value.filter { $0.method == "POST" }
        #expect(posts.count >= 4, "code exchange, refresh and two revocations")
        for request in posts {
            let form = HTTPFormEncoding.decode(String(decoding: request.body ?? Data(), as: UTF8.self))
            #expect(form["client_id"] == "sesame-cli", "\(request.url.path)")
            #expect(form["client_secret"] == nil && form["client_assertion"] == nil, "\(request.url.path)")
            #expect(request.headers["Authorization"] == nil, "\(request.url.path)")
        }
    }

    @Test(
        "REV-04: sign-out revokes the refresh token first, then the access token, and deletes the local credentials whatever the provider answers"
    )
    func revocationOrder() async throws {
        var metadata = try OIDCProviderMetadata.scripted()
        metadata.revocationEndpoint = URL(string: "https://as.example/revoke")
        let transport = ScriptedTransport()
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: .init(clientID: "c", redirectURI: "https://app.example/cb"),
            transport: transport)
        let store = InMemoryTokenStore()
        let auth = OIDCAuth(provider: provider, store: store)
        try await auth.session.signIn(with: TokenSet(accessToken: "a-1", refreshToken: "r-1"))
        transport.enqueue(.json(503, #"{"error":"temporarily_unavailable"}"#), .json(503, "{}"))
        let result = await auth.signOut()
        let bodies = transport.requests.map {
            HTTPFormEncoding.decode(String(decoding: $0.body ?? Data(), as: UTF8.self))
        }
        #expect(bodies.count == 2)
        #expect(bodies.first?["token"] == "r-1" && bodies.first?["token_type_hint"] == "refresh_token")
        #expect(bodies.last?["token"] == "a-1")
        #expect(result.credentialsRemoved)
        #expect(try await store.load(profile: "default") == nil)
    }

    @Test(
        "LOGOUT-04: an end-session page that fails or is cancelled still ends the local session (the facade keeps the DPoP key: the article's not-supported table says why)"
    )
    func endSessionCancelled() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        struct Cancelling: AuthorizationUserAgent {
            func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
                throw AuthError(.cancelled, "the user closed the page")
            }
        }
        let store = InMemoryTokenStore()
        let keys = InMemoryDPoPKeyStore()
        let auth = try await OIDCAuth.configure(
            issuer: oidc.issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback", store: store,
            dpopKeys: keys, timeSource: oidc.clock)
        try await auth.signIn(with: FormUserAgent(harness: oidc))
        #expect(try await store.load(profile: "default") != nil)
        let result = await auth.signOut(endSession: Cancelling())
        #expect(result.credentialsRemoved)
        #expect(try await store.load(profile: "default") == nil)
        // The facade keeps the installation's key (the next sign-in binds to it: see "Not supported");
        // `sesame logout` deletes it: OIDCLoginCommandTests "logout --end-session".
    }

    @Test(
        "RP-24: the client asks for claims by scope (profile, email, phone, address) and exposes what UserInfo returns; without the scopes they are not asked for"
    )
    func claimsByScope() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let scopes = ["openid", "profile", "email", "phone", "address"]
        let provider = try await oidc.provider(scopes: scopes)
        let pending = try await provider.authorizationRequest()
        let query = URLComponents(url: pending.url, resolvingAgainstBaseURL: false)?.queryItems
        #expect(query?.first { $0.name == "scope" }?.value == scopes.joined(separator: " "))
        let tokens = try await oidc.signIn(provider)
        let info = try await provider.userInfo(for: tokens)
        // The dev server's users have a name and an email (no phone or address to give).
        #expect(info["name"] != nil && info["email"] == "alice@example.com")
        let narrow = try await oidc.provider(scopes: ["openid"])
        let fewer = try await provider.userInfo(for: try await oidc.signIn(narrow))
        #expect(fewer["email"] == nil && fewer["phone_number"] == nil)
    }

    @Test("RP-27: the keys come from the discovered jwks_uri, whatever its path")
    func jwksFromDiscovery() async throws {
        let key = try JWK.generate(for: .es256, keyID: "k-1")
        let keyPath = "/keys/\(UUID().uuidString)"
        let keys = try JWKSet(keys: [key.publicKey()])
        let box = LockedBox("")
        let server = try RecordingServer { request in
            let base = box.value
            if request.path == "/.well-known/openid-configuration" {
                return .json(
                    200,
                    Data(
                        #"{"issuer":"\#(base)","authorization_endpoint":"\#(base)/authorize","token_endpoint":"\#(base)/token","jwks_uri":"\#(base)\#(keyPath)","response_types_supported":["code"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}"#
                            .utf8)
                )
            }
            if request.path == keyPath { return .json(200, Data(keys.jsonValue.jsonBytes)) }
            return .text(404, "no")
        }
        box.value =
            server.base.absoluteString.hasSuffix("/")
            ? String(server.base.absoluteString.dropLast()) : server.base.absoluteString
        let metadata = try await OIDCProviderMetadata.discover(issuer: try #require(URL(string: box.value)))
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: .init(clientID: "c", redirectURI: "http://127.0.0.1:5555/callback"))
        let fetched = try #require(try await provider.keys?.keys())
        #expect(fetched.keys.map { $0.keyID } == ["k-1"])
        let paths = server.requests.map(\.path)
        #expect(paths.contains(keyPath) && !paths.contains("/jwks"))
    }

    @Test(
        "NAT-01 NAT-14: no embedded web view: nothing in Sources imports WebKit, and the SDK's user agents are the system browser and ASWebAuthenticationSession"
    )
    func noEmbeddedWebView() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(atPath: root.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        #expect(files.count > 50)
        var agents: [String] = []
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for banned in ["import WebKit", "WKWebView", "UIWebView", "SFSafariViewController"] {
                #expect(!text.contains(banned), "\(file) uses \(banned)")
            }
            for line in text.split(separator: "\n") where line.contains("AuthorizationUserAgent") {
                let declares = ["class ", "struct ", "actor ", "extension "].contains { line.contains($0) }
                // The protocol's own extension (its default endSession) declares no agent.
                let protocolItself = line.contains("protocol ") || line.contains("extension AuthorizationUserAgent {")
                if declares, !protocolItself, !file.hasPrefix("SesameTesting/") {
                    agents.append(String(line))
                }
            }
        }
        #expect(agents.count == 2 && agents.contains { $0.contains("LoopbackUserAgent") }, "\(agents)")
        #expect(agents.contains { $0.contains("WebAuthenticationSession") }, "\(agents)")
    }
}

/// Sends through the platform transport and keeps every request.
struct RecordingTransport: HTTPTransport {
    let recorded: LockedBox<[SesameHTTP.Request]>
    init(_ recorded: LockedBox<[SesameHTTP.Request]>) { self.recorded = recorded }

    func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response {
        recorded.mutate { $0.append(request) }
        return try await SesameHTTP.platformTransport.send(request)
    }
}
