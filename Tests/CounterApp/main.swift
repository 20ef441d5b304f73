// A user's own executable on cogd: the app's declarations and its rig are in
// Counter.swift (outside main.swift, so a declaration is made on first use,
// as in a library); this is the one call that gives it every subcommand.
import CogdCommandLine
import Foundation

await CogdCommandLine.main(rigs: [Counter.build(ProcessInfo.processInfo.environment["COUNTER_BUILD"])], version: "2.3.0")
