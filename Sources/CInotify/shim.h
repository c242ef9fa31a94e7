// CInotify - libinotifytools (no pkg-config file; global state: one watcher per process),
// plus statfs(2), which tells the filesystems whose inotify cannot see other machines' writes.
#ifndef SPEECH_FETCH_CINOTIFY_SHIM_H
#define SPEECH_FETCH_CINOTIFY_SHIM_H
#include <inotifytools/inotifytools.h>
#include <inotifytools/inotify.h>
#include <sys/vfs.h>
#endif
