public import Foundation

extension JOSEValue {
    /// Compact JSON text with members sorted by name (stable output for signing, thumbprints and display).
    public var jsonData: Data { Data(jsonBytes) }

    /// Compact JSON text with members sorted by name.
    public var jsonString: String { String(decoding: jsonBytes, as: UTF8.self) }

    package var jsonBytes: [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(into: &output, pretty: false, indent: 0)
        return output
    }

    /// Indented JSON text with members sorted by name, for people.
    public var prettyJSONString: String {
        var output: [UInt8] = []
        write(into: &output, pretty: true, indent: 0)
        return String(decoding: output, as: UTF8.self)
    }

    private func write(into output: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): output.append(contentsOf: String(value).utf8)
        case .number(let value): output.append(contentsOf: Self.format(value).utf8)
        case .string(let value): Self.writeString(value, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { output.append(UInt8(ascii: ",")) }
                Self.newline(&output, pretty: pretty, indent: indent + 1)
                element.write(into: &output, pretty: pretty, indent: indent + 1)
            }
            if !elements.isEmpty { Self.newline(&output, pretty: pretty, indent: indent) }
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            output.append(UInt8(ascii: "{"))
            // Sorted by UTF-8 bytes: the order RFC 7638 asks for, and stable output for everything else.
            let sorted = object.members.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            for (offset, member) in sorted.enumerated() {
                if offset > 0 { output.append(UInt8(ascii: ",")) }
                Self.newline(&output, pretty: pretty, indent: indent + 1)
                Self.writeString(member.name, into: &output)
                output.append(UInt8(ascii: ":"))
                if pretty { output.append(UInt8(ascii: " ")) }
                member.value.write(into: &output, pretty: pretty, indent: indent + 1)
            }
            if !object.isEmpty { Self.newline(&output, pretty: pretty, indent: indent) }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(_ output: inout [UInt8], pretty: Bool, indent: Int) {
        guard pretty else { return }
        output.append(UInt8(ascii: "\n"))
        output.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * 2))
    }

    private static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    package static func writeString(_ value: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                output.append(contentsOf: "\\u00".utf8)
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
