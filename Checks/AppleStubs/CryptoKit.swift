// Stand-in for CryptoKit: swift-crypto's `Crypto` (the same API), plus declarations of `SecureEnclave`, which
// swift-crypto does not have, for type-checking only.
@_exported import Crypto
import Foundation
import Security

public enum SecureEnclave {
    public static var isAvailable: Bool { false }

    public enum P256 {
        public enum Signing {
            public struct PrivateKey {
                public init(
                    compactRepresentable: Bool = true, accessControl: SecAccessControl
                ) throws { fatalError("Apple stand-in: type-checking only") }
                public init(dataRepresentation: Data) throws { fatalError("Apple stand-in: type-checking only") }
                public var dataRepresentation: Data { fatalError("Apple stand-in: type-checking only") }
                public var publicKey: Crypto.P256.Signing.PublicKey { fatalError("Apple stand-in: type-checking only") }
                public func signature<D: DataProtocol>(for data: D) throws -> Crypto.P256.Signing.ECDSASignature {
                    fatalError("Apple stand-in: type-checking only")
                }
            }
        }
    }
}
