// CLoader - opens a shared library at its first use and resolves the entry points a shim
// calls through (CCurl: libcurl, CCrypto: libcrypto). Linking them instead would make every
// process map and relocate them at start, including the many that never use them
// (docs/architecture.md, "Start-up").
#ifndef SPEECH_FETCH_CLOADER_H
#define SPEECH_FETCH_CLOADER_H
#include <stddef.h>

/// One entry point: its name in the library and where its address goes.
struct sf_symbol {
    const char *name;
    void **slot;
};

/// Opens the first of `names` that loads (RTLD_NOW | RTLD_LOCAL) and fills every symbol's slot.
/// Returns 0, or -1 with the reason in `error` (the first name's loader message, which names a
/// missing dependency of an installed library; or the symbol the library lacks).
int sf_load_library(const char *const *names, size_t name_count, const struct sf_symbol *symbols,
                    size_t symbol_count, char *error, size_t error_size);

#endif
