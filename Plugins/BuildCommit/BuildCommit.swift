// BuildCommit - records the commit a build was made from in the module that prints it
// (CommandLineKit's `BuildInfo`), at build time: every `swift build` runs scripts/build-commit
// first, which writes `BuildCommit.swift` (the checkout's HEAD) into this plugin's work folder
// and rewrites it only when the commit changed. A binary copied or packaged elsewhere keeps it.
import Foundation
import PackagePlugin

@main
struct BuildCommit: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "Generated")
        let script = context.package.directoryURL.appending(path: "scripts/build-commit")
        return [.prebuildCommand(displayName: "Recording the commit of the build",
                                 executable: URL(fileURLWithPath: "/bin/sh"),
                                 arguments: [script.path, context.package.directoryURL.path, output.path],
                                 outputFilesDirectory: output)]
    }
}
