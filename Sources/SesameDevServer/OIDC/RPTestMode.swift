/// The OpenID conformance suite's RP test modules the provider can reproduce (DESIGN §4): in a mode, the provider
/// misbehaves exactly as that module does and in no other way, so a client can be tried against it locally.
public enum RPTestMode: String, CaseIterable, Sendable {
    case invalidIssuer = "oidcc-client-test-invalid-iss"
    case invalidAudience = "oidcc-client-test-invalid-aud"
    case missingSubject = "oidcc-client-test-missing-sub"
    case missingIssuedAt = "oidcc-client-test-missing-iat"
    case invalidNonce = "oidcc-client-test-nonce-invalid"
    case invalidSignatureRS256 = "oidcc-client-test-invalid-sig-rs256"
    case invalidSignatureES256 = "oidcc-client-test-invalid-sig-es256"
    case signatureNone = "oidcc-client-test-idtoken-sig-none"
    case kidAbsentSingleJWKS = "oidcc-client-test-kid-absent-single-jwks"
    case kidAbsentMultipleJWKS = "oidcc-client-test-kid-absent-multiple-jwks"
    case userInfoInvalidSubject = "oidcc-client-test-userinfo-invalid-sub"
    case discoveryIssuerMismatch = "oidcc-client-test-discovery-issuer-mismatch"
    case signingKeyRotation = "oidcc-client-test-signing-key-rotation"
    case signingKeyRotationJustBeforeSigning = "oidcc-client-test-signing-key-rotation-just-before-signing"
    case refreshTokenInvalidSubject = "oidcc-client-test-refresh-token-invalid-sub"
    case refreshTokenInvalidIssuer = "oidcc-client-test-refresh-token-invalid-issuer"
    case invalidAtHash = "oidcc-client-test-invalid-athash"
    case missingAtHash = "oidcc-client-test-missing-athash"
    case invalidAuthorizationResponseIssuer = "fapi2-client-test-invalid-authorization-response-iss"
    case removedAuthorizationResponseIssuer = "fapi2-client-test-remove-authorization-response-iss"
    case invalidState = "fapi2-client-test-invalid-state"
    case happyPathNoDPoPNonce = "fapi2-client-test-happy-path-no-dpop-nonce"
    /// Sesame's own (RFC 9470): the ID token of a stepped-up sign-in says `acr` is a password.
    case stepUpWeakerACR = "sesame-client-test-step-up-weaker-acr"
    /// Sesame's own (RFC 9470): the ID token's `auth_time` is thirty days old.
    case stepUpOldAuthTime = "sesame-client-test-step-up-old-auth-time"
    /// Sesame's own (Native SSO): a token response with a device secret has an ID token without `ds_hash`.
    case nativeSSOMissingDeviceSecretHash = "sesame-client-test-native-sso-missing-ds-hash"
    /// Sesame's own (Native SSO): the ID token of a Native SSO exchange names another user.
    case nativeSSOOtherSubject = "sesame-client-test-native-sso-other-sub"
    /// Sesame's own (RFC 8693): a token exchange answers an `issued_token_type` of an ID token.
    case tokenExchangeWrongIssuedType = "sesame-client-test-token-exchange-wrong-issued-type"
    /// Sesame's own (RFC 6749 §4.4.3): the client credentials grant answers with a refresh token too.
    case clientCredentialsRefreshToken = "sesame-client-test-client-credentials-refresh-token"

    /// What a conforming client does: `reject` or `accept`.
    public var expectedOutcome: String {
        switch self {
        case .kidAbsentSingleJWKS, .signingKeyRotation, .signingKeyRotationJustBeforeSigning, .missingAtHash,
            .happyPathNoDPoPNonce, .clientCredentialsRefreshToken:
            "accept"
        case .kidAbsentMultipleJWKS: "reject or try every key"
        default: "reject"
        }
    }

    /// The defect, and what the client must do about it.
    public var summary: String {
        switch self {
        case .invalidIssuer: "the ID token's iss is not the issuer; reject the ID token"
        case .invalidAudience: "the ID token's aud does not name the client; reject the ID token"
        case .missingSubject: "the ID token has no sub; reject the ID token"
        case .missingIssuedAt: "the ID token has no iat; reject the ID token"
        case .invalidNonce: "the ID token's nonce is not the one sent; reject the ID token"
        case .invalidSignatureRS256: "the ID token is RS256 with a corrupted signature; reject it"
        case .invalidSignatureES256: "the ID token is ES256 with a corrupted signature; reject it"
        case .signatureNone: "the ID token is unsigned (alg none); reject it unless none was explicitly allowed"
        case .kidAbsentSingleJWKS: "the ID token has no kid and the JWKS one key; accept, verifying with that key"
        case .kidAbsentMultipleJWKS: "the ID token has no kid and the JWKS several keys; reject, or try each key"
        case .userInfoInvalidSubject: "UserInfo returns another sub than the ID token; reject the UserInfo response"
        case .discoveryIssuerMismatch: "discovery names another issuer than its URL; stop before authorizing"
        case .signingKeyRotation:
            "after the first ID token the signing key changes; refetch the JWKS on the unknown kid and accept"
        case .signingKeyRotationJustBeforeSigning:
            "the key changes right before the first ID token is signed; refetch the JWKS on the unknown kid and accept"
        case .refreshTokenInvalidSubject: "the ID token from a refresh has another sub; reject the refresh response"
        case .refreshTokenInvalidIssuer: "the ID token from a refresh has another iss; reject the refresh response"
        case .invalidAtHash: "the ID token's at_hash does not match the access token; reject"
        case .missingAtHash: "the ID token has no at_hash (optional in the code flow); accept"
        case .stepUpWeakerACR:
            "after a step-up the ID token's acr is weaker than the acr_values asked for; refuse the result"
        case .stepUpOldAuthTime: "the ID token's auth_time is 30 days old; refuse it when max_age was asked for"
        case .nativeSSOMissingDeviceSecretHash:
            "a device_secret comes with an ID token without ds_hash; refuse the sign-in, share nothing"
        case .nativeSSOOtherSubject:
            "the ID token of a Native SSO exchange names another user than the shared one; refuse it"
        case .tokenExchangeWrongIssuedType:
            "a token exchange says it issued an ID token, not the access token asked for; refuse it"
        case .clientCredentialsRefreshToken:
            "the client credentials grant sends a refresh token too; accept the token, never use the refresh token"
        case .invalidAuthorizationResponseIssuer:
            "the authorization response's iss is not the issuer (RFC 9207); reject it, exchange no code"
        case .removedAuthorizationResponseIssuer:
            "the authorization response has no iss though discovery promises it (RFC 9207); reject it"
        case .invalidState: "the authorization response's state is not the one sent; reject it, exchange no code"
        case .happyPathNoDPoPNonce: "DPoP without a server nonce; complete the flow"
        }
    }
}
