import Foundation
import Sesame
import SesameJOSE

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
        discussion: """
            Reads the profile without refreshing anything. With --all, every profile (every account signed in with
            this CLI), one line each: name, kind, provider, who, expiry; --json makes that an array.
            """,
        options: [all, GlobalOptions.json] + GlobalOptions.session,
        examples: ["sesame status", "sesame status --json --profile work", "sesame status --all"],
        exitCodes: [], command: Self.self)
    static let all = OptionSpec("--all", "every profile, one line each (with --json, an array)")

    let invocation: SessionInvocation
    let listsAll: Bool

    init(_ arguments: ParsedArguments) throws {
        invocation = try SessionInvocation(arguments)
        listsAll = arguments.flag(Self.all)
        if listsAll, arguments.value(GlobalOptions.profile) != nil {
            throw arguments.usage("--all lists every profile: drop --profile")
        }
    }

    /// `--all`: each profile's kind, provider, who and expiry, never a token; one that cannot be read says why.
    func listAll() async {
        var rows: [JOSEValue] = []
        let safe = { (text: String) in PrintableText.sanitized(text, limit: 200) }
        for profile in Profile.all {
            var row: JOSEObject = ["profile": .string(profile.name)]
            guard let settings = (try? profile.settings()).flatMap({ $0 }) else {
                row["problem"] = "unreadable settings"
                rows.append(.object(row))
                continue
            }
            row["kind"] = .string(settings.oidc?.service != nil ? "service" : settings.kind.rawValue)
            row["provider"] = .string(settings.baseURL)
            row["store"] = .string(settings.store.rawValue)
            let tokens: TokenSet?
            do {
                tokens = try await profile.store(settings.store, forNewSession: false).load(profile: profile.name)
            } catch {
                row["problem"] = "store unavailable"
                rows.append(.object(row))
                continue
            }
            row["signedIn"] = .bool(tokens != nil)
            if let service = settings.oidc, service.service != nil { row["client"] = .string(service.clientID) }
            if let user = tokens?.user {
                row["user"] = .string(user.email ?? user.id)
            }
            if let expiresAt = tokens?.expiresAt.flatMap(unixSeconds) { row["expiresAt"] = .integer(expiresAt) }
            rows.append(.object(row))
        }
        if invocation.json {
            print(JOSEValue.array(rows).jsonString)
            return
        }
        if rows.isEmpty { print("no profiles (sesame login … --profile NAME)") }
        for row in rows {
            var fields = [row["profile"]?.stringValue ?? "?"]
            if let problem = row["problem"]?.stringValue {
                print(fields[0] + "  (" + problem + ")")
                continue
            }
            fields.append(row["kind"]?.stringValue ?? "?")
            fields.append(safe(row["provider"]?.stringValue ?? "?"))
            fields.append(safe(row["user"]?.stringValue ?? row["client"]?.stringValue ?? "-"))
            if row["signedIn"] == false {
                fields.append("signed out")
            } else if let expiresAt = row["expiresAt"]?.doubleValue {
                fields.append("expires " + ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: expiresAt)))
            }
            print(fields.joined(separator: "  "))
        }
    }

    func run() async throws {
        if listsAll {
            await listAll()
            return
        }
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
