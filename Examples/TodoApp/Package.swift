// swift-tools-version:6.0
// A todo list on cogd: the template for your own app. Copy this folder,
// then point the dependency below at cogd (a path or a URL; see README.md).
import PackageDescription

let package = Package(
    name: "TodoApp",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "todo", targets: ["todo"]),
    ],
    dependencies: [
        // This repository, two folders up. In your own project, a clone of it:
        // .package(name: "cogd", path: "/path/to/cogd") — `name:` keeps the
        // products' `package: "cogd"` right whatever the folder is called —
        // or .package(url: "https://…/cogd.git", branch: "main").
        .package(name: "cogd", path: "../.."),
    ],
    targets: [
        // The app's state, ops and mechanisms: the rig.
        .target(name: "TodoApp", dependencies: [.product(name: "Cog", package: "cogd")]),
        // The executable: every cogd subcommand, running the rig.
        .executableTarget(
            name: "todo",
            dependencies: ["TodoApp", .product(name: "CogdCommandLine", package: "cogd")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
