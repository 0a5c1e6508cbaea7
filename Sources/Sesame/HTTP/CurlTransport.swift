#if canImport(CSesameCurl)
    internal import CSesameCurl
    import Foundation
    import SesameJOSE

    /// ``HTTPTransport`` over libcurl's multi interface, for Linux: one engine thread per process that waits in
    /// the kernel (`curl_multi_poll`), so a slow server costs no CPU — unlike FoundationNetworking's `URLSession`,
    /// which spins while it waits.
    ///
    /// Behaviour: redirects are never followed (a 3xx comes back as it is; see ``HTTPTransport``); `timeout` covers
    /// the whole exchange; TLS peers and host names are verified (libcurl's defaults, never turned off); only
    /// `http` and `https` are spoken; task cancellation aborts the transfer and throws `CancellationError`;
    /// responses larger than ``maximumResponseSize`` are refused; connections are reused across requests, at most
    /// ``maximumConnectionsPerHost`` at once per host (more requests queue); connections are close-on-exec, so a
    /// program the app starts inherits none of them.
    ///
    /// libcurl is opened at run time (`libcurl.so.4`, which FoundationNetworking links as well), so building needs
    /// no libcurl development files. Where it cannot be loaded, every request throws ``AuthError`` with
    /// ``AuthError/Code/transport`` saying so — a transient failure that never ends a session.
    public struct CurlTransport: HTTPTransport {
        /// The largest response body accepted (default 16 MiB).
        public let maximumResponseSize: Int
        /// Simultaneous connections per host (default 32).
        public var maximumConnectionsPerHost: Int { CurlEngine.maximumConnectionsPerHost }

        /// Creates a transport on the process's shared engine.
        public init(maximumResponseSize: Int = 16 << 20) { self.maximumResponseSize = maximumResponseSize }

        /// Sends the request.
        ///
        /// - Throws: ``AuthError`` with ``AuthError/Code/transport`` when no response arrived (the message says
        ///   why: timed out, cannot connect, TLS, too large); `CancellationError` when the task was cancelled.
        public func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response {
            try Task.checkCancellation()
            let exchange = try CurlExchange(request, maximumResponseSize: maximumResponseSize)
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    CurlEngine.shared.submit(exchange, continuation)
                }
            } onCancel: {
                CurlEngine.shared.cancel(exchange)
            }
        }
    }

    /// One transfer: its easy handle, the request's header list, and what has arrived.
    final class CurlExchange: @unchecked Sendable {
        // Touched by the engine thread only once submitted (the callbacks run there); `continuation` and
        // `cancelled` are guarded by the engine's lock.
        let handle: UnsafeMutableRawPointer
        private var headerList: UnsafeMutableRawPointer?
        let host: String
        let maximumResponseSize: Int
        var headers: [SesameHTTP.Headers.Field] = []
        var body = Data()
        var tooLarge = false
        var continuation: CheckedContinuation<SesameHTTP.Response, any Error>?
        var cancelled = false

        init(_ request: SesameHTTP.Request, maximumResponseSize: Int) throws {
            guard let scheme = request.url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw AuthError(.configuration, "only http and https URLs can be sent")
            }
            guard request.hasValidMethod else { throw AuthError(.configuration, "the method is not an HTTP token") }
            LibCrypto.prepare()  // before libcurl initialises libcrypto with its exit handler
            guard csesame_curl_load() != 0 else {
                let reason = csesame_curl_load_error().map { String(cString: $0) } ?? "unknown reason"
                throw AuthError(.transport, "libcurl could not be loaded: \(reason)")
            }
            guard let handle = csesame_curl_easy_init() else { throw AuthError(.transport, "libcurl could not start") }
            self.handle = handle
            self.host = SesameHTTP.hostAndPort(request.url)
            self.maximumResponseSize = maximumResponseSize
            try configure(request)
        }

        deinit {
            csesame_curl_easy_cleanup(handle)
            csesame_curl_slist_free_all(headerList)
        }

        private func configure(_ request: SesameHTTP.Request) throws {
            var ok =
                csesame_curl_set_string(handle, CSESAME_CURLOPT_URL, request.url.absoluteString) == CSESAME_CURLE_OK
            // CURLOPT_PROTOCOLS_STR is libcurl 7.85+; the bitmask before it (deprecated since, still honoured).
            ok =
                ok
                && (csesame_curl_set_string(handle, CSESAME_CURLOPT_PROTOCOLS_STR, "http,https") == CSESAME_CURLE_OK
                    || csesame_curl_set_long(
                        handle, CSESAME_CURLOPT_PROTOCOLS, Int(CSESAME_CURLPROTO_HTTP | CSESAME_CURLPROTO_HTTPS))
                        == CSESAME_CURLE_OK)
            ok = ok && csesame_curl_set_long(handle, CSESAME_CURLOPT_NOSIGNAL, 1) == CSESAME_CURLE_OK
            ok = ok && csesame_curl_set_close_on_exec(handle) == CSESAME_CURLE_OK
            ok = ok && csesame_curl_set_long(handle, CSESAME_CURLOPT_FOLLOWLOCATION, 0) == CSESAME_CURLE_OK
            let milliseconds = Int(max(0.001, min(request.timeout, 86_400)) * 1000)
            ok = ok && csesame_curl_set_long(handle, CSESAME_CURLOPT_TIMEOUT_MS, milliseconds) == CSESAME_CURLE_OK
            ok = ok && csesame_curl_set_string(handle, CSESAME_CURLOPT_ACCEPT_ENCODING, "") == CSESAME_CURLE_OK
            let method = request.method.uppercased()
            // libcurl sends a request again, unasked, when a reused connection dies before any answer: harmless for
            // a GET, not for a POST the server may have carried out (a refresh token spent, an order placed). Such
            // requests go on a connection of their own, which libcurl never retries.
            if !RetryPolicy.isIdempotent(method) {
                ok = ok && csesame_curl_set_long(handle, CSESAME_CURLOPT_FRESH_CONNECT, 1) == CSESAME_CURLE_OK
            }
            switch method {
            case "GET" where request.body == nil:
                ok = ok && csesame_curl_set_long(handle, CSESAME_CURLOPT_HTTPGET, 1) == CSESAME_CURLE_OK
            case "HEAD":
                ok = ok && csesame_curl_set_long(handle, CSESAME_CURLOPT_NOBODY, 1) == CSESAME_CURLE_OK
            default:
                if let body = request.body {
                    ok =
                        ok
                        && csesame_curl_set_size(handle, CSESAME_CURLOPT_POSTFIELDSIZE_LARGE, Int64(body.count))
                            == CSESAME_CURLE_OK
                    // COPYPOSTFIELDS copies the bytes, so the request need not outlive this call.
                    ok =
                        ok
                        && (body.isEmpty
                            ? csesame_curl_set_string(handle, CSESAME_CURLOPT_COPYPOSTFIELDS, "")
                            : body.withUnsafeBytes { bytes in
                                csesame_curl_set_pointer(
                                    handle, CSESAME_CURLOPT_COPYPOSTFIELDS,
                                    UnsafeMutableRawPointer(mutating: bytes.baseAddress)
                                )
                            }) == CSESAME_CURLE_OK
                }
                if method != "POST" || request.body == nil {
                    ok =
                        ok && csesame_curl_set_string(handle, CSESAME_CURLOPT_CUSTOMREQUEST, method) == CSESAME_CURLE_OK
                }
            }
            var list: UnsafeMutableRawPointer?
            for field in request.headers.fields {
                guard Self.isSafe(field.name), Self.isSafe(field.value) else {
                    throw AuthError(.configuration, "a header name or value contains a control character")
                }
                list = csesame_curl_slist_append(
                    list, field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)")
            }
            // No `Expect: 100-continue` pause, and no invented form content type for bodies without one.
            list = csesame_curl_slist_append(list, "Expect:")
            if !request.headers.contains("Content-Type") { list = csesame_curl_slist_append(list, "Content-Type:") }
            headerList = list
            ok = ok && csesame_curl_set_pointer(handle, CSESAME_CURLOPT_HTTPHEADER, list) == CSESAME_CURLE_OK
            let context = Unmanaged.passUnretained(self).toOpaque()
            ok =
                ok
                && csesame_curl_set_callback(handle, CSESAME_CURLOPT_WRITEFUNCTION, curlWriteBody) == CSESAME_CURLE_OK
            ok = ok && csesame_curl_set_pointer(handle, CSESAME_CURLOPT_WRITEDATA, context) == CSESAME_CURLE_OK
            ok =
                ok
                && csesame_curl_set_callback(handle, CSESAME_CURLOPT_HEADERFUNCTION, curlReceiveHeader)
                    == CSESAME_CURLE_OK
            ok = ok && csesame_curl_set_pointer(handle, CSESAME_CURLOPT_HEADERDATA, context) == CSESAME_CURLE_OK
            guard ok else { throw AuthError(.transport, "libcurl refused the request's options") }
        }

        private static func isSafe(_ text: String) -> Bool {
            text.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }
        }

        /// One header line (`Name: value\r\n`); a status line starts a new response (after a 1xx).
        func receiveHeader(_ line: String) {
            if line.hasPrefix("HTTP/") {
                headers = []
                return
            }
            if let field = SesameHTTP.Headers.Field(line: line) { headers.append(field) }
        }

        func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
            guard body.count + bytes.count <= maximumResponseSize else {
                tooLarge = true
                return false
            }
            body.append(contentsOf: bytes)
            return true
        }

        /// The outcome once libcurl reports the transfer done.
        func outcome(_ code: Int32) -> Result<SesameHTTP.Response, any Error> {
            guard code == CSESAME_CURLE_OK else { return .failure(error(code)) }
            var status = 0
            _ = csesame_curl_response_code(handle, &status)
            return .success(SesameHTTP.Response(status: status, headers: SesameHTTP.Headers(headers), body: body))
        }

        private func error(_ code: Int32) -> AuthError {
            let reason: String
            switch code {
            case CSESAME_CURLE_OPERATION_TIMEDOUT: reason = "timed out"
            case CSESAME_CURLE_COULDNT_CONNECT, CSESAME_CURLE_COULDNT_RESOLVE_HOST, CSESAME_CURLE_COULDNT_RESOLVE_PROXY:
                reason = "cannot connect"
            case CSESAME_CURLE_WRITE_ERROR where tooLarge:
                reason = "the response is larger than \(maximumResponseSize) bytes"
            case CSESAME_CURLE_PEER_FAILED_VERIFICATION, CSESAME_CURLE_SSL_CONNECT_ERROR, CSESAME_CURLE_SSL_CERTPROBLEM,
                CSESAME_CURLE_SSL_CACERT_BADFILE:
                reason = "TLS verification failed"
            case CSESAME_CURLE_GOT_NOTHING, CSESAME_CURLE_RECV_ERROR, CSESAME_CURLE_SEND_ERROR,
                CSESAME_CURLE_PARTIAL_FILE:
                reason = "the connection was lost"
            default: reason = "the request failed (\(String(cString: csesame_curl_easy_strerror(code))))"
            }
            var error = AuthError(.transport, "no response from \(host): \(reason)")
            // Nothing reached the server: a request of any kind may be sent again (RetryPolicy).
            if code == CSESAME_CURLE_COULDNT_CONNECT || code == CSESAME_CURLE_COULDNT_RESOLVE_HOST {
                error.reason = "cannot_connect"
            }
            return error
        }
    }

    private func curlWriteBody(
        _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
    ) -> Int {
        guard let context else { return 0 }
        let exchange = Unmanaged<CurlExchange>.fromOpaque(context).takeUnretainedValue()
        let length = size * count
        guard length > 0, let data else { return 0 }
        return exchange.receiveBody(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
    }

    private func curlReceiveHeader(
        _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
    ) -> Int {
        guard let context, let data else { return 0 }
        let exchange = Unmanaged<CurlExchange>.fromOpaque(context).takeUnretainedValue()
        let length = size * count
        let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
        exchange.receiveHeader(line)
        return length
    }

    /// The process's libcurl multi handle and the thread that drives it.
    final class CurlEngine: @unchecked Sendable {
        static let shared = CurlEngine()

        // `incoming`, `cancellations` and every exchange's `continuation`/`cancelled` are guarded by `lock`; the
        // multi handle and `active` belong to the engine thread.
        private let lock = NSLock()
        private var incoming: [CurlExchange] = []
        private var cancellations: [CurlExchange] = []
        private var active: [UnsafeMutableRawPointer: CurlExchange] = [:]
        private let multi: UnsafeMutableRawPointer
        static let maximumConnectionsPerHost = 32

        private init() {
            // swift-format-ignore: NeverForceUnwrap
            // (curl_multi_init fails only when out of memory)
            multi = csesame_curl_multi_init()!
            _ = csesame_curl_multi_set_long(
                multi, CSESAME_CURLMOPT_MAX_HOST_CONNECTIONS, Self.maximumConnectionsPerHost)
            _ = csesame_curl_multi_set_long(multi, CSESAME_CURLMOPT_MAX_TOTAL_CONNECTIONS, 256)
            let thread = Thread { [unowned self] in self.run() }
            thread.name = "sesame.curl"
            thread.start()
        }

        func submit(_ exchange: CurlExchange, _ continuation: CheckedContinuation<SesameHTTP.Response, any Error>) {
            lock.lock()
            if exchange.cancelled {
                lock.unlock()
                continuation.resume(throwing: CancellationError())
                return
            }
            exchange.continuation = continuation
            incoming.append(exchange)
            lock.unlock()
            csesame_curl_multi_wakeup(multi)
        }

        func cancel(_ exchange: CurlExchange) {
            lock.lock()
            exchange.cancelled = true
            let submitted = exchange.continuation != nil
            if submitted { cancellations.append(exchange) }
            lock.unlock()
            if submitted { csesame_curl_multi_wakeup(multi) }
        }

        private func run() {
            var running: Int32 = 0
            while true {
                admit()
                _ = csesame_curl_multi_perform(multi, &running)
                collect()
                // Blocks in poll(2) until a socket is ready, a timer is due, or submit/cancel wakes it.
                _ = csesame_curl_multi_poll(multi, 1000)
            }
        }

        private func admit() {
            lock.lock()
            let new = incoming
            let cancelled = cancellations
            incoming = []
            cancellations = []
            lock.unlock()
            for exchange in new {
                if csesame_curl_multi_add_handle(multi, exchange.handle) == 0 {
                    active[exchange.handle] = exchange
                } else {
                    finish(exchange, .failure(AuthError(.transport, "libcurl could not start the transfer")))
                }
            }
            for exchange in cancelled where active[exchange.handle] != nil {
                _ = csesame_curl_multi_remove_handle(multi, exchange.handle)
                active[exchange.handle] = nil
                finish(exchange, .failure(CancellationError()))
            }
        }

        private func collect() {
            var handle: UnsafeMutableRawPointer?
            var code: Int32 = 0
            while csesame_curl_multi_next_done(multi, &handle, &code) != 0 {
                guard let done = handle, let exchange = active.removeValue(forKey: done) else { continue }
                _ = csesame_curl_multi_remove_handle(multi, done)
                finish(exchange, exchange.outcome(code))
            }
        }

        private func finish(_ exchange: CurlExchange, _ result: Result<SesameHTTP.Response, any Error>) {
            lock.lock()
            let continuation = exchange.continuation
            exchange.continuation = nil
            let cancelled = exchange.cancelled
            lock.unlock()
            if cancelled, case .failure = result {
                continuation?.resume(throwing: CancellationError())
            } else {
                continuation?.resume(with: result)
            }
        }
    }
#endif
