// Stand-in declarations of os (Logger and its privacy-annotated messages) for type-checking only.

private func stub() -> Never { fatalError("Apple stand-in: type-checking only") }

/// The level of a log message.
public struct OSLogType: Equatable, Sendable {
    let raw: UInt8
    public static let `default` = OSLogType(raw: 0)
    public static let info = OSLogType(raw: 1)
    public static let debug = OSLogType(raw: 2)
    public static let error = OSLogType(raw: 16)
    public static let fault = OSLogType(raw: 17)
}

/// Whether an interpolated value shows in the log.
public struct OSLogPrivacy: Equatable, Sendable {
    let raw: UInt8
    public static let `public` = OSLogPrivacy(raw: 1)
    public static let `private` = OSLogPrivacy(raw: 2)
}

/// A message with privacy-annotated interpolations.
public struct OSLogMessage: ExpressibleByStringInterpolation, Sendable {
    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        public init(literalCapacity: Int, interpolationCount: Int) {}
        public mutating func appendLiteral(_ literal: String) {}
        public mutating func appendInterpolation(_ value: @autoclosure @escaping () -> String, privacy: OSLogPrivacy) {}
    }
    public init(stringLiteral value: String) {}
    public init(stringInterpolation: StringInterpolation) {}
}

/// The unified log's logger.
public struct Logger: Sendable {
    public init(subsystem: String, category: String) {}
    public func log(level: OSLogType, _ message: OSLogMessage) { stub() }
}
