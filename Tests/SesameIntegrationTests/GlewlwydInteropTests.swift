import Foundation
import Sesame
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// DPoP against a real third-party provider that demands nonces: Glewlwyd (Debian `glewlwyd`) on SQLite, on
/// loopback, set up by `Tests/Interop/glewlwyd/start.sh` (see its NOTES.md).
@Suite struct GlewlwydInteropTests {
    static let available: Bool = {
        let found = FileManager.default.isExecutableFile(atPath: "/usr/bin/glewlwyd")
        if !found && !OIDCInteropTests.required {
            print(
                "notice: GlewlwydInteropTests: glewlwyd missing (apt-get install glewlwyd); the DPoP interop test is skipped"
            )
        }
        return found || OIDCInteropTests.required
    }()

    /// Glewlwyd running for one test.
    final class Provider {
        let process = ChildProcess()
        let folder: URL
        let issuer: URL

        /// - Parameter serviceClients: also the confidential clients of the client credentials grant
        ///   (`SERVICE_CLIENTS=1`, see NOTES.md).
        /// - Throws: ``AuthError`` when Glewlwyd does not start.
        init(serviceClients: Bool = false) throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sesame-glewlwyd-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            if serviceClients {
                process.environment = ProcessInfo.processInfo.environment.merging(["SERVICE_CLIENTS": "1"]) { $1 }
            }
            process.arguments = [
                OIDCInteropTests.root.appendingPathComponent("Tests/Interop/glewlwyd/start.sh").path,
                String(try Self.freePort()), folder.path,
            ]
            let output = Pipe()
            process.standardOutput = .pipe(output)
            let errors = Pipe()
            process.standardError = .pipe(errors)
            try process.run()
            let line = output.fileHandleForReading.readLineUnbuffered()
            guard line.hasPrefix("READY "),
                let url = URL(string: String(line.dropFirst(6)).trimmingCharacters(in: .whitespacesAndNewlines))
            else {
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                process.waitUntilExit()
                try? FileManager.default.removeItem(at: folder)
                let reason = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                throw AuthError(.transport, "Glewlwyd did not start: \(line) \(reason.suffix(2000))")
            }
            issuer = url
        }

        /// A port nobody listens on now (the provider needs it in its configuration before it starts).
        static func freePort() throws -> Int {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw AuthError(.transport, "no socket") }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else { throw AuthError(.transport, "no free port") }
            return Int(UInt16(bigEndian: address.sin_port))
        }

        func stop() {
            // SIGKILL: a child spawned from a test's worker thread may inherit a mask that blocks SIGTERM.
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: folder)
        }

        /// Signs alice in through Glewlwyd's login API (its login page is a JavaScript app) and continues the
        /// authorization to the redirect with the code.
        func authorize(_ url: URL, browser: TestBrowser) throws -> URL {
            let login = try browser.request(
                "POST", "/api/auth/", headers: [("Content-Type", "application/json")],
                body: Array(#"{"username":"alice","password":"correct-horse"}"#.utf8))
            guard login.status == 200 else { throw AuthError(.invalidResponse, "login answered \(login.status)") }
            let parts = URLComponents(url: url, resolvingAgainstBaseURL: false)
            let target = (parts?.percentEncodedPath ?? "") + "?" + (parts?.percentEncodedQuery ?? "") + "&g_continue"
            let page = try browser.get(target)
            guard let location = page.location, location.hasPrefix("http://127.0.0.1:5555/callback"),
                let redirect = URL(string: location)
            else { throw AuthError(.invalidResponse, "authorization answered \(page.status) \(page.location ?? "")") }
            return redirect
        }
    }

    @Test(
        "PKJ-01 PKJ-03 RP-25 against Glewlwyd: client credentials with private_key_jwt (aud the token endpoint) and client_secret_basic; a new assertion per request; no refresh token",
        .enabled(if: available))
    func glewlwydClientCredentials() async throws {
        let glewlwyd = try Provider(serviceClients: true)
        defer { glewlwyd.stop() }
        // The key start.sh made for sesame-service (a private JWK with its kid, mode 0600).
        let key = try JWK(json: Array(try Data(contentsOf: glewlwyd.folder.appendingPathComponent("service.jwk"))))
        let service = try await ServiceAccount.configure(
            issuer: glewlwyd.issuer, clientID: "sesame-service",
            authentication: try .privateKeyJWT(key: key, audience: .tokenEndpoint), scopes: ["reports.read"])
        let first = try await service.accessToken()
        #expect(try await service.session.currentTokens?.refreshToken == nil)
        // Another grant: a new assertion (Glewlwyd refuses a replayed jti).
        let second = try await service.accessToken(forceRefresh: true)
        #expect(first != second)
        let secret = try await ServiceAccount.configure(
            issuer: glewlwyd.issuer, clientID: "sesame-service-secret",
            authentication: .clientSecretBasic("sesame-service-secret-0123456789"), scopes: ["reports.read"])
        _ = try await secret.accessToken()
        // A wrong key is refused as the client's error, typed.
        let stranger = try await ServiceAccount.configure(
            issuer: glewlwyd.issuer, clientID: "sesame-service",
            authentication: try .privateKeyJWT(
                key: try JWK.generate(for: .es256).with(keyID: key.keyID, algorithm: nil), audience: .tokenEndpoint),
            scopes: ["reports.read"])
        do {
            _ = try await stranger.accessToken()
            Issue.record("Glewlwyd accepted an assertion by another key")
        } catch let error as AuthError {
            #expect(error.code == .authorizationFailed, "\(error)")
        }
    }

    @Test(
        "RP-50 DPOP-04 DPOP-05 DPOP-06 against Glewlwyd: nonces demanded by the token endpoint and UserInfo, rotating mid-session; DPoP refresh; a stolen refresh token is useless",
        .enabled(if: available), .timeLimit(.minutes(2)))
    func glewlwydWithNonces() async throws {
        let glewlwyd = try Provider()
        defer { glewlwyd.stop() }
        let metadata = try await OIDCProviderMetadata.discover(issuer: glewlwyd.issuer)
        #expect(metadata.dpopSigningAlgorithms.contains("ES256"), "\(metadata.dpopSigningAlgorithms)")
        let key = try JWK.generate(for: .es256)
        var configuration = OIDCAuthProvider.Configuration(
            clientID: "sesame-test", redirectURI: "http://127.0.0.1:5555/callback",
            scopes: ["openid", "offline_access", "email"])
        configuration.dpopKey = key
        let provider = OIDCAuthProvider(metadata: metadata, configuration: configuration)
        let signIn = OIDCAuth(provider: provider, store: InMemoryTokenStore())
        let browser = TestBrowser(port: glewlwyd.issuer.port ?? 0)

        // The code exchange: Glewlwyd answers the first proof with 400 use_dpop_nonce; one retry with its nonce.
        let pending = try await provider.authorizationRequest()
        let tokens = try await provider.completeAuthorization(
            redirect: try glewlwyd.authorize(pending.url, browser: browser), pending: pending)
        #expect(tokens.tokenType.lowercased() == "dpop" && tokens.dpopKeyThumbprint == key.thumbprint)
        #expect(try JWT.unverifiedClaims(of: tokens.accessToken)["cnf"]?["jkt"] == .string(key.thumbprint))
        #expect(tokens.refreshToken != nil && tokens.user?.email == "alice@example.test")
        let firstNonce = try #require(provider.dpopNonces.nonce(for: metadata.tokenEndpoint), "no nonce was demanded")
        try await signIn.session.signIn(with: tokens)

        // UserInfo through an AuthorizedClient: the nonce is kept per origin; Glewlwyd rotates it every ten uses
        // and announces the new one on a 200, so thirty calls cross two rotations.
        let userinfo = try #require(metadata.userInfoEndpoint)
        let api = signIn.client(for: glewlwyd.issuer)
        for call in 1...30 {
            let response = try await api.send(SesameHTTP.Request(method: "GET", url: userinfo))
            #expect(
                response.status == 200, "call \(call): \(response.status) \(response.header("WWW-Authenticate") ?? "")")
        }
        #expect(provider.dpopNonces.nonce(for: userinfo) != firstNonce, "the nonce rotated and was followed")
        #expect(try await signIn.userInfo()["sub"] == .string(tokens.user?.id ?? "-"))

        // A refresh carries a proof with the same key; the new tokens stay bound to it.
        let refreshed = try await signIn.session.forceRefresh()
        #expect(refreshed.tokenType.lowercased() == "dpop" && refreshed.accessToken != tokens.accessToken)
        #expect(try JWT.unverifiedClaims(of: refreshed.accessToken)["cnf"]?["jkt"] == .string(key.thumbprint))
        #expect(try await api.send(SesameHTTP.Request(method: "GET", url: userinfo)).status == 200)

        // The refresh token without the key: refused by the provider itself.
        var thiefConfiguration = configuration
        thiefConfiguration.dpopKey = try JWK.generate(for: .es256)
        let thief = OIDCAuthProvider(metadata: metadata, configuration: thiefConfiguration)
        var stolen = refreshed
        stolen.dpopKeyThumbprint = nil
        await #expect(throws: AuthError.self) { _ = try await thief.refresh(stolen) }
        #expect(try await api.send(SesameHTTP.Request(method: "GET", url: userinfo)).status == 200)
    }
}
