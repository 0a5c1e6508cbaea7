import Foundation
import Testing

@testable import SesameJOSE

/// The portable DER code the Apple backend relies on, checked here against libcrypto's own encodings.
@Suite struct DERTests {
    @Test("RSA: libcrypto's SubjectPublicKeyInfo and PKCS#8 parse to the same components", .needsRSA)
    func rsaFromLibcrypto() throws {
        let key = TestKeys.rsa
        let publicDER = try DER.der(fromPEM: try key.pemRepresentation, label: "PUBLIC KEY")
        #expect(try DER.components(keyInfo: publicDER) == (try key.publicKey()).components)
        let privateDER = try DER.der(fromPEM: try key.unsafePrivatePEMRepresentation, label: "PRIVATE KEY")
        #expect(try DER.components(keyInfo: privateDER) == key.components)
    }

    @Test("RSA and Ed25519: our SubjectPublicKeyInfo and PKCS#8 are byte-identical to libcrypto's")
    func encodingsMatchLibcrypto() throws {
        for key in (TestKeys.rsaAvailable ? [TestKeys.rsa] : []) + [TestKeys.ed] {
            let ours = DER.pem(try DER.subjectPublicKeyInfo(key.components), label: "PUBLIC KEY")
            #expect(ours == (try key.pemRepresentation))
            let ourPrivate = DER.pem(try DER.privateKeyInfo(key.components), label: "PRIVATE KEY")
            let imported = try JWK(pemRepresentation: ourPrivate)
            #expect(imported.components == key.components)
        }
    }

    @Test("Ed25519: libcrypto's PKCS#8 yields the private scalar")
    func ed25519FromLibcrypto() throws {
        let privateDER = try DER.der(fromPEM: try TestKeys.ed.unsafePrivatePEMRepresentation, label: "PRIVATE KEY")
        guard case .okp(_, _, let d?) = try DER.components(keyInfo: privateDER),
            case .okp(_, _, let expected?) = TestKeys.ed.components
        else {
            Issue.record("not an OKP private key")
            return
        }
        #expect(d == expected)
    }

    @Test(
        "Malformed DER is refused with invalid_key",
        arguments: [[], [0x30], [0x30, 0x05, 0x02], [0x30, 0x81, 0x05, 0, 0, 0, 0, 0], [0x02, 0x01, 0x80]] as [[UInt8]])
    func malformed(bytes: [UInt8]) {
        expectJOSEError(.invalidKey) { _ = try DER.components(keyInfo: bytes) }
    }
}
