// CacheLayout - which layout a model directory is written in: speech-fetch's own, or
// huggingface_hub's repo folder. Spool records carry it (`"layout": "hf"`, absent for native).

public enum CacheLayout: String, Codable, Sendable {
    /// `<base>/models/<org>/<name>/`, files under their repo paths (absent from a record).
    case native
    /// A huggingface_hub repo folder `models--<org>--<name>/`: blobs, snapshots/<commit>, refs.
    case huggingFace = "hf"

    /// The value a record stores: nil for `.native`, which older records (and readers) know as
    /// an absent field.
    public var recorded: CacheLayout? { self == .native ? nil : self }
}

extension ModelDirectory {
    /// The layout this directory is written in.
    public var layout: CacheLayout { hubCommit == nil ? .native : .huggingFace }
}
