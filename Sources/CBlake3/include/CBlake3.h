// CBlake3 - BLAKE3 (hash, keyed hash, derive-key, extended output) in portable C, written for
// speech-fetch from the BLAKE3 paper's description (O'Connor, Aumasson, Neves, Wilcox-O'Hearn,
// 2020). Xet names every chunk, xorb and file by a keyed BLAKE3 hash, and Debian 12 ships no
// C library for it (docs/xet.md).
//
// Speed: the compression function is portable C; on x86-64 a second copy of the whole-chunk
// loop is compiled for AVX2 and chosen at run time by cpuid (see blake3.c, "Why two copies").
#ifndef SPEECH_FETCH_CBLAKE3_H
#define SPEECH_FETCH_CBLAKE3_H
#include <stddef.h>
#include <stdint.h>

#define CBLAKE3_KEY_LEN 32
#define CBLAKE3_OUT_LEN 32
#define CBLAKE3_BLOCK_LEN 64
#define CBLAKE3_CHUNK_LEN 1024
/// Enough chaining values for 2^54 chunks (2^64 bytes).
#define CBLAKE3_MAX_DEPTH 54

/// One incremental hash: a plain struct, so it can be copied, kept on the stack or saved.
typedef struct {
    uint32_t key[8];              // the key words every chunk and parent starts from
    uint32_t cv[8];               // the current chunk's chaining value so far
    uint64_t chunk_counter;       // index of the current chunk
    uint8_t block[CBLAKE3_BLOCK_LEN];  // the current chunk's unfinished block
    uint8_t block_len;
    uint8_t blocks_compressed;    // blocks of the current chunk already compressed
    uint8_t flags;                // KEYED_HASH / DERIVE_KEY_* for every compression
    uint8_t cv_stack_len;
    uint32_t cv_stack[CBLAKE3_MAX_DEPTH][8];  // left subtrees waiting for their right sibling
} cblake3_hasher;

void cblake3_init(cblake3_hasher *self);
void cblake3_init_keyed(cblake3_hasher *self, const uint8_t key[CBLAKE3_KEY_LEN]);
void cblake3_init_derive_key(cblake3_hasher *self, const void *context, size_t context_len);
void cblake3_update(cblake3_hasher *self, const void *input, size_t input_len);
/// Any output length (extended output); the first 32 bytes are the hash. Does not change self.
void cblake3_finalize(const cblake3_hasher *self, uint8_t *out, size_t out_len);

/// Which whole-chunk loop runs: 0 portable, 1 AVX2. For the tests and the benchmark.
int cblake3_simd_level(void);
/// Forces the portable loop (1) or lets cpuid decide again (0). For the tests and the benchmark.
void cblake3_force_portable(int on);

#endif
