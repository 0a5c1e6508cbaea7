import Foundation

/// Routes requests by method and exact path; answers 404 for an unknown path and 405 (with `Allow`) for a known
/// path with the wrong method.
public struct HTTPRouter: Sendable {
    private var routes: [String: [String: HTTPServer.Handler]] = [:]

    /// An empty router.
    public init() {}

    /// Adds a route.
    public mutating func add(_ method: String, _ path: String, _ handler: @escaping HTTPServer.Handler) {
        routes[path, default: [:]][method] = handler
    }

    /// Whether `path` has a route.
    public func hasRoute(_ path: String) -> Bool { routes[path] != nil }

    /// Whether `method` on `path` has a route (HEAD where GET has one).
    public func hasRoute(_ method: String, _ path: String) -> Bool {
        guard let methods = routes[path] else { return false }
        return methods[method] != nil || (method == "HEAD" && methods["GET"] != nil)
    }

    /// Answers `request` with the matching route, 404 or 405.
    public func handle(_ request: HTTPServerRequest) -> HTTPServerResponse {
        guard let methods = routes[request.path] else { return .text(404, "not found\n") }
        if let handler = methods[request.method] { return handler(request) }
        if request.method == "HEAD", let get = methods["GET"] {
            var response = get(request)
            response.body = .init()
            return response
        }
        var response = HTTPServerResponse.text(405, "method not allowed\n")
        response.headers.set("Allow", methods.keys.sorted().joined(separator: ", "))
        return response
    }
}
