import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import Testing

/// The provider's tests drive the one OIDC test bed (`OIDCTestServer` in SesameTestSupport); its REST side
/// through the dev server's REST test client.
extension OIDCTestServer {
    var running: RunningServer { RunningServer(wrapping: server) }
}

extension JOSEValue {
    var string: String { stringValue ?? "" }
}

extension Optional where Wrapped == JOSEValue {
    /// The string, or "" (a test's `#expect` then fails on what uses it).
    var string: String { self?.stringValue ?? "" }
}

/// `at_hash` for an ES256/RS256 ID token, computed here rather than by the server (OIDC Core §3.1.3.6).
func expectedAtHash(_ accessToken: String) -> String {
    Base64URL.encode(JOSECrypto.sha256(Array(accessToken.utf8)).prefix(16))
}
