// FrozenWallClock - a preload library that stops a process's wall clock: CLOCK_REALTIME,
// gettimeofday and time() answer the time of the first reading for the life of the process, while
// CLOCK_MONOTONIC runs on. A child started with it (LD_PRELOAD) sees what a clock set back by
// as long as it runs would show it: a duration measured on the wall clock never passes. Nothing
// on the machine changes (setting the real clock is not acceptable on a shared machine).
import Foundation
import XCTest

enum FrozenWallClock {
    static let source = """
    #define _GNU_SOURCE
    #include <dlfcn.h>
    #include <time.h>
    #include <bits/types/struct_timeval.h>

    static struct timespec frozen;
    static int frozenSet;

    int clock_gettime(clockid_t id, struct timespec *ts) {
        static int (*real)(clockid_t, struct timespec *);
        if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
        if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) {
            if (!__atomic_load_n(&frozenSet, __ATOMIC_ACQUIRE)) {
                struct timespec now;
                real(CLOCK_REALTIME, &now);
                frozen = now;
                __atomic_store_n(&frozenSet, 1, __ATOMIC_RELEASE);
            }
            *ts = frozen;
            return 0;
        }
        return real(id, ts);
    }

    int gettimeofday(struct timeval *tv, void *tz) {
        (void)tz;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        if (tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
        return 0;
    }

    time_t time(time_t *t) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        if (t) *t = ts.tv_sec;
        return ts.tv_sec;
    }
    """

    /// Builds the library into `directory` with the toolchain's C compiler (clang beside swift,
    /// else cc) and returns its path, for a child's `LD_PRELOAD`.
    static func build(in directory: URL) throws -> String {
        let c = directory.appendingPathComponent("frozen-wall-clock.c")
        let library = directory.appendingPathComponent("frozen-wall-clock.so")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try source.write(to: c, atomically: true, encoding: .utf8)
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        guard let compiler = ["clang", "cc"].lazy.compactMap({ name in
            path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }).first else { throw XCTSkip("no C compiler (clang or cc) to build the frozen wall clock") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: compiler)
        p.arguments = ["-shared", "-fPIC", "-O1", "-o", library.path, c.path, "-ldl"]
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw NSError(domain: "FrozenWallClock", code: Int(p.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "\(compiler) could not build \(library.path)"])
        }
        return library.path
    }
}
