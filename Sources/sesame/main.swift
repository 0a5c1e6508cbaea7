import Foundation
import SesameJOSE

// The `sesame` command line: thin argument handling over the Sesame modules. See `sesame help`.
// libcrypto first, without its exit handler: `exit` below must not free what a retiring worker thread still uses.
LibCrypto.prepare()
let status = await CLI.run(Array(CommandLine.arguments.dropFirst()))
exit(status.rawValue)
