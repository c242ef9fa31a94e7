// FuzzRangeHeaders - the headers a range answer is judged by: Content-Range and Retry-After.
import FuzzSupport
import Foundation
import HubClient
import Transfer

let policy = RetryPolicy()

fuzzMain { data in
    let header = text(data)
    if let r = RangeResponse.parseContentRange(header) {
        expect(r.start >= 0 && r.start <= r.end, "Content-Range '\(header)' gave bytes \(r.start)-\(r.end)")
        if let total = r.total { expect(r.end < total, "Content-Range '\(header)' gave end \(r.end) beyond total \(total)") }
    }
    let after = HubError.retryAfterSeconds(header)
    let delay = policy.delay(afterAttempt: 1, retryAfter: after)
    expect(delay >= 0 && delay <= policy.maxRetryAfter, "Retry-After '\(header)' gave a delay of \(delay) s")
}
