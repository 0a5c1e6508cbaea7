// swift-tools-version:6.0
// The sample apps: an iOS app's portable model (its SwiftUI views are compiled for iOS against stand-ins by
// Scripts/check-apple.sh) and a Linux command-line app, both tested against the dev server.
import Foundation
import PackageDescription

// A path dependency is named by its folder: "Sesame" in a clone of that name, whatever it is called here.
let sesame = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "SesameExamples",
    platforms: [.iOS(.v17), .macOS(.v14)],
    dependencies: [.package(path: "..")],
    targets: [
        .target(
            name: "ExampleAppModel", dependencies: [.product(name: "Sesame", package: sesame)],
            path: "iOSApp/Model"),
        .target(
            name: "ExampleCLICore", dependencies: [.product(name: "Sesame", package: sesame)], path: "LinuxCLI/Core"),
        .executableTarget(name: "example-cli", dependencies: ["ExampleCLICore"], path: "LinuxCLI/Main"),
        .testTarget(
            name: "ExamplesTests",
            dependencies: [
                "ExampleAppModel", "ExampleCLICore", .product(name: "SesameDevServer", package: sesame),
                .product(name: "SesameTesting", package: sesame),
            ],
            path: "Tests"),
    ]
)
