import Foundation
import Testing

@testable import SesameJOSE

@Suite struct Base64URLTests {
    /// RFC 4648 §10, in the base64url alphabet and without padding.
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ]

    @Test("VEC RFC 4648 §10: encode and decode", arguments: rfc4648)
    func rfc4648Vectors(plain: String, encoded: String) throws {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(try Base64URL.decode(encoded) == Data(plain.utf8))
    }

    @Test("The URL-safe alphabet: - and _ stand for 62 and 63")
    func urlSafeAlphabet() throws {
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(try Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
    }

    @Test(
        "ATK-18: padding, +, /, white space, stray characters and impossible lengths are rejected",
        arguments: ["Zg==", "Zm8=", "+/8", "Zm 9v", "Zm9v\n", "Zm9v.", "Z", "Zm9vY", "é", "Zm9%"]
    )
    func rejectsNonCanonical(text: String) {
        #expect(throws: JOSEError.self) { try Base64URL.decode(text) }
        do {
            _ = try Base64URL.decode(text)
        } catch let error as JOSEError {
            #expect(error.code == .malformedBase64URL)
        } catch {
            Issue.record("unexpected error type \(error)")
        }
    }

    @Test("ATK-18: non-zero unused trailing bits are rejected (one value, one encoding)")
    func rejectsNonZeroTrailingBits() throws {
        #expect(try Base64URL.decode("Zg") == Data("f".utf8))
        #expect(throws: JOSEError.self) { try Base64URL.decode("Zh") }
        #expect(try Base64URL.decode("Zm8") == Data("fo".utf8))
        #expect(throws: JOSEError.self) { try Base64URL.decode("Zm9") }
    }

    @Test("Round trip over every byte value and length")
    func roundTrip() throws {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ length) }
            #expect(try Base64URL.decode(Base64URL.encode(bytes)) == Data(bytes))
        }
    }
}
