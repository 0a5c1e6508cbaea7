// swift-tools-version:6.0
// SesameAlamofire: Sesame's session behind an Alamofire `RequestInterceptor`. A package of its own, so that the
// Sesame package keeps zero dependencies and builds with no network.
//
// Dependencies: Sesame from this repository (by path), and Alamofire — from GitHub by default, or from a local
// copy when SESAME_ALAMOFIRE_PATH names one (the way swift-crypto switches with SWIFTCI_USE_LOCAL_DEPS);
// Scripts/check-integrations.sh points it at the vendored copy.
import Foundation
import PackageDescription

let alamofire: Package.Dependency = {
    if let path = ProcessInfo.processInfo.environment["SESAME_ALAMOFIRE_PATH"], !path.isEmpty {
        return .package(path: path)
    }
    return .package(url: "https://github.com/Alamofire/Alamofire.git", from: "5.10.0")
}()

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "SesameAlamofire",
    platforms: [.iOS(.v16), .macOS(.v13), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [.library(name: "SesameAlamofire", targets: ["SesameAlamofire"])],
    dependencies: [.package(name: "Sesame", path: "../.."), alamofire],
    targets: [
        .target(
            name: "SesameAlamofire",
            dependencies: [
                .product(name: "Sesame", package: "Sesame"), .product(name: "Alamofire", package: "Alamofire"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SesameAlamofireTests",
            dependencies: [
                "SesameAlamofire",
                .product(name: "Alamofire", package: "Alamofire"),
                .product(name: "Sesame", package: "Sesame"),
                .product(name: "SesameDevServer", package: "Sesame"),
                .product(name: "SesameLoopback", package: "Sesame"),
                .product(name: "SesameJOSE", package: "Sesame"),
                .product(name: "SesameTesting", package: "Sesame"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
