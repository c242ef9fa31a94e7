// CFileOps - file operations Swift's Glibc module does not expose: in-kernel copies between
// files (copy_file_range(2), which glibc only declares under _GNU_SOURCE, and the FICLONERANGE
// reflink) and extended attributes (the content id a final file carries).
#ifndef SPEECH_FETCH_CFILEOPS_SHIM_H
#define SPEECH_FETCH_CFILEOPS_SHIM_H
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <linux/fs.h>

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
/* Sets a user extended attribute on an open file; -1 where the filesystem has none. */
static inline int sf_set_xattr(int fd, const char *name, const char *value, size_t len) {
    return fsetxattr(fd, name, value, len, 0);
}

/* Reads a user extended attribute of a path (not following a final symlink); -1 when absent. */
static inline ssize_t sf_get_xattr(const char *path, const char *name, char *value, size_t len) {
    return lgetxattr(path, name, value, len);
}
#endif
