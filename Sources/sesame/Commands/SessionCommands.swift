import Foundation
import Sesame
import SesameJOSE

/// `sesame token`: a valid access token on stdout.
struct TokenCommand: SesameCommand {
    static let forceRefresh = OptionSpec("--force-refresh", "refresh now, whatever the expiry")
    static let audience = OptionSpec(
        "--audience", value: "NAME", "exchange the session's token for one for this API (RFC 8693)")
    static let resource = OptionSpec(
        "--resource", value: "URL", "exchange the session's token for one for this resource URL (RFC 8693)")
    static let scope = OptionSpec("--scope", value: "SCOPES", "with --audience/--resource: a narrower scope")
    static let spec = CommandSpec(
        words: ["token"], summary: "a valid access token on stdout, refreshed if needed", arguments: nil,
        discussion: """
            Prints the profile's access token, refreshing it first when it expires within a minute (or half its
            lifetime). Several processes at once refresh once between them. A DPoP profile's token (login --dpop)
            works only with a proof of the profile's key: use 'sesame request', which sends both, not curl.
            With --audience or --resource (OpenID Connect profiles), prints a token for that API instead,
            exchanged for the session's at the provider (RFC 8693 token exchange; the provider decides which
            client may exchange for what, matching the target exactly: invalid_target otherwise). Without --scope
            it carries the session's whole scope. Each run exchanges anew (the CLI keeps no exchanged tokens).
            The session's own token is not printed.
            """,
        options: [forceRefresh, audience, resource, scope, GlobalOptions.json] + GlobalOptions.session,
        examples: [
            "curl -H \"Authorization: Bearer $(sesame token)\" http://127.0.0.1:8080/me", "sesame token --json",
            "sesame token --audience https://api.example.com --json",
        ],
        exitCodes: [(1, "the provider refused the exchange (exchange_rejected)")], command: Self.self)

    let invocation: SessionInvocation
    let refreshesNow: Bool
    let target: ExchangeTarget?
    let exchangeScope: [String]?

    init(_ arguments: ParsedArguments) throws {
        invocation = try SessionInvocation(arguments)
        refreshesNow = arguments.flag(Self.forceRefresh)
        switch (arguments.value(Self.audience), arguments.value(Self.resource)) {
        case (nil, nil): target = nil
        case (let name?, nil):
            guard !name.isEmpty, name.utf8.count <= 2048, PrintableText.isClean(name) else {
                throw arguments.usage("--audience takes the API's name")
            }
            target = .audience(name)
        case (nil, let text?):
            guard let url = URL(string: text), SesameHTTP.Origin(url) != nil else {
                throw arguments.usage("--resource takes an http(s) URL (got '\(printable(text))')")
            }
            target = .resource(url)
        default: throw arguments.usage("give --audience or --resource, not both")
        }
        exchangeScope = arguments.value(Self.scope).map { $0.split(separator: " ").map(String.init) }
        if exchangeScope != nil, target == nil { throw arguments.usage("--scope goes with --audience or --resource") }
    }

    func run() async throws {
        let context = try await SessionContext(invocation.selection).withUsableKey()
        if let target {
            guard let auth = context.oidc else {
                throw CLIError.usage(
                    "profile \(context.profile.name) \(context.kindForRefusal), which has no token exchange here",
                    command: invocation.selection.command)
            }
            let token: ExchangedToken
            do {
                token = try await auth.exchangedToken(for: target, scope: exchangeScope, forceExchange: refreshesNow)
            } catch let error as AuthError where error.code == .exchangeRejected {
                // The description without its leading code (the CLI prints the code itself).
                throw CLIError(
                    status: .failure, code: error.code.rawValue,
                    message: String(error.description.dropFirst(error.code.rawValue.count + 2)))
            }
            if invocation.json {
                var json: JOSEObject = [
                    "accessToken": .string(token.accessToken), "tokenType": .string(token.tokenType),
                    "issuedTokenType": .string(token.issuedTokenType),
                ]
                if let expiresAt = token.expiresAt.flatMap(unixSeconds) { json["expiresAt"] = .integer(expiresAt) }
                if let scope = token.scope { json["scope"] = .string(scope) }
                print(JOSEValue.object(json).jsonString)
            } else {
                print(token.accessToken)
            }
            return
        }
        let tokens = try await context.tokens(forceRefresh: refreshesNow)
        if invocation.json {
            var json: JOSEObject = ["accessToken": .string(tokens.accessToken), "tokenType": .string(tokens.tokenType)]
            if let expiresAt = tokens.expiresAt.flatMap(unixSeconds) { json["expiresAt"] = .integer(expiresAt) }
            print(JOSEValue.object(json).jsonString)
        } else {
            print(tokens.accessToken)
        }
    }
}

/// `sesame userinfo`: the provider's UserInfo through the SDK.
struct UserInfoCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["userinfo"], summary: "the provider's UserInfo claims for the signed-in user", arguments: nil,
        discussion: """
            OpenID Connect profiles: asks the provider's UserInfo endpoint with the profile's credentials (a DPoP
            proof for a DPoP profile), refreshing once if the access token is rejected. The answer's sub must be
            the ID token's (OIDC Core 5.3.2): another subject is refused with userinfo_rejected.
            """,
        options: [GlobalOptions.json] + GlobalOptions.session,
        examples: ["sesame userinfo", "sesame userinfo --json --profile work"],
        exitCodes: [(1, "the provider refused, or described another subject (userinfo_rejected)")],
        command: Self.self)

    let invocation: SessionInvocation

    init(_ arguments: ParsedArguments) throws { invocation = try SessionInvocation(arguments) }

    func run() async throws {
        let context = try await SessionContext(invocation.selection).withUsableKey()
        guard let auth = context.oidc else {
            throw CLIError.usage(
                "profile \(context.profile.name) \(context.kindForRefusal), which has no UserInfo"
                    + (context.service == nil ? "; try 'sesame request /me'" : ""),
                command: invocation.selection.command)
        }
        // Through the SDK: the session's scheme (DPoP when bound), one refresh on a rejection, `sub` checked.
        let claims = try await auth.userInfo()
        if invocation.json {
            print(JOSEValue.object(claims).jsonString)
            return
        }
        let width = min(32, (claims.map { $0.name.count }.max() ?? 0) + 2)
        for member in claims.sorted(by: { $0.name < $1.name }) {
            let value = member.value.stringValue ?? member.value.jsonString
            let label = PrintableText.sanitized(member.name + ":", limit: 64)
            print(
                label.padding(toLength: width, withPad: " ", startingAt: 0) + PrintableText.sanitized(value, limit: 400)
            )
        }
    }
}

/// `sesame status`: who, which provider, which store — never a token.
struct StatusCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["status"], summary: "who, which provider, store, expiry, scopes — never a token", arguments: nil,
        discussion: "Reads the profile without refreshing anything.",
        options: [GlobalOptions.json] + GlobalOptions.session,
        examples: ["sesame status", "sesame status --json --profile work"],
        exitCodes: [], command: Self.self)

    let invocation: SessionInvocation

    init(_ arguments: ParsedArguments) throws { invocation = try SessionInvocation(arguments) }

    func run() async throws {
        let context = try await SessionContext(invocation.selection).withUsableKey()
        guard let tokens = try await context.session.currentTokens else {
            throw AuthError(.notSignedIn, "profile \(context.profile.name) is not signed in")
        }
        let expired = tokens.expiresAt.map { $0 <= Date() } ?? false
        let settings = context.settings
        if invocation.json {
            var status: JOSEObject = [
                "profile": .string(context.profile.name), "provider": .string(settings.baseURL),
                "kind": .string(settings.kind.rawValue), "store": .string(settings.store.rawValue),
                "tokenType": .string(tokens.tokenType), "hasRefreshToken": .bool(tokens.refreshToken != nil),
                "expired": .bool(expired), "dpop": .bool(context.oidc?.provider.dpopSigner != nil),
            ]
            if let user = tokens.user {
                status["user"] = ["id": .string(user.id), "email": user.email.map(JOSEValue.string) ?? .null]
            }
            if let oidc = settings.oidc, let service = oidc.service {
                status["service"] = [
                    "clientID": .string(oidc.clientID), "method": .string(service.method),
                    "keyFile": service.keyFile.map(JOSEValue.string) ?? .null,
                ]
            }
            if let entry = settings.oidc?.nativeSSO { status["nativeSSO"] = .string(entry) }
            if let expiresAt = tokens.expiresAt.flatMap(unixSeconds) { status["expiresAt"] = .integer(expiresAt) }
            if let scope = tokens.scope { status["scope"] = .string(scope) }
            if let thumbprint = tokens.dpopKeyThumbprint { status["dpopKeyThumbprint"] = .string(thumbprint) }
            print(JOSEValue.object(status).jsonString)
            return
        }
        // What a server or a file said is printed without control characters.
        let safe = { (text: String) in PrintableText.sanitized(text, limit: 200) }
        print("profile:  \(context.profile.name)")
        print("provider: \(safe(settings.baseURL)) (\(settings.kind.rawValue))")
        print("store:    \(settings.store.rawValue)")
        if let key = context.oidc?.provider.dpopSigner {
            print("dpop:     yes (\(key.algorithm.name) key \(key.thumbprint))")
        }
        if let oidc = settings.oidc, let service = oidc.service {
            print("client:   \(safe(oidc.clientID)) (service account, \(service.method))")
            if let keyFile = service.keyFile { print("key:      \(safe(keyFile))") }
        } else {
            print("user:     \(safe(tokens.user?.email ?? tokens.user?.id ?? "unknown"))")
        }
        if let entry = settings.oidc?.nativeSSO { print("shared:   sign-in shared as \(safe(entry)) (Native SSO)") }
        var expiry = tokens.expiresAt.map { ISO8601DateFormatter().string(from: $0) } ?? "unknown"
        if expired { expiry += tokens.refreshToken == nil ? " (expired)" : " (expired — will refresh)" }
        print("expires:  \(expiry)")
        if let scope = tokens.scope { print("scope:    \(safe(scope))") }
    }
}

/// What every session command reads first: the profile and store (checked before anything else), no positionals,
/// and `--json`.
struct SessionInvocation: Sendable {
    let selection: SessionSelection
    let json: Bool

    /// - Throws: ``CLIError`` (usage).
    init(_ arguments: ParsedArguments) throws {
        selection = try SessionSelection(arguments)
        try arguments.noPositionals()
        json = arguments.flag(GlobalOptions.json)
    }
}

/// Integer Unix seconds, or nil for a date no integer holds.
func unixSeconds(_ date: Date) -> Int64? {
    let seconds = date.timeIntervalSince1970.rounded(.down)
    return seconds.isFinite && abs(seconds) < 1e15 ? Int64(seconds) : nil
}
