// loader.c - resolves libcurl at its first use (see CCurl.h for why it is not linked).
#include "CCurl.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct sf_curl_api sf_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int load_status = -1;

/* libcurl's SONAME on Debian and most distributions; the unversioned name needs the -dev package. */
static const char *const library_names[] = {"libcurl.so.4", "libcurl.so"};

#define RESOLVE(field, symbol)                                                              \
    do {                                                                                    \
        *(void **)(&sf_curl.field) = dlsym(library, symbol);                                \
        if (sf_curl.field == NULL) {                                                        \
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
            /* The first name's reason is the useful one (a missing dependency of an installed
               libcurl.so.4, say); the fallback name usually exists only with the -dev package. */
            const char *why = dlerror();
            snprintf(load_error, sizeof load_error, "%s", why ? why : "libcurl.so.4 not found");
        }
    }
    if (library == NULL) {
        return;
    }
    RESOLVE(global_init, "curl_global_init");
    RESOLVE(easy_init, "curl_easy_init");
    RESOLVE(easy_cleanup, "curl_easy_cleanup");
    RESOLVE(easy_reset, "curl_easy_reset");
    RESOLVE(easy_perform, "curl_easy_perform");
    RESOLVE(easy_setopt, "curl_easy_setopt");
    RESOLVE(easy_getinfo, "curl_easy_getinfo");
    RESOLVE(easy_strerror, "curl_easy_strerror");
    RESOLVE(slist_append, "curl_slist_append");
    RESOLVE(slist_free_all, "curl_slist_free_all");
    RESOLVE(multi_init, "curl_multi_init");
    RESOLVE(multi_cleanup, "curl_multi_cleanup");
    RESOLVE(multi_setopt, "curl_multi_setopt");
    RESOLVE(multi_add_handle, "curl_multi_add_handle");
    RESOLVE(multi_remove_handle, "curl_multi_remove_handle");
    RESOLVE(multi_perform, "curl_multi_perform");
    RESOLVE(multi_poll, "curl_multi_poll");
    RESOLVE(multi_wakeup, "curl_multi_wakeup");
    RESOLVE(multi_info_read, "curl_multi_info_read");
    CURLcode code = sf_curl.global_init(CURL_GLOBAL_DEFAULT);
    if (code != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "curl_global_init failed (code %d)", (int)code);
        return;
    }
    load_status = 0;
}

int sf_curl_load(char *reason, size_t reason_size) {
    pthread_once(&load_once, load);
    if (load_status != 0 && reason != NULL && reason_size > 0) {
        snprintf(reason, reason_size, "%s", load_error);
    }
    return load_status;
}
