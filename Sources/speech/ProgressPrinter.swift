// ProgressPrinter - renders download progress on stderr (as hf's bars: stdout is the result):
// a redrawn line on a terminal, lines otherwise (one per finished file, and one at least every
// 5 s while bytes move); or JSON events on stdout; or nothing.
import ByteUnits
import CommandLineKit
import Foundation
import SpeechFetch

final class ProgressPrinter: @unchecked Sendable {
    enum Style { case terminal, lines, json, silent }

    let style: Style
    private let lock = NSLock()
    private var lastWidth = 0
    private var lastDraw = Date.distantPast
    private var lastLine = Date()
    private var latest: DownloadProgress?
    private var firstBytes: Int64?
    private let started = Date()
    private var ticker: Thread?
    private var stopped = false
    /// Seconds between progress lines when piped: 5, or SPEECH_FETCH_PROGRESS_INTERVAL (tests).
    private let lineInterval: Double

    /// `json` wins; `quiet` (or HF_HUB_DISABLE_PROGRESS_BARS) prints no progress at all.
    init(json: Bool, quiet: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) {
        lineInterval = environment["SPEECH_FETCH_PROGRESS_INTERVAL"].flatMap { Double($0) }.map { max(0.05, min($0, 5)) } ?? 5
        style = json ? .json : quiet ? .silent : (isatty(STDERR_FILENO) != 0 ? .terminal : .lines)
    }

    /// Piped: a line at least every 5 s even while no file finishes (a 300 MiB file). Started at
    /// the first progress event, so a call the cache answers starts no thread. Called under `lock`.
    private func startTicker() {
        guard style == .lines, ticker == nil else { return }
        let thread = Thread { [weak self] in
            while let self, !self.lock.withLock({ self.stopped }) {
                usleep(UInt32(min(250_000, self.lineInterval * 250_000)))
                self.tick()
            }
        }
        thread.start()
        ticker = thread
    }

    func update(_ p: DownloadProgress) {
        lock.withLock {
            if firstBytes == nil {
                firstBytes = p.completedBytes
                lastLine = Date()
                startTicker()
            }
            latest = p
            switch style {
            case .silent: return
            case .json:
                emit(ProgressEvent(event: p.completedFile == nil ? "progress" : "file", completedBytes: p.completedBytes,
                                   totalBytes: p.totalBytes, fraction: p.fraction, filesDone: p.filesDone, filesTotal: p.filesTotal,
                                   bytesPerSecond: Int(p.bytesPerSecond), currentFile: p.currentFile, completedFile: p.completedFile).line)
            case .lines:
                if let file = p.completedFile {
                    say("done \(TerminalText.escaped(file)) (\(p.filesDone)/\(p.filesTotal) files, \(ByteFormat.string(p.completedBytes)) of \(ByteFormat.string(p.totalBytes)))")
                    lastLine = Date()
                }
            case .terminal:
                let now = Date()
                guard p.completedFile != nil || now.timeIntervalSince(lastDraw) >= 0.1 || p.completedBytes == p.totalBytes else { return }
                lastDraw = now
                draw(p)
            }
        }
    }

    /// A line of its own (a retry, the daemon going away) without breaking the redrawn bar.
    func note(_ text: String, json: some DownloadEvent) {
        lock.withLock {
            switch style {
            case .json: emit(json.line)
            case .terminal:
                if lastWidth > 0 { write("\r" + String(repeating: " ", count: lastWidth) + "\r", to: STDERR_FILENO) }
                write("speech: \(text)\n", to: STDERR_FILENO)
                if let latest { lastWidth = 0; draw(latest) }
            case .lines, .silent:
                write("speech: \(text)\n", to: STDERR_FILENO)
            }
        }
    }

    private func tick() {
        lock.withLock {
            guard !stopped, let p = latest, Date().timeIntervalSince(lastLine) >= lineInterval else { return }
            lastLine = Date()
            say("\(Format.percent(p.fraction)) \(ByteFormat.string(p.completedBytes)) of \(ByteFormat.string(p.totalBytes)), "
                + "\(ByteFormat.rate(Int64(p.bytesPerSecond))), \(p.filesDone)/\(p.filesTotal) files")
        }
    }

    private func draw(_ p: DownloadProgress) {
        let width = 24
        let filled = Int(p.fraction * Double(width))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let eta = RateMeter.eta(remaining: p.totalBytes - p.completedBytes, bytesPerSecond: p.bytesPerSecond).map(DurationText.compact) ?? "--"
        let line = String(format: "%@ %5.1f%% %@ / %@  %@/s  ETA %@  %d/%d files", bar, p.fraction * 100,
                          ByteFormat.string(p.completedBytes), ByteFormat.string(p.totalBytes), ByteFormat.string(Int64(p.bytesPerSecond)),
                          eta, p.filesDone, p.filesTotal)
        let pad = max(0, lastWidth - line.count)
        lastWidth = line.count
        write("\r" + line + String(repeating: " ", count: pad), to: STDERR_FILENO)
    }

    /// Bytes this call moved per second, start to end (not the last instant's rate).
    var averageRate: Double {
        lock.withLock {
            guard let latest, let firstBytes else { return 0 }
            let seconds = Date().timeIntervalSince(started)
            return seconds > 0 ? Double(max(0, latest.completedBytes - firstBytes)) / seconds : 0
        }
    }

    /// Bytes this call moved.
    var bytesMoved: Int64 { lock.withLock { max(0, (latest?.completedBytes ?? 0) - (firstBytes ?? 0)) } }

    /// Ends the redrawn line so later output starts on its own line; stops the piped ticker.
    func finish() {
        lock.withLock {
            stopped = true
            if style == .terminal && lastWidth > 0 { write("\n", to: STDERR_FILENO); lastWidth = 0 }
        }
    }

    /// A `--json` line (outside the printer's lock: the final events).
    func emitEvent(_ event: some DownloadEvent) { emit(event.line) }
}

/// Writes straight to standard output (unbuffered, so lines interleave correctly with stderr).
func emit(_ text: String) {
    write(text, to: STDOUT_FILENO)
}

/// A line on stderr: what a command did, beside a stdout that carries only its result (the
/// model directory of `speech download`, as `hf download` prints it).
func say(_ line: String) {
    write(line + "\n", to: STDERR_FILENO)
}

/// One JSON object on a line of its own; `/` stays `/` (paths and repo ids read as written).
func emitJSON(_ object: Any) {
    if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) {
        emit(String(decoding: data, as: UTF8.self) + "\n")
    }
}

/// A path or word as the shell reads it back (single quotes when needed).
func shellQuoted(_ text: String) -> String {
    let plain = text.allSatisfy { $0.isLetter || $0.isNumber || "/._-+:@%=,".contains($0) }
    return plain && !text.isEmpty ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

enum Format {
    static func percent(_ fraction: Double) -> String { String(format: "%.1f%%", fraction * 100) }
}
