#if canImport(CSesameOpenSSL)
    import CSesameOpenSSL
#endif

/// libcrypto's process-wide state, initialised once, before any other libcrypto call this package makes.
///
/// By default libcrypto frees its global state from an `atexit` handler (`OPENSSL_cleanup`). `exit` runs that handler
/// on the exiting thread while the process's other threads still run: a worker thread retiring at that moment runs
/// libcrypto's thread-local destructor against freed locks, and a thread still hashing or signing uses freed
/// algorithm objects — the process then dies with SIGSEGV or a heap-corruption abort after its work is done (seen:
/// `sesame demo` under load, a few runs in a hundred). `OPENSSL_INIT_NO_ATEXIT` leaves that state in place until the
/// kernel reclaims the process, which is all an exiting process needs. It counts only in the first initialisation of
/// the process, so the backends call ``prepare()`` before their first libcrypto call, the HTTP transport before
/// libcurl initialises its TLS library, and the command line before anything else. A process whose own code
/// initialises libcrypto first (with the default) keeps the handler and can still crash at exit: on Linux, call
/// ``prepare()`` first thing in `main` when your process may use libcrypto before Sesame does (your own C code, or
/// `URLSession`, which goes through libcurl). Without libcrypto (Apple platforms) it does nothing.
public enum LibCrypto {
    #if canImport(CSesameOpenSSL)
        private static let initialised: Bool = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
    #endif

    /// Initialises libcrypto without its exit handler, once per process; later calls cost one load and a branch.
    public static func prepare() {
        #if canImport(CSesameOpenSSL)
            _ = initialised
        #endif
    }
}
