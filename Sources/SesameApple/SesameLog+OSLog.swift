// Sesame's diagnostics in the unified log: a thin handler over os.Logger. The messages are redacted by
// construction (SesameLog.Message), so they are logged as public; the portable seam is tested on Linux.
#if canImport(os)
    import os
    public import Sesame

    extension SesameLog {
        /// Sends Sesame's diagnostics of at least `level` to the unified log: subsystem `subsystem`, one category
        /// per part of Sesame (`session`, `http`, `oidc`, `dpop`), `warning` as the default type.
        ///
        /// The messages hold no secret (``SesameLog/Message`` redacts them when they are made), so they are logged
        /// as public and readable in Console and `log stream`.
        public static func useOSLog(subsystem: String = "dev.sesame", level: Level = .info) {
            setHandler(level: level) { entry in
                let type: OSLogType =
                    switch entry.level {
                    case .debug: .debug
                    case .info: .info
                    case .warning: .default
                    case .error: .error
                    }
                Logger(subsystem: subsystem, category: entry.category.rawValue)
                    .log(level: type, "\(entry.message.description, privacy: .public)")
            }
        }
    }
#endif
