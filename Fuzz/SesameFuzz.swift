// libFuzzer targets for every parser that reads bytes from the network, a file or the command line. Built by
// Scripts/fuzz.sh: the package's modules with SwiftPM (coverage and AddressSanitizer instrumentation, testing
// enabled), this harness with swiftc against them. `SESAME_FUZZ_TARGET` picks the target; `Scripts/fuzz.sh --list`
// names them. Every input must be answered (parsed, or refused with a typed error): a crash, a hang (5 s), memory
// past 1 GiB (leak detection itself is off: see fuzz.sh) or a sanitizer report is a bug, and so is a broken invariant
// checked below.
//
// A new target: a case below (its raw value exactly the name in Scripts/fuzz.sh's `targets`; nothing else checks that
// the two lists agree), its line in the switch of fuzzOne, a function in a Fixtures+*.swift file (synchronous: an async
// API goes through `blocking`, which must not be called from async code), its name in `targets` and in fuzz.sh's
// `describe`, and a `seed` call there (SESAME_FUZZ_TRACE=1 with --replay shows what an input reached). Code in a module
// the harness does not link yet needs that module's objects in fuzz.sh's `build` and its `@testable import` here. Check
// that the target reaches what it claims (a `try?` or guard in front of the parser that always fails makes a target
// that runs fast and tests nothing: the redirect target once never reached the code exchange). A crash found becomes a
// regression test in the suite of the code it broke (the input's bytes as a literal, run through the same call), and
// its input one more argument of the target's `seed` call.
import Dispatch
import Foundation
import SesameJOSE
import Synchronization

@testable import Sesame
@testable import SesameDevServer
@testable import SesameLoopback
@testable import sesame

/// The targets, by the name `Scripts/fuzz.sh` takes.
enum FuzzTarget: String, CaseIterable {
    case jose, discovery
    case tokenResponse = "token-response"
    case deviceResponse = "device-response"
    case parResponse = "par-response"
    case errorResponse = "error-response"
    case wwwAuthenticate = "www-authenticate"
    case redirect
    case dpopProof = "dpop-proof"
    case httpRequest = "http-request"
    case form
    case storedFiles = "stored-files"
    case cliArguments = "cli-arguments"
    case providerResponse = "provider-response"
    case resourceResponse = "resource-response"
    case credentialHelper = "credential-helper"
    case devServer = "dev-server"
}

private let target: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["SESAME_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        FileHandle.standardError.write(
            Data("fuzz harness: SESAME_FUZZ_TARGET must be one of: \(FuzzTarget.allCases.map(\.rawValue))\n".utf8))
        exit(2)
    }
    // The harness's own folder, and SESAME_HOME in it, before any target runs: nothing reaches the user's files.
    _ = Fixtures.folder
    return target
}()

/// libFuzzer calls this with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    switch target {
    case .jose: Fixtures.jose(bytes)
    case .discovery: Fixtures.discovery(bytes)
    case .tokenResponse: Fixtures.tokenResponse(bytes)
    case .deviceResponse: Fixtures.deviceResponse(bytes)
    case .parResponse: Fixtures.parResponse(bytes)
    case .errorResponse: Fixtures.errorResponse(bytes)
    case .wwwAuthenticate: Fixtures.wwwAuthenticate(bytes)
    case .redirect: Fixtures.redirect(bytes)
    case .dpopProof: Fixtures.dpopProof(bytes)
    case .httpRequest: Fixtures.httpRequest(bytes)
    case .form: Fixtures.form(bytes)
    case .storedFiles: Fixtures.storedFiles(bytes)
    case .cliArguments: Fixtures.cliArguments(bytes)
    case .providerResponse: Fixtures.providerResponse(bytes)
    case .resourceResponse: Fixtures.resourceResponse(bytes)
    case .credentialHelper: Fixtures.credentialHelper(bytes)
    case .devServer: Fixtures.devServer(bytes)
    }
    return 0
}

/// A broken invariant: abort, so that libFuzzer keeps the input.
func require(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition {
        FileHandle.standardError.write(Data("invariant broken: \(what())\n".utf8))
        abort()
    }
}

/// Whether `SESAME_FUZZ_TRACE` is set: then targets say what an input reached (with `--replay`, to check that a
/// target reaches what it claims).
let tracing = ProcessInfo.processInfo.environment["SESAME_FUZZ_TRACE"] != nil

/// Says what an input reached, when tracing.
func trace(_ what: @autoclosure () -> String) {
    if tracing { FileHandle.standardError.write(Data("fuzz trace: \(what())\n".utf8)) }
}

/// `outcome`, said when tracing.
func trace<T>(_ outcome: Result<T, any Error>, _ what: String) -> Result<T, any Error> {
    trace("\(what): \(outcome)")
    return outcome
}

/// The outcome of `body`, for a target to look at (and trace) whether it succeeded or why not.
func attempt<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}

/// Runs `body` to its end and waits for it (the SDK's parsers sit behind async calls).
///
/// The task starts on this thread and stays on it until something truly suspends: most inputs never leave it,
/// which spares two thread switches per execution.
func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.immediate {
        await body()
        done.signal()
    }
    done.wait()
}

/// A response made of fuzz bytes: the first byte picks the status, header lines (`Name: value`) up to a NUL byte,
/// then the body.
struct FuzzResponse: Sendable {
    static let statuses = [200, 201, 400, 401, 403, 404, 429, 500, 503, 302]
    let status: Int
    let headers: SesameHTTP.Headers
    let body: Data

    init(status: Int, headers: SesameHTTP.Headers, body: Data) {
        (self.status, self.headers, self.body) = (status, headers, body)
    }

    init(_ bytes: [UInt8]) {
        guard let first = bytes.first else {
            (status, headers, body) = (200, [:], Data())
            return
        }
        status = Self.statuses[Int(first) % Self.statuses.count]
        let rest = bytes.dropFirst()
        guard let split = rest.firstIndex(of: 0) else {
            (headers, body) = ([:], Data(rest))
            return
        }
        var fields: [SesameHTTP.Headers.Field] = []
        // Lines cut on the byte LF ("\r\n" is one Swift Character: a split on "\n" would miss it), each read by
        // the transport's own header-line parser (libcurl hands it one line at a time, its CRLF included).
        for bytes in rest[..<split].split(separator: 0x0A).prefix(16) {
            if let field = SesameHTTP.Headers.Field(line: String(decoding: bytes, as: UTF8.self) + "\n") {
                fields.append(field)
            }
        }
        headers = SesameHTTP.Headers(fields)
        body = Data(rest[rest.index(after: split)...])
    }

    var response: SesameHTTP.Response { SesameHTTP.Response(status: status, headers: headers, body: body) }
}

/// Answers the JWKS URI with the fixtures' key set and every other request with the fuzz response; counts the
/// requests to the token endpoint.
struct FuzzTransport: HTTPTransport {
    let answer: FuzzResponse
    let tokenRequests = TokenRequestCount()

    func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response {
        if request.url.path == "/jwks" {
            return SesameHTTP.Response(status: 200, headers: ["Content-Type": "application/json"], body: Fixtures.jwks)
        }
        if request.url.path == "/token" { tokenRequests.value.add(1, ordering: .relaxed) }
        return answer.response
    }
}

/// A resource server answering with the fuzz response (its first twelve requests, past the client's ten redirects,
/// then 200), the provider's token endpoint with fresh tokens of the type asked for; every request recorded.
final class ResourceTransport: HTTPTransport {
    let answer: FuzzResponse
    let sent = Mutex<[SesameHTTP.Request]>([])

    init(answer: FuzzResponse) { self.answer = answer }

    func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response {
        let count = sent.withLock { sent in
            sent.append(request)
            return sent.count { $0.url.host != "op.example" }
        }
        if request.url.host == "op.example" {
            let type = request.headers["DPoP"] == nil ? "Bearer" : "DPoP"
            let body = #"{"access_token":"at2","token_type":"\#(type)","expires_in":3600,"refresh_token":"rt2"}"#
            return SesameHTTP.Response(
                status: 200, headers: ["Content-Type": "application/json"], body: Data(body.utf8))
        }
        return count <= 12 ? answer.response : SesameHTTP.Response(status: 200, headers: [:], body: Data())
    }
}

/// How many requests reached the token endpoint.
final class TokenRequestCount: Sendable {
    let value = Atomic(0)
}
