import Foundation
import SesameJOSE
import SesameLoopback

/// Every route of one issuer (DESIGN §4): the REST contract, the OpenID Connect provider, and `/_dev/`.
extension DevServer {
    func makeRouter() -> HTTPRouter {
        var router = HTTPRouter()
        router.add("POST", "/register") { [self] in register($0) }
        router.add("POST", "/login") { [self] in login($0) }
        router.add("POST", "/refresh-token") { [self] in refresh($0) }
        router.add("POST", "/logout") { [self] in logout($0) }
        router.add("GET", "/me") { [self] in me($0) }
        router.add("POST", "/auth/apple") { [self] in appleExchange($0) }
        router.add("GET", "/jwks") { [self] _ in jwks() }
        router.add("GET", "/.well-known/openid-configuration") { [self] _ in discovery() }
        router.add("GET", "/.well-known/oauth-authorization-server") { [self] _ in discovery() }
        router.add("GET", "/authorize") { [self] in authorize($0) }
        router.add("POST", "/authorize") { [self] in authorize($0) }
        router.add("POST", "/par") { [self] in pushAuthorizationRequest($0) }
        router.add("POST", "/token") { [self] in token($0) }
        router.add("GET", "/userinfo") { [self] in userInfo($0) }
        router.add("POST", "/userinfo") { [self] in userInfo($0) }
        router.add("POST", "/revoke") { [self] in revoke($0) }
        router.add("GET", "/end-session") { [self] in endSession($0) }
        router.add("POST", "/end-session") { [self] in endSession($0) }
        router.add("POST", "/device_authorization") { [self] in deviceAuthorization($0) }
        router.add("GET", "/device") { [self] in devicePage($0) }
        router.add("POST", "/device") { [self] in deviceSubmission($0) }
        router.add("POST", "/connect/register") { [self] in registerClient($0) }
        router.add("GET", "/protected") { [self] in protectedResource($0) }
        router.add("POST", "/protected") { [self] in protectedResource($0) }
        router.add("POST", "/_dev/protected") { [self] in setProtectedRoute($0) }
        router.add("GET", "/_dev/protected") { [self] _ in protectedRouteDescription() }
        router.add("GET", "/_dev/debugger") { [self] _ in debugger() }
        router.add("GET", "/_dev/rp-tests") { [self] _ in listRPTests() }
        router.add("POST", "/_dev/rp-test") { [self] in setRPTest($0) }
        router.add("POST", "/_dev/rotate-keys") { [self] _ in rotateKeysNow() }
        router.add("POST", "/_dev/token") { [self] in mintToken($0) }
        router.add("GET", "/_dev/counters") { [self] _ in .json(200, state.withLock { $0.counters.jsonValue }.jsonData)
        }
        router.add("POST", "/_dev/counters/reset") { [self] _ in
            state.withLock { $0.counters = Counters() }
            return HTTPServerResponse(status: 204)
        }
        router.add("POST", "/_dev/faults") { [self] in setFaults($0) }
        router.add("POST", "/_dev/apple/identity-token") { [self] in mintAppleToken($0) }
        router.add("GET", "/_dev/apple/jwks") { [self] _ in appleJWKS() }
        return router
    }
}
