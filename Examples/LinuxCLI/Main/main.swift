import ExampleCLICore
import Foundation
import Sesame

// EXAMPLE_CLI_HOME, else $XDG_CONFIG_HOME/example-cli, else $HOME/.config/example-cli.
let environment = ProcessInfo.processInfo.environment
let config = environment["XDG_CONFIG_HOME"] ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.config")
let home = URL(fileURLWithPath: environment["EXAMPLE_CLI_HOME"] ?? config + "/example-cli")
let cli = ExampleCLI(folder: home)
let arguments = Array(CommandLine.arguments.dropFirst())
do {
    switch arguments.first {
    case "login" where arguments.count == 2:
        guard let issuer = URL(string: arguments[1]) else { throw AuthError(.configuration, "an issuer URL") }
        try await cli.login(issuer: issuer) { authorization in
            let line = "open \(authorization.verificationURI.absoluteString) and enter \(authorization.userCode)\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
    case "whoami": try await cli.whoami()
    case "logout": try await cli.logout()
    default:
        FileHandle.standardError.write(Data("usage: example-cli login ISSUER | whoami | logout\n".utf8))
        exit(2)
    }
} catch let error as AuthError {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(error.requiresReauthentication ? 3 : error.isTransient ? 4 : 1)  // as sesame's own exit statuses
}
