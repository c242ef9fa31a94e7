// ProgressPrinter - renders download progress: a redrawn line on a terminal, lines otherwise, or JSON.
import Foundation
import SpeechFetch

final class ProgressPrinter: @unchecked Sendable {
    enum Style { case terminal, lines, json }

    let style: Style
    private let lock = NSLock()
    private var lastWidth = 0
    private var lastDraw = Date.distantPast

    init(json: Bool) {
        style = json ? .json : (isatty(STDOUT_FILENO) != 0 ? .terminal : .lines)
    }

    func update(_ p: DownloadProgress) {
        lock.withLock {
            switch style {
            case .json:
                var event: [String: Any] = ["event": p.completedFile == nil ? "progress" : "file",
                                            "completedBytes": p.completedBytes, "totalBytes": p.totalBytes,
                                            "fraction": p.fraction, "filesDone": p.filesDone, "filesTotal": p.filesTotal,
                                            "bytesPerSecond": Int(p.bytesPerSecond)]
                if let f = p.currentFile { event["currentFile"] = f }
                if let f = p.completedFile { event["completedFile"] = f }
                emitJSON(event)
            case .lines:
                if let file = p.completedFile {
                    emit("done \(file) (\(p.filesDone)/\(p.filesTotal) files, \(Format.bytes(p.completedBytes)) of \(Format.bytes(p.totalBytes)))\n")
                }
            case .terminal:
                let now = Date()
                guard p.completedFile != nil || now.timeIntervalSince(lastDraw) >= 0.1 || p.completedBytes == p.totalBytes else { return }
                lastDraw = now
                draw(p)
            }
        }
    }

    private func draw(_ p: DownloadProgress) {
        let width = 24
        let filled = Int(p.fraction * Double(width))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        var eta = "--"
        if p.bytesPerSecond > 0 { eta = Format.duration(Double(p.totalBytes - p.completedBytes) / p.bytesPerSecond) }
        let line = String(format: "%@ %5.1f%% %@ / %@  %@/s  ETA %@  %d/%d files", bar, p.fraction * 100,
                          Format.bytes(p.completedBytes), Format.bytes(p.totalBytes), Format.bytes(Int64(p.bytesPerSecond)),
                          eta, p.filesDone, p.filesTotal)
        let pad = max(0, lastWidth - line.count)
        lastWidth = line.count
        emit("\r" + line + String(repeating: " ", count: pad))
    }

    /// Ends the redrawn line so later output starts on its own line.
    func finish() {
        lock.withLock {
            if style == .terminal && lastWidth > 0 { emit("\n"); lastWidth = 0 }
        }
    }

    func emitJSON(_ object: [String: Any]) {
        if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
            emit(String(decoding: data, as: UTF8.self) + "\n")
        }
    }
}

/// Writes straight to standard output (unbuffered, so lines interleave correctly with stderr).
func emit(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
}

enum Format {
    static func bytes(_ n: Int64) -> String { ByteFormat.string(n) }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "--" }
        let s = Int(seconds.rounded())
        return s >= 3600 ? "\(s / 3600)h\((s % 3600) / 60)m" : s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
    }
}
