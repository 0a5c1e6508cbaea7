public import Foundation
internal import SesameJOSE

/// A device authorization in progress (RFC 8628 §3.2): what to show the user, and the device code to poll with.
public struct DeviceAuthorization: Sendable, CustomStringConvertible, CustomReflectable {
    /// The code the user types (show it, always: RFC 8628 §5.4).
    public let userCode: String
    /// Where the user types it.
    public let verificationURI: URL
    /// The same with the code filled in, for a QR code or a link (show ``verificationURI`` and ``userCode`` too).
    public let verificationURIComplete: URL?
    /// When the device code expires.
    public let expiresAt: Date
    /// The polling interval the provider asked for (5 s when it named none).
    public let interval: TimeInterval
    let deviceCode: String

    /// The user code and URIs; never the device code.
    public var description: String {
        "DeviceAuthorization(userCode: \(userCode), verificationURI: \(verificationURI.absoluteString), expiresAt: \(expiresAt))"
    }

    /// What `dump()` and debuggers show: everything but the device code, which polls for the user's tokens.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "userCode": userCode, "verificationURI": verificationURI,
                "verificationURIComplete": verificationURIComplete as Any, "expiresAt": expiresAt, "interval": interval,
            ], displayStyle: .struct)
    }
}

/// One step of the device flow as it polls.
public enum DeviceFlowProgress: Sendable {
    /// Still waiting for the user; `secondsLeft` until the code expires.
    case waiting(secondsLeft: Int, interval: TimeInterval)
    /// The user approved: the tokens.
    case signedIn(TokenSet)
}

extension OIDCAuthProvider {
    /// Starts the device flow (RFC 8628 §3.1): call it when the user asks to sign in, not at launch.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/configuration`` when the provider has no device endpoint; the
    ///   provider's errors.
    public func deviceAuthorization() async throws -> DeviceAuthorization {
        guard let endpoint = metadata.deviceAuthorizationEndpoint else {
            throw AuthError(.configuration, "the provider has no device authorization endpoint")
        }
        let response = try await postForm(
            endpoint, [("client_id", configuration.clientID), ("scope", configuration.scopes.joined(separator: " "))])
        guard response.status == 200 else { throw Self.failure(response, "the device authorization was refused") }
        guard let json = try? JOSEValue.parse(response.body), let deviceCode = json["device_code"]?.stringValue,
            let userCode = json["user_code"]?.stringValue, PrintableText.isClean(userCode), userCode.count <= 64,
            userCode.unicodeScalars.allSatisfy({ $0.isASCII }),
            let uriText = json["verification_uri"]?.stringValue ?? json["verification_url"]?.stringValue,
            let uri = URL(string: uriText), Self.isWebURL(uri), let expiresIn = json["expires_in"]?.doubleValue,
            expiresIn.isFinite,
            expiresIn > 0
        else { throw AuthError(.invalidResponse, "the device authorization response is incomplete") }
        let interval = json["interval"]?.doubleValue.flatMap { $0.isFinite && $0 >= 1 && $0 <= 3600 ? $0 : nil } ?? 5
        return DeviceAuthorization(
            userCode: userCode, verificationURI: uri,
            verificationURIComplete: json["verification_uri_complete"]?.stringValue.flatMap(URL.init(string:)).flatMap {
                Self.isWebURL($0) ? $0 : nil
            },
            expiresAt: timeSource.now.addingTimeInterval(min(expiresIn, 86400)), interval: interval,
            deviceCode: deviceCode)
    }

    /// Whether `url` is https, or http on loopback: nothing else (`javascript:`, `file:`) is shown to a user to open.
    static func isWebURL(_ url: URL) -> Bool {
        url.host?.isEmpty == false
            && (url.scheme?.lowercased() == "https" || OIDCProviderMetadata.isLoopback(url))
    }

    /// Polls the token endpoint until the user decides (RFC 8628 §3.4–3.5): `authorization_pending` waits the
    /// interval, `slow_down` adds 5 s to it for good, a timeout doubles it; `access_denied` and `expired_token`
    /// end the flow, as does the device code's expiry.
    ///
    /// The stream yields ``DeviceFlowProgress/waiting(secondsLeft:interval:)`` before every wait, then
    /// ``DeviceFlowProgress/signedIn(_:)``, and finishes; cancel the consuming task to stop.
    ///
    /// - Throws (from the stream): ``AuthError`` — ``AuthError/Code/cancelled`` (`access_denied`),
    ///   ``AuthError/Code/deviceCodeExpired``, the provider's other errors.
    public func deviceTokens(for authorization: DeviceAuthorization) -> AsyncThrowingStream<
        DeviceFlowProgress, any Error
    > {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    var interval = authorization.interval
                    while true {
                        let left = authorization.expiresAt.timeIntervalSince(timeSource.now)
                        guard left > 0 else {
                            throw AuthError(.deviceCodeExpired, "the code expired before it was approved; start again")
                        }
                        continuation.yield(.waiting(secondsLeft: Int(left.rounded(.up)), interval: interval))
                        try await sleep(min(interval, left))
                        // No poll after the code has expired (DEV-08).
                        guard authorization.expiresAt > timeSource.now else {
                            throw AuthError(.deviceCodeExpired, "the code expired before it was approved; start again")
                        }
                        let response: SesameHTTP.Response
                        do {
                            response = try await postWithProof(
                                metadata.tokenEndpoint,
                                [
                                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                                    ("device_code", authorization.deviceCode), ("client_id", configuration.clientID),
                                ])
                        } catch let error as AuthError where error.code == .transport {
                            interval *= 2  // RFC 8628 §3.5: back off on a timeout
                            continue
                        }
                        if response.status == 200 {
                            let tokens = try await tokens(
                                from: response, expecting: IDTokenValidator.Expectations(), previous: nil)
                            continuation.yield(.signedIn(tokens))
                            continuation.finish()
                            return
                        }
                        let error = Self.failure(response, "the device grant was refused")
                        switch error.serverResponse?.error {
                        case "authorization_pending": continue
                        case "slow_down": interval += 5
                        case "access_denied":
                            throw AuthError(
                                .cancelled, "the device was not approved", serverResponse: error.serverResponse)
                        case "expired_token":
                            throw AuthError(
                                .deviceCodeExpired, "the code expired before it was approved; start again",
                                serverResponse: error.serverResponse)
                        default:
                            if error.isTransient {
                                interval *= 2
                                continue
                            }
                            throw error
                        }
                    }
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
