// loader.c - resolves libcurl at its first use (see CCurl.h for why it is not linked).
#include "CCurl.h"
#include "CLoader.h"
#include <pthread.h>
#include <stdio.h>

struct sf_curl_api sf_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int load_status = -1;

static void load(void) {
    /* libcurl's SONAME on Debian and most distributions; the unversioned name needs the -dev package. */
    static const char *const names[] = {"libcurl.so.4", "libcurl.so"};
    const struct sf_symbol symbols[] = {
        {"curl_global_init", (void **)&sf_curl.global_init},
        {"curl_easy_init", (void **)&sf_curl.easy_init},
        {"curl_easy_cleanup", (void **)&sf_curl.easy_cleanup},
        {"curl_easy_reset", (void **)&sf_curl.easy_reset},
        {"curl_easy_perform", (void **)&sf_curl.easy_perform},
        {"curl_easy_setopt", (void **)&sf_curl.easy_setopt},
        {"curl_easy_getinfo", (void **)&sf_curl.easy_getinfo},
        {"curl_easy_strerror", (void **)&sf_curl.easy_strerror},
        {"curl_slist_append", (void **)&sf_curl.slist_append},
        {"curl_slist_free_all", (void **)&sf_curl.slist_free_all},
        {"curl_multi_init", (void **)&sf_curl.multi_init},
        {"curl_multi_cleanup", (void **)&sf_curl.multi_cleanup},
        {"curl_multi_setopt", (void **)&sf_curl.multi_setopt},
        {"curl_multi_add_handle", (void **)&sf_curl.multi_add_handle},
        {"curl_multi_remove_handle", (void **)&sf_curl.multi_remove_handle},
        {"curl_multi_perform", (void **)&sf_curl.multi_perform},
        {"curl_multi_poll", (void **)&sf_curl.multi_poll},
        {"curl_multi_wakeup", (void **)&sf_curl.multi_wakeup},
        {"curl_multi_info_read", (void **)&sf_curl.multi_info_read},
        {"curl_version", (void **)&sf_curl.version},
    };
    if (sf_load_library(names, sizeof names / sizeof names[0], symbols, sizeof symbols / sizeof symbols[0], load_error, sizeof load_error) != 0) {
        return;
    }
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
