// WakeWord - wakes a spool's local waiters without an inotify instance each.
//
// `spool/wake` holds one 32-bit counter, mapped MAP_SHARED by every process that uses it; the
// kernel keys a futex on a shared file mapping by inode and offset, so a process that bumps
// the counter (whoever publishes a done/ or failed/ marker) wakes every process on this machine
// sleeping on it. Waiters use it when they cannot have an inotify instance (the per-user limit,
// 128 by default, is used up by others): they sleep at no cost instead of polling. Other
// machines sharing the spool over NFS are not woken by it; they poll, as they must anyway.
//
// The page holds two words, one per kind of listener: a node's idle worker slots sleep on the
// first, its waiters on the second. A marker's publisher bumps both; the supervisor bumps the
// waiters' word as soon as it sees another node's change and the slots' once its pass has
// planned and revoked, so neither is woken for the other's sake (a slot woken before the pass
// would list `jobs/ready` twice per change, a waiter after it would wait a pass longer).
//
// The file is anyone's to truncate or replace, so nothing here touches the mapping from
// userspace (a load from a page past the end of a truncated file is a SIGBUS): the counter is
// read with pread and changed by the kernel (FUTEX_WAKE_OP), where a vanished page is EFAULT.
// A truncated file is given its page back; a replaced one is followed; meanwhile a waiter
// polls in short naps.
import CFileOps
import Foundation

/// One process's handle on `spool/wake`. Use it from one thread at a time.
public final class WakeWord: @unchecked Sendable {
    /// Who sleeps on a word: each kind has its own 32-bit word in the page.
    public enum Listener: Int, Sendable, CaseIterable {
        case slots = 0, waiters = 1
        var offset: Int { rawValue * 4 }
    }
    private static let length = 4096
    /// A nap while the word cannot be slept on (the file is being repaired or replaced).
    private static let fallbackNap = 0.05
    private let path: String
    private let listener: Listener
    private var fd: Int32
    private var mapping: UnsafeMutableRawPointer
    private var identity: (device: UInt64, inode: UInt64)
    private var word: UnsafeMutablePointer<UInt32> { word(of: listener) }
    private func word(of listener: Listener) -> UnsafeMutablePointer<UInt32> {
        (mapping + listener.offset).assumingMemoryBound(to: UInt32.self)
    }

    /// Maps `<spool>/wake`, creating it (one zero page) when missing; nil when that fails.
    public init?(spoolRoot: String, listener: Listener) {
        path = SpoolLayout(root: spoolRoot).wakeWord
        self.listener = listener
        guard let opened = WakeWord.open(path) else { return nil }
        (fd, mapping, identity) = opened
    }

    deinit {
        munmap(mapping, WakeWord.length)
        close(fd)
    }

    private static func open(_ path: String) -> (Int32, UnsafeMutableRawPointer, (UInt64, UInt64))? {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
              st.st_size >= WakeWord.length || ftruncate(fd, off_t(WakeWord.length)) == 0,
              let m = mmap(nil, WakeWord.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), m != MAP_FAILED else {
            close(fd)
            return nil
        }
        return (fd, m, (UInt64(st.st_dev), UInt64(st.st_ino)))
    }

    /// The counter now: read it before checking what you wait for, then `wait` on it. Read
    /// through the file, so a file truncated under the mapping costs nothing but a repair.
    public var generation: UInt32 {
        var value: UInt32 = 0
        if pread(fd, &value, 4, off_t(listener.offset)) == 4 { return value }
        repair()
        return 0
    }

    /// Bumps this listener's counter and wakes every local process sleeping on it.
    public func wakeAll() { wake(listener) }

    /// Bumps both counters: slots and waiters alike.
    public func wakeEveryone() {
        for listener in Listener.allCases { wake(listener) }
    }

    private func wake(_ listener: Listener) {
        if sf_word_bump_and_wake(word(of: listener)) != 0 && errno == EFAULT {
            repair()
            _ = sf_word_bump_and_wake(word(of: listener))
        }
    }

    /// Sleeps while the counter still equals `generation`, at most `seconds`. True when woken
    /// (or the counter had already moved, or the file was replaced and is now followed), false
    /// when the time ran out. While the word cannot be slept on it naps briefly and returns
    /// false: the caller polls until the word works again.
    /// `followingReplacement`: look up the path first (a stat; a caller that naps often on a
    /// network filesystem does it now and then instead).
    @discardableResult
    public func wait(whileGeneration generation: UInt32, seconds: Double, followingReplacement: Bool = true) -> Bool {
        if followingReplacement && followReplacement() { return true }
        switch sf_word_wait(word, generation, max(0, Int(seconds * 1000))) {
        case 0: return true
        case 1: return false
        default:
            repair()  // EFAULT: truncated under the mapping
            usleep(UInt32(min(max(0, seconds), WakeWord.fallbackNap) * 1_000_000))
            return false
        }
    }

    /// Gives a truncated file its page back (a publisher opening it does the same).
    private func repair() {
        var st = stat()
        if fstat(fd, &st) == 0, st.st_size < WakeWord.length { _ = ftruncate(fd, off_t(WakeWord.length)) }
    }

    /// When `spool/wake` is no longer the file this handle maps (deleted, or deleted and made
    /// again), publishers bump the new one: map that instead. True when it switched.
    private func followReplacement() -> Bool {
        var st = stat()
        let current = lstat(path, &st) == 0 ? (UInt64(st.st_dev), UInt64(st.st_ino)) : nil
        if let current, current == identity { return false }
        guard let opened = WakeWord.open(path) else { return false }
        munmap(mapping, WakeWord.length)
        close(fd)
        (fd, mapping, identity) = opened
        return true
    }
}
