import Foundation

// The `sesame` command line: thin argument handling over the Sesame modules. See `sesame help`.
let status = await CLI.run(Array(CommandLine.arguments.dropFirst()))
exit(status.rawValue)
