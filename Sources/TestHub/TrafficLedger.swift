// TrafficLedger - what the test Hub has served since start or the last reset: requests,
// body bytes and byte ranges per file. Body bytes are booked before they go to the socket
// and the unsent part is taken back after, so a client that has just read the last byte
// never sees a count that is still short.
import Foundation

/// Which of the two listeners a request came in on.
enum Listener: String, Sendable {
    case hub, cdn
}

/// A handle on one body being sent, to book its bytes as they go.
struct BodyTally: Sendable {
    fileprivate let file: String
    fileprivate let index: Int
    fileprivate let epoch: Int
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

    func beginBody(of file: String, at start: Int) -> BodyTally {
        lock.withLock {
            fileRanges[file, default: []].append((start, 0))
            return BodyTally(file: file, index: fileRanges[file]!.count - 1, epoch: epoch)
        }
    }

    /// Books `count` bytes (negative to take back bytes that were not sent).
    func book(_ count: Int, on tally: BodyTally) {
        lock.withLock {
            guard tally.epoch == epoch, count != 0 else { return }
            fileBytes[tally.file, default: 0] += count
            fileRanges[tally.file]?[tally.index].count += count
        }
    }

    func reset() {
        lock.withLock {
            epoch += 1
            total = 0
            log.removeAll()
            fileRequests.removeAll()
            fileBytes.removeAll()
            fileRanges.removeAll()
            authorizationSeen.removeAll()
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
