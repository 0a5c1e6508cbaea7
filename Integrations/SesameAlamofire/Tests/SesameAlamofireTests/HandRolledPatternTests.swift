import Alamofire
import Foundation
import Sesame
import SesameAlamofire
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The backend of the hand-rolled pattern: `POST auth/refresh {"refreshToken","deviceId"}` (and the rest of the
/// REST contract), played by a loopback proxy in front of the dev server that drops a share of refresh
/// connections on purpose.
final class DeviceBackend: @unchecked Sendable {
    let proxy: HTTPServer
    let port: Int
    // `counter` and `dropped` are only touched under `lock`.
    private let lock = NSLock()
    private var counter = 0
    private(set) var dropped = 0

    init(upstream: URL, dropEvery dropRate: Double) throws {
        let box = Unowned()
        proxy = HTTPServer { request in
            guard let owner = box.owner else { return .drop }
            return owner.handle(request, upstream: upstream, dropRate: dropRate)
        }
        port = try proxy.start()
        guard let base = URL(string: "http://127.0.0.1:\(port)/") else { throw AuthError(.configuration, "no URL") }
        self.base = base
        box.owner = self
    }

    let base: URL

    private func handle(_ request: HTTPServerRequest, upstream: URL, dropRate: Double) -> HTTPServerResponse {
        if request.path == "/auth/refresh" {
            guard let body = try? JOSEValue.parse(request.body), let token = body["refreshToken"]?.stringValue,
                body["deviceId"]?.stringValue?.isEmpty == false
            else { return .json(400, Data(#"{"error":"invalid_request"}"#.utf8)) }
            // A deterministic 30 %: the 1st, 4th, 7th, … refresh of each ten is dropped.
            let drop: Bool = {
                lock.lock()
                defer { lock.unlock() }
                counter += 1
                let hit = Double(counter % 10) / 10 < dropRate
                if hit { dropped += 1 }
                return hit
            }()
            if drop { return .drop }
            return forward(
                "POST", upstream.appendingPathComponent("refresh-token"),
                JOSEValue.object(["refreshToken": .string(token)]).jsonData, nil)
        }
        return forward(
            request.method, upstream.appendingPathComponent(String(request.path.dropFirst())), request.body,
            request.headers["Authorization"])
    }

    /// Forwards synchronously (this is a server thread).
    private func forward(_ method: String, _ url: URL, _ body: Data, _ authorization: String?) -> HTTPServerResponse {
        var headers: SesameHTTP.Headers = ["Content-Type": "application/json"]
        if let authorization { headers["Authorization"] = authorization }
        let request = SesameHTTP.Request(method: method, url: url, headers: headers, body: body.isEmpty ? nil : body)
        let result = Locked<SesameHTTP.Response?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            result.value = try? await SesameHTTP.platformTransport.send(request)
            done.signal()
        }
        done.wait()
        guard let response = result.value else { return .drop }
        var answer = HTTPServerResponse(status: response.status, body: response.body)
        for field in response.headers where ["content-type", "www-authenticate"].contains(field.name.lowercased()) {
            answer.headers.add(field.name, field.value)
        }
        return answer
    }

    func stop() { proxy.stop() }

    private final class Unowned: @unchecked Sendable { weak var owner: DeviceBackend? }
}

/// A value behind a lock.
final class Locked<Value>: @unchecked Sendable {
    // `stored` is only touched under `lock`.
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value {
        get {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }
        set {
            lock.lock()
            stored = newValue
            lock.unlock()
        }
    }
}

@Suite struct HandRolledPatternTests {
    @Test(
        "auth/refresh with {refreshToken, deviceId}, 30 % dropped refreshes: never signed out; invalid_grant: signed out, store empty"
    )
    func deviceRefresh() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        let device = try DeviceBackend(upstream: backend.base, dropEvery: 0.3)
        defer { device.stop() }
        var contract = RESTAuthProvider.Contract()
        contract.refreshPath = "auth/refresh"
        contract.refreshBody = { ["refreshToken": .string($0), "deviceId": "device-42"] }
        let clock = backend.clock
        let provider = RESTAuthProvider(baseURL: device.base, contract: contract, timeSource: clock)
        let store = InMemoryTokenStore()
        let session = AuthSession(
            provider: provider, store: store, timeSource: clock, refreshLeeway: 0,
            refreshBudget: .init(maxRefreshes: 100))
        try await session.signIn(
            with: try await provider.register(email: "device@example.com", password: "correct-horse"))
        let interceptor = SesameInterceptor(session: session, origins: [device.base])
        let alamofire = Alamofire.Session(interceptor: interceptor, redirectHandler: interceptor.redirectHandler)
        var successes = 0
        var failures = 0
        for _ in 0..<20 {
            clock.advance(by: 901)  // every call finds the access token expired
            let response = await alamofire.request(device.base.appendingPathComponent("me")).validate()
                .serializingData().response
            if response.response?.statusCode == 200 { successes += 1 } else { failures += 1 }
            #expect(await session.status == .signedIn)
            #expect(try await store.load(profile: "default") != nil)
        }
        #expect(
            device.dropped >= 5 && failures >= 1 && successes >= 10,
            "\(successes) ok, \(failures) failed, \(device.dropped) dropped")

        // Another device reuses the current refresh token: the server revokes the family, the next refresh here
        // is a definitive invalid_grant.
        let current = try #require(try await session.currentTokens?.refreshToken)
        _ = try? await RESTAuthProvider(baseURL: backend.base).refresh(
            TokenSet(accessToken: "x", refreshToken: current))
        _ = try? await RESTAuthProvider(baseURL: backend.base).refresh(
            TokenSet(accessToken: "x", refreshToken: current))
        clock.advance(by: 901)
        var ended = false
        for _ in 0..<5 where !ended {  // a dropped connection is transient; the rejection comes through
            _ = await alamofire.request(device.base.appendingPathComponent("me")).validate().serializingData().response
            ended = await session.status == .signedOut(reason: .sessionExpired)
        }
        #expect(ended)
        #expect(try await store.load(profile: "default") == nil)
    }
}
