// Stand-in for CryptoKit (iOS 13 / macOS 10.15 and later), for type-checking only: the part of its API that
// SesameJOSE's Apple backend (BackingKey+CryptoKit.swift) and SesameApple's Secure Enclave keys use, written from
// Apple's CryptoKit documentation — names, argument labels, generic constraints, `throws` and return types.
//
// Apple declares P256, P384 and P521 as separate structs; here each curve's keys and signatures are one generic
// shape specialized per curve (`NISTSigning<P384Curve>.PrivateKey`), so that a P-256 signature still cannot be
// passed to a P-384 key, without three copies; the three digests likewise. That is the one liberty taken: a member
// Apple declares on one curve or digest only would not be caught here. Keys and signatures are not declared Sendable (our code must not rely on it).
// Nothing here runs: every body traps.
public import Foundation
public import Security

@inline(never) func stub() -> Never { fatalError("Apple stand-in: type-checking only") }

// MARK: Digests

/// A digest: its bytes, as a sequence (Apple: `Digest`, also `ContiguousBytes`).
public protocol Digest: Hashable, ContiguousBytes, Sequence, Sendable where Element == UInt8 {
    static var byteCount: Int { get }
}

/// A hash function (Apple: `HashFunction`).
public protocol HashFunction: Sendable {
    associatedtype Digest: CryptoKit.Digest
    static func hash<D: DataProtocol>(data: D) -> Digest
}

/// One hash function's digest (Apple: `SHA256Digest` and its siblings, each a separate struct).
public struct StandInDigest<Tag>: Digest {
    public static var byteCount: Int { stub() }
    public func makeIterator() -> Array<UInt8>.Iterator { stub() }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { stub() }
}

public enum SHA256Tag {}
public enum SHA384Tag {}
public enum SHA512Tag {}
public typealias SHA256Digest = StandInDigest<SHA256Tag>
public typealias SHA384Digest = StandInDigest<SHA384Tag>
public typealias SHA512Digest = StandInDigest<SHA512Tag>

public struct SHA256: HashFunction {
    public static func hash<D: DataProtocol>(data: D) -> SHA256Digest { stub() }
}

public struct SHA384: HashFunction {
    public static func hash<D: DataProtocol>(data: D) -> SHA384Digest { stub() }
}

public struct SHA512: HashFunction {
    public static func hash<D: DataProtocol>(data: D) -> SHA512Digest { stub() }
}

// MARK: Keys and MACs

/// A symmetric key (Apple: `SymmetricKey`).
public struct SymmetricKey: ContiguousBytes, Sendable {
    public init<D: ContiguousBytes>(data: D) { stub() }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { stub() }
}

/// A message authentication code's bytes (Apple: `MessageAuthenticationCode`: an instance `byteCount`, unlike a
/// digest's static one).
public protocol MessageAuthenticationCode: Hashable, ContiguousBytes, Sequence, Sendable where Element == UInt8 {
    var byteCount: Int { get }
}

/// An HMAC's code (Apple: `HashedAuthenticationCode`).
public struct HashedAuthenticationCode<H: HashFunction>: MessageAuthenticationCode {
    public var byteCount: Int { stub() }
    public func makeIterator() -> Array<UInt8>.Iterator { stub() }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { stub() }
}

/// HMAC over a hash function (Apple: `HMAC`).
public struct HMAC<H: HashFunction>: Sendable {
    public static func authenticationCode<D: DataProtocol>(for data: D, using key: SymmetricKey)
        -> HashedAuthenticationCode<H>
    { stub() }
}

// MARK: Elliptic-curve signing

public enum P256Curve {}
public enum P384Curve {}
public enum P521Curve {}

/// One NIST curve's signing types (Apple: `P256.Signing` and its siblings, each a separate declaration).
public enum NISTSigning<Curve> {
    public struct ECDSASignature {
        public init<D: DataProtocol>(rawRepresentation: D) throws { stub() }
        public init<D: DataProtocol>(derRepresentation: D) throws { stub() }
        public var rawRepresentation: Data { stub() }
        public var derRepresentation: Data { stub() }
    }

    public struct PublicKey {
        public init<D: ContiguousBytes>(rawRepresentation: D) throws { stub() }
        public init<D: ContiguousBytes>(x963Representation: D) throws { stub() }
        public init(pemRepresentation: String) throws { stub() }
        public var rawRepresentation: Data { stub() }
        public var x963Representation: Data { stub() }
        public var pemRepresentation: String { stub() }
        public func isValidSignature<D: DataProtocol>(_ signature: ECDSASignature, for data: D) -> Bool { stub() }
    }

    public struct PrivateKey {
        public init(compactRepresentable: Bool = true) { stub() }
        public init<D: ContiguousBytes>(rawRepresentation: D) throws { stub() }
        public init(pemRepresentation: String) throws { stub() }
        public var rawRepresentation: Data { stub() }
        public var pemRepresentation: String { stub() }
        public var publicKey: PublicKey { stub() }
        public func signature<D: DataProtocol>(for data: D) throws -> ECDSASignature { stub() }
    }
}

public enum P256 { public typealias Signing = NISTSigning<P256Curve> }
public enum P384 { public typealias Signing = NISTSigning<P384Curve> }
public enum P521 { public typealias Signing = NISTSigning<P521Curve> }

/// Ed25519 (Apple: `Curve25519.Signing`).
public enum Curve25519 {
    public enum Signing {
        public struct PublicKey {
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { stub() }
            public var rawRepresentation: Data { stub() }
            public func isValidSignature<S: DataProtocol, D: DataProtocol>(_ signature: S, for data: D) -> Bool {
                stub()
            }
        }

        public struct PrivateKey {
            public init() { stub() }
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { stub() }
            public var rawRepresentation: Data { stub() }
            public var publicKey: PublicKey { stub() }
            public func signature<D: DataProtocol>(for data: D) throws -> Data { stub() }
        }
    }
}

// MARK: The Secure Enclave

/// Keys held by the Secure Enclave (Apple: `SecureEnclave`, P-256 only).
public enum SecureEnclave {
    public static var isAvailable: Bool { stub() }

    public enum P256 {
        public enum Signing {
            public struct PrivateKey {
                // Apple's initializers also take an optional `authenticationContext: LAContext?`, left out here.
                public init(compactRepresentable: Bool = true, accessControl: SecAccessControl) throws { stub() }
                public init(dataRepresentation: Data) throws { stub() }
                public var dataRepresentation: Data { stub() }
                public var publicKey: CryptoKit.P256.Signing.PublicKey { stub() }
                public func signature<D: DataProtocol>(for data: D) throws -> CryptoKit.P256.Signing.ECDSASignature {
                    stub()
                }
            }
        }
    }
}
