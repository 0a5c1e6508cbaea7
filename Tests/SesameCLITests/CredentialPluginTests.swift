import Foundation
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

/// The CLI as a credential plugin: `sesame token --output json|exec-credential --min-validity`, a real kubectl
/// running it as its exec plugin, and a real git asking `sesame credential-helper`.
@Suite struct CredentialPluginTests {
    /// Moves the stored access token's life (the file store's JSON) as if it had been received `age` seconds ago
    /// and lived `lifetime` seconds: in the past, it has expired.
    static func ageStoredToken(
        _ workspace: OIDCLoginCommandTests.Workspace, profile: String = "default", age: TimeInterval = 660,
        lifetime: TimeInterval = 600
    ) throws {
        let file = workspace.folder.appendingPathComponent("credentials/\(profile).json")
        var object = try #require(try JOSEValue.parse(Data(contentsOf: file)).objectValue)
        let received = Date().addingTimeInterval(-age)
        object["receivedAt"] = .number(received.timeIntervalSinceReferenceDate)
        object["expiresAt"] = .number(received.addingTimeInterval(lifetime).timeIntervalSinceReferenceDate)
        try Data(JOSEValue.object(object).jsonBytes).write(to: file)
    }

    @Test("token --output json and exec-credential, --min-validity refreshes or refuses, usage errors")
    func outputs() throws {
        let workspace = try OIDCLoginCommandTests.Workspace(serving: ["--access-token-ttl", "600"])
        defer { workspace.stop() }
        try workspace.signIn([])
        let env = workspace.environment
        let json = try CLIRunner.run(["token", "--output", "json"], environment: env)
        let object = try JOSEValue.parse(Data(json.stdout.utf8))
        #expect(object["tokenType"] == "Bearer" && object["expiresAt"]?.doubleValue != nil)
        #expect(object["scopes"]?.arrayValue?.contains("openid") == true)
        #expect(try CLIRunner.run(["token", "--json"], environment: env).stdout == json.stdout)
        let credential = try CLIRunner.run(["token", "--output", "exec-credential"], environment: env)
        let exec = try JOSEValue.parse(Data(credential.stdout.utf8))
        #expect(exec["apiVersion"] == "client.authentication.k8s.io/v1" && exec["kind"] == "ExecCredential")
        #expect(exec["status"]?["token"] == object["accessToken"])
        #expect(exec["status"]?["expirationTimestamp"]?.stringValue?.hasSuffix("Z") == true)
        var beta = env
        beta["KUBERNETES_EXEC_INFO"] =
            #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#
        let old = try CLIRunner.run(["token", "--output", "exec-credential"], environment: beta)
        #expect(try JOSEValue.parse(Data(old.stdout.utf8))["apiVersion"] == "client.authentication.k8s.io/v1beta1")
        // --min-validity: within the lifetime, a refresh when the token has less left; beyond it, exit 1.
        let same = try CLIRunner.run(["token", "--min-validity", "200"], environment: env)
        #expect(same.status == 0 && same.stdout.trimmingCharacters(in: .newlines) == object["accessToken"]?.stringValue)
        // 200 s left of 600: a promise of 590 s is kept by refreshing (not within the session's usual leeway).
        try Self.ageStoredToken(workspace, age: 400, lifetime: 600)
        let fresher = try CLIRunner.run(["token", "--min-validity", "590"], environment: env)
        let fresh = fresher.stdout.trimmingCharacters(in: .newlines)
        #expect(fresher.status == 0 && fresh != object["accessToken"]?.stringValue, "\(fresher.stderr)")
        #expect(try CLIRunner.run(["token", "--min-validity", "590"], environment: env).stdout.contains(fresh))
        let tooLong = try CLIRunner.run(["token", "--min-validity", "3600"], environment: env)
        #expect(tooLong.status == 1 && tooLong.stderr.contains("min_validity_unmet"), "\(tooLong.stderr)")
        // A promise no fresh token could keep (exactly the lifetime) costs no refresh, call after call.
        let counters = {
            try TestBrowser(port: workspace.server.base.port ?? 0).get("/_dev/counters").json?["refreshes"]
        }
        let before = try counters()
        for _ in 0..<2 {
            #expect(try CLIRunner.run(["token", "--min-validity", "600"], environment: env).status == 1)
        }
        #expect(try counters() == before)
        // With provideClusterInfo, kubectl names the cluster: only one of the profile's origins gets a token.
        var foreign = env
        foreign["KUBERNETES_EXEC_INFO"] =
            #"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"cluster":{"server":"https://evil.example"}}}"#
        let refusedCluster = try CLIRunner.run(["token", "--output", "exec-credential"], environment: foreign)
        #expect(refusedCluster.status == 1 && refusedCluster.stderr.contains("cluster_not_allowed"))
        #expect(refusedCluster.stdout.isEmpty)
        var own = env
        own["KUBERNETES_EXEC_INFO"] =
            #"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"cluster":{"server":"\#(workspace.server.base.absoluteString)"}}}"#
        #expect(try CLIRunner.run(["token", "--output", "exec-credential"], environment: own).status == 0)
        // --verbose: the SDK's diagnostics on stderr, no token among them.
        let verbose = try CLIRunner.run(["token", "--force-refresh", "--verbose"], environment: env)
        #expect(verbose.status == 0 && verbose.stderr.contains("refresh started"), "\(verbose.stderr)")
        #expect(verbose.stderr.contains("refreshed") && !verbose.stderr.contains("eyJ"))
        for arguments in [
            ["token", "--output", "yaml"], ["token", "--json", "--output", "text"], ["token", "--min-validity", "-1"],
            ["credential-helper"], ["credential-helper", "fill"],
        ] {
            #expect(try CLIRunner.run(arguments, environment: env).status == 2, "\(arguments)")
        }
    }

    @Test("two accounts (profiles) refreshing at once across eight processes: one refresh each, both kept")
    func twoAccountsAcrossProcesses() throws {
        let workspace = try OIDCLoginCommandTests.Workspace(serving: ["--user", "bob@example.com:battery-staple-x"])
        defer { workspace.stop() }
        let base = workspace.server.base.absoluteString
        for (profile, email, password) in [
            ("alice", "alice@example.com", "correct-horse"), ("bob", "bob@example.com", "battery-staple-x"),
        ] {
            let login = try CLIRunner.run(
                ["login", "--rest", base, "--email", email, "--profile", profile], stdin: password + "\n",
                environment: workspace.environment)
            #expect(login.status == 0, "\(login.stderr)")
            try Self.ageStoredToken(workspace, profile: profile)
        }
        let runs = (0..<8).map { ["token", "--profile", $0 % 2 == 0 ? "alice" : "bob"] }
        let results = try CLIRunner.runConcurrently(runs, environment: workspace.environment)
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        let alice = Set(results.enumerated().filter { $0.offset % 2 == 0 }.map(\.element.stdout))
        let bob = Set(results.enumerated().filter { $0.offset % 2 == 1 }.map(\.element.stdout))
        #expect(alice.count == 1 && bob.count == 1 && alice != bob)
        let counters = try TestBrowser(port: workspace.server.base.port ?? 0).get("/_dev/counters").json
        #expect(counters?["requests"]?["POST /refresh-token"] == 2, "\(String(describing: counters))")
        for profile in ["alice", "bob"] {
            #expect(
                try CLIRunner.run(["status", "--profile", profile], environment: workspace.environment).status == 0)
        }
    }

    @Test("kubectl runs sesame as its exec credential plugin: the API gets the token, a fresh one once expired")
    func kubectl() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/kubectl") else {
            print("notice: CredentialPluginTests.kubectl: kubectl missing (apt-get install kubectl); skipped")
            return
        }
        let workspace = try OIDCLoginCommandTests.Workspace()
        defer { workspace.stop() }
        try workspace.signIn([])
        // A stand-in API server over TLS (kubectl runs exec plugins only for TLS), logging what it is sent.
        let api = ChildProcess()
        api.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        api.arguments = [
            "python3", OIDCLoginCommandTests.root.appendingPathComponent("Tests/Interop/fake_kube_api.py").path,
            workspace.folder.path,
        ]
        let apiOutput = Pipe()
        let apiInput = Pipe()
        api.standardOutput = .pipe(apiOutput)
        api.standardInput = .pipe(apiInput)
        try api.run()
        defer {
            try? apiInput.fileHandleForWriting.close()
            api.waitUntilExit()
        }
        let ready = apiOutput.fileHandleForReading.readLineUnbuffered()
        let port = try #require(Int(ready.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst(6)), "\(ready)")
        let seen = { () -> [String] in
            let log = workspace.folder.appendingPathComponent("authorization.log")
            return ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        let kubeconfig = workspace.folder.appendingPathComponent("kubeconfig")
        let config: JOSEValue = [
            "apiVersion": "v1", "kind": "Config", "current-context": "dev",
            "clusters": [
                [
                    "name": "dev",
                    "cluster": ["server": .string("https://127.0.0.1:\(port)"), "insecure-skip-tls-verify": true],
                ]
            ],
            "contexts": [["name": "dev", "context": ["cluster": "dev", "user": "dev"]]],
            "users": [
                [
                    "name": "dev",
                    "user": [
                        "exec": [
                            "apiVersion": "client.authentication.k8s.io/v1",
                            "command": .string(CLIRunner.binary.path),
                            "args": ["token", "--output", "exec-credential"], "interactiveMode": "Never",
                            "env": [
                                ["name": "SESAME_HOME", "value": .string(workspace.folder.path)],
                                ["name": "SESAME_STORE", "value": "file"],
                            ],
                        ]
                    ],
                ]
            ],
        ]
        try Data(config.jsonBytes).write(to: kubeconfig)
        func kubectl() throws -> CLIResult {
            try CLIRunner.run(
                executable: URL(fileURLWithPath: "/usr/bin/kubectl"),
                ["--kubeconfig", kubeconfig.path, "get", "--raw", "/version"],
                environment: ["HOME": workspace.folder.path])
        }
        let first = try kubectl()
        #expect(first.status == 0 && first.stdout.contains("v1.30.0"), "\(first.stderr)")
        let token = try CLIRunner.run(["token"], environment: workspace.environment).stdout
            .trimmingCharacters(in: .newlines)
        #expect(seen().last == "Bearer " + token)
        // The stored token expires: the plugin refreshes, and kubectl sends the new one.
        try Self.ageStoredToken(workspace)
        let second = try kubectl()
        #expect(second.status == 0, "\(second.stderr)")
        #expect(seen().last?.hasPrefix("Bearer ") == true && seen().last != "Bearer " + token)
    }

    @Test("git credential fill asks sesame: the token for the profile's host, nothing for another; reject refreshes")
    func git() throws {
        let workspace = try OIDCLoginCommandTests.Workspace()
        defer { workspace.stop() }
        try workspace.signIn([])
        let helper = "!\(CLIRunner.binary.path) credential-helper"
        let environment = [
            "HOME": workspace.folder.path, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
            "SESAME_HOME": workspace.folder.path, "SESAME_STORE": "file",
        ]
        func git(_ operation: String, _ input: String) throws -> CLIResult {
            try CLIRunner.run(
                executable: URL(fileURLWithPath: "/usr/bin/git"),
                ["-c", "credential.helper=", "-c", "credential.helper=\(helper)", "credential", operation],
                stdin: input, environment: environment)
        }
        let port = workspace.server.base.port ?? 0
        let filled = try git("fill", "protocol=http\nhost=127.0.0.1:\(port)\n\n")
        #expect(filled.status == 0 && filled.stdout.contains("username=oauth2"), "\(filled.stderr)")
        let token = try CLIRunner.run(["token"], environment: workspace.environment).stdout
            .trimmingCharacters(in: .newlines)
        #expect(filled.stdout.contains("password=\(token)\n"))
        // Lines ended "\r\n" are read as lines ("\r\n" is one Swift Character: a split on "\n" saw one line).
        let crlf = try CLIRunner.run(
            ["credential-helper", "get"], stdin: "protocol=http\r\nhost=127.0.0.1:\(port)\r\n\r\n",
            environment: workspace.environment)
        #expect(crlf.status == 0 && crlf.stdout.contains("password=\(token)\n"), "\(crlf.stderr)")
        // Another host (another port is another origin): nothing from sesame, and git, unable to prompt, fails.
        let other = try git("fill", "protocol=http\nhost=127.0.0.1:\(port + 1)\n\n")
        #expect(other.status != 0 && !other.stdout.contains(token))
        let https = try git("fill", "protocol=https\nhost=127.0.0.1:\(port)\n\n")
        #expect(!https.stdout.contains(token))
        // The helper itself, asked directly about a host that smuggles the profile's origin in: nothing.
        // An unfinished last line (input cut short) is no attribute: nothing.
        let cut = try CLIRunner.run(
            ["credential-helper", "get"], stdin: "protocol=http\nhost=127.0.0.1:\(port)",
            environment: workspace.environment)
        #expect(cut.status == 0 && cut.stdout.isEmpty)
        for host in ["evil.example@127.0.0.1:\(port)", "127.0.0.1:\(port)/x", "127.0.0.1:\(port)#"] {
            let direct = try CLIRunner.run(
                ["credential-helper", "get"], stdin: "protocol=http\nhost=\(host)\n\n",
                environment: workspace.environment)
            #expect(direct.status == 0 && direct.stdout.isEmpty, "\(host)")
        }
        // git found the token refused: the next fill has a new one.
        _ = try git("reject", "protocol=http\nhost=127.0.0.1:\(port)\nusername=oauth2\npassword=\(token)\n\n")
        let refilled = try git("fill", "protocol=http\nhost=127.0.0.1:\(port)\n\n")
        #expect(refilled.status == 0 && !refilled.stdout.contains(token) && refilled.stdout.contains("password="))
    }
}
