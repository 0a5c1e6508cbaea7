import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// DPoP on the dev server's provider (RFC 9449): binding at /token, proofs at /userinfo and /me, nonces.
@Suite struct DPoPProviderTests {
    /// Signs in, then exchanges the code with a proof by `key` (and `nonce`).
    static func dpopTokens(_ oidc: OIDCTestServer, key: JWK, nonce: String? = nil, overrides: [String: String?] = [:])
        throws -> TestBrowser.Page
    {
        let pkce = OIDCTestServer.PKCE()
        let (code, _) = try oidc.code(pkce, overrides)
        return try oidc.browser.post(
            "/token",
            form: [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OIDCTestServer.redirect),
                ("client_id", "sesame-cli"), ("code_verifier", pkce.verifier),
            ], headers: [("DPoP", try proof(oidc, key, "POST", "/token", nonce: nonce))])
    }

    static func proof(
        _ oidc: OIDCTestServer, _ key: JWK, _ method: String, _ path: String, token: String? = nil,
        nonce: String? = nil
    ) throws -> String {
        try DPoPProof.make(
            key: key, method: method, url: try #require(URL(string: oidc.issuerText + path)), accessToken: token,
            nonce: nonce,
            issuedAt: oidc.clock.now)
    }

    /// `POST /token` refreshing `token` with a proof by `key`.
    static func refresh(_ oidc: OIDCTestServer, _ token: String, proofBy key: JWK) throws -> TestBrowser.Page {
        try oidc.browser.post(
            "/token", form: [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "sesame-cli")],
            headers: [("DPoP", try proof(oidc, key, "POST", "/token"))])
    }

    /// A well-formed DPoP resource request: `Authorization: DPoP` and a fresh proof by `key` with `ath`.
    static func dpopGet(
        _ oidc: OIDCTestServer, _ path: String, token: String, key: JWK, nonce: String? = nil
    ) throws -> TestBrowser.Page {
        try oidc.browser.get(
            path,
            headers: [
                ("Authorization", "DPoP \(token)"),
                ("DPoP", try proof(oidc, key, "GET", path, token: token, nonce: nonce)),
            ])
    }

    @Test(
        "DPOP-06 DPOP-07: a proof at /token binds the tokens (token_type DPoP, cnf.jkt); the bound token needs a proof by its key"
    )
    func binding() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let response = try Self.dpopTokens(oidc, key: key)
        #expect(response.status == 200, "\(response.body)")
        let tokens = try #require(response.json)
        #expect(tokens["token_type"] == "DPoP")
        let access = tokens["access_token"].string
        #expect(try JWT.unverifiedClaims(of: access)["cnf"]?["jkt"] == .string(key.thumbprint))
        func userInfo(_ headers: [(String, String)]) throws -> TestBrowser.Page {
            try oidc.browser.get("/userinfo", headers: headers)
        }
        let good = try Self.proof(oidc, key, "GET", "/userinfo", token: access)
        #expect(try userInfo([("Authorization", "DPoP \(access)"), ("DPoP", good)]).status == 200)
        #expect(try userInfo([("Authorization", "DPoP \(access)"), ("DPoP", good)]).status == 401, "a replayed proof")
        #expect(try userInfo([("Authorization", "Bearer \(access)")]).status == 401, "a bound token as Bearer")
        #expect(try userInfo([("Authorization", "DPoP \(access)")]).status == 401, "no proof")
        let thief = try JWK.generate(for: .es256)
        let stolen = try userInfo([
            ("Authorization", "DPoP \(access)"),
            ("DPoP", try Self.proof(oidc, thief, "GET", "/userinfo", token: access)),
        ])
        #expect(stolen.status == 401 && stolen.header("WWW-Authenticate")?.hasPrefix("DPoP") == true, "a stolen token")
        let noATH = try userInfo([
            ("Authorization", "DPoP \(access)"), ("DPoP", try Self.proof(oidc, key, "GET", "/userinfo")),
        ])
        #expect(noATH.status == 401, "a proof without ath")
        let twoProofs = try userInfo([
            ("Authorization", "DPoP \(access)"), ("DPoP", try Self.proof(oidc, key, "GET", "/userinfo", token: access)),
            ("DPoP", try Self.proof(oidc, key, "GET", "/userinfo", token: access)),
        ])
        #expect(twoProofs.status == 401, "DPOP-11: one DPoP header only")
        // /me honours the binding too.
        #expect(try Self.dpopGet(oidc, "/me", token: access, key: key).status == 200)
        #expect(try oidc.browser.get("/me", headers: [("Authorization", "Bearer \(access)")]).status == 401)
    }

    @Test(
        "DPOP-06: a public client's refresh token is bound: another key or none is refused, and the token is not spent")
    func refreshBinding() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let tokens = try #require(try Self.dpopTokens(oidc, key: key).json)
        let refresh = tokens["refresh_token"].string
        func refreshWith(_ signer: JWK?) throws -> TestBrowser.Page {
            try oidc.browser.post(
                "/token",
                form: [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "sesame-cli")],
                headers: try signer.map { [("DPoP", try Self.proof(oidc, $0, "POST", "/token"))] } ?? [])
        }
        #expect(try refreshWith(nil).error == "invalid_grant")
        #expect(try refreshWith(try JWK.generate(for: .es256)).error == "invalid_grant")
        let rotated = try refreshWith(key)
        #expect(rotated.status == 200 && rotated.json?["token_type"] == "DPoP", "the failures did not spend it")
    }

    @Test("DPOP-10: dpop_jkt binds the code (also set by a proof at PAR); the wrong key or none cannot redeem it")
    func codeBinding() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let other = try JWK.generate(for: .es256)
        let wrong = try Self.dpopTokens(oidc, key: other, overrides: ["dpop_jkt": key.thumbprint])
        #expect(wrong.error == "invalid_grant")
        let right = try Self.dpopTokens(oidc, key: key, overrides: ["dpop_jkt": key.thumbprint])
        #expect(right.status == 200)
        let pkce = OIDCTestServer.PKCE()
        let pushed = try oidc.browser.post(
            "/par", form: oidc.parameters(pkce), headers: [("DPoP", try Self.proof(oidc, key, "POST", "/par"))])
        let uri = try #require(pushed.json?["request_uri"]?.stringValue)
        let redirect = try oidc.complete(try oidc.authorize([("client_id", "sesame-cli"), ("request_uri", uri)]))
        let code = try #require(redirect.redirectParameters["code"])
        let bearer = try oidc.exchange(code, pkce)
        #expect(bearer.error == "invalid_grant", "a code pushed with a proof needs one")
    }

    @Test(
        "DPOP-05: --dpop-nonce: use_dpop_nonce with a DPoP-Nonce at /token and /userinfo, accepted on retry, rotating")
    func nonces() throws {
        let oidc = try OIDCTestServer { $0.dpopNonce = true }
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let first = try Self.dpopTokens(oidc, key: key)
        #expect(first.status == 400 && first.error == "use_dpop_nonce")
        let nonce = try #require(first.header("DPoP-Nonce"))
        let second = try Self.dpopTokens(oidc, key: key, nonce: nonce)
        #expect(second.status == 200 && second.header("DPoP-Nonce") != nil)
        let access = try #require(second.json)["access_token"].string
        let missing = try Self.dpopGet(oidc, "/userinfo", token: access, key: key)
        #expect(missing.status == 401 && missing.header("WWW-Authenticate")?.contains("use_dpop_nonce") == true)
        let retried = try Self.dpopGet(oidc, "/userinfo", token: access, key: key, nonce: missing.header("DPoP-Nonce"))
        #expect(retried.status == 200)
        oidc.clock.advance(by: 601)
        let stale = try Self.dpopTokens(oidc, key: key, nonce: nonce)
        #expect(stale.error == "use_dpop_nonce" && stale.header("DPoP-Nonce") != nonce, "nonces rotate")
    }
}

@Suite struct DPoPAuditTests {
    @Test("a refresh token used with a proof once is bound from then on (RFC 9449 §5)")
    func lateBinding() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        #expect(tokens["token_type"] == "Bearer")
        let key = try JWK.generate(for: .es256)
        func refresh(_ token: String, _ signer: JWK?) throws -> TestBrowser.Page {
            try oidc.browser.post(
                "/token",
                form: [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "sesame-cli")],
                headers: try signer.map { [("DPoP", try DPoPProviderTests.proof(oidc, $0, "POST", "/token"))] } ?? [])
        }
        let bound = try refresh(tokens["refresh_token"].string, key)
        #expect(bound.json?["token_type"] == "DPoP")
        let next = try #require(bound.json)["refresh_token"].string
        #expect(try refresh(next, nil).error == "invalid_grant")
        #expect(try refresh(next, try JWK.generate(for: .es256)).error == "invalid_grant")
        #expect(try refresh(next, key).status == 200)
    }

    @Test("/me answers a DPoP nonce challenge like /userinfo does")
    func meNonce() throws {
        let oidc = try OIDCTestServer { $0.dpopNonce = true }
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let nonce = try #require(try DPoPProviderTests.dpopTokens(oidc, key: key).header("DPoP-Nonce"))
        let access = try #require(try DPoPProviderTests.dpopTokens(oidc, key: key, nonce: nonce).json)["access_token"]
            .string
        let me = try DPoPProviderTests.dpopGet(oidc, "/me", token: access, key: key)
        #expect(me.status == 401 && me.header("WWW-Authenticate")?.contains("use_dpop_nonce") == true)
        #expect(me.header("DPoP-Nonce") != nil)
    }
}

@Suite struct DPoPReplayCacheTests {
    @Test("the replay cache refuses a replay, refuses a flooding key alone, and refuses rather than forgets when full")
    func boundedPerKey() {
        var cache = DPoPReplayCache(capacity: 10, perKeyCapacity: 4)
        for index in 0..<4 { #expect(cache.insert(jti: "j\(index)", key: "flood", expiring: 100, now: 0) == nil) }
        #expect(cache.insert(jti: "j0", key: "flood", expiring: 100, now: 0) == "this DPoP proof was already used")
        #expect(cache.insert(jti: "j9", key: "flood", expiring: 100, now: 0)?.contains("this DPoP key") == true)
        #expect(cache.insert(jti: "j0", key: "victim", expiring: 100, now: 0) == nil, "another key is unaffected")
        for key in ["a", "b", "c", "d", "e"] {
            _ = cache.insert(jti: "x", key: key, expiring: 100, now: 0)
        }
        #expect(cache.insert(jti: "y", key: "f", expiring: 100, now: 0)?.contains("too many") == true)
        #expect(cache.insert(jti: "j0", key: "victim", expiring: 100, now: 0) != nil, "still a replay when full")
        // After expiry everything is forgotten, the flooding key included.
        #expect(cache.insert(jti: "j9", key: "flood", expiring: 300, now: 200) == nil)
        #expect(cache.insert(jti: "y", key: "f", expiring: 300, now: 200) == nil)
    }

    @Test(
        "a stolen Bearer refresh token used first with the thief's key: the victim's next use is reuse, the grant revoked (with and without a reuse grace)",
        arguments: [0, 30] as [Int64])
    func stolenRefreshTokenCannotTakeTheGrantOver(grace: Int64) async throws {
        let oidc = try OIDCTestServer { $0.refreshReuseGrace = grace }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()  // a Bearer grant
        let stolen = tokens["refresh_token"].string
        let thief = try JWK.generate(for: .es256)
        let taken = try DPoPProviderTests.refresh(oidc, stolen, proofBy: thief)
        #expect(taken.status == 200 && taken.json?["token_type"] == "DPoP", "the thief refreshed first")
        let victim = try oidc.refresh(stolen)  // without the thief's key (within the grace, when there is one)
        #expect(victim.error == "invalid_grant" && victim.body.contains("already used"), "\(victim.body)")
        #expect(try await oidc.running.counters()["reuseDetections"] == 1, "reuse, not 'bound to a key'")
        let thiefNext = try DPoPProviderTests.refresh(oidc, taken.json?["refresh_token"].string ?? "", proofBy: thief)
        #expect(thiefNext.error == "invalid_grant", "the thief's chain is revoked with the grant")
    }

    @Test("a grace re-issue never binds the grant to a key (a copy shown within the grace with a proof)")
    func graceNeverBinds() async throws {
        let oidc = try OIDCTestServer { $0.refreshReuseGrace = 30 }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        let first = tokens["refresh_token"].string
        let successor = try #require(try oidc.refresh(first).json)["refresh_token"].string
        let thief = try JWK.generate(for: .es256)
        let copy = try DPoPProviderTests.refresh(oidc, first, proofBy: thief)
        #expect(copy.status == 200 && copy.json?["token_type"] == "Bearer", "not bound to the thief's key")
        #expect(try oidc.refresh(successor).error == "invalid_grant", "the victim's next use is reuse")
        #expect(try oidc.refresh(copy.json?["refresh_token"].string ?? "").error == "invalid_grant", "grant revoked")
    }

    @Test("a stolen DPoP-bound access token, without the key, cannot end the victim's session at /revoke")
    func stolenBoundAccessTokenCannotEndTheGrant() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let tokens = try #require(try DPoPProviderTests.dpopTokens(oidc, key: key).json)
        let stolen = tokens["access_token"].string
        let revoked = try oidc.browser.post("/revoke", form: [("token", stolen), ("client_id", "sesame-cli")])
        #expect(revoked.status == 200)
        let renewed = try DPoPProviderTests.refresh(oidc, tokens["refresh_token"].string, proofBy: key)
        #expect(renewed.status == 200, "the victim's grant lives on: \(renewed.body)")
    }
}

/// Issue 20 #13: the DPoP replay cache is in memory, the grants (with `--db`) on disk.
@Suite struct DPoPRestartTests {
    @Test(
        "a proof used before a restart on the same database is not accepted again: asked for a nonce, which a fresh proof then carries"
    )
    func replayAcrossRestart() throws {
        // A folder of our own: the server refuses a database in a folder others can write.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("dev.sqlite").path
        let first = try OIDCTestServer { $0.databasePath = path }
        let key = try JWK.generate(for: .es256)
        first.clock.advance(by: 10)  // proofs made well after the start (none of this process's is suspect)
        let tokens = try #require(try DPoPProviderTests.dpopTokens(first, key: key).json)
        let access = tokens["access_token"].string
        let proof = try DPoPProviderTests.proof(first, key, "GET", "/userinfo", token: access)
        let headers = [("Authorization", "DPoP \(access)"), ("DPoP", proof)]
        #expect(try first.browser.get("/userinfo", headers: headers).status == 200)
        first.stop()

        // The same database and issuer, seconds later (the proof is still within its minute).
        let issuer = first.issuerText
        let second = try OIDCTestServer {
            $0.databasePath = path
            $0.issuer = URL(string: issuer)
            $0.clock = { first.clock.now }
        }
        defer { second.stop() }
        let replayed = try second.browser.get("/userinfo", headers: headers)
        #expect(replayed.status == 401 && replayed.header("WWW-Authenticate")?.contains("use_dpop_nonce") == true)
        let nonce = try #require(replayed.header("DPoP-Nonce"))
        let fresh = try DPoPProviderTests.proof(first, key, "GET", "/userinfo", token: access, nonce: nonce)
        #expect(
            try second.browser.get("/userinfo", headers: [("Authorization", "DPoP \(access)"), ("DPoP", fresh)])
                .status == 200)
    }
}
