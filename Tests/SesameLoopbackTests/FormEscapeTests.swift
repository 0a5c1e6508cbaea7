import Foundation
import SesameLoopback
import Testing

/// The servers' form encoder against Foundation's percent-encoding as the reference.
///
/// `HTTPFormEncoding.escape` (HTML's set, spaces as `+`) walks UTF-8 bytes itself instead of building a
/// `CharacterSet` per call; what it writes must be what Foundation writes, and decoding gives the pairs back.
@Suite struct FormEscapeTests {
    /// Words meant to break an encoder (the client's test has the same list): every ASCII byte, multi-byte scalars, a combining mark, a lone `%`.
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
}
