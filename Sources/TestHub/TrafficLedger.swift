// TrafficLedger - what the test Hub has served since start or the last reset: requests,
// body bytes and byte ranges per file. Body bytes are booked before they go to the socket
// and the unsent part is taken back after, so a client that has just read the last byte
// never sees a count that is still short.
import Foundation

/// Which of the two listeners a request came in on.
enum Listener: String, Sendable {
    case hub, cdn
}

/// What a body's bytes count as.
enum BodyChannel: Sendable {
    /// The file's own bytes (resolve or CDN): `bodyBytes` and `servedRanges`.
    case file
    /// The plain resolve of a Xet-backed file: `bodyBytes` and `servedRanges`, and `bridgeBytes`.
    case bridge
    /// Xorb bytes fetched for the file: `xorbBytes` only (offsets are the xorb's, not the file's).
    case xorb
}

/// A handle on one body being sent, to book its bytes as they go.
struct BodyTally: Sendable {
    fileprivate let file: String
    fileprivate let index: Int
    fileprivate let epoch: Int
    fileprivate let channel: BodyChannel
}

final class TrafficLedger: @unchecked Sendable {
    private let lock = NSLock()
    private var epoch = 0
    private var total = 0
    private var log: [String] = []
    private var fileRequests: [String: Int] = [:]
    private var fileBytes: [String: Int] = [:]
    /// Per file, each body's (start offset, bytes booked).
    private var fileRanges: [String: [(start: Int, count: Int)]] = [:]
    private var authorizationSeen: Set<String> = []
    private var fileBridgeBytes: [String: Int] = [:]
    private var fileXorbBytes: [String: Int] = [:]
    private var fileXorbRequests: [String: Int] = [:]
    private var fileReconstructions: [String: Int] = [:]
    private var observer: (@Sendable (String, Bool) -> Void)?

    func recordRequest(on listener: Listener, method: String, target: String, hasAuthorization: Bool) {
        let line = "\(listener.rawValue) \(method) \(target)"
        let observer: (@Sendable (String, Bool) -> Void)? = lock.withLock {
            total += 1
            log.append(line)
            if hasAuthorization { authorizationSeen.insert(listener.rawValue) }
            return self.observer
        }
        observer?(line, hasAuthorization)
    }

    func observe(_ observer: (@Sendable (String, Bool) -> Void)?) {
        lock.withLock { self.observer = observer }
    }

    func recordFileRequest(_ file: String) {
        lock.withLock { fileRequests[file, default: 0] += 1 }
    }

    func beginBody(of file: String, at start: Int, channel: BodyChannel = .file) -> BodyTally {
        lock.withLock {
            if channel == .xorb { return BodyTally(file: file, index: -1, epoch: epoch, channel: channel) }
            fileRanges[file, default: []].append((start, 0))
            return BodyTally(file: file, index: fileRanges[file]!.count - 1, epoch: epoch, channel: channel)
        }
    }

    /// Books `count` bytes (negative to take back bytes that were not sent).
    func book(_ count: Int, on tally: BodyTally) {
        lock.withLock {
            guard tally.epoch == epoch, count != 0 else { return }
            switch tally.channel {
            case .xorb:
                fileXorbBytes[tally.file, default: 0] += count
                return
            case .bridge:
                fileBridgeBytes[tally.file, default: 0] += count
            case .file:
                break
            }
            fileBytes[tally.file, default: 0] += count
            fileRanges[tally.file]?[tally.index].count += count
        }
    }

    func recordReconstruction(_ file: String) {
        lock.withLock { fileReconstructions[file, default: 0] += 1 }
    }

    func recordXorbRequest(_ file: String) {
        lock.withLock { fileXorbRequests[file, default: 0] += 1 }
    }

    func bridgeBytes(for file: String) -> Int { lock.withLock { fileBridgeBytes[file] ?? 0 } }
    func xorbBytes(for file: String) -> Int { lock.withLock { fileXorbBytes[file] ?? 0 } }
    func xorbRangeRequests(for file: String) -> Int { lock.withLock { fileXorbRequests[file] ?? 0 } }
    func reconstructions(for file: String) -> Int { lock.withLock { fileReconstructions[file] ?? 0 } }
    var totalXorbBytes: Int { lock.withLock { fileXorbBytes.values.reduce(0, +) } }
    var totalBridgeBytes: Int { lock.withLock { fileBridgeBytes.values.reduce(0, +) } }
    var totalReconstructions: Int { lock.withLock { fileReconstructions.values.reduce(0, +) } }

    func reset() {
        lock.withLock {
            epoch += 1
            total = 0
            log.removeAll()
            fileRequests.removeAll()
            fileBytes.removeAll()
            fileRanges.removeAll()
            authorizationSeen.removeAll()
            fileBridgeBytes.removeAll()
            fileXorbBytes.removeAll()
            fileXorbRequests.removeAll()
            fileReconstructions.removeAll()
        }
    }

    var totalRequests: Int { lock.withLock { total } }
    var requestLog: [String] { lock.withLock { log } }
    func requests(for file: String) -> Int { lock.withLock { fileRequests[file] ?? 0 } }
    func bodyBytes(for file: String) -> Int { lock.withLock { fileBytes[file] ?? 0 } }
    func sawAuthorization(on listener: Listener) -> Bool { lock.withLock { authorizationSeen.contains(listener.rawValue) } }

    func servedRanges(for file: String) -> [Range<Int>] {
        lock.withLock {
            (fileRanges[file] ?? []).filter { $0.count > 0 }.map { $0.start ..< $0.start + $0.count }
        }
    }
}
