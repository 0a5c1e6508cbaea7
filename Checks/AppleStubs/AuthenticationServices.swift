// Stand-in declarations of AuthenticationServices (ASWebAuthenticationSession, Sign in with Apple) for
// type-checking only. The presentation-context protocols and the authorization delegate are main-actor isolated,
// as in Apple's current SDK (UI actor); the session's completion handler is a plain closure, which the system
// calls on a queue of its own. (Sesame's witnesses are written to satisfy older, nonisolated declarations too.)
// Like Apple's framework module (`export *`) it re-exports the Objective-C modules below it — ObjectiveC's NSObject
// here — but not Foundation's Swift types (URL, Data): a public use of those needs Foundation imported publicly.
import Foundation
@_exported import ObjectiveC

/// UIWindow / NSWindow on Apple platforms: main-actor isolated, like them.
@MainActor open class ASPresentationAnchor: ObjectiveC.NSObject {}

private func stub() -> Never { fatalError("Apple stand-in: type-checking only") }

@MainActor public protocol ASWebAuthenticationPresentationContextProviding: ObjectiveC.NSObjectProtocol {
    func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor
}

public struct ASWebAuthenticationSessionError: Error, Hashable {
    public enum Code: Int, Sendable {
        case canceledLogin = 1
        case presentationContextNotProvided = 2
        case presentationContextInvalid = 3
    }
    public var code: Code
}

open class ASWebAuthenticationSession: ObjectiveC.NSObject {
    public typealias CompletionHandler = (URL?, (any Error)?) -> Void
    public init(url URL: URL, callbackURLScheme: String?, completionHandler: @escaping CompletionHandler) { stub() }
    open weak var presentationContextProvider: (any ASWebAuthenticationPresentationContextProviding)?
    open var prefersEphemeralWebBrowserSession: Bool = false
    open func start() -> Bool { stub() }
    open func cancel() { stub() }
}

open class ASAuthorization: ObjectiveC.NSObject {
    public struct Scope: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let email = Scope(rawValue: "email")
        public static let fullName = Scope(rawValue: "full_name")
    }
    open var credential: any ASAuthorizationCredential { stub() }
}

public protocol ASAuthorizationCredential: ObjectiveC.NSObjectProtocol {}

open class ASAuthorizationRequest: ObjectiveC.NSObject {}

open class ASAuthorizationOpenIDRequest: ASAuthorizationRequest {
    open var requestedScopes: [ASAuthorization.Scope]?
    open var state: String?
    open var nonce: String?
}

open class ASAuthorizationAppleIDRequest: ASAuthorizationOpenIDRequest {
    open var user: String?
}

open class ASAuthorizationAppleIDProvider: ObjectiveC.NSObject {
    public override init() { stub() }
    open func createRequest() -> ASAuthorizationAppleIDRequest { stub() }
}

open class ASAuthorizationAppleIDCredential: ObjectiveC.NSObject, ASAuthorizationCredential {
    open var user: String { stub() }
    open var identityToken: Data? { stub() }
    open var authorizationCode: Data? { stub() }
    open var email: String? { stub() }
}

@MainActor public protocol ASAuthorizationControllerDelegate: ObjectiveC.NSObjectProtocol {
    func authorizationController(
        controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization)
    func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error)
}

extension ASAuthorizationControllerDelegate {
    // Optional in Objective-C.
    public func authorizationController(
        controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization
    ) {}
    public func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) {}
}

@MainActor public protocol ASAuthorizationControllerPresentationContextProviding: ObjectiveC.NSObjectProtocol {
    func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor
}

open class ASAuthorizationController: ObjectiveC.NSObject {
    public init(authorizationRequests: [ASAuthorizationRequest]) { stub() }
    open weak var delegate: (any ASAuthorizationControllerDelegate)?
    open weak var presentationContextProvider: (any ASAuthorizationControllerPresentationContextProviding)?
    open func performRequests() { stub() }
}
