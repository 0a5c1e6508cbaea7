// libFuzzer entry point for SesameJOSE's parsers, compiled together with the module's sources by
// Scripts/fuzz.sh. Every input must either parse or throw a JOSEError: a crash, a hang or a sanitizer report is
// a bug. The same bytes are fed to the JSON parser, the compact JWT decoder, JWK and JWK Set import, and a full
// verification against a fixed key set.
import Foundation

private let verifier: JWTVerifier? = {
    guard let key = try? JWK.generate(for: .es256, keyID: "fuzz"), let publicKey = try? key.publicKey(),
        let keys = try? JWKSet(keys: [publicKey])
    else { return nil }
    return JWTVerifier(keys: keys)
}()

/// libFuzzer calls this with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJOSE(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? JOSEValue.parse(bytes)
    _ = try? JWK(json: bytes, allowSymmetric: true)
    _ = try? JWKSet(json: bytes, allowSymmetric: true)
    let text = String(decoding: bytes, as: UTF8.self)
    _ = try? JWT.unverified(text)
    _ = try? Base64URL.decode(text)
    _ = try? verifier?.verify(text, now: Date(timeIntervalSince1970: 1_750_000_000))
    return 0
}
