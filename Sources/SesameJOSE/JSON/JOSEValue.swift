/// A JSON value as it appears in a JOSE header, a JWT claim set or a JWK.
///
/// SesameJOSE parses JOSE JSON with its own strict parser (``parse(_:maxDepth:)``): duplicate member names are
/// rejected at every level (Foundation's decoders let the last one win, a parser differential attackers use),
/// nesting is bounded, numbers must fit a `Double`, and strings must be valid UTF-8.
public enum JOSEValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// An integer literal that fits in 64 bits.
    case integer(Int64)
    /// Any other number (a fraction, an exponent, or an integer too large for `Int64`).
    case number(Double)
    case string(String)
    case array([JOSEValue])
    case object(JOSEObject)

    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number as a `Double`, if this is a number.
    public var doubleValue: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    /// The members, if this is an object.
    public var objectValue: JOSEObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JOSEValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The member named `key`, if this is an object that has it.
    public subscript(key: String) -> JOSEValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }
}

extension JOSEValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
    /// A string.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// A number.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// A Boolean.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An array.
    public init(arrayLiteral elements: JOSEValue...) { self = .array(elements) }
    /// `null`.
    public init(nilLiteral: ()) { self = .null }
    /// An object (a repeated key keeps the last value).
    public init(dictionaryLiteral elements: (String, JOSEValue)...) {
        var object = JOSEObject()
        for (name, value) in elements { object[name] = value }
        self = .object(object)
    }
}
