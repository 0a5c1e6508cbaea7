package import Foundation
package import SesameLoopback

/// A real loopback HTTP server that records every request it receives and answers through `respond`: the
/// "other origin" of redirect tests, or a small backend with routes the dev server does not have.
package final class RecordingServer: @unchecked Sendable {
    // `received` is guarded by `lock`.
    private let lock = NSLock()
    private var received: [HTTPServerRequest] = []
    private let server: HTTPServer
    package let port: Int

    package init(_ respond: @escaping @Sendable (HTTPServerRequest) -> HTTPServerResponse) throws {
        let box = Box()
        server = HTTPServer { request in
            box.owner?.record(request)
            return respond(request)
        }
        port = try server.start()
        box.owner = self
    }

    deinit { server.stop() }

    /// `http://127.0.0.1:PORT`.
    package var base: URL {
        // swift-format-ignore: NeverForceUnwrap
        // (a literal loopback URL with a port always parses)
        URL(string: "http://127.0.0.1:\(port)")!
    }

    /// Every request so far.
    package var requests: [HTTPServerRequest] {
        lock.lock()
        defer { lock.unlock() }
        return received
    }

    package func stop() { server.stop() }

    private func record(_ request: HTTPServerRequest) {
        lock.lock()
        received.append(request)
        lock.unlock()
    }

    /// Breaks the init-time cycle between the handler and the server that owns it.
    private final class Box: @unchecked Sendable {
        weak var owner: RecordingServer?
    }
}
