// CCurl - typed wrappers around libcurl's variadic entry points, which Swift cannot call.
// One static inline function per argument type; nothing else lives here.
#ifndef SPEECH_FETCH_CCURL_SHIM_H
#define SPEECH_FETCH_CCURL_SHIM_H
#include <curl/curl.h>

typedef size_t (*sf_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*sf_curl_xferinfo_cb)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                   curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode sf_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_data_cb(CURL *h, CURLoption o, sf_curl_data_cb v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode sf_easy_setopt_xferinfo_cb(CURL *h, CURLoption o, sf_curl_xferinfo_cb v) { return curl_easy_setopt(h, o, v); }

static inline CURLcode sf_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode sf_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode sf_easy_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode sf_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode sf_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/* CURLMsg keeps its result in a union; read it here. */
static inline CURL *sf_msg_easy(CURLMsg *m) { return m->easy_handle; }
static inline int sf_msg_is_done(CURLMsg *m) { return m->msg == CURLMSG_DONE; }
static inline CURLcode sf_msg_result(CURLMsg *m) { return m->data.result; }

/* Write/header callbacks return this to pause (not used) or a short count to abort. */
static inline size_t sf_curl_abort_write(void) { return 0; }
#endif
