#if canImport(CSesameCurl)
    internal import CSesameCurl
    import Foundation

    /// ``HTTPTransport`` over libcurl's multi interface, for Linux: one engine thread per process that waits in
    /// the kernel (`curl_multi_poll`), so a slow server costs no CPU — unlike FoundationNetworking's `URLSession`,
    /// which spins while it waits.
    ///
    /// Behaviour: redirects are never followed (a 3xx comes back as it is; see ``HTTPTransport``); `timeout` covers
    /// the whole exchange; TLS peers and host names are verified (libcurl's defaults, never turned off); only
    /// `http` and `https` are spoken; task cancellation aborts the transfer and throws `CancellationError`;
    /// responses larger than ``maximumResponseSize`` are refused; connections are reused across requests, at most
    /// ``maximumConnectionsPerHost`` at once per host (more requests queue).
    public struct CurlTransport: HTTPTransport {
        /// The largest response body accepted (default 16 MiB).
        public let maximumResponseSize: Int
        /// Simultaneous connections per host (default 32).
        public var maximumConnectionsPerHost: Int { CurlEngine.shared.maximumConnectionsPerHost }

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
        private var headerList: UnsafeMutablePointer<curl_slist>?
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
            guard let handle = curl_easy_init() else { throw AuthError(.transport, "libcurl could not start") }
            self.handle = handle
            self.host = request.url.host ?? "the server"
            self.maximumResponseSize = maximumResponseSize
            try configure(request)
        }

        deinit {
            curl_easy_cleanup(handle)
            curl_slist_free_all(headerList)
        }

        private func configure(_ request: SesameHTTP.Request) throws {
            var ok = csesame_curl_set_string(handle, CURLOPT_URL, request.url.absoluteString) == CURLE_OK
            ok = ok && csesame_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK
            ok = ok && csesame_curl_set_long(handle, CURLOPT_NOSIGNAL, 1) == CURLE_OK
            ok = ok && csesame_curl_set_long(handle, CURLOPT_FOLLOWLOCATION, 0) == CURLE_OK
            let milliseconds = Int(max(0.001, min(request.timeout, 86_400)) * 1000)
            ok = ok && csesame_curl_set_long(handle, CURLOPT_TIMEOUT_MS, milliseconds) == CURLE_OK
            ok = ok && csesame_curl_set_string(handle, CURLOPT_ACCEPT_ENCODING, "") == CURLE_OK
            let method = request.method.uppercased()
            switch method {
            case "GET" where request.body == nil:
                ok = ok && csesame_curl_set_long(handle, CURLOPT_HTTPGET, 1) == CURLE_OK
            case "HEAD":
                ok = ok && csesame_curl_set_long(handle, CURLOPT_NOBODY, 1) == CURLE_OK
            default:
                if let body = request.body {
                    ok =
                        ok
                        && csesame_curl_set_size(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
                            == CURLE_OK
                    // COPYPOSTFIELDS copies the bytes, so the request need not outlive this call.
                    ok =
                        ok
                        && (body.isEmpty
                            ? csesame_curl_set_string(handle, CURLOPT_COPYPOSTFIELDS, "")
                            : body.withUnsafeBytes { bytes in
                                csesame_curl_set_pointer(
                                    handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress)
                                )
                            }) == CURLE_OK
                }
                if method != "POST" || request.body == nil {
                    ok = ok && csesame_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK
                }
            }
            var list: UnsafeMutablePointer<curl_slist>?
            for field in request.headers.fields {
                guard Self.isSafe(field.name), Self.isSafe(field.value) else {
                    throw AuthError(.configuration, "a header name or value contains a control character")
                }
                list = curl_slist_append(list, field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)")
            }
            // No `Expect: 100-continue` pause, and no invented form content type for bodies without one.
            list = curl_slist_append(list, "Expect:")
            if !request.headers.contains("Content-Type") { list = curl_slist_append(list, "Content-Type:") }
            headerList = list
            ok = ok && csesame_curl_set_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)) == CURLE_OK
            let context = Unmanaged.passUnretained(self).toOpaque()
            ok = ok && csesame_curl_set_callback(handle, CURLOPT_WRITEFUNCTION, curlWriteBody) == CURLE_OK
            ok = ok && csesame_curl_set_pointer(handle, CURLOPT_WRITEDATA, context) == CURLE_OK
            ok = ok && csesame_curl_set_callback(handle, CURLOPT_HEADERFUNCTION, curlReceiveHeader) == CURLE_OK
            ok = ok && csesame_curl_set_pointer(handle, CURLOPT_HEADERDATA, context) == CURLE_OK
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
            guard let colon = line.firstIndex(of: ":") else { return }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
            headers.append(.init(name: name, value: value))
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
        func outcome(_ code: CURLcode) -> Result<SesameHTTP.Response, any Error> {
            guard code == CURLE_OK else { return .failure(error(code)) }
            var status = 0
            _ = csesame_curl_response_code(handle, &status)
            return .success(SesameHTTP.Response(status: status, headers: SesameHTTP.Headers(headers), body: body))
        }

        private func error(_ code: CURLcode) -> AuthError {
            let reason: String
            switch code {
            case CURLE_OPERATION_TIMEDOUT: reason = "timed out"
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
                reason = "cannot connect"
            case CURLE_WRITE_ERROR where tooLarge: reason = "the response is larger than \(maximumResponseSize) bytes"
            case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM,
                CURLE_SSL_CACERT_BADFILE:
                reason = "TLS verification failed"
            case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE:
                reason = "the connection was lost"
            default: reason = "the request failed (\(String(cString: curl_easy_strerror(code))))"
            }
            return AuthError(.transport, "no response from \(host): \(reason)")
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
        let maximumConnectionsPerHost = 32

        private init() {
            curl_global_init(Int(CURL_GLOBAL_DEFAULT))
            // swift-format-ignore: NeverForceUnwrap
            // (curl_multi_init fails only when out of memory)
            multi = curl_multi_init()!
            _ = csesame_curl_multi_set_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maximumConnectionsPerHost)
            _ = csesame_curl_multi_set_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 256)
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
            curl_multi_wakeup(multi)
        }

        func cancel(_ exchange: CurlExchange) {
            lock.lock()
            exchange.cancelled = true
            let submitted = exchange.continuation != nil
            if submitted { cancellations.append(exchange) }
            lock.unlock()
            if submitted { curl_multi_wakeup(multi) }
        }

        private func run() {
            var running: Int32 = 0
            while true {
                admit()
                curl_multi_perform(multi, &running)
                collect()
                // Blocks in poll(2) until a socket is ready, a timer is due, or submit/cancel wakes it.
                curl_multi_poll(multi, nil, 0, 1000, nil)
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
                if curl_multi_add_handle(multi, exchange.handle) == CURLM_OK {
                    active[exchange.handle] = exchange
                } else {
                    finish(exchange, .failure(AuthError(.transport, "libcurl could not start the transfer")))
                }
            }
            for exchange in cancelled where active[exchange.handle] != nil {
                curl_multi_remove_handle(multi, exchange.handle)
                active[exchange.handle] = nil
                finish(exchange, .failure(CancellationError()))
            }
        }

        private func collect() {
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard csesame_curl_message_done(message) != 0, let handle = csesame_curl_message_handle(message),
                    let exchange = active.removeValue(forKey: handle)
                else { continue }
                let code = csesame_curl_message_result(message)
                curl_multi_remove_handle(multi, handle)
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
