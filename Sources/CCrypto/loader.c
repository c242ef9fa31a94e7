// loader.c - resolves libcrypto at the first hasher (see CCrypto.h for why it is not linked).
#include "CCrypto.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

struct sf_crypto_api sf_crypto;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int load_status = -1;

/* OpenSSL 3's SONAME; the unversioned name exists only with the -dev package. */
static const char *const library_names[] = {"libcrypto.so.3", "libcrypto.so"};

#define RESOLVE(field, symbol)                                                              \
    do {                                                                                    \
        *(void **)(&sf_crypto.field) = dlsym(library, symbol);                              \
        if (sf_crypto.field == NULL) {                                                      \
            snprintf(load_error, sizeof load_error, "%s has no symbol %s", name, symbol);   \
            return;                                                                         \
        }                                                                                   \
    } while (0)

static void load(void) {
    void *library = NULL;
    const char *name = library_names[0];
    for (size_t i = 0; i < sizeof library_names / sizeof library_names[0] && library == NULL; i++) {
        name = library_names[i];
        library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (library == NULL && i == 0) {
            const char *why = dlerror();
            snprintf(load_error, sizeof load_error, "%s", why ? why : "libcrypto.so.3 not found");
        }
    }
    if (library == NULL) {
        return;
    }
    RESOLVE(sha256_init, "SHA256_Init");
    RESOLVE(sha256_update, "SHA256_Update");
    RESOLVE(sha256_final, "SHA256_Final");
    RESOLVE(sha1_init, "SHA1_Init");
    RESOLVE(sha1_update, "SHA1_Update");
    RESOLVE(sha1_final, "SHA1_Final");
    load_status = 0;
}

int sf_crypto_load(char *reason, size_t reason_size) {
    pthread_once(&load_once, load);
    if (load_status != 0 && reason != NULL && reason_size > 0) {
        snprintf(reason, reason_size, "%s", load_error);
    }
    return load_status;
}
