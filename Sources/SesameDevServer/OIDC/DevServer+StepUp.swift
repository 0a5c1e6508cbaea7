import Foundation
import SesameJOSE
import SesameLoopback

/// Step-up authentication (RFC 9470): a development second step on the sign-in page, `acr`/`amr` in the tokens, and
/// a protected test route that answers `insufficient_user_authentication` until the token is strong and recent
/// enough.
///
/// The second step is a development stand-in for multi-factor authentication: a six-digit one-time code the server
/// writes to its log (``DevServer/Configuration/log``; `sesame serve` prints it on stderr). It proves nothing about
/// the user; it lets an app's step-up path be exercised end to end.
extension DevServer {
    /// The authentication context class of a sign-in with the second step.
    public static let mfaACR = "urn:sesame:acr:mfa"
    /// The classes this provider can meet, weakest first.
    static let supportedACRs = [passwordACR, mfaACR]
    /// How long a second-step code is good for, and how many wrong tries it survives.
    static let secondStepTTL: Int64 = 300
    static let secondStepAttempts = 5

    /// A second step in progress: who signed in with a password, when, and the hash of the code sent to the log.
    struct SecondStep: Sendable {
        let user: DevStore.User
        let authTime: Int64
        let codeHash: [UInt8]
        let expiry: Int64
        let request: String
        var attempts = 0
        /// Creation order (a monotonic clock: several steps may start in the same server second).
        let created = DispatchTime.now().uptimeNanoseconds
    }

    /// An `acr` value that can go into a challenge's quoted string as it is: 1 to 256 of RFC 6749's NQCHAR
    /// without a space (visible ASCII but `"` and `\`).
    static func isACRName(_ name: String) -> Bool { PrintableText.isQuotableWord(name) }

    /// The class a request asks for: the first value of its `acr` request (from `acr_values` or `claims`) this
    /// provider supports, else a password.
    func wantedACR(_ authorization: AuthorizationRequest) -> String {
        let entry = authorization.claimsRequest.idToken["acr"]
        let asked = (entry?.values ?? entry?.value.map { [$0] } ?? []).compactMap(\.stringValue)
        return asked.first { name in Self.supportedACRs.contains { ByteExact.equals($0, name) } } ?? Self.passwordACR
    }

    /// `amr` (RFC 8176) for an `acr` of this provider.
    static func amr(for acr: String) -> JOSEValue { ByteExact.equals(acr, mfaACR) ? ["pwd", "otp"] : ["pwd"] }

    // MARK: The second step

    /// After the password: a page asking for the code just written to the server's log.
    func secondStepPage(
        _ request: HTTPServerRequest, _ authorization: AuthorizationRequest, user: DevStore.User, authTime: Int64,
        error: String? = nil, ticket existing: String? = nil
    ) -> HTTPServerResponse {
        var ticket = existing ?? ""
        if existing == nil {
            ticket = DevStore.newSecret()
            let digits = JOSECrypto.randomBytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 1_000_000
            let code = String(format: "%06u", digits)
            let step = SecondStep(
                user: user, authTime: authTime, codeHash: JOSECrypto.sha256(Array(code.utf8)),
                expiry: now + Self.secondStepTTL, request: authorization.encoded)
            let time = now
            let kept = secondSteps.withLock { steps -> Bool in
                if steps.count >= 1000 { steps = steps.filter { $0.value.expiry > time } }
                // At most 3 open second steps per account (the oldest goes): one account cannot fill the table,
                // and restarting the step cannot multiply the tries (those are counted per account too).
                let mine = steps.filter { ByteExact.equals($0.value.user.id, user.id) }.sorted {
                    $0.value.created < $1.value.created
                }
                for old in mine.dropLast(2) { steps[old.key] = nil }
                guard steps.count < 1000 else { return false }
                steps[ticket] = step
                return true
            }
            guard kept else { return Self.error(503, "temporarily_unavailable", "too many sign-ins in progress") }
            // Development only: the "second factor" is this log line.
            configuration.log?(
                "second step for \(user.email ?? user.id): one-time code \(code) (a development stand-in for MFA)")
        }
        let csrf = csrfCookie(for: request)
        let token = csrfToken(cookie: csrf.value, purpose: "second-step\n\(ticket)\n" + authorization.encoded)
        var response = SignInPage.response(
            error == nil ? 200 : 400,
            SignInPage.secondStep(
                clientID: authorization.clientID, signedInAs: user.email ?? user.id, error: error,
                hidden: authorization.hiddenPairs + [("csrf", token), ("ticket", ticket), ("second_step", "1")]))
        for set in csrf.setCookie { response.headers.add("Set-Cookie", set) }
        return response
    }

    /// The second step's `POST`: the same browser and request, the code within its lifetime and tries.
    func secondStepSubmission(
        _ request: HTTPServerRequest, _ authorization: AuthorizationRequest, _ parameters: OAuthParameters
    ) -> HTTPServerResponse {
        let ticket = parameters.values["ticket"] ?? ""
        guard
            checkCSRF(
                request, token: parameters.values["csrf"], purpose: "second-step\n\(ticket)\n" + authorization.encoded)
        else {
            return SignInPage.expiredForm()
        }
        if parameters.values["action"] == "cancel" {
            secondSteps.withLock { $0[ticket] = nil }
            return redirect(authorization, error: OAuthFailure("access_denied", "the user cancelled the sign-in"))
        }
        let code = Array((parameters.values["otp"] ?? "").filter { !$0.isWhitespace }.utf8)
        let time = now
        if let owner = secondSteps.withLock({ $0[ticket]?.user.id }),
            state.withLock({ $0.secondStepFailures.isOver(owner, now: time) })
        {
            return redirect(
                authorization,
                error: OAuthFailure(
                    "access_denied", "too many wrong one-time codes for this account; wait a few minutes"))
        }
        enum Outcome {
            case passed(SecondStep)
            case wrong(SecondStep)
            case gone
        }
        let outcome = secondSteps.withLock { steps -> Outcome in
            guard var step = steps[ticket], step.expiry > time, ByteExact.equals(step.request, authorization.encoded)
            else {
                steps[ticket] = nil
                return .gone
            }
            if ConstantTime.equals(JOSECrypto.sha256(code), step.codeHash) {
                steps[ticket] = nil
                return .passed(step)
            }
            step.attempts += 1
            let owner = step.user.id
            self.state.withLock { $0.secondStepFailures.record(owner, now: time) }
            steps[ticket] = step.attempts >= Self.secondStepAttempts ? nil : step
            return step.attempts >= Self.secondStepAttempts ? .gone : .wrong(step)
        }
        switch outcome {
        case .gone:
            return redirect(
                authorization,
                error: OAuthFailure("access_denied", "the second step expired or failed too often; sign in again"))
        case .wrong(let step):
            return secondStepPage(
                request, authorization, user: step.user, authTime: step.authTime,
                error: "That code is not the one in the server's log. Try again.", ticket: ticket)
        case .passed(let step):
            return issueCode(
                authorization, user: step.user, authTime: step.authTime, claims: nil, status: 303, acr: Self.mfaACR)
        }
    }

    // MARK: The protected test route (RFC 9470 §3)

    /// What `/protected` requires, set by ``Configuration/protectedRoute`` or `POST /_dev/protected`.
    public struct ProtectedRoute: Sendable, Equatable {
        /// The classes that satisfy it (any of them); empty accepts any.
        public var acrValues: [String]
        /// How recent the sign-in must be, in seconds; nil accepts any age.
        public var maxAge: Int64?

        /// A requirement.
        public init(acrValues: [String] = [DevServer.mfaACR], maxAge: Int64? = nil) {
            self.acrValues = acrValues
            self.maxAge = maxAge
        }
    }

    /// `GET|POST /protected`: `{"sub","acr","auth_time"}` for an access token that meets the requirement, else 401
    /// with `error="insufficient_user_authentication"` and the `acr_values` / `max_age` it needs (in the token's
    /// scheme: `Bearer` or `DPoP`).
    func protectedResource(_ request: HTTPServerRequest) -> HTTPServerResponse {
        guard let (token, scheme) = Self.presentedToken(request), let (grant, claims) = oidcAccess(token) else {
            return Self.invalidToken("the access token is invalid, expired or revoked")
        }
        if let refusal = checkBinding(request, claims: claims, token: token, scheme: scheme, path: "/protected") {
            return refusal
        }
        let required = state.withLock { $0.protectedRoute }
        let acr = claims["acr"]?.stringValue ?? Self.passwordACR
        // A token minted with any claims (/_dev/token) must not crash the check: an auth_time that is no whole
        // number in range, or in the future, is no recent sign-in.
        let authTime = claims["auth_time"]?.doubleValue.flatMap { Int64(exactly: $0.rounded(.down)) }
        let strong = required.acrValues.isEmpty || required.acrValues.contains { ByteExact.equals($0, acr) }
        let recent =
            required.maxAge.map { maxAge in
                guard let authTime, authTime <= now else { return false }
                let (age, overflow) = now.subtractingReportingOverflow(authTime)
                return !overflow && age <= maxAge
            } ?? true
        guard strong, recent else {
            var parameters = [
                "error=\"insufficient_user_authentication\"",
                "error_description=\"\(strong ? "a more recent sign-in is required" : "a stronger sign-in is required")\"",
            ]
            if !required.acrValues.isEmpty {
                parameters.append("acr_values=\"\(required.acrValues.joined(separator: " "))\"")
            }
            if let maxAge = required.maxAge { parameters.append("max_age=\"\(maxAge)\"") }
            var response = Self.oauthError(
                OAuthFailure(
                    "insufficient_user_authentication",
                    strong ? "a more recent sign-in is required" : "a stronger sign-in is required", status: 401))
            response.headers.set("WWW-Authenticate", "\(scheme) " + parameters.joined(separator: ", "))
            return response
        }
        return .json(
            200,
            JOSEValue.object([
                "sub": .string(grant.user.id), "acr": .string(acr), "auth_time": authTime.map { .integer($0) } ?? .null,
            ]).jsonData)
    }

    /// `POST /_dev/protected {"acrValues": [..]|null, "maxAge": N|null}`: what `/protected` requires from now on.
    ///
    /// The body replaces the whole requirement (a member left out is no requirement); another member is a 400.
    func setProtectedRoute(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            if let unknown = body.first(where: { !["acrValues", "maxAge"].contains($0.name) }) {
                return Self.error(
                    400, "invalid_request",
                    "unknown member \(PrintableTextForPage.short(unknown.name)): acrValues, maxAge")
            }
            var route = ProtectedRoute(acrValues: [], maxAge: nil)
            switch body["acrValues"] {
            case nil, .null?: break
            case .array(let values)?
            where values.count <= 10 && values.allSatisfy({ $0.stringValue.map(Self.isACRName) == true }):
                route.acrValues = values.compactMap(\.stringValue)
            default:
                return Self.error(
                    400, "invalid_request",
                    "acrValues is a list of up to 10 names (1 to 256 visible ASCII characters, no quote, backslash or space), or null"
                )
            }
            switch body["maxAge"] {
            case nil, .null?: break
            case let value?:
                guard let seconds = value.doubleValue, seconds.isFinite, seconds >= 0, seconds <= 366 * 86400,
                    seconds == seconds.rounded()
                else { return Self.error(400, "invalid_request", "maxAge is whole seconds, 0 to a year, or null") }
                route.maxAge = Int64(seconds)
            }
            state.withLock { $0.protectedRoute = route }
            return protectedRouteDescription()
        }
    }

    /// `GET /_dev/protected`: the current requirement.
    func protectedRouteDescription() -> HTTPServerResponse {
        let route = state.withLock { $0.protectedRoute }
        return .json(
            200,
            JOSEValue.object([
                "acrValues": .array(route.acrValues.map(JOSEValue.string)),
                "maxAge": route.maxAge.map { .integer($0) } ?? .null,
            ]).jsonData)
    }
}
