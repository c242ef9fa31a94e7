// FaultBook - the faults in force per file, and the decision each response takes from
// them. Counted faults are used up here, under one lock, so two connections racing for
// the last `times` of a fault never both get it.
import Foundation

/// What a body endpoint does with a request before looking at its Range.
enum FaultAdmission: Equatable {
    /// Answer this status instead of the file.
    case refuse(status: Int, retryAfter: Int?)
    /// The CDN says the signed URL has expired (403).
    case expired
    /// Serve the file; `ignoreRange` asks for a 200 with the whole body whatever the Range.
    case serve(ignoreRange: Bool)
}

/// The faults that shape one body being sent.
struct BodyFaults: Sendable {
    var flipOffsets: [Int] = []
    var dropAfter: Int?
    /// Bytes Content-Length announces beyond the body (the connection closes after the body).
    var missingBytes: Int?
    var stall: (afterBytes: Int, seconds: Double)?
    var bytesPerSecond: Int?
}

final class FaultBook: @unchecked Sendable {
    fileprivate struct Entry {
        var fault: Fault
        var remaining: Int
    }

    fileprivate let lock = NSLock()
    fileprivate var entries: [String: [Entry]] = [:]

    func add(_ fault: Fault, for file: String) {
        let remaining: Int
        switch fault {
        case .dropConnection(_, let times), .truncateBody(_, let times), .stall(_, _, let times), .status(_, let times, _), .cdnExpired(let times),
             .reconstructionStatus(_, let times, _), .reconstructionStall(_, let times), .xorbStatus(_, let times, _),
             .xorbStall(_, _, let times), .xorbTruncated(_, let times), .xetTokenExpired(let times):
            remaining = times
        case .flipByte(_, let times?):
            remaining = times
        case .flipByte, .ignoreRange, .rateLimit, .corruptChunk:
            remaining = Int.max
        }
        lock.withLock { entries[file, default: []].append(Entry(fault: fault, remaining: remaining)) }
    }

    func clear() {
        lock.withLock { entries.removeAll() }
    }

    /// Decides whether a request to `file`'s body is answered at all; uses up one `status`
    /// (or, on the CDN, one `cdnExpired`) when it applies.
    func admission(for file: String, onCDN: Bool) -> FaultAdmission {
        lock.withLock {
            guard var list = entries[file], !list.isEmpty else { return .serve(ignoreRange: false) }
            defer { entries[file] = list.filter { $0.remaining > 0 } }
            if onCDN, let i = list.firstIndex(where: { if case .cdnExpired = $0.fault { return $0.remaining > 0 }; return false }) {
                list[i].remaining -= 1
                return .expired
            }
            for i in list.indices where list[i].remaining > 0 {
                if case .status(let code, _, let retryAfter) = list[i].fault {
                    list[i].remaining -= 1
                    return .refuse(status: code, retryAfter: retryAfter)
                }
            }
            let ignore = list.contains { if case .ignoreRange = $0.fault { return true }; return false }
            return .serve(ignoreRange: ignore)
        }
    }

    /// The faults for one body about to be sent (file bytes `covering`); uses up one
    /// `dropConnection`, one `truncateBody`, one `stall` and one of each counted `flipByte` it covers.
    func bodyFaults(for file: String, covering: Range<Int>) -> BodyFaults {
        lock.withLock {
            var result = BodyFaults()
            guard var list = entries[file], !list.isEmpty else { return result }
            defer { entries[file] = list.filter { $0.remaining > 0 } }
            for i in list.indices where list[i].remaining > 0 {
                switch list[i].fault {
                case .flipByte(let offset, let times) where covering.contains(offset):
                    result.flipOffsets.append(offset)
                    if times != nil { list[i].remaining -= 1 }
                case .rateLimit(let bps) where bps > 0:
                    result.bytesPerSecond = min(result.bytesPerSecond ?? Int.max, bps)
                case .dropConnection(let after, _) where result.dropAfter == nil:
                    result.dropAfter = max(0, after)
                    list[i].remaining -= 1
                case .truncateBody(let missing, _) where result.missingBytes == nil:
                    result.missingBytes = max(1, missing)
                    list[i].remaining -= 1
                case .stall(let after, let seconds, _) where result.stall == nil:
                    result.stall = (max(0, after), seconds)
                    list[i].remaining -= 1
                default:
                    break
                }
            }
            return result
        }
    }
}

/// What the CAS does with a reconstruction or xorb request before serving it.
enum CASAdmission: Equatable {
    case serve
    case refuse(status: Int, retryAfter: Int?)
    /// 401: the access token has expired (reconstructions only).
    case tokenExpired
}

extension FaultBook {
    /// Decides a reconstruction request for `file`: uses up one `xetTokenExpired` or
    /// `reconstructionStatus`; a `reconstructionStall`'s seconds to wait first, used up too.
    func reconstructionAdmission(for file: String) -> (admission: CASAdmission, stall: Double?) {
        take(file) { list in
            var stall: Double?
            if let i = list.firstIndex(where: { if case .reconstructionStall = $0.fault { return $0.remaining > 0 }; return false }),
               case .reconstructionStall(let seconds, _) = list[i].fault {
                list[i].remaining -= 1
                stall = seconds
            }
            for i in list.indices where list[i].remaining > 0 {
                switch list[i].fault {
                case .xetTokenExpired:
                    list[i].remaining -= 1
                    return (.tokenExpired, stall)
                case .reconstructionStatus(let code, _, let retryAfter):
                    list[i].remaining -= 1
                    return (.refuse(status: code, retryAfter: retryAfter), stall)
                default:
                    continue
                }
            }
            return (.serve, stall)
        } ?? (.serve, nil)
    }

    /// Decides a xorb range request made for `file`; uses up one `xorbStatus`.
    func xorbAdmission(for file: String) -> CASAdmission {
        take(file) { list in
            for i in list.indices where list[i].remaining > 0 {
                if case .xorbStatus(let code, _, let retryAfter) = list[i].fault {
                    list[i].remaining -= 1
                    return .refuse(status: code, retryAfter: retryAfter)
                }
            }
            return .serve
        } ?? .serve
    }

    /// The stall, truncation and pace of one xorb body made for `file` of `length` bytes; uses up
    /// the stall and the truncation.
    func xorbBodyFaults(for file: String, length: Int) -> BodyFaults {
        take(file) { list in
            var result = BodyFaults()
            for i in list.indices where list[i].remaining > 0 {
                switch list[i].fault {
                case .xorbStall(let after, let seconds, _) where result.stall == nil:
                    result.stall = (max(0, after), seconds)
                    list[i].remaining -= 1
                case .xorbTruncated(let missing, _) where result.dropAfter == nil:
                    result.dropAfter = max(0, length - max(1, missing))
                    list[i].remaining -= 1
                case .rateLimit(let bps) where bps > 0:
                    // The file's per-connection pace applies to its xorb ranges too (stays).
                    result.bytesPerSecond = min(result.bytesPerSecond ?? Int.max, bps)
                default:
                    break
                }
            }
            return result
        } ?? BodyFaults()
    }

    /// Every corrupt-chunk fault in force: (file, chunk index).
    func corruptChunks() -> [(file: String, chunk: Int)] {
        lock.withLock {
            entries.flatMap { file, list in
                list.compactMap { entry -> (file: String, chunk: Int)? in
                    if case .corruptChunk(let chunk) = entry.fault { return (file, chunk) }
                    return nil
                }
            }
        }
    }

    private func take<T>(_ file: String, _ body: (inout [Entry]) -> T) -> T? {
        lock.withLock {
            guard var list = entries[file], !list.isEmpty else { return nil }
            defer { entries[file] = list.filter { $0.remaining > 0 } }
            return body(&list)
        }
    }
}
