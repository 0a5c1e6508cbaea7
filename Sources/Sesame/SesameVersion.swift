/// The version of the Sesame package: the one source for `sesame --version` and anything else that reports it.
public enum SesameVersion {
    /// The version string (semantic versioning): `-dev` until a release is tagged (CONTRIBUTING.md, "Versions").
    public static let current = "0.3.0-dev"
}
