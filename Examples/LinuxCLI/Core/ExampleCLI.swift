import Foundation
import Sesame

/// A command-line app on the SDK.
///
/// `login ISSUER` (the device flow: a code to enter on another device), `whoami`
/// (an `AuthorizedClient` call to UserInfo, refreshed as needed), `logout`. Credentials live in the Linux keyring
/// when one answers, else in 0600 files; the provider's metadata is kept beside them, so later runs need no
/// discovery.
public struct ExampleCLI: Sendable {
    /// Where the provider's metadata (and, without a keyring, the credentials) are kept.
    public let folder: URL
    /// The client at the provider.
    public let clientID: String
    /// Whether credentials go to the Linux keyring.
    public let usesKeyring: Bool
    let output: @Sendable (String) -> Void

    /// A CLI keeping its files in `folder`.
    ///
    /// - Parameters:
    ///   - folder: where the files go.
    ///   - clientID: the client at the provider.
    ///   - usesKeyring: keep credentials in the Linux keyring (default: when one answers), else 0600 files.
    ///   - output: where lines for the user go (standard output).
    public init(
        folder: URL, clientID: String = "sesame-cli", usesKeyring: Bool = SecretServiceTokenStore.isAvailable,
        output: @escaping @Sendable (String) -> Void = { print($0) }
    ) {
        self.folder = folder
        self.clientID = clientID
        self.usesKeyring = usesKeyring
        self.output = output
    }

    /// The keyring, or files in `folder`.
    public func store() throws -> any TokenStore {
        usesKeyring
            ? SecretServiceTokenStore(service: "example-cli")
            : try FileTokenStore(directory: folder.appendingPathComponent("credentials"))
    }

    var metadataFile: URL { folder.appendingPathComponent("provider.json") }

    /// Signs in with the device flow; `show` receives the code and where to enter it.
    public func login(issuer: URL, show: @escaping @Sendable (DeviceAuthorization) async -> Void) async throws {
        // The device flow has no redirect: no redirect URI to give.
        let auth = try await OIDCAuth.configure(issuer: issuer, clientID: clientID, store: try store())
        let tokens = try await auth.signInOnAnotherDevice { authorization, progress in
            if progress == nil { await show(authorization) }
        }
        // The provider's endpoints decide where credentials go: 0600 in a 0700 folder, like the credentials.
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try JSONEncoder().encode(auth.provider.metadata).write(to: metadataFile, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: metadataFile.path)
        output("signed in as \(tokens.user?.email ?? tokens.user?.id ?? "?")")
    }

    func restored() async throws -> OIDCAuth {
        guard let data = try? Data(contentsOf: metadataFile) else {
            throw AuthError(.notSignedIn, "not signed in: example-cli login ISSUER")
        }
        return try await OIDCAuth.restore(
            metadata: try JSONDecoder().decode(OIDCProviderMetadata.self, from: data), clientID: clientID,
            store: try store())
    }

    /// Who is signed in, from UserInfo through an `AuthorizedClient`.
    public func whoami() async throws {
        let auth = try await restored()
        guard let endpoint = auth.provider.metadata.userInfoEndpoint else {
            throw AuthError(.configuration, "the provider has no UserInfo endpoint")
        }
        // A client for the endpoint's origin: credentials go there and nowhere else.
        guard let origin = URL(string: "/", relativeTo: endpoint)?.absoluteURL else {
            throw AuthError(.configuration, "an unusable UserInfo endpoint")
        }
        let response = try await auth.client(for: origin).send(.get(endpoint.path))
        let claims = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        output("\(claims?["email"] as? String ?? "?") (HTTP \(response.status))")
    }

    /// Signs out, revoking at the provider.
    public func logout() async throws {
        let result = try await restored().signOut()
        try? FileManager.default.removeItem(at: metadataFile)
        output(result.credentialsRemoved ? "signed out" : "signed out here; the server did not confirm")
    }
}
