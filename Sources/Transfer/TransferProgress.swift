// TransferProgress - byte-weighted progress over a whole file set.
import Foundation

public struct TransferProgress: Sendable, Equatable {
    /// Bytes of the requested files that are on disk (already cached ones included).
    public var completedBytes: Int64
    public var totalBytes: Int64
    public var filesDone: Int
    public var filesTotal: Int
    /// The file that most recently received bytes or completed.
    public var currentFile: String?
    /// Bytes per second over the last few seconds of this transfer.
    public var bytesPerSecond: Double
    /// Set on the event for a file that just became final.
    public var completedFile: String?

    public var fraction: Double { totalBytes > 0 ? min(1, Double(completedBytes) / Double(totalBytes)) : 1 }

    public init(completedBytes: Int64, totalBytes: Int64, filesDone: Int, filesTotal: Int,
                currentFile: String? = nil, bytesPerSecond: Double = 0, completedFile: String? = nil) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.currentFile = currentFile
        self.bytesPerSecond = bytesPerSecond
        self.completedFile = completedFile
    }
}
