import Foundation
import SesameJOSE

/// The token argument of the `jwt` commands: the argument, or standard input for `-` or none (read when run).
struct TokenArgument: Sendable {
    let text: String?

    /// Reads it now, from the argument or standard input.
    var value: String { argumentOrStandardInput(text) }
}

/// `sesame jwt decode [TOKEN|-]`: header and claims, without verifying anything.
struct JWTDecodeCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["jwt", "decode"], summary: "print a JWT's header and claims as JSON, without verifying it",
        arguments: "[TOKEN|-]",
        discussion: "For display only: nothing is verified. A TOKEN of '-' or no TOKEN reads it from standard input.",
        options: [], examples: ["sesame jwt decode - < token.txt"], exitCodes: [], command: Self.self)

    let token: TokenArgument

    init(_ arguments: ParsedArguments) throws {
        token = TokenArgument(text: try arguments.atMostOnePositional("token"))
    }

    func run() async throws {
        let jwt = try JWT.unverified(token.value)
        let output: JOSEValue = ["header": .object(jwt.header.parameters), "claims": jwt.claims.jsonValue]
        print(output.prettyJSONString)
    }
}

/// `sesame jwt verify --jwks FILE|URL …`: signature and claims; the claims printed.
struct JWTVerifyCommand: SesameCommand {
    static let jwks = OptionSpec("--jwks", value: "FILE|URL", "the keys: a JWK Set or a single JWK (required)")
    static let issuer = OptionSpec("--iss", value: "ISS", "the required issuer")
    static let audience = OptionSpec("--aud", value: "AUD", "an audience the token must have")
    static let nonce = OptionSpec("--nonce", value: "N", "the required nonce")
    static let leeway = OptionSpec("--leeway", value: "S", "clock-skew allowance in seconds (0-3600)", default: "60")
    static let now = OptionSpec("--now", value: "UNIX", "verify as of this Unix time", default: "now")
    static let algorithm = OptionSpec(
        "--alg", value: "ALG", "an allowed algorithm", default: "every asymmetric one", repeatable: true)
    static let type = OptionSpec("--typ", value: "TYP", "an accepted typ header", default: "JWT", repeatable: true)
    static let spec = CommandSpec(
        words: ["jwt", "verify"], summary: "verify signature and claims; print the claims as JSON",
        arguments: "[TOKEN|-]",
        discussion: """
            The key decides the algorithm. exp is required; iss, aud and nonce are checked when given; typ must be
            JWT unless --typ says otherwise (access tokens are at+jwt). Keys from a URL come over https, or plain
            http from loopback only.
            """,
        options: [jwks, issuer, audience, nonce, leeway, now, algorithm, type],
        examples: [
            "sesame jwt verify --jwks jwks.json --aud app - < token.txt",
            "sesame jwt verify --jwks http://127.0.0.1:8080/jwks --typ at+jwt \"$(sesame token)\"",
        ],
        exitCodes: [(1, "the token is rejected (the code names the check)")], command: Self.self)

    let keySource: String
    let policy: ClaimValidationPolicy
    let time: Date
    let algorithms: Set<JWSAlgorithm>
    let token: TokenArgument

    init(_ arguments: ParsedArguments) throws {
        guard let source = arguments.value(Self.jwks) else { throw arguments.usage("jwt verify needs --jwks FILE|URL") }
        var policy = ClaimValidationPolicy(
            issuer: arguments.value(Self.issuer), audience: arguments.value(Self.audience),
            nonce: arguments.value(Self.nonce))
        if let leeway = arguments.value(Self.leeway) {
            guard let seconds = TimeInterval(leeway), seconds >= 0, seconds <= 3600 else {
                throw arguments.usage("--leeway takes seconds from 0 to 3600")
            }
            policy.leeway = seconds
        }
        let types = arguments.values(Self.type)
        if !types.isEmpty { policy.acceptedTypes = Set(types.map { $0.lowercased() }) }
        var time = Date()
        if let fixed = arguments.value(Self.now) {
            guard let seconds = TimeInterval(fixed) else { throw arguments.usage("--now takes a Unix time in seconds") }
            time = Date(timeIntervalSince1970: seconds)
        }
        let names = arguments.values(Self.algorithm)
        algorithms =
            names.isEmpty
            ? JWSAlgorithm.asymmetric
            : Set(
                try names.map { name in
                    guard let algorithm = JWSAlgorithm(name: name) else {
                        throw arguments.usage("unknown algorithm '\(printable(name))'")
                    }
                    return algorithm
                })
        keySource = source
        self.policy = policy
        self.time = time
        token = TokenArgument(text: try arguments.atMostOnePositional("token"))
    }

    func run() async throws {
        let token = self.token.value
        let keys = try await KeySource.load(keySource, allowSymmetric: algorithms.contains { $0.isSymmetric })
        let verifier = JWTVerifier(keys: keys, policy: policy, allowedAlgorithms: algorithms)
        print(try verifier.verify(token, now: time).claims.jsonValue.prettyJSONString)
    }
}

/// `sesame jwt sign --key FILE [CLAIMS_JSON|-]`.
struct JWTSignCommand: SesameCommand {
    static let key = OptionSpec("--key", value: "FILE", "the private JWK (required)")
    static let algorithm = OptionSpec("--alg", value: "ALG", "the algorithm", default: "the key's alg")
    static let type = OptionSpec("--typ", value: "TYP", "the typ header", default: "JWT")
    static let spec = CommandSpec(
        words: ["jwt", "sign"], summary: "sign a claim set with a private JWK; print the token",
        arguments: "[CLAIMS_JSON|-]", discussion: "Reads the claims from the argument, or standard input.",
        options: [key, algorithm, type],
        examples: ["echo '{\"sub\":\"alice\",\"aud\":\"app\",\"exp\":4102444800}' | sesame jwt sign --key key.json"],
        exitCodes: [], command: Self.self)

    let keyPath: String
    let named: JWSAlgorithm?
    let typ: String
    let claims: TokenArgument
    let command: CommandSpec

    init(_ arguments: ParsedArguments) throws {
        guard let keyPath = arguments.value(Self.key) else { throw arguments.usage("jwt sign needs --key FILE") }
        self.keyPath = keyPath
        named = try arguments.value(Self.algorithm).map { name in
            guard let algorithm = JWSAlgorithm(name: name) else {
                throw arguments.usage("unknown algorithm '\(printable(name))'")
            }
            return algorithm
        }
        typ = arguments.value(Self.type) ?? "JWT"
        claims = TokenArgument(text: try arguments.atMostOnePositional("claim set"))
        command = arguments.command
    }

    func run() async throws {
        let key = try KeySource.privateKey(at: keyPath)
        guard let algorithm = named ?? key.algorithm else {
            throw CLIError.usage("the key declares no alg; pass --alg", command: command)
        }
        guard let claims = try JOSEValue.parse(Array(claims.value.utf8)).objectValue else {
            throw CLIError(status: .failure, code: "malformed_claims", message: "the claim set must be a JSON object")
        }
        print(try JWT.sign(JWTClaims(claims), key: key, algorithm: algorithm, type: typ))
    }
}
