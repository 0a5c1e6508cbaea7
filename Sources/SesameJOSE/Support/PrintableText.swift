/// Text from outside (a token header, a server's error description) made safe to print: control characters
/// (C0, DEL, C1) and bidirectional overrides become U+FFFD, and the length is bounded, so nothing a sender
/// controls can move a cursor, clear a terminal, forge a log line or reorder what a reader sees.
package enum PrintableText {
    /// `text` with unsafe scalars replaced and at most `limit` scalars kept (an ellipsis marks a cut).
    package static func sanitized(_ text: String, limit: Int = 512) -> String {
        var result = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            guard count < limit else {
                result.append("…")
                break
            }
            result.append(isUnsafe(scalar) ? "\u{FFFD}" : scalar)
            count += 1
        }
        return String(result)
    }

    /// Whether `text` is 1 to `limit` bytes of RFC 6749's NQCHAR without a space: visible ASCII but `"` and `\`
    /// (an `acr` value, a scope token: safe inside a quoted string and in a message as it is).
    package static func isQuotableWord(_ text: String, limit: Int = 256) -> Bool {
        (1...limit).contains(text.utf8.count)
            && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }
    }

    /// Whether `text` needs no change.
    package static func isClean(_ text: String) -> Bool { !text.unicodeScalars.contains(where: isUnsafe) }

    private static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        // Control characters, bidi controls, line and paragraph separators, zero-width and invisible characters
        // (which can make a printed value read as another), the BOM, and tag characters.
        case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069, 0x200B...0x200F, 0x2028, 0x2029,
            0x2060...0x2064,
            0x061C, 0xFEFF, 0xE0000...0xE007F:
            true
        default: false
        }
    }
}

/// Identifiers (`iss`, `aud`, `azp`, `kid`, …) compared byte for byte, never with Swift's Unicode canonical
/// equivalence (`"é" == "e\u{301}"` is true for `String`, and an issuer spelt in NFD is another issuer).
package enum ByteExact {
    /// Whether the UTF-8 bytes of `lhs` and `rhs` are the same.
    package static func equals(_ lhs: String, _ rhs: String) -> Bool { lhs.utf8.elementsEqual(rhs.utf8) }

    /// Whether `list` contains `value`, byte for byte.
    package static func contains(_ list: [String], _ value: String) -> Bool { list.contains { equals($0, value) } }
}
