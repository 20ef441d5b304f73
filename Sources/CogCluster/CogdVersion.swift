/// The version of cogd this build is: what `cogd version` prints and what a
/// leader reports in its `status` (`protocol/cogwire.md` §3), so an operator
/// sees which build serves.
public enum CogdVersion {
    public static let current = "0.1.0"
}
