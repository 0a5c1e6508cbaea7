import Foundation
import SesameLoopback
import Testing

@testable import Sesame

/// The client's form encoder (`OIDCAuthProvider.formComponent`, RFC 3986 unreserved only) and the servers'
/// (`HTTPFormEncoding`, HTML's set, spaces as `+`), each against Foundation's percent-encoding as the reference, and
/// against each other: what the client posts, the dev server reads back exactly.
///
/// Both walk UTF-8 bytes themselves instead of building a `CharacterSet` per call, and both decode byte for byte
/// (Foundation's `removingPercentEncoding` drops a leading U+FEFF).
@Suite struct FormCodingTests {
    /// Words meant to break an encoder: every ASCII byte, multi-byte scalars, a combining mark, a lone `%`.
    static let words: [String] = {
        var words = [
            "", "abc-._~XYZ019", "a b+c&d=e", "%", "%41", "é", "e\u{301}", "😀", "日本語", "\u{0}\u{7F}", "*'()!",
            "https://op.example/cb?x=1#f", "\u{FEFF}", "🏳️‍🌈",
        ]
        words.append(String(decoding: (0...127).map { UInt8($0) }, as: UTF8.self))
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("aZ9-._~*+ %&=/?#é€😀\u{301}\n\t\"'")
        for _ in 0..<500 {
            words.append(
                String(
                    (0..<Int.random(in: 0...24, using: &generator)).map { _ in
                        alphabet[Int.random(in: alphabet.indices, using: &generator)]
                    }))
        }
        return words
    }()

    @Test("The client's form component: RFC 3986 unreserved kept, every other byte %XX, as Foundation writes it")
    func clientComponent() {
        let unreserved = CharacterSet(
            charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        for word in Self.words {
            let reference = word.addingPercentEncoding(withAllowedCharacters: unreserved)
            #expect(OIDCAuthProvider.formComponent(word) == reference, "\(Array(word.utf8))")
            #expect(OIDCAuthProvider.formDecoded(OIDCAuthProvider.formComponent(word), plusIsSpace: true) == word)
        }
        #expect(OIDCAuthProvider.formEncode([("a b", "x&y=z"), ("é", "")]) == "a%20b=x%26y%3Dz&%C3%A9=")
    }

    @Test("A redirect's parameters decode byte for byte: a leading U+FEFF stays (Foundation's decoder drops it)")
    func byteExactDecoding() throws {
        #expect(OIDCAuthProvider.formDecoded("%EF%BB%BFabc", plusIsSpace: true) == "\u{FEFF}abc")
        #expect(OIDCAuthProvider.formDecoded("a+b%2B", plusIsSpace: true) == "a b+")
        #expect(OIDCAuthProvider.formDecoded("a+b", plusIsSpace: false) == "a+b")
        for broken in ["%", "%4", "%G1", "abc%", "%FF", "%C3"] {
            #expect(OIDCAuthProvider.formDecoded(broken, plusIsSpace: true) == nil, "\(broken)")
        }
        let url = try #require(
            URL(string: "http://127.0.0.1/cb?code=c&state=%EF%BB%BFs1&iss=%EF%BB%BFhttps%3A%2F%2Fop"))
        let response = try AuthorizationResponse(url: url)
        #expect(response.parameters["state"] == "\u{FEFF}s1" && response.parameters["iss"] == "\u{FEFF}https://op")
    }
    @Test("The servers' form escape: HTML's set kept, spaces as +, and it decodes back to the same pairs")
    func serverEscape() {
        let kept = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._* ")
        for word in Self.words {
            let reference = word.addingPercentEncoding(withAllowedCharacters: kept)?
                .replacingOccurrences(of: " ", with: "+")
            #expect(HTTPFormEncoding.escape(word) == reference, "\(Array(word.utf8))")
        }
        let pairs = Self.words.map { ($0, String($0.reversed())) }
        let decoded = HTTPFormEncoding.decodePairs(HTTPFormEncoding.encode(pairs))
        #expect(decoded.map(\.name) == pairs.map(\.0) && decoded.map(\.value) == pairs.map(\.1))
        // Byte for byte: a leading U+FEFF stays (Foundation's removingPercentEncoding drops it); broken escapes and
        // bytes that are not UTF-8 do not decode.
        #expect(HTTPFormEncoding.decodeComponent("%EF%BB%BFx") == "\u{FEFF}x")
        #expect(HTTPFormEncoding.decode("redirect_uri=%EF%BB%BFhttp%3A%2F%2Fa")["redirect_uri"] == "\u{FEFF}http://a")
        for broken in ["%", "%4", "%G1", "%FF"] { #expect(HTTPFormEncoding.decodeComponent(broken) == nil) }
    }

    @Test("The servers' form decoder splits on the bytes & and =, also where a combining mark follows one")
    func byteSeparators() {
        // Swift joins "&" and U+0301 into one Character; WHATWG URL (and every other server) splits on the byte.
        let decoded = HTTPFormEncoding.decodePairs("a=1&\u{301}b=2&c=\u{301}3&=\u{301}&d&%zz=+%")
        #expect(decoded.map(\.name) == ["a", "\u{301}b", "c", "", "d", "%zz"])
        #expect(decoded.map(\.value) == ["1", "2", "\u{301}3", "\u{301}", "", " %"])
        #expect(HTTPFormEncoding.decode("state=x&\u{301}state=y")["state"] == "x")
    }

    @Test("What the client form-encodes, the servers' decoder reads back pair for pair")
    func clientToServer() {
        let pairs = Self.words.map { ($0, String($0.reversed())) }
        let decoded = HTTPFormEncoding.decodePairs(OIDCAuthProvider.formEncode(pairs))
        #expect(decoded.map(\.name) == pairs.map(\.0) && decoded.map(\.value) == pairs.map(\.1))
    }
}
