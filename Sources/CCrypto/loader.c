// loader.c - resolves libcrypto at the first hasher (see CCrypto.h for why it is not linked).
#include "CCrypto.h"
#include "CLoader.h"
#include <pthread.h>
#include <stdio.h>

struct sf_crypto_api sf_crypto;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int load_status = -1;

static void load(void) {
    /* OpenSSL 3's SONAME; the unversioned name exists only with the -dev package. */
    static const char *const names[] = {"libcrypto.so.3", "libcrypto.so"};
    const struct sf_symbol symbols[] = {
        {"SHA256_Init", (void **)&sf_crypto.sha256_init},
        {"SHA256_Update", (void **)&sf_crypto.sha256_update},
        {"SHA256_Final", (void **)&sf_crypto.sha256_final},
        {"SHA1_Init", (void **)&sf_crypto.sha1_init},
        {"SHA1_Update", (void **)&sf_crypto.sha1_update},
        {"SHA1_Final", (void **)&sf_crypto.sha1_final},
    };
    load_status = sf_load_library(names, sizeof names / sizeof names[0], symbols, sizeof symbols / sizeof symbols[0], load_error, sizeof load_error);
}

int sf_crypto_load(char *reason, size_t reason_size) {
    pthread_once(&load_once, load);
    if (load_status != 0 && reason != NULL && reason_size > 0) {
        snprintf(reason, reason_size, "%s", load_error);
    }
    return load_status;
}
