// loader.c - dlopen and dlsym for the shims that load their library on first use.
#include "CLoader.h"
#include <dlfcn.h>
#include <stdio.h>

int sf_load_library(const char *const *names, size_t name_count, const struct sf_symbol *symbols,
                    size_t symbol_count, char *error, size_t error_size) {
    void *library = NULL;
    const char *name = name_count > 0 ? names[0] : "?";
    for (size_t i = 0; i < name_count && library == NULL; i++) {
        name = names[i];
        library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (library == NULL && i == 0) {
            /* The first name's reason is the useful one; the fallback (the unversioned name)
               usually exists only with the -dev package. */
            const char *why = dlerror();
            snprintf(error, error_size, "%s", why ? why : "not found");
        }
    }
    if (library == NULL) {
        return -1;
    }
    for (size_t i = 0; i < symbol_count; i++) {
        *symbols[i].slot = dlsym(library, symbols[i].name);
        if (*symbols[i].slot == NULL) {
            snprintf(error, error_size, "%s has no symbol %s", name, symbols[i].name);
            return -1;
        }
    }
    return 0;
}
