// CCurl - libcurl for Swift: typed wrappers around its variadic entry points (which Swift
// cannot call), reached through a table that loader.c fills with dlopen("libcurl.so.4").
//
// Why not link libcurl: it pulls in some 35 shared libraries (GnuTLS, Kerberos, LDAP, ...)
// that every process would map and relocate at start and unmap at exit, even the ones that
// never open a socket (`speech wait`, `speech download --offline`). Loaded on first use, they
// cost only the processes that transfer. Swift code calls only the sf_curl_* functions below;
// calling a curl_* function directly fails to link, by design.
#ifndef SPEECH_FETCH_CCURL_H
#define SPEECH_FETCH_CCURL_H
#include <curl/curl.h>
#include <stddef.h>

typedef size_t (*sf_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*sf_curl_xferinfo_cb)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                   curl_off_t ultotal, curl_off_t ulnow);

/// The libcurl entry points speech-fetch uses, resolved by sf_curl_load.
struct sf_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    void (*easy_reset)(CURL *h);
    CURLcode (*easy_perform)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption o, ...);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO i, ...);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *m);
    CURLMcode (*multi_setopt)(CURLM *m, CURLMoption o, ...);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_perform)(CURLM *m, int *running);
    CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd *fds, unsigned int nfds, int timeout_ms, int *ready);
    CURLMcode (*multi_wakeup)(CURLM *m);
    CURLMsg *(*multi_info_read)(CURLM *m, int *left);
    char *(*version)(void);
};

/// Filled by sf_curl_load; read only after it returned 0.
extern struct sf_curl_api sf_curl;

/// Loads libcurl once (thread-safe) and runs curl_global_init. Returns 0, or -1 with the reason
/// (the loader's message, or the missing symbol) in `reason`.
int sf_curl_load(char *reason, size_t reason_size);

static inline CURL *sf_curl_easy_init(void) { return sf_curl.easy_init(); }
static inline void sf_curl_easy_cleanup(CURL *h) { sf_curl.easy_cleanup(h); }
static inline void sf_curl_easy_reset(CURL *h) { sf_curl.easy_reset(h); }
static inline CURLcode sf_curl_easy_perform(CURL *h) { return sf_curl.easy_perform(h); }
static inline const char *sf_curl_easy_strerror(CURLcode code) { return sf_curl.easy_strerror(code); }
static inline struct curl_slist *sf_curl_slist_append(struct curl_slist *l, const char *s) { return sf_curl.slist_append(l, s); }
static inline void sf_curl_slist_free_all(struct curl_slist *l) { sf_curl.slist_free_all(l); }
static inline CURLM *sf_curl_multi_init(void) { return sf_curl.multi_init(); }
static inline CURLMcode sf_curl_multi_cleanup(CURLM *m) { return sf_curl.multi_cleanup(m); }
static inline CURLMcode sf_curl_multi_add_handle(CURLM *m, CURL *h) { return sf_curl.multi_add_handle(m, h); }
static inline CURLMcode sf_curl_multi_remove_handle(CURLM *m, CURL *h) { return sf_curl.multi_remove_handle(m, h); }
static inline CURLMcode sf_curl_multi_perform(CURLM *m, int *running) { return sf_curl.multi_perform(m, running); }
static inline CURLMcode sf_curl_multi_poll(CURLM *m, struct curl_waitfd *fds, unsigned int nfds, int timeout_ms, int *ready) {
    return sf_curl.multi_poll(m, fds, nfds, timeout_ms, ready);
}
static inline CURLMcode sf_curl_multi_wakeup(CURLM *m) { return sf_curl.multi_wakeup(m); }
static inline CURLMsg *sf_curl_multi_info_read(CURLM *m, int *left) { return sf_curl.multi_info_read(m, left); }
static inline const char *sf_curl_version(void) { return sf_curl.version(); }

static inline CURLcode sf_easy_setopt_long(CURL *h, CURLoption o, long v) { return sf_curl.easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return sf_curl.easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return sf_curl.easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return sf_curl.easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return sf_curl.easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_data_cb(CURL *h, CURLoption o, sf_curl_data_cb v) { return sf_curl.easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_xferinfo_cb(CURL *h, CURLoption o, sf_curl_xferinfo_cb v) { return sf_curl.easy_setopt(h, o, v); }

/* Only http and https, for the request and for any redirect libcurl might follow (it follows
   none: CURLOPT_FOLLOWLOCATION is 0, and our code judges every Location itself). The _STR options
   came with libcurl 7.85; an older library gets the bitmask options instead. Returns CURLE_OK
   when both restrictions took. */
static inline CURLcode sf_easy_restrict_to_http(CURL *h) {
    CURLcode a = sf_curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode b = sf_curl.easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (a == CURLE_UNKNOWN_OPTION || b == CURLE_UNKNOWN_OPTION) {
        long http = CURLPROTO_HTTP | CURLPROTO_HTTPS;
        a = sf_curl.easy_setopt(h, (CURLoption)181 /* CURLOPT_PROTOCOLS */, http);
        b = sf_curl.easy_setopt(h, (CURLoption)182 /* CURLOPT_REDIR_PROTOCOLS */, http);
    }
    return a != CURLE_OK ? a : b;
}

static inline CURLcode sf_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return sf_curl.easy_getinfo(h, i, v); }
static inline CURLcode sf_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return sf_curl.easy_getinfo(h, i, v); }
static inline CURLcode sf_easy_getinfo_string(CURL *h, CURLINFO i, char **v) { return sf_curl.easy_getinfo(h, i, v); }
static inline CURLcode sf_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return sf_curl.easy_getinfo(h, i, v); }

static inline CURLMcode sf_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return sf_curl.multi_setopt(m, o, v); }

/* CURLMsg keeps its result in a union; read it here. */
static inline CURL *sf_msg_easy(CURLMsg *m) { return m->easy_handle; }
static inline int sf_msg_is_done(CURLMsg *m) { return m->msg == CURLMSG_DONE; }
static inline CURLcode sf_msg_result(CURLMsg *m) { return m->data.result; }

/* Write/header callbacks return this to pause (not used) or a short count to abort. */
static inline size_t sf_curl_abort_write(void) { return 0; }
#endif
