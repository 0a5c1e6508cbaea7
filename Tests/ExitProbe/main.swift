// A process that uses libcrypto after `exit` has begun, as a worker thread still hashing or retiring does when a
// process exits under it (see `LibCrypto`). Exits 0 when the digest, the key, the signature and its verification
// made then are right; anything else (a wrong one: 3; a crash: a signal) means libcrypto freed its state at exit.
//
//   sesame-exit-probe jose        libcrypto's first use is SesameJOSE's (a key generated, a token signed)
//   sesame-exit-probe transport   libcrypto's first use is the HTTP transport's (libcurl initialising TLS)
//   sesame-exit-probe urlsession  the same through URLSessionTransport (FoundationNetworking's libcurl)
//
// The handler is registered before libcrypto's first use, so `exit` runs it after any handler libcrypto registers
// then (handlers run in the reverse order of their registration).
import Foundation
import Sesame
import SesameJOSE

atexit {
    let digest = JOSECrypto.sha256(Array("abc".utf8))
    let expected: [UInt8] = [
        0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
        0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
    ]
    // A key made, a token signed and verified: each fetches algorithms from libcrypto's state anew.
    let verified = try? {
        let key = try JWK.generate(for: .es256)
        let token = try JWS.sign(payload: Array("exit".utf8), key: key, algorithm: .es256)
        return try JWS.verify(token, keys: JWKSet(keys: [key.publicKey()])).payload == Data("exit".utf8)
    }()
    _exit(digest == expected && verified == true ? 0 : 3)
}

let mode = CommandLine.arguments.dropFirst().first
switch mode {
case "jose":
    let key = try JWK.generate(for: .es256)
    _ = try JWS.sign(payload: Array(#"{"sub":"probe"}"#.utf8), key: key, algorithm: .es256)
case "transport", "urlsession":
    #if os(Linux)
        // Port 9 (discard) on loopback: nothing listens; the request fails after libcurl has initialised.
        guard let url = URL(string: "http://127.0.0.1:9/") else { _exit(2) }
        let transport: any HTTPTransport = mode == "transport" ? CurlTransport() : URLSessionTransport()
        do {
            _ = try await transport.send(SesameHTTP.Request(method: "GET", url: url, timeout: 5))
            _exit(4)  // something answered on port 9
        } catch let error as AuthError where error.code == .transport && !error.message.contains("could not be loaded")
        {
            // refused, as expected: libcurl was loaded and initialised
        } catch {
            FileHandle.standardError.write(Data("the request failed otherwise: \(error)\n".utf8))
            _exit(5)
        }
    #endif
default:
    FileHandle.standardError.write(Data("usage: sesame-exit-probe jose|transport|urlsession\n".utf8))
    _exit(2)
}
exit(0)
