// DownloadEvent - the lines `speech download --json` writes to stdout, one JSON object each, with
// keys sorted and `/` unescaped: the schema docs/cli.md ("--json events") lists. Each names
// itself in `event`; a field that does not apply is left out, never null.
import Foundation

/// One `--json` line of `speech download`.
protocol DownloadEvent: Encodable {}

extension DownloadEvent {
    /// The line this event is (its JSON and a newline).
    var line: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return ((try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "") + "\n"
    }
}

/// Bytes moved (`progress`), or a file final (`file`, with `completedFile`).
struct ProgressEvent: DownloadEvent {
    let event: String
    let completedBytes: Int64
    let totalBytes: Int64
    let fraction: Double
    let filesDone: Int
    let filesTotal: Int
    let bytesPerSecond: Int
    let currentFile: String?
    let completedFile: String?
}

/// A request is retried: what failed, attempt k of n, the wait.
struct RetryNotice: DownloadEvent {
    let event = "retry"
    let subject: String
    let reason: String
    let attempt: Int
    let attempts: Int
    let waitSeconds: Double
    /// Nothing answered (refused, no DNS).
    let unreachable: Bool
}

/// A line of one field beside its name: the hand-over's turns, a wait, the error.
enum NoteEvent: DownloadEvent {
    /// The transfer runs in the speech-fetchd that serves `spool`.
    case daemon(spool: String)
    /// A daemon serves the base but this call fetches itself, and why.
    case notHandedOver(reason: String)
    /// The daemon of `spool` is gone; this process finishes the transfer.
    case daemonGone(spool: String)
    /// The call waits for something (a lock another process holds).
    case waiting(message: String)
    /// The call failed (`message` as the error line says it).
    case error(message: String)

    /// The line's two keys: `event` and the one field.
    private var fields: [String: String] {
        switch self {
        case .daemon(let spool): ["event": "daemon", "spool": spool]
        case .notHandedOver(let reason): ["event": "notHandedOver", "reason": reason]
        case .daemonGone(let spool): ["event": "daemonGone", "spool": spool]
        case .waiting(let message): ["event": "waiting", "message": message]
        case .error(let message): ["event": "error", "message": message]
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(fields)
    }
}

/// `--detach`: the request was handed over (nothing fetched yet, so no `done` follows).
struct AcceptedEvent: DownloadEvent {
    let event = "accepted"
    let requestId: String
    let repo: String
    let directory: String
    let files: [String]
    let commit: String?
    /// The speech-fetchd this call started, and its log.
    let daemonPid: Int?
    let daemonLog: String?
}

/// The repo's files are final (the last line of a repo download).
struct DoneEvent: DownloadEvent {
    let event = "done"
    let directory: String
    let files: [String]
    let fetched: [String]
    let seconds: Double
    let averageBytesPerSecond: Int
    let commit: String?
    let warning: String?
    /// `--include` globs that matched no file of the repo, with the nearest paths.
    let unmatchedPatterns: [UnmatchedPattern]?
    let daemonPid: Int?
    let daemonLog: String?

    struct UnmatchedPattern: Encodable {
        let pattern: String
        let nearPaths: [String]
    }
}

/// A catalog model's component is final (one line per component).
struct ComponentDoneEvent: DownloadEvent {
    let event = "done"
    let model: String
    let role: String
    let repo: String
    let directory: String
    let files: [String]
    let fetched: [String]
}

/// `--dry-run`: what the call would fetch.
struct PlanEvent: DownloadEvent {
    let event = "plan"
    let directory: String
    let commit: String
    let bytesToFetch: Int64
    let files: [PlannedFile]

    struct PlannedFile: Encodable {
        let path: String
        let size: Int64
        let cached: Bool
    }
}
