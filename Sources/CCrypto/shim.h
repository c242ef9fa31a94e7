// CCrypto - the slice of OpenSSL libcrypto speech-fetch uses: SHA-256 and SHA-1.
// The low-level SHA256_CTX is used on purpose: it is a plain struct, so a partial hash
// can be saved in a staging sidecar and resumed after a crash. OpenSSL 3 marks it
// deprecated; the functions remain, and we silence the attribute here only.
#ifndef SPEECH_FETCH_CCRYPTO_SHIM_H
#define SPEECH_FETCH_CCRYPTO_SHIM_H
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#endif
