// CInotify - libinotifytools (no pkg-config file; global state: one watcher per process).
#ifndef SPEECH_FETCH_CINOTIFY_SHIM_H
#define SPEECH_FETCH_CINOTIFY_SHIM_H
#include <inotifytools/inotifytools.h>
#include <inotifytools/inotify.h>
#endif
