// CFileOps - system calls Swift's Glibc module does not expose: in-kernel copies between
// files (copy_file_range(2), which glibc only declares under _GNU_SOURCE, and the FICLONERANGE
// reflink), extended attributes (the content id a final file carries; getxattrat), the futex of
// the spool's wake word, prctl(PR_SET_NAME) (variadic), and statfs(2) (the filesystems whose
// inotify cannot see other machines' writes).
#ifndef SPEECH_FETCH_CFILEOPS_SHIM_H
#define SPEECH_FETCH_CFILEOPS_SHIM_H
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/xattr.h>
#include <sys/vfs.h>
#include <linux/fs.h>
#include <linux/futex.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern ssize_t copy_file_range(int fd_in, long long *off_in, int fd_out, long long *off_out,
                               size_t len, unsigned int flags);

/* Copies len bytes from in at *off_in to out at *off_out; both offsets advance. */
static inline ssize_t sf_copy_file_range(int in, long long *off_in, int out, long long *off_out, size_t len) {
    return copy_file_range(in, off_in, out, off_out, len, 0);
}

/* Shares len bytes of src at src_off into dst at dst_off (btrfs, XFS); -1 where unsupported. */
static inline int sf_clone_range(int src, long long src_off, long long len, int dst, long long dst_off) {
    struct file_clone_range range = { .src_fd = src, .src_offset = (unsigned long long)src_off,
                                      .src_length = (unsigned long long)len, .dest_offset = (unsigned long long)dst_off };
    return ioctl(dst, FICLONERANGE, &range);
}
/* O_PATH, which glibc declares only under _GNU_SOURCE: a descriptor that names a directory for
   the *at calls and /proc/self/fd without read permission on it (010000000 on every Linux ABI
   but alpha, parisc and sparc, which this project does not build for). */
static inline int sf_o_path(void) {
#ifdef O_PATH
    return O_PATH;
#else
    return 010000000;
#endif
}
/* O_DIRECT, which glibc declares only under _GNU_SOURCE: reads that go around the page cache
   and a FUSE client's own caches (040000 on x86, 0200000 on ARM). */
static inline int sf_o_direct(void) {
#ifdef O_DIRECT
    return O_DIRECT;
#elif defined(__aarch64__) || defined(__arm__)
    return 0200000;
#else
    return 040000;
#endif
}
/* Sets a user extended attribute on an open file; -1 where the filesystem has none. */
static inline int sf_set_xattr(int fd, const char *name, const char *value, size_t len) {
    return fsetxattr(fd, name, value, len, 0);
}

/* Reads a user extended attribute of a path (not following a final symlink); -1 when absent. */
static inline ssize_t sf_get_xattr(const char *path, const char *name, char *value, size_t len) {
    return lgetxattr(path, name, value, len);
}
/* getxattrat(2) (Linux 6.13): the attribute of dir/rel without walking dir's path again. */
#if !defined(__NR_getxattrat) && (defined(__x86_64__) || defined(__aarch64__))
#define __NR_getxattrat 464
#endif
struct sf_xattr_args { uint64_t value; uint32_t size; uint32_t flags; };

/* Reads a user extended attribute of rel under the directory dirfd (not following a final
   symlink); full_path is the same file, used where the kernel (or a seccomp filter) has no
   getxattrat. -1 when absent. */
static inline ssize_t sf_get_xattr_at(int dirfd, const char *rel, const char *full_path,
                                      const char *name, char *value, size_t len) {
#ifdef __NR_getxattrat
    static int unavailable; /* set once the kernel (or seccomp) refused it: no retry per file */
    if (!__atomic_load_n(&unavailable, __ATOMIC_RELAXED)) {
        struct sf_xattr_args args = { .value = (uint64_t)(uintptr_t)value, .size = (uint32_t)len, .flags = 0 };
        long r = syscall(__NR_getxattrat, dirfd, rel, AT_SYMLINK_NOFOLLOW, name, &args, sizeof args);
        if (r >= 0 || (errno != ENOSYS && errno != EPERM)) return (ssize_t)r;
        __atomic_store_n(&unavailable, 1, __ATOMIC_RELAXED);
    }
#endif
    return lgetxattr(full_path, name, value, len);
}

/* Names the calling thread (the main thread: the process, as ps, pgrep and top show it); prctl
   is variadic, so Swift cannot call it. */
static inline void sf_set_process_name(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

/* A 32-bit word in a file mapped MAP_SHARED is a futex every process that maps the file shares
   (the kernel keys it by inode and offset): the spool's wake word. Userspace never loads or
   stores through the mapping: if the file is truncated under it, such an access is a SIGBUS.
   The counter is read with pread (the page cache the mapping shows) and changed only by the
   kernel, where a page that is gone is an EFAULT to handle, never a signal. */

/* Adds 1 to *word and wakes every process sleeping on it, in one FUTEX_WAKE_OP (the kernel adds
   before it wakes, so a woken sleeper sees the new value). 0, or -1 with errno (EFAULT: the
   file was truncated under the mapping). */
static inline int sf_word_bump_and_wake(uint32_t *word) {
    long r = syscall(SYS_futex, word, FUTEX_WAKE_OP, INT32_MAX, (void *)(uintptr_t)INT32_MAX, word,
                     FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_GE, 0));
    return r < 0 ? -1 : 0;
}

/* Sleeps while *word == expected, at most timeout_ms. 0 when woken (or the word had already
   changed), 1 when the time ran out, -1 on another error (errno set; EFAULT: the file was
   truncated under the mapping). */
static inline int sf_word_wait(uint32_t *word, uint32_t expected, long timeout_ms) {
    struct timespec t = { .tv_sec = timeout_ms / 1000, .tv_nsec = (timeout_ms % 1000) * 1000000L };
    long r = syscall(SYS_futex, word, FUTEX_WAIT, expected, &t, NULL, 0);
    if (r == 0 || errno == EAGAIN || errno == EINTR) return 0;
    return errno == ETIMEDOUT ? 1 : -1;
}
#endif
