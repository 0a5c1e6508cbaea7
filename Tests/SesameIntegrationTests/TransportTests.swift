import Foundation
import Sesame
import SesameDevServer
import SesameLoopback
import SesameTestSupport
import Testing

/// Both transports behave the same over real loopback HTTP: methods and bodies, repeated headers, empty answers,
/// timeouts, cancellation, connection failures, limits.
@Suite struct TransportTests {
    static let names = ["curl", "urlsession"]

    static func transport(_ name: String) -> any HTTPTransport {
        name == "curl" ? SesameHTTP.platformTransport : URLSessionTransport()
    }

    static func echo() throws -> RecordingServer {
        try RecordingServer { request in
            switch request.path {
            case "/empty": return HTTPServerResponse(status: 204)
            case "/slow":
                Thread.sleep(forTimeInterval: 2)
                return .text(200, "late")
            case "/big": return .text(200, String(repeating: "x", count: 3 << 20))
            case "/challenges":
                var response = HTTPServerResponse(status: 401)
                response.headers.add("WWW-Authenticate", #"Basic realm="x""#)
                response.headers.add("WWW-Authenticate", #"Bearer error="invalid_token""#)
                return response
            default:
                let body =
                    #"{"method":"\#(request.method)","bytes":\#(request.body.count),"type":"\#(request.headers["Content-Type"] ?? "")"}"#
                return .json(200, Data(body.utf8))
            }
        }
    }

    func send(
        _ transport: any HTTPTransport, _ server: RecordingServer, _ method: String, _ path: String,
        body: Data? = nil, headers: SesameHTTP.Headers = [:], timeout: TimeInterval = 30
    ) async throws
        -> SesameHTTP.Response
    {
        try await transport.send(
            SesameHTTP.Request(
                method: method, url: server.base.appendingPathComponent(path), headers: headers, body: body,
                timeout: timeout))
    }

    @Test("Methods and bodies arrive as sent; no invented Content-Type; 204 is empty", arguments: names)
    func methodsAndBodies(name: String) async throws {
        let server = try Self.echo()
        defer { server.stop() }
        let transport = Self.transport(name)
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            let body: Data? = method == "GET" ? nil : Data(#"{"k":"v"}"#.utf8)
            let headers: SesameHTTP.Headers = body == nil ? [:] : ["Content-Type": "application/json"]
            let response = try await send(transport, server, method, "/echo", body: body, headers: headers)
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(response.status == 200 && text.contains(#""method":"\#(method)""#), "\(method): \(text)")
            #expect(text.contains(#""bytes":\#(body?.count ?? 0)"#))
        }
        let untyped = try await send(transport, server, "POST", "/echo", body: Data("raw".utf8))
        if name == "curl" {
            #expect(String(decoding: untyped.body, as: UTF8.self).contains(#""type":"""#))
        }
        let empty = try await send(transport, server, "DELETE", "/empty")
        #expect(empty.status == 204 && empty.body.isEmpty)
        let head = try await send(transport, server, "HEAD", "/echo")
        #expect(head.status == 200 && head.body.isEmpty)
    }

    @Test("Repeated WWW-Authenticate fields both arrive and parse (URLSession on Linux: a typed error, never a hang)")
    func repeatedHeaders() async throws {
        let server = try Self.echo()
        defer { server.stop() }
        let response = try await send(SesameHTTP.platformTransport, server, "GET", "/challenges")
        #expect(Set(response.challenges.map(\.scheme)) == ["Basic", "Bearer"])
        #if canImport(FoundationNetworking)
            do {
                _ = try await send(URLSessionTransport(), server, "GET", "/challenges")
            } catch let error as AuthError {
                #expect(error.code == .transport && error.message.contains("CurlTransport"))
            }
        #else
            let viaURLSession = try await send(URLSessionTransport(), server, "GET", "/challenges")
            #expect(viaURLSession.status == 401 && viaURLSession.challenges.count == 2)
        #endif
    }

    @Test("A timeout and a refused connection are transport errors; cancellation is CancellationError")
    func failures() async throws {
        let server = try Self.echo()
        defer { server.stop() }
        let transport = SesameHTTP.platformTransport
        do {
            _ = try await send(transport, server, "GET", "/slow", timeout: 0.3)
            Issue.record("expected a timeout")
        } catch let error as AuthError {
            #expect(error.code == .transport && error.isTransient && error.message.contains("timed out"))
        }
        let closed = try RecordingServer { _ in .text(200, "") }
        let port = closed.port
        closed.stop()
        do {
            _ = try await transport.send(
                SesameHTTP.Request(method: "GET", url: try #require(URL(string: "http://127.0.0.1:\(port)/"))))
        } catch let error as AuthError {
            #expect(error.code == .transport && error.isTransient)
        }
        // Cancelled while the server still holds the answer: CancellationError, not the late answer.
        let task = Task { try await send(transport, server, "GET", "/slow") }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test("Limits: a response over the size limit is refused; control characters in headers never go out")
    func limits() async throws {
        let server = try Self.echo()
        defer { server.stop() }
        let small = CurlTransport(maximumResponseSize: 1 << 20)
        do {
            _ = try await send(small, server, "GET", "/big")
            Issue.record("expected a size refusal")
        } catch let error as AuthError {
            #expect(error.code == .transport && error.message.contains("larger than"))
        }
        #expect(try await send(SesameHTTP.platformTransport, server, "GET", "/big").body.count == 3 << 20)
        let before = server.requests.count
        for hostile in ["x\r\nInjected: yes", "x\ny", "x\u{0}y"] {
            await #expect(throws: AuthError.self) {
                try await send(small, server, "GET", "/echo", headers: ["X-Value": hostile])
            }
        }
        #expect(server.requests.count == before)
        await #expect(throws: AuthError.self) {
            try await small.send(
                SesameHTTP.Request(method: "GET", url: try #require(URL(string: "file:///etc/passwd"))))
        }
    }
}

/// What an earlier security review found in the transports.
extension TransportTests {
    @Test(
        "Transports refuse a method that is not an HTTP token (no request-line smuggling)",
        arguments: ["curl", "urlsession"])
    func methodInjection(transport: String) async throws {
        let server = try RecordingServer { _ in .text(200, "ok") }
        defer { server.stop() }
        let sender: any HTTPTransport = transport == "curl" ? SesameHTTP.platformTransport : URLSessionTransport()
        for method in ["GET /smuggled HTTP/1.1\r\nX-Injected: yes\r\nX-Pad:", "GET X", "", "G\u{0}T"] {
            await #expect(throws: AuthError.self) {
                try await sender.send(
                    SesameHTTP.Request(method: method, url: server.base.appendingPathComponent("real")))
            }
        }
        #expect(server.requests.isEmpty)
    }

    @Test("URLSessionTransport keeps no cookies; headers print and dump without values")
    func cookiesAndHeaderRedaction() async throws {
        let server = try RecordingServer { request in
            request.path == "/set"
                ? HTTPServerResponse(status: 200, headers: ["Set-Cookie": "sid=SECRET-COOKIE; Path=/"])
                : .text(200, "cookie:" + (request.headers["Cookie"] ?? "none"))
        }
        defer { server.stop() }
        let transport = URLSessionTransport()
        _ = try await transport.send(SesameHTTP.Request(method: "GET", url: server.base.appendingPathComponent("set")))
        let echoed = try await transport.send(
            SesameHTTP.Request(method: "GET", url: server.base.appendingPathComponent("echo")))
        #expect(String(decoding: echoed.body, as: UTF8.self) == "cookie:none")
        let headers: SesameHTTP.Headers = ["Authorization": "Bearer SECRET"]
        var dumped = ""
        dump(headers, to: &dumped)
        #expect(!dumped.contains("SECRET") && !"\(headers)".contains("SECRET"))
    }
}

extension TransportTests {
    @Test("CurlTransport's connection limit reads without starting the engine (it used to, before libcurl was loaded)")
    func connectionLimitIsAConstant() {
        #expect(CurlTransport().maximumConnectionsPerHost == 32)
    }

    @Test("a POST whose connection dies unanswered is not sent again by libcurl (a fresh connection of its own)")
    func noSilentResend() async throws {
        var configuration = DevServer.Configuration()
        configuration.faults = try FaultPlan(spec: "POST /logout:drop")
        configuration.passwordIterations = 1000
        let server = try DevServer(configuration: configuration)
        let base = try server.start()
        defer { server.stop() }
        let transport = SesameHTTP.platformTransport
        // A GET first leaves a kept-alive connection that libcurl would reuse.
        _ = try await transport.send(SesameHTTP.Request(method: "GET", url: base.appendingPathComponent("jwks")))
        await #expect(throws: AuthError.self) {
            _ = try await transport.send(
                SesameHTTP.Request(
                    method: "POST", url: base.appendingPathComponent("logout"),
                    headers: ["Content-Type": "application/json"], body: Data("{}".utf8)))
        }
        let counters = try await transport.send(
            SesameHTTP.Request(method: "GET", url: base.appendingPathComponent("_dev/counters")))
        let requests = try JSONSerialization.jsonObject(with: counters.body) as? [String: Any]
        #expect((requests?["requests"] as? [String: Int])?["POST /logout"] == 1, "\(String(describing: requests))")
    }

    #if os(Linux)
        @Test(
            "CurlTransport's connections are close-on-exec: a program started mid-request inherits none of them",
            .timeLimit(.minutes(1)))
        func curlConnectionsStayHome() async throws {
            let (entered, signal) = AsyncStream<Void>.makeStream()
            let release = DispatchSemaphore(value: 0)
            let server = try RecordingServer { _ in
                signal.yield()
                _ = release.wait(timeout: .now() + 10)
                return .text(200, "done")
            }
            defer { server.stop() }
            let pending = Task {
                defer { signal.finish() }  // a request failing before the server has it ends the wait too
                return try await send(CurlTransport(), server, "GET", "/held")
            }
            for await _ in entered { break }
            let connections = socketDescriptors(peerPort: server.port)
            #expect(connections.count == 1)  // libcurl's connection, its request held by the server
            let child = try InheritingChild()
            let inherited = child.descriptorNames()
            child.end()
            #expect(!inherited.isEmpty)  // (read: it has its standard input, output and error)
            #expect(Set(connections.map(\.name)).isDisjoint(with: inherited))
            release.signal()
            #expect(try await pending.value.status == 200)
        }
    #endif
}
