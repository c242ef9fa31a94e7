// faultfs.c - an LD_PRELOAD shim for tests: makes opens, stats and directory opens of chosen
// paths fail with ESTALE or EIO at a set rate, as a network filesystem client does after another
// client renamed or unlinked a file (NFS, GlusterFS). It is built by the test that uses it
// (gcc -shared -fPIC -O2 -o faultfs.so faultfs.c -ldl) and never linked into a product.
//
// Environment:
//   FAULTFS_PATHS  colon-separated substrings; only paths containing one of them fail
//                  (e.g. "/spool/:/.incomplete")
//   FAULTFS_ESTALE percent of matching calls that fail with ESTALE (e.g. 5)
//   FAULTFS_EIO    percent that fail with EIO (e.g. 2)
//   FAULTFS_SEED   seed of the per-process generator (mixed with the pid)
//   FAULTFS_TRACE  1: also log "call <call> 0 <pid> <path>" for every matching call (to see which
//                  entry points a program really uses)
//   FAULTFS_LOG    a file every process appends to: "inject <call> <errno> <path>" for each
//                  injected error, "short <call> <size> <path>" for each size reported short and
//                  "break <from> <to>" for every rename of a staging lock to its ".broken." name
//                  (the mark of a lock being broken)
//   FAULTFS_SHORT_ONCE  a substring: the first fstat (by descriptor) of each path containing it
//                  reports half the file's size, once per path and process, as a client whose
//                  cached attributes still hold the size of a file another client was writing
//
// The calls covered are the libc entry points Swift's Glibc overlay and Foundation reach
// (open, open64, openat, __open_2 …, stat/lstat/fstat/fstatat and their 64 and __xstat forms,
// statx, access/faccessat, opendir) - glibc's own internal calls bypass the PLT, so opendir is
// covered itself rather than through its openat.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ready;
static char *patterns[16];
static int npatterns;
static unsigned estale_pm, eio_pm;  /* per 10000 */
static uint64_t state;
static int logfd = -1;
static int trace;            /* FAULTFS_TRACE=1: also log every matching call */
static __thread int busy;          /* no injection inside our own calls */
static char *short_pattern;        /* FAULTFS_SHORT_ONCE */
static uint64_t shortened[4096];   /* hashes of the paths already reported short (open addressing) */

static void setup(void) {
    if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&mu);
    if (!ready) {
        const char *p = getenv("FAULTFS_PATHS");
        if (p && *p) {
            char *copy = strdup(p), *save = NULL;
            for (char *tok = strtok_r(copy, ":", &save); tok && npatterns < 16; tok = strtok_r(NULL, ":", &save))
                patterns[npatterns++] = tok;
        }
        const char *e = getenv("FAULTFS_ESTALE"), *i = getenv("FAULTFS_EIO"), *s = getenv("FAULTFS_SEED");
        estale_pm = e ? (unsigned)(atof(e) * 100) : 0;
        eio_pm = i ? (unsigned)(atof(i) * 100) : 0;
        state = (s ? strtoull(s, NULL, 10) : 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)getpid() << 17);
        if (!state) state = 1;
        trace = getenv("FAULTFS_TRACE") && *getenv("FAULTFS_TRACE") == '1';
        const char *sp = getenv("FAULTFS_SHORT_ONCE");
        if (sp && *sp) short_pattern = strdup(sp);
        const char *l = getenv("FAULTFS_LOG");
        if (l && *l) {
            int (*real_open)(const char *, int, ...) = dlsym(RTLD_NEXT, "open");
            logfd = real_open(l, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        }
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mu);
}

static uint64_t next_random(void) {
    pthread_mutex_lock(&mu);
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    uint64_t r = state;
    pthread_mutex_unlock(&mu);
    return r;
}

static void log_line(const char *a, const char *b, const char *c, int code) {
    if (logfd < 0) return;
    char line[4200];
    int n = snprintf(line, sizeof line, "%s %s %d %d %s\n", a, b, code, (int)getpid(), c ? c : "?");
    if (n > 0) { ssize_t w = write(logfd, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)); (void)w; }
}

static int matches(const char *path) {
    if (!path) return 0;
    for (int k = 0; k < npatterns; k++)
        if (strstr(path, patterns[k])) return 1;
    return 0;
}

/* The path a dirfd-relative name or an fd stands for (via /proc/self/fd). */
static int fd_path(int fd, char *out, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    busy++;
    ssize_t n = readlink(link, out, size - 1);
    busy--;
    if (n < 0) return 0;
    out[n] = 0;
    return 1;
}

/* 0, or the errno to fail this call with. */
static int fault(const char *call, int dirfd, const char *path) {
    if (busy) return 0;
    setup();
    if (!npatterns || (!estale_pm && !eio_pm && !trace)) return 0;
    char buf[4096];
    const char *full = path;
    if (!path) {
        if (dirfd < 0 || !fd_path(dirfd, buf, sizeof buf)) return 0;
        full = buf;
    } else if (path[0] != '/' && dirfd != AT_FDCWD && dirfd >= 0) {
        char dir[4096];
        if (!fd_path(dirfd, dir, sizeof dir)) return 0;
        snprintf(buf, sizeof buf, "%s/%s", dir, path);
        full = buf;
    }
    if (!matches(full)) return 0;
    if (trace) log_line("call", call, full, 0);
    unsigned roll = (unsigned)(next_random() % 10000);
    int code = roll < estale_pm ? ESTALE : roll < estale_pm + eio_pm ? EIO : 0;
    if (code) log_line("inject", call, full, code);
    return code;
}

/* 1 when this fstat of `fd` is to report a short size: its path contains FAULTFS_SHORT_ONCE
 * and was not reported short before in this process. */
static int short_once(const char *call, int fd, long long size) {
    if (busy) return 0;
    setup();
    if (!short_pattern || size <= 0) return 0;
    char path[4096];
    if (!fd_path(fd, path, sizeof path) || !strstr(path, short_pattern)) return 0;
    uint64_t h = 1469598103934665603ull;
    for (const char *c = path; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    if (!h) h = 1;
    int fresh = 0;
    pthread_mutex_lock(&mu);
    for (unsigned k = 0; k < 4096; k++) {
        uint64_t *slot = &shortened[(h + k) % 4096];
        if (*slot == h) break;
        if (!*slot) { *slot = h; fresh = 1; break; }
    }
    pthread_mutex_unlock(&mu);
    if (fresh) log_line("short", call, path, (int)(size / 2));
    return fresh;
}

#define REAL(ret, name, args) static ret (*real_##name) args; if (!real_##name) real_##name = (ret (*) args)dlsym(RTLD_NEXT, #name)
#define FAIL(code) do { errno = (code); return -1; } while (0)

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_LIKE(name)                                                            \
    int name(const char *path, int flags, ...) {                                    \
        va_list ap; va_start(ap, flags); mode_t m = mode_arg(flags, ap); va_end(ap); \
        REAL(int, name, (const char *, int, ...));                                 \
        int c = fault(#name, AT_FDCWD, path); if (c) FAIL(c);                        \
        return real_##name(path, flags, m);                                          \
    }
OPEN_LIKE(open)
OPEN_LIKE(open64)

#define OPENAT_LIKE(name)                                                          \
    int name(int dirfd, const char *path, int flags, ...) {                         \
        va_list ap; va_start(ap, flags); mode_t m = mode_arg(flags, ap); va_end(ap); \
        REAL(int, name, (int, const char *, int, ...));                            \
        int c = fault(#name, dirfd, path); if (c) FAIL(c);                           \
        return real_##name(dirfd, path, flags, m);                                   \
    }
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)

int __open_2(const char *path, int flags) {
    REAL(int, __open_2, (const char *, int));
    int c = fault("__open_2", AT_FDCWD, path); if (c) FAIL(c);
    return real___open_2(path, flags);
}
int __open64_2(const char *path, int flags) {
    REAL(int, __open64_2, (const char *, int));
    int c = fault("__open64_2", AT_FDCWD, path); if (c) FAIL(c);
    return real___open64_2(path, flags);
}

#define STAT_LIKE(name, st)                                                        \
    int name(const char *path, struct st *buf) {                                   \
        REAL(int, name, (const char *, struct st *));                             \
        int c = fault(#name, AT_FDCWD, path); if (c) FAIL(c);                       \
        return real_##name(path, buf);                                              \
    }
STAT_LIKE(stat, stat)
STAT_LIKE(lstat, stat)
STAT_LIKE(stat64, stat64)
STAT_LIKE(lstat64, stat64)

#define FSTAT_LIKE(name, st)                                                       \
    int name(int fd, struct st *buf) {                                             \
        REAL(int, name, (int, struct st *));                                      \
        int c = fault(#name, fd, NULL); if (c) FAIL(c);                             \
        int r = real_##name(fd, buf);                                               \
        if (r == 0 && short_once(#name, fd, (long long)buf->st_size)) buf->st_size /= 2; \
        return r;                                                                   \
    }
FSTAT_LIKE(fstat, stat)
FSTAT_LIKE(fstat64, stat64)

#define FSTATAT_LIKE(name, st)                                                     \
    int name(int dirfd, const char *path, struct st *buf, int flags) {             \
        REAL(int, name, (int, const char *, struct st *, int));                   \
        int c = fault(#name, dirfd, (path && *path) ? path : NULL); if (c) FAIL(c); \
        return real_##name(dirfd, path, buf, flags);                                \
    }
FSTATAT_LIKE(fstatat, stat)
FSTATAT_LIKE(fstatat64, stat64)

#define XSTAT_LIKE(name, st)                                                       \
    int name(int ver, const char *path, struct st *buf) {                          \
        REAL(int, name, (int, const char *, struct st *));                        \
        int c = fault(#name, AT_FDCWD, path); if (c) FAIL(c);                       \
        return real_##name(ver, path, buf);                                         \
    }
XSTAT_LIKE(__xstat, stat)
XSTAT_LIKE(__lxstat, stat)
XSTAT_LIKE(__xstat64, stat64)
XSTAT_LIKE(__lxstat64, stat64)

int __fxstat(int ver, int fd, struct stat *buf) {
    REAL(int, __fxstat, (int, int, struct stat *));
    int c = fault("__fxstat", fd, NULL); if (c) FAIL(c);
    int r = real___fxstat(ver, fd, buf);
    if (r == 0 && short_once("__fxstat", fd, (long long)buf->st_size)) buf->st_size /= 2;
    return r;
}
int __fxstat64(int ver, int fd, struct stat64 *buf) {
    REAL(int, __fxstat64, (int, int, struct stat64 *));
    int c = fault("__fxstat64", fd, NULL); if (c) FAIL(c);
    int r = real___fxstat64(ver, fd, buf);
    if (r == 0 && short_once("__fxstat64", fd, (long long)buf->st_size)) buf->st_size /= 2;
    return r;
}

int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *buf) {
    REAL(int, statx, (int, const char *, int, unsigned, struct statx *));
    int c = fault("statx", dirfd, (path && *path) ? path : NULL); if (c) FAIL(c);
    return real_statx(dirfd, path, flags, mask, buf);
}

int access(const char *path, int mode) {
    REAL(int, access, (const char *, int));
    int c = fault("access", AT_FDCWD, path); if (c) FAIL(c);
    return real_access(path, mode);
}

int faccessat(int dirfd, const char *path, int mode, int flags) {
    REAL(int, faccessat, (int, const char *, int, int));
    int c = fault("faccessat", dirfd, path); if (c) FAIL(c);
    return real_faccessat(dirfd, path, mode, flags);
}

DIR *opendir(const char *path) {
    REAL(DIR *, opendir, (const char *));
    int c = fault("opendir", AT_FDCWD, path);
    if (c) { errno = c; return NULL; }
    return real_opendir(path);
}

/* Not faulted: recorded, so a test can count broken staging locks. */
int rename(const char *from, const char *to) {
    REAL(int, rename, (const char *, const char *));
    int r = real_rename(from, to);
    if (r == 0 && !busy && to && strstr(to, ".lock.broken.")) {
        setup();
        char holder[256] = "?";
        busy++;
        int (*real_open)(const char *, int, ...) = dlsym(RTLD_NEXT, "open");
        int fd = real_open(to, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) { ssize_t n = read(fd, holder, sizeof holder - 1); holder[n > 0 ? n : 0] = 0; close(fd); }
        busy--;
        log_line("break", holder, from, 0);
    }
    return r;
}
