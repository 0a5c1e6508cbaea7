import Foundation
import Sesame
import SesameJOSE

/// `sesame token`: a valid access token on stdout — as text, JSON, or a kubectl `ExecCredential`.
struct TokenCommand: SesameCommand {
    static let forceRefresh = OptionSpec("--force-refresh", "refresh now, whatever the expiry")
    static let audience = OptionSpec(
        "--audience", value: "NAME", "exchange the session's token for one for this API (RFC 8693)")
    static let resource = OptionSpec(
        "--resource", value: "URL", "exchange the session's token for one for this resource URL (RFC 8693)")
    static let scope = OptionSpec("--scope", value: "SCOPES", "with --audience/--resource: a narrower scope")
    static let output = OptionSpec(
        "--output", value: "FORMAT",
        "text (the token), json (token, type, expiry, scopes; as --json) or exec-credential (a kubectl ExecCredential)",
        default: "text", choices: ["text", "json", "exec-credential"])
    static let minValidity = OptionSpec(
        "--min-validity", value: "SECONDS",
        "a token good for at least this long: refreshed first if needed; exit 1 if the provider's tokens live less")
    static let spec = CommandSpec(
        words: ["token"], summary: "a valid access token on stdout, refreshed if needed", arguments: nil,
        discussion: """
            Prints the profile's access token, refreshing it first when it expires within a minute (or half its
            lifetime), or within --min-validity seconds. Several processes at once refresh once between them. A
            DPoP profile's token (login --dpop) works only with a proof of the profile's key: use 'sesame
            request', which sends both, not curl.
            With --audience or --resource (OpenID Connect profiles), prints a token for that API instead,
            exchanged for the session's at the provider (RFC 8693 token exchange; the provider decides which
            client may exchange for what, matching the target exactly: invalid_target otherwise). Without --scope
            it carries the session's whole scope. Each run exchanges anew (the CLI keeps no exchanged tokens).
            The session's own token is not printed.
            --output exec-credential makes sesame a kubectl credential plugin: a users[].user.exec entry with
            command sesame and args [token, --output, exec-credential] (apiVersion client.authentication.k8s.io/v1,
            or v1beta1 when kubectl asks for it); kubectl reads the token and its expirationTimestamp and runs
            sesame again when it has expired.
            """,
        options: [forceRefresh, minValidity, output, audience, resource, scope, GlobalOptions.json]
            + GlobalOptions.session,
        examples: [
            "curl -H \"Authorization: Bearer $(sesame token)\" http://127.0.0.1:8080/me", "sesame token --json",
            "sesame token --min-validity 600 --output json",
            "sesame token --output exec-credential --profile k8s",
            "sesame token --audience https://api.example.com --json",
        ],
        exitCodes: [
            (1, "the provider refused the exchange (exchange_rejected), or its tokens live less than --min-validity")
        ], command: Self.self)

    /// How the token is printed.
    enum Format: String, Sendable {
        case text
        case json
        case execCredential = "exec-credential"
    }

    let invocation: SessionInvocation
    let refreshesNow: Bool
    let target: ExchangeTarget?
    let exchangeScope: [String]?
    let format: Format
    let minimumValidity: TimeInterval?

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
        let named = arguments.value(Self.output).map { Format(rawValue: $0) }
        guard let chosen = named ?? .some(invocation.json ? .json : .text) else {
            throw arguments.usage("--output takes text, json or exec-credential")
        }
        if invocation.json, chosen != .json { throw arguments.usage("--json is --output json: give one of them") }
        format = chosen
        if let text = arguments.value(Self.minValidity) {
            guard let seconds = Int(text), (0...366 * 86400).contains(seconds) else {
                throw arguments.usage("--min-validity takes whole seconds (0 to a year)")
            }
            minimumValidity = TimeInterval(seconds)
        } else {
            minimumValidity = nil
        }
    }

    /// The token to print, with what the formats say about it.
    struct Issued {
        let token: String
        let type: String
        let expiresAt: Date?
        let scope: String?
        let issuedTokenType: String?
        var isDPoPBound: Bool { type.lowercased() == "dpop" }
    }

    func run() async throws {
        let context = try await SessionContext(invocation.selection).withUsableKey()
        let issued: Issued
        if let target {
            issued = try await exchanged(for: target, context: context)
        } else {
            issued = try await sessionToken(context)
        }
        if let minimumValidity {
            guard let expiresAt = issued.expiresAt else {
                throw CLIError(
                    status: .failure, code: "min_validity_unmet",
                    message: "the token's lifetime is unknown (no expires_in): --min-validity cannot be promised")
            }
            let left = expiresAt.timeIntervalSinceNow
            guard left >= minimumValidity else {
                throw CLIError(
                    status: .failure, code: "min_validity_unmet",
                    message: "the provider's tokens are good for \(Int(max(0, left))) s, less than --min-validity "
                        + "\(Int(minimumValidity)) s, even freshly refreshed")
            }
        }
        switch format {
        case .text: print(issued.token)
        case .json: print(JOSEValue.object(Self.json(issued)).jsonString)
        case .execCredential:
            guard !issued.isDPoPBound else {
                throw CLIError(
                    status: .failure, code: "dpop_bound",
                    message: "a DPoP-bound token works only with a proof of the profile's key, which kubectl cannot "
                        + "make; sign in without --dpop for this profile")
            }
            // With provideClusterInfo, kubectl says which cluster the token is for: only one of the profile's
            // origins gets it (log in with --resource for the cluster's API server).
            if let server = Self.clusterServer(), target == nil, !context.client.mayReceiveCredentials(server) {
                throw CLIError(
                    status: .failure, code: "cluster_not_allowed",
                    message:
                        "kubectl asks for a token for \(SesameHTTP.Origin(server)?.description ?? "another server"), "
                        + "which is not one of profile \(context.profile.name)'s origins; log in with --resource for it"
                )
            }
            print(JOSEValue.object(Self.execCredential(issued)).jsonString)
        }
    }

    /// The session's token (or a service account's), valid for `minimumValidity` when asked.
    func sessionToken(_ context: SessionContext) async throws -> Issued {
        let tokens = try await context.tokens(forceRefresh: refreshesNow, minimumValidity: minimumValidity)
        return Issued(
            token: tokens.accessToken, type: tokens.tokenType, expiresAt: tokens.expiresAt, scope: tokens.scope,
            issuedTokenType: nil)
    }

    /// A token exchanged for the session's (RFC 8693).
    func exchanged(for target: ExchangeTarget, context: SessionContext) async throws -> Issued {
        guard let auth = context.oidc else {
            throw CLIError.usage(
                "profile \(context.profile.name) \(context.kindForRefusal), which has no token exchange here",
                command: invocation.selection.command)
        }
        do {
            let token = try await auth.exchangedToken(
                for: target, scope: exchangeScope, minimumValidity: minimumValidity ?? 30, forceExchange: refreshesNow)
            return Issued(
                token: token.accessToken, type: token.tokenType, expiresAt: token.expiresAt, scope: token.scope,
                issuedTokenType: token.issuedTokenType)
        } catch let error as AuthError where error.code == .exchangeRejected {
            // The description without its leading code (the CLI prints the code itself).
            throw CLIError(
                status: .failure, code: error.code.rawValue,
                message: String(error.description.dropFirst(error.code.rawValue.count + 2)))
        }
    }

    /// `--output json`: the token, its type, expiry (Unix seconds) and scopes.
    static func json(_ issued: Issued) -> JOSEObject {
        var json: JOSEObject = ["accessToken": .string(issued.token), "tokenType": .string(issued.type)]
        if let expiresAt = issued.expiresAt.flatMap(unixSeconds) { json["expiresAt"] = .integer(expiresAt) }
        if let scope = issued.scope {
            json["scope"] = .string(scope)
            json["scopes"] = .array(scope.split(separator: " ").map { .string(String($0)) })
        }
        if let type = issued.issuedTokenType { json["issuedTokenType"] = .string(type) }
        return json
    }

    /// The cluster's API server kubectl names in `KUBERNETES_EXEC_INFO` (with `provideClusterInfo: true`), if any.
    static func clusterServer() -> URL? {
        ProcessInfo.processInfo.environment["KUBERNETES_EXEC_INFO"]
            .flatMap { try? JOSEValue.parse(Data($0.utf8)) }?["spec"]?["cluster"]?["server"]?.stringValue
            .flatMap(URL.init(string:))
    }

    /// A kubectl `ExecCredential` (client.authentication.k8s.io): the token and when it expires, in the
    /// apiVersion kubectl asked for (`KUBERNETES_EXEC_INFO`), v1 by default.
    static func execCredential(_ issued: Issued) -> JOSEObject {
        let asked = ProcessInfo.processInfo.environment["KUBERNETES_EXEC_INFO"]
            .flatMap { try? JOSEValue.parse(Data($0.utf8)) }?["apiVersion"]?.stringValue
        let versions = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
        let version = asked.flatMap { asked in versions.first { $0 == asked } } ?? versions[0]
        var status: JOSEObject = ["token": .string(issued.token)]
        if let expiresAt = issued.expiresAt {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime]
            status["expirationTimestamp"] = .string(formatter.string(from: expiresAt))
        }
        return ["apiVersion": .string(version), "kind": "ExecCredential", "status": .object(status)]
    }
}
