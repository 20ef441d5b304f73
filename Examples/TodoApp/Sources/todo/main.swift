// `todo`: every subcommand cogd has (leader, worker, call, status, tail,
// log, version), running the todo rig.
import CogdCommandLine
import TodoApp

await CogdCommandLine.main(rigs: [TodoApp.rig], version: "1.0.0")
