// CCrypto - the slice of OpenSSL libcrypto speech-fetch uses (SHA-256 and SHA-1), reached
// through a table that loader.c fills with dlopen("libcrypto.so.3") at the first hasher, plus a
// small built-in SHA-256 for short inputs.
//
// Why not link libcrypto: relocating it costs every process ~0.6 ms and ~120 page faults at
// start (and the pages again at exit), and most processes never hash a file: `speech wait`,
// `speech download --offline`, a cached `fromPretrained`. The spool's ids are SHA-256 of a few
// hundred bytes; `sf_sha256_small` computes them without the library.
//
// The low-level SHA256_CTX is used on purpose: it is a plain struct, so a partial hash can be
// saved in a staging sidecar and resumed after a crash. OpenSSL 3 marks it deprecated; the
// functions remain, and we silence the attribute here only.
#ifndef SPEECH_FETCH_CCRYPTO_H
#define SPEECH_FETCH_CCRYPTO_H
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#include <stddef.h>
#include <stdint.h>

/// The libcrypto entry points speech-fetch uses, resolved by sf_crypto_load.
struct sf_crypto_api {
    int (*sha256_init)(SHA256_CTX *c);
    int (*sha256_update)(SHA256_CTX *c, const void *data, size_t len);
    int (*sha256_final)(unsigned char *md, SHA256_CTX *c);
    int (*sha1_init)(SHA_CTX *c);
    int (*sha1_update)(SHA_CTX *c, const void *data, size_t len);
    int (*sha1_final)(unsigned char *md, SHA_CTX *c);
};

/// Filled by sf_crypto_load; read only after it returned 0.
extern struct sf_crypto_api sf_crypto;

/// Loads libcrypto once (thread-safe). Returns 0, or -1 with the reason in `reason`.
int sf_crypto_load(char *reason, size_t reason_size);

static inline void sf_sha256_init(SHA256_CTX *c) { sf_crypto.sha256_init(c); }
static inline void sf_sha256_update(SHA256_CTX *c, const void *data, size_t len) { sf_crypto.sha256_update(c, data, len); }
static inline void sf_sha256_final(unsigned char *md, SHA256_CTX *c) { sf_crypto.sha256_final(md, c); }
static inline void sf_sha1_init(SHA_CTX *c) { sf_crypto.sha1_init(c); }
static inline void sf_sha1_update(SHA_CTX *c, const void *data, size_t len) { sf_crypto.sha1_update(c, data, len); }
static inline void sf_sha1_final(unsigned char *md, SHA_CTX *c) { sf_crypto.sha1_final(md, c); }

/// SHA-256 of `len` bytes into `md` (32 bytes) without libcrypto: FIPS 180-4 in plain C, for
/// short inputs (ids of a few hundred bytes); files go through the library (SHA-NI, AVX2).
void sf_sha256_small(const void *data, size_t len, unsigned char md[32]);

#endif
