// swift-tools-version:6.0
// cogd — a Swift runtime for Cog-style state on Linux, made multi-process.
// The package depends on nothing outside the toolchain; C libraries come from
// Debian (`deploy/install-deps.sh`).
import PackageDescription

let package = Package(
    name: "cogd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Cog", targets: ["Cog"]),
        .library(name: "CogTesting", targets: ["CogTesting"]),
        .library(name: "CogCodec", targets: ["CogCodec"]),
        .library(name: "CogProtocol", targets: ["CogProtocol"]),
        .library(name: "CogLog", targets: ["CogLog"]),
        .library(name: "CogWire", targets: ["CogWire"]),
        .library(name: "CogCluster", targets: ["CogCluster"]),
        .library(name: "CogdCommandLine", targets: ["CogdCommandLine"]),
        .executable(name: "cogd", targets: ["cogd"]),
        .executable(name: "cogd-lab", targets: ["cogd-lab"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        // No pkg-config here: libzmq's names Kerberos' include folder with
        // -isystem, which SwiftPM refuses with a warning; zmq.h needs none of
        // its flags, and the module map links libzmq (Debian: libzmq3-dev).
        .systemLibrary(name: "CZMQ"),
        .target(name: "Cog"),
        .target(name: "CogTesting", dependencies: ["Cog"]),
        .target(name: "CCRC32C"),
        .target(name: "CSHA256"),
        // Deterministic CBOR, request ids, turn records, scope events, digests: no LMDB.
        .target(name: "CogCodec", dependencies: ["Cog", "CCRC32C", "CSHA256"]),
        // The LMDB store.
        .target(name: "CPrefetch"),
        .target(name: "CogLog", dependencies: ["Cog", "CogCodec", "CLMDB", "CPrefetch"]),
        .target(name: "CFileAccess"),
        // Every protocol rule as a state machine, and the messages: no ZeroMQ,
        // LMDB, Glibc or clock (Tests/CoreTests/ModulePurityTests.swift checks).
        .target(
            name: "CogProtocol", dependencies: ["Cog", "CogCodec"],
            // A member of a module this one does not import (Foundation's, through
            // CogCodec) is an error here, not a silent way around the imports.
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        .target(name: "CogWire", dependencies: ["CogProtocol", "CZMQ", "CFileAccess"]),
        .target(name: "CThreadAffinity"),
        .target(name: "CCrashMark"),
        .target(name: "CogCluster", dependencies: ["Cog", "CogCodec", "CogProtocol", "CogLog", "CogWire", "CThreadAffinity", "CCrashMark", "CFileAccess"]),
        .target(name: "LedgerRig", dependencies: ["Cog"]),
        .target(name: "TrailsRig", dependencies: ["Cog"]),
        .target(name: "CogSim", dependencies: ["Cog", "CogCodec", "CogProtocol", "LedgerRig", "TrailsRig"]),
        .target(name: "CCogdSupport"),
        // The runtime's commands, as a library a user's app links: no example rig, no lab code.
        .target(
            name: "CogdCommandLine",
            dependencies: ["Cog", "CogCodec", "CogProtocol", "CogLog", "CogWire", "CogCluster", "CLMDB", "CZMQ"]
        ),
        .executableTarget(name: "cogd", dependencies: ["Cog", "CogdCommandLine", "LedgerRig", "TrailsRig"]),
        // The lab: benchmarks, drills, the simulator and the rigs they need, as `cogd-lab`.
        .target(
            name: "CogLab",
            dependencies: [
                "Cog", "CogCodec", "CogProtocol", "CogLog", "CogWire", "CogCluster", "CogSim", "CogdCommandLine", "LedgerRig", "TrailsRig", "CLMDB",
                "CZMQ", "CCogdSupport",
            ]
        ),
        .executableTarget(name: "cogd-lab", dependencies: ["CogLab"]),
        // A user's own executable with one rig of its own (CogdTests runs it).
        .executableTarget(name: "CounterApp", dependencies: ["Cog", "CogdCommandLine"], path: "Tests/CounterApp"),
        .testTarget(name: "CogTests", dependencies: ["Cog", "CogTesting"]),
        .testTarget(name: "CogLogTests", dependencies: ["CogCodec", "CogLog", "Cog", "CogTesting", "CogSim"]),
        .testTarget(name: "RigTests", dependencies: ["LedgerRig", "TrailsRig", "Cog", "CogTesting", "CogCodec", "CogLog"]),
        .testTarget(
            name: "CogdTests",
            dependencies: [
                "cogd", "cogd-lab", "CogdCommandLine", "CogLab", "CogWire", "CogProtocol", "CogCodec", "CogLog", "CogCluster", "LedgerRig", "Cog",
            ]),
        .testTarget(name: "CoreTests", dependencies: ["CogCluster", "CogProtocol", "CogWire", "CogCodec", "CogLog", "Cog", "LedgerRig", "CogSim"]),
    ],
    swiftLanguageModes: [.v6]
)
