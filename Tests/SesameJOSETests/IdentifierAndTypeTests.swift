import Foundation
import Testing

@testable import SesameJOSE

/// Identifiers compared byte for byte; nested-token and security-event confusion; control characters from a
/// token never reach an error message (the smaller findings of the client core's second pass).
@Suite struct IdentifierAndTypeTests {
    let verifier: JWTVerifier

    init() throws {
        verifier = JWTVerifier(keys: try TestKeys.publicSet(TestKeys.ec))
    }

    func token(_ changes: [String: JOSEValue]) throws -> String {
        var values = TestKeys.claims.values
        for (name, value) in changes { values[name] = value }
        return try JWT.sign(JWTClaims(values), key: TestKeys.ec, algorithm: .es256)
    }

    @Test("iss, aud and azp are compared byte for byte: NFD is not NFC, full-width is not ASCII")
    func byteExactClaims() throws {
        let nfc = "https://caf\u{E9}.example"
        let nfd = "https://cafe\u{301}.example"
        #expect(nfc == nfd)  // Swift's String equality is canonical equivalence: exactly what must not decide
        var policy = verifier
        policy.policy.issuer = nfc
        #expect(throws: Never.self) { try policy.verify(try token(["iss": .string(nfc)]), now: referenceNow) }
        expectJOSEError(.issuerMismatch) { _ = try policy.verify(try token(["iss": .string(nfd)]), now: referenceNow) }

        var audience = verifier
        audience.policy.audience = "app-\u{E9}"
        expectJOSEError(.audienceMismatch) {
            _ = try audience.verify(try token(["aud": .string("app-e\u{301}")]), now: referenceNow)
        }
        expectJOSEError(.audienceMismatch) {
            _ = try audience.verify(try token(["aud": ["app-e\u{301}"]]), now: referenceNow)
        }
        #expect(throws: Never.self) {
            try audience.verify(try token(["aud": .string("app-\u{E9}")]), now: referenceNow)
        }
        expectJOSEError(.authorizedPartyMismatch) {
            _ = try audience.verify(
                try token(["aud": .string("app-\u{E9}"), "azp": .string("app-e\u{301}")]), now: referenceNow)
        }
    }

    @Test("kid is matched byte for byte")
    func byteExactKeyID() throws {
        let key = try JWK.generate(for: .es256, keyID: "k\u{E9}y")
        let verifier = JWTVerifier(keys: try TestKeys.publicSet(key))
        let matching = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"k\#u{E9}y"}"#, payload: TestKeys.claims.jsonValue.jsonString, key: key,
            algorithm: .es256)
        #expect(throws: Never.self) { try verifier.verify(matching, now: referenceNow) }
        let decomposed = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ke\#u{301}y"}"#, payload: TestKeys.claims.jsonValue.jsonString, key: key,
            algorithm: .es256)
        expectJOSEError(.keyNotFound) { _ = try verifier.verify(decomposed, now: referenceNow) }
    }

    @Test(
        "ATK-16: cty naming a nested JWT is refused in every spelling",
        arguments: ["JWT", "jwt", "application/jwt", "Application/JWT"])
    func nestedContentTypes(contentType: String) throws {
        let nested = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ec-1","cty":"\#(contentType)"}"#,
            payload: TestKeys.claims.jsonValue.jsonString, key: TestKeys.ec, algorithm: .es256)
        expectJOSEError(.invalidHeader) { _ = try verifier.verify(nested, now: referenceNow) }
    }

    @Test("ATK-19: a token with an events claim (logout or security event token) is never an ID or access token")
    func securityEventTokens() throws {
        let logout = try token(["events": ["http://schemas.openid.net/event/backchannel-logout": [:]]])
        expectJOSEError(.invalidClaimType) { _ = try verifier.verify(logout, now: referenceNow) }
        var opted = verifier
        opted.policy.rejectsSecurityEventTokens = false
        #expect(throws: Never.self) { try opted.verify(logout, now: referenceNow) }
    }

    @Test("Control characters in a token's header never reach an error's message or description")
    func controlCharactersInMessages() throws {
        let hostile = "at+jwt\\u001b[2J\\u001b[31mFAKE\\r\\nerror: ok\\u202e"
        let token = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ec-1","typ":"\#(hostile)"}"#, payload: TestKeys.claims.jsonValue.jsonString,
            key: TestKeys.ec, algorithm: .es256)
        do {
            _ = try verifier.verify(token, now: referenceNow)
            Issue.record("expected a rejection")
        } catch let error as JOSEError {
            for text in [error.message, error.description] {
                #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0.value == 0x202E })
            }
        }
        let forged = JOSEError(.invalidHeader, "kty \u{1B}[2Jx\u{7}")
        #expect(forged.message == "kty \u{FFFD}[2Jx\u{FFFD}")
    }
}
