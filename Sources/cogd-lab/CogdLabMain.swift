import CogLab

/// `cogd-lab`: the lab's executable — benchmarks, drills and the simulator
/// beside the runtime's commands, over the example rigs.
@main
struct CogdLabMain {
    static func main() async {
        await CogLab.main()
    }
}
