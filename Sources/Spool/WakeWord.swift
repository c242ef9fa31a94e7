// WakeWord - wakes a spool's local waiters without an inotify instance each.
//
// `spool/wake` holds one 32-bit counter, mapped MAP_SHARED by every process that uses it; the
// kernel keys a futex on a shared file mapping by inode and offset, so a process that bumps
// the counter (whoever publishes a done/ or failed/ marker) wakes every process on this machine
// sleeping on it. Waiters use it when they cannot have an inotify instance (the per-user limit,
// 128 by default, is used up by others): they sleep at no cost instead of polling. Other
// machines sharing the spool over NFS are not woken by it; they poll, as they must anyway.
import CFileOps
import Foundation

public final class WakeWord: @unchecked Sendable {
    public static let fileName = "wake"
    private let mapping: UnsafeMutableRawPointer
    private var word: UnsafeMutablePointer<UInt32> { mapping.assumingMemoryBound(to: UInt32.self) }
    private static let length = 4096

    /// Maps `<spool>/wake`, creating it (one zero page) when missing; nil when that fails.
    public init?(spoolRoot: String) {
        let path = spoolRoot + "/" + WakeWord.fileName
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        if st.st_size < WakeWord.length, ftruncate(fd, off_t(WakeWord.length)) != 0 { return nil }
        guard let m = mmap(nil, WakeWord.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), m != MAP_FAILED else {
            return nil
        }
        mapping = m
    }

    deinit { munmap(mapping, WakeWord.length) }

    /// The counter now: read it before checking what you wait for, then `wait` on it.
    public var generation: UInt32 { sf_word_load(word) }

    /// Bumps the counter and wakes every local process sleeping on it.
    public func wakeAll() { sf_word_bump_and_wake(word) }

    /// Sleeps while the counter still equals `generation`, at most `seconds`. True when woken
    /// (or the counter had already moved), false when the time ran out.
    @discardableResult
    public func wait(whileGeneration generation: UInt32, seconds: Double) -> Bool {
        sf_word_wait(word, generation, max(0, Int(seconds * 1000))) == 0
    }
}
