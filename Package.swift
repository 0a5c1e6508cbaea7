// swift-tools-version:6.0
import PackageDescription

/// Settings shared by every Swift target: Swift 6 mode plus the upcoming features STYLE.md §4 asks for.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Sesame",
    platforms: [.iOS(.v16), .macOS(.v13), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "SesameJOSE", targets: ["SesameJOSE"]),
        .library(name: "Sesame", targets: ["Sesame"]),
        .library(name: "SesameApple", targets: ["SesameApple"]),
        .library(name: "SesameTesting", targets: ["SesameTesting"]),
        .library(name: "SesameLoopback", targets: ["SesameLoopback"]),
        .library(name: "SesameDevServer", targets: ["SesameDevServer"]),
        .executable(name: "sesame", targets: ["sesame"]),
    ],
    targets: [
        // OpenSSL 3 libcrypto (Debian `libssl-dev`). Only SesameJOSE's `+OpenSSL` backend files import it,
        // and only on Linux; Apple platforms use CryptoKit and Security instead.
        .systemLibrary(
            name: "CSesameOpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "SesameJOSE",
            dependencies: [
                .target(name: "CSesameOpenSSL", condition: .when(platforms: [.linux, .android, .openbsd]))
            ],
            swiftSettings: swiftSettings
        ),
        // libcurl for the Linux transport, which waits in the kernel instead of spinning like FoundationNetworking's
        // URLSession. Opened with dlopen at run time (libcurl.so.4, which FoundationNetworking links too), so the
        // package builds without libcurl's development files. Apple platforms use URLSession.
        .target(
            name: "CSesameCurl",
            linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]
        ),
        // The Linux keyring through libsecret, opened with dlopen at run time (builds without libsecret).
        .target(
            name: "CSesameSecret",
            linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]
        ),
        .target(
            name: "Sesame",
            dependencies: [
                "SesameJOSE", "SesameLoopback",
                .target(name: "CSesameSecret", condition: .when(platforms: [.linux, .android, .openbsd])),
                .target(name: "CSesameCurl", condition: .when(platforms: [.linux, .android, .openbsd])),
            ],
            swiftSettings: swiftSettings
        ),
        // Apple-only shims, declared on every platform; their sources are guarded by #if canImport.
        .target(
            name: "SesameApple",
            dependencies: ["Sesame", "SesameJOSE"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SesameTesting",
            dependencies: ["Sesame", "SesameJOSE"],
            swiftSettings: swiftSettings
        ),
        // epoll for SesameLoopback's event loop, accept4/pipe2 (close-on-exec) and posix_spawn for its ChildProcess
        // (Linux only: elsewhere poll, fcntl, Process).
        .target(name: "CSesameEpoll"),
        .target(
            name: "SesameLoopback",
            dependencies: [.target(name: "CSesameEpoll", condition: .when(platforms: [.linux, .android]))],
            swiftSettings: swiftSettings
        ),
        // SQLite (Debian `libsqlite3-dev`) for the dev server; Apple platforms use their SQLite3 module.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "SesameDevServer",
            dependencies: [
                "SesameJOSE", "SesameLoopback",
                .target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .openbsd])),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sesame",
            dependencies: ["Sesame", "SesameJOSE", "SesameLoopback", "SesameDevServer", "SesameTesting"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sesame-bench",
            dependencies: [
                "Sesame", "SesameJOSE", "SesameDevServer", "SesameLoopback",
                .target(name: "CSesameOpenSSL", condition: .when(platforms: [.linux, .android, .openbsd])),
            ],
            path: "Benchmarks/sesame-bench",
            swiftSettings: swiftSettings
        ),
        // A process that uses libcrypto after exit has begun (SesameCLITests' ExitTests run it).
        .executableTarget(
            name: "sesame-exit-probe",
            dependencies: ["Sesame", "SesameJOSE"],
            path: "Tests/ExitProbe",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SesameJOSETests",
            dependencies: ["SesameJOSE"],
            exclude: ["Vectors"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SesameTestSupport",
            dependencies: ["SesameJOSE", "SesameLoopback", "SesameDevServer", "SesameTesting"],
            path: "Tests/SesameTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SesameTests",
            dependencies: ["Sesame", "SesameJOSE", "SesameLoopback", "SesameTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SesameIntegrationTests",
            dependencies: [
                "Sesame", "SesameDevServer", "SesameJOSE", "SesameLoopback", "SesameTestSupport", "SesameTesting",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SesameDevServerTests",
            dependencies: ["SesameDevServer", "SesameJOSE", "SesameLoopback", "SesameTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SesameLoopbackTests",
            dependencies: ["SesameLoopback", "SesameTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SesameCLITests",
            dependencies: [
                "sesame", "sesame-exit-probe", "SesameTestSupport", "SesameLoopback", "SesameJOSE", "Sesame",
            ],
            exclude: ["Snapshots", "Fixtures"],
            swiftSettings: swiftSettings
        ),
    ]
)
