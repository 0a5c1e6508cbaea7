import Foundation
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame jwt decode | verify | sign`.
enum JWTCommands {
    /// Prints `{"header":…,"claims":…}` without verifying anything.
    static func decode(_ arguments: ParsedArguments) throws {
        let token = argumentOrStandardInput(try arguments.atMostOnePositional("token"))
        let jwt = try JWT.unverified(token)
        let output: JOSEValue = ["header": .object(jwt.header.parameters), "claims": jwt.claims.jsonValue]
        print(output.prettyJSONString)
    }

    /// Verifies signature and claims; prints the claims.
    static func verify(_ arguments: ParsedArguments) async throws {
        guard let jwksSource = arguments.value("--jwks") else {
            throw CLIError.usage("jwt verify needs --jwks FILE|URL", command: arguments.command)
        }
        var policy = ClaimValidationPolicy(
            issuer: arguments.value("--iss"), audience: arguments.value("--aud"),
            nonce: arguments.value("--nonce"))
        if let leeway = arguments.value("--leeway") {
            guard let seconds = TimeInterval(leeway), seconds >= 0, seconds <= 3600 else {
                throw CLIError.usage("--leeway takes seconds from 0 to 3600", command: arguments.command)
            }
            policy.leeway = seconds
        }
        let types = arguments.values("--typ")
        if !types.isEmpty { policy.acceptedTypes = Set(types.map { $0.lowercased() }) }
        var now = Date()
        if let fixed = arguments.value("--now") {
            guard let seconds = TimeInterval(fixed) else {
                throw CLIError.usage("--now takes a Unix time in seconds", command: arguments.command)
            }
            now = Date(timeIntervalSince1970: seconds)
        }
        var algorithms = JWSAlgorithm.asymmetric
        let names = arguments.values("--alg")
        if !names.isEmpty {
            algorithms = Set(
                try names.map { name in
                    guard let algorithm = JWSAlgorithm(name: name) else {
                        throw CLIError.usage("unknown algorithm '\(name)'", command: arguments.command)
                    }
                    return algorithm
                })
        }
        let token = argumentOrStandardInput(try arguments.atMostOnePositional("token"))
        let allowSymmetric = algorithms.contains { $0.isSymmetric }
        let keys = try await KeySource.load(jwksSource, allowSymmetric: allowSymmetric)
        let verifier = JWTVerifier(keys: keys, policy: policy, allowedAlgorithms: algorithms)
        let jwt = try verifier.verify(token, now: now)
        print(jwt.claims.jsonValue.prettyJSONString)
    }

    /// Signs a JSON claim set with a private JWK.
    static func sign(_ arguments: ParsedArguments) throws {
        guard let keyPath = arguments.value("--key") else {
            throw CLIError.usage("jwt sign needs --key FILE", command: arguments.command)
        }
        let key = try KeySource.privateKey(at: keyPath)
        let algorithm: JWSAlgorithm
        if let name = arguments.value("--alg") {
            guard let named = JWSAlgorithm(name: name) else {
                throw CLIError.usage("unknown algorithm '\(name)'", command: arguments.command)
            }
            algorithm = named
        } else if let declared = key.algorithm {
            algorithm = declared
        } else {
            throw CLIError.usage("the key declares no alg; pass --alg", command: arguments.command)
        }
        let claimsText = argumentOrStandardInput(try arguments.atMostOnePositional("claim set"))
        guard let claims = try JOSEValue.parse(Array(claimsText.utf8)).objectValue else {
            throw CLIError(status: .failure, code: "malformed_claims", message: "the claim set must be a JSON object")
        }
        print(
            try JWT.sign(JWTClaims(claims), key: key, algorithm: algorithm, type: arguments.value("--typ") ?? "JWT")
        )
    }
}

/// `sesame jwk generate | public`.
enum JWKCommands {
    /// Prints `{"keys":[public JWK]}` for a private (or public) JWK file.
    static func publicSet(_ arguments: ParsedArguments) throws {
        let path = try arguments.atMostOnePositional("key file")
        let text = path.flatMap { $0 == "-" ? nil : $0 }.map { try? String(contentsOfFile: $0, encoding: .utf8) }
        guard let json = text ?? argumentOrStandardInput(nil) else {
            throw CLIError(status: .failure, code: "io", message: "cannot read \(path ?? "-")")
        }
        let key = try JWK(json: json)
        print(try JWKSet(keys: [try key.publicKey()]).jsonValue.prettyJSONString)
    }

    static func generate(_ arguments: ParsedArguments) throws {
        let name = arguments.value("--alg") ?? "ES256"
        guard let algorithm = JWSAlgorithm(name: name) else {
            throw CLIError.usage("unknown algorithm '\(name)'", command: arguments.command)
        }
        let key = try JWK.generate(for: algorithm, keyID: arguments.value("--kid"))
        try arguments.noPositionals()
        let text =
            arguments.flag("--public")
            ? try key.publicKey().jsonValue().prettyJSONString : key.jsonValue(includingPrivate: true).prettyJSONString
        if let output = arguments.value("--output") {
            try SecureFile.write(Data((text + "\n").utf8), to: URL(fileURLWithPath: output))
            FileHandle.standardError.write(Data("wrote \(output) (mode 0600)\n".utf8))
        } else {
            if !arguments.flag("--public") { StandardOutput.restrictIfFile() }
            print(text)
        }
    }
}

/// Standard output when it holds a secret.
enum StandardOutput {
    /// `sesame jwk generate > key.json` must not leave a private key 0644: when standard output is a regular file
    /// of this user, it is made 0600 before anything is written to it.
    static func restrictIfFile() {
        var info = stat()
        guard fstat(1, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return }
        fchmod(1, 0o600)
    }
}
