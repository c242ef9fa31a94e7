// CSplice - in-kernel copies between files: copy_file_range(2) and the FICLONERANGE reflink,
// which glibc only declares under _GNU_SOURCE and Swift's Glibc module does not expose.
#ifndef SPEECH_FETCH_CSPLICE_SHIM_H
#define SPEECH_FETCH_CSPLICE_SHIM_H
#include <sys/types.h>
#include <sys/ioctl.h>
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
#endif
