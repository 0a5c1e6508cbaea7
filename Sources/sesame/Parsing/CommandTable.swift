/// Every command of `sesame`, each declared once in its own type (``SesameCommand/spec``): parsing, `--help`,
/// `sesame help`, suggestions and `sesame completion` are generated from this table.
enum CommandTable {
    static let all: [CommandSpec] = [
        DemoCommand.spec, ServeCommand.spec, RegisterCommand.spec, LoginCommand.spec, TokenCommand.spec,
        UserInfoCommand.spec, StatusCommand.spec, RequestCommand.spec, LogoutCommand.spec, CredentialHelperCommand.spec,
        CompletionCommand.spec,
        JWKGenerateCommand.spec, JWKPublicCommand.spec, JWTDecodeCommand.spec, JWTVerifyCommand.spec,
        JWTSignCommand.spec,
    ]

    /// The command named by the first one or two of `words`, and how many words it took.
    static func lookup(_ words: [String]) -> (CommandSpec, Int)? {
        if words.count >= 2, let two = all.first(where: { $0.words == Array(words.prefix(2)) }) { return (two, 2) }
        if let one = words.first, let command = all.first(where: { $0.words == [one] }) { return (command, 1) }
        return nil
    }

    /// Groups of subcommands (`jwt`, `jwk`).
    static var groups: [String: [CommandSpec]] {
        Dictionary(grouping: all.filter { $0.words.count == 2 }, by: { $0.words[0] })
    }
}
