import Foundation
import Sesame
import Testing

/// Runs `body`, which must throw an ``AuthError`` with `code`; records an issue naming `what` otherwise.
func expectAuthError<T>(
    _ code: AuthError.Code, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async {
    do {
        _ = try await body()
        Issue.record("\(what): no error", sourceLocation: sourceLocation)
    } catch let error as AuthError {
        #expect(error.code == code, "\(what): \(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(what): \(error)", sourceLocation: sourceLocation)
    }
}

extension TokenSet {
    /// Credentials of user `id` that never expire: `ID-aSUFFIX` / `ID-rSUFFIX`.
    static func of(_ id: String, _ suffix: String) -> TokenSet {
        TokenSet(
            accessToken: "\(id)-a\(suffix)", refreshToken: "\(id)-r\(suffix)", expiresAt: .distantFuture,
            user: .init(id: id))
    }
}
