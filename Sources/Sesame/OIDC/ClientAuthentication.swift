import Foundation
public import SesameJOSE

/// How a confidential client proves itself at the provider's token, PAR, revocation and device endpoints
/// (RFC 6749 §2.3, RFC 7523, OIDC Core §9): nothing (a public client), a signed assertion (`private_key_jwt`), or a
/// secret (`client_secret_basic`, `client_secret_post`).
///
/// A client with a key should prefer `private_key_jwt`: the key never leaves the client (a Secure Enclave key
/// cannot), and each assertion is good once, for a minute. Credentials go only to the provider's own endpoints
/// from its metadata. `description` and `dump()` name the method, never a secret.
///
/// ```swift
/// let keyFile = try Data(contentsOf: URL(fileURLWithPath: "/run/secrets/nightly-report.jwk"))  // a private JWK
/// let authentication = try ClientAuthentication.privateKeyJWT(key: try JWK(json: keyFile))
/// ```
public struct ClientAuthentication: Sendable, CustomStringConvertible, CustomReflectable {
    /// What an assertion's `aud` names.
    public enum AssertionAudience: Sendable, Hashable {
        /// The provider's issuer identifier (what RFC 7523's update and FAPI 2 ask for).
        case issuer
        /// The token endpoint's URL (what OIDC Core §9 asks for; some providers accept only this).
        case tokenEndpoint
    }

    enum Method: Sendable {
        case none
        case privateKeyJWT(DPoPSigner, keyID: String?, audience: AssertionAudience)
        case secretBasic(String)
        case secretPost(String)
    }

    let method: Method

    /// A public client: `client_id` only.
    public static let none = ClientAuthentication(method: .none)

    /// Signed assertions (`private_key_jwt`, RFC 7523 §2.2) with a private JWK.
    ///
    /// - Parameters:
    ///   - key: the private key (RSA, EC or OKP); its algorithm is the key's `alg`, else the usual one for it.
    ///   - keyID: the `kid` to name in the header (by default the key's own, if it has one).
    ///   - audience: what `aud` names (the issuer by default).
    /// - Returns: the authentication.
    /// - Throws: `JOSEError` for a public or symmetric key.
    public static func privateKeyJWT(key: JWK, keyID: String? = nil, audience: AssertionAudience = .issuer) throws
        -> ClientAuthentication
    {
        ClientAuthentication(
            method: .privateKeyJWT(try DPoPSigner(key: key), keyID: keyID ?? key.keyID, audience: audience))
    }

    /// Signed assertions with a key kept elsewhere: the Secure Enclave (`SesameApple`), or any
    /// `DPoPSigningKey`.
    ///
    /// - Returns: the authentication.
    /// - Throws: `JOSEError` when the key's test signature does not verify with its public key.
    public static func privateKeyJWT(
        signingKey: any DPoPSigningKey, keyID: String? = nil, audience: AssertionAudience = .issuer
    ) throws -> ClientAuthentication {
        ClientAuthentication(
            method: .privateKeyJWT(try DPoPSigner(signingKey: signingKey), keyID: keyID, audience: audience))
    }

    /// The secret in HTTP Basic (`client_secret_basic`), for providers that offer nothing better.
    public static func clientSecretBasic(_ secret: String) -> ClientAuthentication {
        ClientAuthentication(method: .secretBasic(secret))
    }

    /// The secret as `client_secret` in the request body (`client_secret_post`).
    public static func clientSecretPost(_ secret: String) -> ClientAuthentication {
        ClientAuthentication(method: .secretPost(secret))
    }

    /// The RFC 7591 name: `none`, `private_key_jwt`, `client_secret_basic` or `client_secret_post`.
    public var methodName: String {
        switch method {
        case .none: "none"
        case .privateKeyJWT: "private_key_jwt"
        case .secretBasic: "client_secret_basic"
        case .secretPost: "client_secret_post"
        }
    }

    /// Whether the client is confidential (it authenticates).
    public var isConfidential: Bool {
        if case .none = method { return false }
        return true
    }

    /// The method; never a secret.
    public var description: String { "ClientAuthentication(\(methodName))" }

    /// A mirror with the method only.
    public var customMirror: Mirror { Mirror(self, children: ["method": methodName], displayStyle: .struct) }

    /// An assertion's lifetime: one minute (single use; the provider remembers its `jti` that long).
    static let assertionLifetime: TimeInterval = 60

    /// `pairs` and headers for a request by `clientID`, authenticated; `keepsClientID` for a pushed authorization
    /// request, whose `client_id` is one of the request's own parameters (RFC 9126 §2.1).
    func apply(
        to pairs: [(String, String)], clientID: String, issuer: String?, tokenEndpoint: URL, now: Date,
        keepsClientID: Bool = false
    ) throws -> (pairs: [(String, String)], headers: SesameHTTP.Headers) {
        switch method {
        case .none:
            return (pairs, [:])
        case .secretBasic(let secret):
            // RFC 6749 §2.3.1: both parts form-encoded, then Base64; client_id not repeated in the body.
            let credentials =
                OIDCAuthProvider.formComponent(clientID) + ":" + OIDCAuthProvider.formComponent(secret)
            return (
                keepsClientID ? pairs : pairs.filter { $0.0 != "client_id" },
                ["Authorization": "Basic " + Data(credentials.utf8).base64EncodedString()]
            )
        case .secretPost(let secret):
            return (pairs + [("client_secret", secret)], [:])
        case .privateKeyJWT(let signer, let keyID, let audience):
            let issued = Int64(now.timeIntervalSince1970.rounded(.down))
            let named: String
            switch audience {
            case .issuer:
                guard let issuer else {
                    throw AuthError(.configuration, "an assertion for the issuer needs a provider with an issuer")
                }
                named = issuer
            case .tokenEndpoint:
                // An assertion naming a token endpoint is good at that server: one on another origin than the
                // issuer could be an honest server's, named by a hostile provider's metadata to get assertions it
                // can replay there (the mix-up RFC 7523's update addresses by naming the issuer).
                guard let issuer, let issuerURL = URL(string: issuer),
                    SesameHTTP.Origin(issuerURL) == SesameHTTP.Origin(tokenEndpoint)
                else {
                    throw AuthError(
                        .configuration,
                        "an assertion for the token endpoint needs the endpoint on the issuer's origin; use .issuer")
                }
                named = tokenEndpoint.absoluteString
            }
            let claims: JOSEObject = [
                "iss": .string(clientID), "sub": .string(clientID), "aud": .string(named), "iat": .integer(issued),
                "exp": .integer(issued + Int64(Self.assertionLifetime)),
                "jti": .string(Base64URL.encode(JOSECrypto.randomBytes(18))),
            ]
            var header: JOSEObject = ["typ": "JWT"]
            if let keyID { header["kid"] = .string(keyID) }
            let assertion: String
            do {
                assertion = try signer.compactJWS(payload: JOSEValue.object(claims).jsonBytes, header: header)
            } catch let error as JOSEError {
                throw AuthError(.configuration, "the client assertion could not be signed: \(error.message)")
            }
            return (
                pairs + [
                    ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    ("client_assertion", assertion),
                ], [:]
            )
        }
    }
}
