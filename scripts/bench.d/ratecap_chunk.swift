// ratecap_chunk.swift - scenario 7's measure of what the bandwidth cap costs a chunk when it
// never waits: compiled by scenario7.py with Sources/Transfer/RateCap.swift (the code the
// engine runs), it charges 2,000,000 chunks of 16 KiB (libcurl's usual write) to a cap far
// above the loop's pace, in memory (`speech download --max-rate`) and through a schedule file
// on /dev/shm (`speech-fetchd --max-rate`), and prints the CPU seconds per chunk of each.
import Foundation

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func perChunk(_ cap: RateCap, chunks: Int = 2_000_000) -> Double {
    let start = cpuSeconds()
    for _ in 0..<chunks { cap.take(16 << 10) }
    return (cpuSeconds() - start) / Double(chunks)
}

let rate: Int64 = 10_000_000_000_000  // 10 TB/s: the loop never runs ahead of it, so no chunk sleeps
let name = "speech-fetch-bench-cap-\(getpid())"
let schedule = try RateCap.makeSchedule(name: name, fallback: NSTemporaryDirectory())
defer { unlink(schedule) }
print(perChunk(RateCap(bytesPerSecond: rate)), try perChunk(RateCap(bytesPerSecond: rate, schedule: schedule)))
