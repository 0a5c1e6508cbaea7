/// The version of the Sesame package: the one source for `sesame --version` and anything else that reports it.
public enum SesameVersion {
    /// The version string (semantic versioning).
    public static let current = "0.2.0"
}
