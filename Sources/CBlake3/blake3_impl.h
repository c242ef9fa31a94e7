// blake3_impl.h - what blake3.c and the SIMD chunk loops share (not part of the module's API).
#ifndef SPEECH_FETCH_BLAKE3_IMPL_H
#define SPEECH_FETCH_BLAKE3_IMPL_H
#include <stddef.h>
#include <stdint.h>

enum {
    CBLAKE3_CHUNK_START = 1 << 0,
    CBLAKE3_CHUNK_END = 1 << 1,
    CBLAKE3_PARENT = 1 << 2,
    CBLAKE3_ROOT = 1 << 3,
    CBLAKE3_KEYED_HASH = 1 << 4,
    CBLAKE3_DERIVE_KEY_CONTEXT = 1 << 5,
    CBLAKE3_DERIVE_KEY_MATERIAL = 1 << 6,
};

/// Whole chunks hashed per call of the chunk loop (a multiple of every SIMD width).
#define CBLAKE3_BATCH 16

// The message word order of each of the seven rounds: round r uses the permutation
// (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8) applied r times.
// Static in the header: each loop sees the constants and unrolls to fixed registers.
static const uint8_t cblake3_schedule[7][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8},
    {3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1},
    {10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6},
    {12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4},
    {9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7},
    {11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13},
};

void cblake3_compress_in_place(uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                               uint64_t counter, uint8_t flags);
/// Chaining values of `chunks` whole, non-root chunks numbered from `counter`.
void cblake3_hash_chunks(const uint32_t key[8], const uint8_t *input, size_t chunks,
                         uint64_t counter, uint8_t flags, uint32_t (*out)[8]);
void cblake3_hash_chunks_portable(const uint32_t key[8], const uint8_t *input, size_t chunks,
                                  uint64_t counter, uint8_t flags, uint32_t (*out)[8]);
#endif
