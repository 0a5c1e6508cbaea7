import Foundation
import SesameLoopback
import SesameTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct HTTPServerTests {
    static func makeServer(_ configure: (inout HTTPServer.Configuration) -> Void = { _ in }) throws -> HTTPServer {
        var router = HTTPRouter()
        router.add("GET", "/hello") { request in .text(200, "hello \(request.queryParameters["name"] ?? "world")") }
        router.add("POST", "/echo") { request in
            HTTPServerResponse(status: 200, headers: ["Content-Type": "application/octet-stream"], body: request.body)
        }
        router.add("POST", "/form") { request in .text(200, request.formParameters?["a"] ?? "-") }
        router.add("GET", "/empty") { _ in HTTPServerResponse(status: 204) }
        var configuration = HTTPServer.Configuration()
        configure(&configuration)
        let server = HTTPServer(configuration: configuration, handler: router.handle)
        try server.start()
        return server
    }

    @Test("Serves over loopback with URLSession: query, body echo, form decoding, 204 without a body")
    func servesURLSession() async throws {
        let server = try Self.makeServer()
        defer { server.stop() }
        let base = "http://127.0.0.1:\(server.port)"
        let (hello, response) = try await URLSession.shared.data(
            from: try #require(URL(string: "\(base)/hello?name=a%20b")))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: hello, as: UTF8.self) == "hello a b")

        var echo = URLRequest(url: try #require(URL(string: "\(base)/echo")))
        echo.httpMethod = "POST"
        echo.httpBody = Data((0..<5000).map { UInt8($0 % 251) })
        let (echoed, _) = try await URLSession.shared.data(for: echo)
        #expect(echoed == echo.httpBody)

        var form = URLRequest(url: try #require(URL(string: "\(base)/form")))
        form.httpMethod = "POST"
        form.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        form.httpBody = Data("a=x+y%26z&b=2".utf8)
        let (formBody, _) = try await URLSession.shared.data(for: form)
        #expect(String(decoding: formBody, as: UTF8.self) == "x y&z")

        let (empty, emptyResponse) = try await URLSession.shared.data(from: try #require(URL(string: "\(base)/empty")))
        #expect((emptyResponse as? HTTPURLResponse)?.statusCode == 204 && empty.isEmpty)
    }

    @Test("Host localhost binds 127.0.0.1 and ::1 on one port; ::1 alone serves over IPv6")
    func ipv6() throws {
        let both = try Self.makeServer { $0.host = "localhost" }
        defer { both.stop() }
        // (FoundationNetworking's URLSession rejects IPv6 literal hosts, so these use raw sockets.)
        for host in ["127.0.0.1", "::1"] {
            let client = try RawClient(port: both.port, host: host)
            client.send("GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n")
            #expect(client.readToEnd().hasSuffix("hello world"), "\(host)")
        }
        let v6 = try Self.makeServer { $0.host = "::1" }
        defer { v6.stop() }
        let client = try RawClient(port: v6.port, host: "::1")
        client.send("GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(client.readToEnd().hasSuffix("hello world"))
        // (Whether 127.0.0.1 answers on that port number is not asserted: the IPv4 port is free for any other
        // server of the parallel test run to take.)
    }

    @Test("Port 0 picks a free port; a second server cannot take it; stop releases it")
    func portLifecycle() throws {
        let server = try Self.makeServer()
        let port = server.port
        #expect(port > 0)
        #expect(throws: LoopbackError.self) { try Self.makeServer { $0.port = port } }
        server.stop()
        let again = try Self.makeServer { $0.port = port }
        #expect(again.port == port)
        again.stop()
    }

    @Test("Pipelined and keep-alive requests are answered in order on one connection")
    func pipelining() throws {
        let server = try Self.makeServer()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send(
            "GET /hello?name=1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                + "GET /hello?name=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        let responses = client.readResponses(3)
        #expect(responses.count == 3)
        #expect(responses.first?.hasSuffix("hello 1") == true)
        #expect(responses.dropFirst().first?.hasSuffix("abc") == true)
        #expect(responses.last?.hasSuffix("hello 3") == true)
    }

    @Test(
        "Every limit answers with its status and the server keeps serving",
        arguments: [
            ("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "404"),
            ("DELETE /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "405"),
            ("GET /hello HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 17000) + "\r\n\r\n", "431"),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", "413"),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "411"),
            ("GARBAGE\r\n\r\n", "400"), ("GET /hello HTTP/2.0\r\n\r\n", "400"), ("GET hello HTTP/1.1\r\n\r\n", "400"),
            ("GET /hello HTTP/1.1\r\nBad Header: x\r\n\r\n", "400"), ("GET /hello HTTP/1.1\r\n folded\r\n\r\n", "400"),
            ("POST /echo HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "400"),
            ("POST /echo HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "400"),
            ("\u{0}\u{1}\u{2}\u{ff}\r\n\r\n", "400"),
        ])
    func limits(request: String, status: String) throws {
        let server = try Self.makeServer()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send(request)
        let answer = client.readToEnd()
        #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(answer.prefix(80))")
        if status == "405" { #expect(answer.contains("Allow: GET")) }
        let next = try RawClient(port: server.port)
        next.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(next.readToEnd().hasPrefix("HTTP/1.1 200 "))
    }

    @Test("A client that sends half a request and stalls gets 408 and does not hold the server")
    func stalledRequest() throws {
        let server = try Self.makeServer { $0.readTimeout = 0.3 }
        defer { server.stop() }
        let staller = try RawClient(port: server.port)
        staller.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        let other = try RawClient(port: server.port)
        other.send("GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(other.readToEnd().hasPrefix("HTTP/1.1 200 "))
        #expect(staller.readToEnd().hasPrefix("HTTP/1.1 408 "))
    }

    @Test("Bounded concurrency: an idle keep-alive connection makes room for a newcomer; a busy one gets it a 503")
    func boundedConcurrency() throws {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        var router = HTTPRouter()
        router.add("GET", "/hello") { _ in .text(200, "hello") }
        router.add("GET", "/hold") { _ in
            started.signal()
            release.wait()
            return .text(200, "held")
        }
        var configuration = HTTPServer.Configuration()
        configuration.maxConnections = 1
        configuration.readTimeout = 5
        let server = HTTPServer(configuration: configuration, handler: router.handle)
        try server.start()
        defer { server.stop() }
        let first = try RawClient(port: server.port)
        first.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(first.readResponses(1).count == 1)
        // The first connection is idle (once its thread has marked it so): it is closed to make room, and the
        // second is served.
        var second = try RawClient(port: server.port)
        second.send("GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        var attempts = 0
        while started.wait(timeout: .now() + 0.5) == .timedOut, attempts < 20 {
            attempts += 1
            second = try RawClient(port: server.port)
            second.send("GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        }
        #expect(attempts < 20)
        #expect(first.readToEnd().isEmpty, "the idle connection was closed")
        // The only slot is busy now: a third client is answered at once, with a 503.
        let third = try RawClient(port: server.port)
        third.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(third.readToEnd().hasPrefix("HTTP/1.1 503 "))
        release.signal()
        #expect(second.readToEnd().hasSuffix("held"))
    }

    @Test("Graceful stop: a request in flight finishes, then the connection closes")
    func gracefulStop() throws {
        var router = HTTPRouter()
        let started = DispatchSemaphore(value: 0)
        router.add("GET", "/slow") { _ in
            started.signal()
            Thread.sleep(forTimeInterval: 0.3)
            return .text(200, "done")
        }
        let server = HTTPServer(handler: router.handle)
        try server.start()
        let client = try RawClient(port: server.port)
        client.send("GET /slow HTTP/1.1\r\n\r\n")
        #expect(started.wait(timeout: .now() + 5) == .success)
        let idle = try RawClient(port: server.port)
        idle.send("GET /nothing HTTP/1.1\r\n\r\n")
        _ = idle.readResponses(1)
        server.stop()
        let answer = client.readToEnd()
        #expect(answer.hasPrefix("HTTP/1.1 200 ") && answer.hasSuffix("done"))
        #expect(answer.contains("Connection: close"))
        // (That the port is released is asserted by portLifecycle, which binds it again; connecting here would race
        // with other servers of the parallel run that may take the same number.)
    }

    @Test(
        "A child spawned while it runs gets neither the listener nor a connection; stopping ends both even for a copy"
    )
    func childKeepsNothing() throws {
        let server = try Self.makeServer()
        let port = server.port
        let client = try RawClient(port: port)
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(client.readResponses(1).count == 1)  // accepted, and kept alive
        // Started as posix_spawn without file actions (or system(3)'s fork and exec) starts one — an app opening a
        // browser for the redirect: every descriptor that is not close-on-exec goes along.
        #if os(Linux)
            let child = try InheritingChild()
            let inherited = child.descriptorNames()
            child.end()
            #expect(!inherited.isEmpty)  // (read: it has its standard input, output and error)
            let ours = socketDescriptors(localPort: port)
            #expect(ours.count == 2)  // the listener and the accepted connection
            #expect(Set(ours.map(\.name)).isDisjoint(with: inherited))
            // Copies held elsewhere (a child between its fork and its exec, one that forked without exec) must keep
            // neither alive once the server stops.
            let copies = ours.map { fcntl($0.fd, F_DUPFD_CLOEXEC, 0) }
            defer {
                for copy in copies { close(copy) }
            }
        #endif
        server.stop()
        var byte: UInt8 = 0
        // 0: the connection ended. -1 after the client's 5 s timeout: something still holds the server's end.
        #expect(recv(client.fd, &byte, 1, 0) == 0)
        // (Another server of the parallel run could take the number first, as in portLifecycle: unlikely.)
        let again = try Self.makeServer { $0.port = port }
        #expect(again.port == port)
        again.stop()
    }
}

/// Slow and non-reading clients (issue 9's hardening): they cannot starve others, and they do not stay.
@Suite(.disabled(if: underSanitizer, "time bounds under load do not hold under a sanitizer's slowdown"))
struct SlowClientTests {
    @Test(
        "Clients trickling a byte at a time: a newcomer is served at once (the oldest trickler makes room, 408) and the rest hit the whole-request deadline (408)"
    )
    func slowloris() throws {
        let server = try HTTPServerTests.makeServer {
            $0.maxConnections = 8
            $0.maxConnectionsPerPeer = 8
            $0.requestTimeout = 4
            $0.readTimeout = 5
        }
        defer { server.stop() }
        let tricklers = try (0..<8).map { _ in try RawClient(port: server.port) }
        for client in tricklers { client.send("GET /hello HTTP/1.1\r\nHo") }
        let done = DispatchSemaphore(value: 0)
        let stop = LockedBox(false)
        Thread {
            // A byte every 200 ms: far more often than the 5 s read timeout, never a complete request.
            while !stop.value {
                for client in tricklers { client.send("x") }
                Thread.sleep(forTimeInterval: 0.2)
            }
            done.signal()
        }.start()
        Thread.sleep(forTimeInterval: 0.3)
        let newcomer = try RawClient(port: server.port)
        let asked = Date()
        newcomer.send("GET /hello?name=newcomer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(newcomer.readToEnd().hasSuffix("hello newcomer"), "never refused while a trickler can make room")
        // Starved, the newcomer would wait for the tricklers' 4 s deadline (3.7 s from here): 3 s tells the two apart
        // with room for a loaded 2-core machine.
        #expect(Date().timeIntervalSince(asked) < 3)
        for client in tricklers { #expect(client.readToEnd().hasPrefix("HTTP/1.1 408 ")) }
        stop.value = true
        done.wait()
    }

    @Test(
        "1,000 connections trickling a byte every 2 s: a fresh client is served within 1 s, and every trickler is cut by its request-line deadline",
        .enabled(if: runsDescriptorHeavyTests, Comment(rawValue: descriptorHeavyNotice)), .timeLimit(.minutes(1)))
    func thousandTricklers() throws {
        let server = try HTTPServerTests.makeServer { $0.maxConnections = 256 }
        defer { server.stop() }
        let tricklers = try (0..<1000).map { _ in try RawClient(port: server.port, timeout: 10) }
        for client in tricklers { client.send("G") }
        Thread.sleep(forTimeInterval: 1)
        for client in tricklers.prefix(500) { client.send("E") }  // one more byte, as a trickler would
        let fresh = try RawClient(port: server.port)
        let asked = Date()
        fresh.send("GET /hello?name=fresh HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(fresh.readToEnd().hasSuffix("hello fresh"))
        #expect(Date().timeIntervalSince(asked) < 1)
        // Each trickler is closed: made room for others, or past the 2 s request-line deadline.
        let started = Date()
        for client in tricklers { _ = client.readToEnd() }
        #expect(Date().timeIntervalSince(started) < 5, "every trickler was cut within its deadline")
    }

    @Test(
        "1,000 idle keep-alive connections: a newcomer is still served at once",
        .enabled(if: runsDescriptorHeavyTests, Comment(rawValue: descriptorHeavyNotice)), .timeLimit(.minutes(1)))
    func thousandIdle() throws {
        let server = try HTTPServerTests.makeServer { $0.readTimeout = 30 }
        defer { server.stop() }
        // Each sends its request as it connects: the request-line deadline (2 s) runs from the accept, and a
        // thousand connects in a row can take longer than that on a loaded machine.
        let idle = try (0..<1000).map { _ in
            let client = try RawClient(port: server.port, timeout: 10)
            client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            return client
        }
        for client in idle { #expect(client.readResponses(1).first?.hasSuffix("hello world") == true) }
        let newcomer = try RawClient(port: server.port)
        let asked = Date()
        newcomer.send("GET /hello?name=newcomer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(newcomer.readToEnd().hasSuffix("hello newcomer"))
        #expect(Date().timeIntervalSince(asked) < 1)
        // The idle ones are still usable (1,024 connections fit; none had to make room).
        idle[0].send("GET /hello?name=again HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(idle[0].readResponses(1).first?.hasSuffix("hello again") == true)
    }

    @Test(
        "A client that pipelines 25,000 requests and never reads cannot keep the only slot: refused newcomers wait at most the write timeout"
    )
    func neverReads() throws {
        let server = try HTTPServerTests.makeServer {
            $0.writeTimeout = 0.5
            $0.maxConnections = 1
            $0.maxConnectionsPerPeer = 1
        }
        defer { server.stop() }
        // The client's receive buffer as the kernel sizes it: what bounds the answers parked for it is the server's
        // send buffer (256 KiB); with loopback's autotuned one (megabytes) the server kept "making progress" for
        // seconds on a slow machine before the write timeout could start.
        let greedy = try RawClient(port: server.port)
        let sent = DispatchSemaphore(value: 0)
        Thread {
            let one = "GET /hello?name=pipelined-and-never-read HTTP/1.1\r\nHost: x\r\n\r\n"
            for _ in 0..<250 { greedy.send(String(repeating: one, count: 100)) }
            sent.signal()
        }.start()
        Thread.sleep(forTimeInterval: 0.2)
        // The only slot is held by a connection whose responses nobody reads: a newcomer is answered at once — 503
        // while the greedy one has a response on its way, or served when it was waiting for more input (then it
        // made room)...
        let first = try RawClient(port: server.port)
        first.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let answer1 = first.readToEnd()
        #expect(answer1.hasPrefix("HTTP/1.1 503 ") || answer1.hasSuffix("hello world"), "\(answer1.prefix(40))")
        // ...and within the write timeout the greedy connection is gone; the next one is served.
        var answer = ""
        for _ in 0..<100 where !answer.hasSuffix("hello other") {
            Thread.sleep(forTimeInterval: 0.1)
            let other = try RawClient(port: server.port)
            other.send("GET /hello?name=other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = other.readToEnd()
        }
        #expect(answer.hasSuffix("hello other"))
        #expect(sent.wait(timeout: .now() + 20) == .success)
    }

    @Test(
        "70 clients pipelining without pause cannot hold the 64 handler threads: a newcomer is served at once, not starved",
        .timeLimit(.minutes(1)))
    func greedyPipeliners() throws {
        let server = try HTTPServerTests.makeServer()
        defer { server.stop() }
        let stop = LockedBox(false)
        let group = DispatchGroup()
        for _ in 0..<70 {
            let client = try RawClient(port: server.port, timeout: 10)
            group.enter()
            Thread {
                defer { group.leave() }
                let batch = String(repeating: "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", count: 200)
                while !stop.value {
                    client.send(batch)
                    guard client.readResponses(200).count == 200 else { return }
                }
            }.start()
        }
        Thread.sleep(forTimeInterval: 0.5)
        let newcomer = try RawClient(port: server.port)
        let asked = Date()
        newcomer.send("GET /hello?name=newcomer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(newcomer.readToEnd().hasSuffix("hello newcomer"))
        // A starved newcomer is never answered while the flood lasts (it stops only after this answer): its read
        // gives up after 5 s, empty. 3 s tells fair from starved with room for a loaded 2-core machine (1.25 s was
        // seen with the whole suite running in parallel; alone it takes milliseconds).
        #expect(Date().timeIntervalSince(asked) < 3)
        stop.value = true
        group.wait()
    }

    @Test(
        "A client that stops reading a large answer does not keep the only slot for the write timeout: after a second it makes room"
    )
    func stalledReaderMakesRoom() throws {
        var router = HTTPRouter()
        router.add("GET", "/big") { _ in
            HTTPServerResponse(
                status: 200, headers: ["Content-Type": "application/octet-stream"], body: Data(count: 8 << 20))
        }
        router.add("GET", "/hello") { _ in .text(200, "hello") }
        var configuration = HTTPServer.Configuration()
        configuration.maxConnections = 1
        configuration.writeTimeout = 30
        let server = HTTPServer(configuration: configuration, handler: router.handle)
        try server.start()
        defer { server.stop() }
        let reader = try RawClient(port: server.port)
        reader.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")  // and never reads
        Thread.sleep(forTimeInterval: 0.3)
        let started = Date()
        var answer = ""
        for _ in 0..<40 where !answer.hasSuffix("hello") {
            let other = try RawClient(port: server.port)
            other.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = other.readToEnd()
            if !answer.hasSuffix("hello") { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(answer.hasSuffix("hello"))
        #expect(Date().timeIntervalSince(started) < 3, "made room after about a second, not the 30 s write timeout")
        withExtendedLifetime(reader) {}
    }
}
