// blake3_chunks.c - the whole-chunk loop: where BLAKE3 spends its time on long inputs.
//
// Why two copies: a chunk's 16 blocks must be compressed one after the other, but separate
// chunks are independent, so AVX2 compresses 8 chunks at once, one 32-bit lane each (the
// message words of the 8 chunks transposed into 16 vectors). It is compiled with
// __attribute__((target("avx2"))) and chosen at run time by cpuid, so the build needs no
// -mavx2 and still runs on any x86-64. docs/xet.md has the measured speeds of both.
#include "CBlake3.h"
#include "blake3_impl.h"
#include <stdatomic.h>
#include <string.h>

static atomic_int force_portable;

void cblake3_force_portable(int on) { atomic_store_explicit(&force_portable, on, memory_order_relaxed); }

#if defined(__x86_64__)
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2")))

static const uint32_t IV0 = 0x6A09E667u, IV1 = 0xBB67AE85u, IV2 = 0x3C6EF372u, IV3 = 0xA54FF53Au;

AVX2 static inline __m256i add(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
AVX2 static inline __m256i xor(__m256i a, __m256i b) { return _mm256_xor_si256(a, b); }
AVX2 static inline __m256i rot16(__m256i x) {
    return _mm256_shuffle_epi8(x, _mm256_set_epi8(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2,
                                                  13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2));
}
AVX2 static inline __m256i rot8(__m256i x) {
    return _mm256_shuffle_epi8(x, _mm256_set_epi8(12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, 1,
                                                  12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, 1));
}
AVX2 static inline __m256i rot12(__m256i x) { return _mm256_or_si256(_mm256_srli_epi32(x, 12), _mm256_slli_epi32(x, 20)); }
AVX2 static inline __m256i rot7(__m256i x) { return _mm256_or_si256(_mm256_srli_epi32(x, 7), _mm256_slli_epi32(x, 25)); }

#define G(a, b, c, d, x, y) do { \
    v[a] = add(add(v[a], v[b]), x); v[d] = rot16(xor(v[d], v[a])); \
    v[c] = add(v[c], v[d]);         v[b] = rot12(xor(v[b], v[c])); \
    v[a] = add(add(v[a], v[b]), y); v[d] = rot8(xor(v[d], v[a])); \
    v[c] = add(v[c], v[d]);         v[b] = rot7(xor(v[b], v[c])); \
} while (0)

// Rows become columns: row i word j goes to row j word i.
AVX2 static void transpose8(__m256i r[8]) {
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    r[0] = _mm256_permute2x128_si256(u0, u4, 0x20); r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    r[1] = _mm256_permute2x128_si256(u1, u5, 0x20); r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    r[2] = _mm256_permute2x128_si256(u2, u6, 0x20); r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    r[3] = _mm256_permute2x128_si256(u3, u7, 0x20); r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

// Eight whole chunks (8 KiB from input), chunk i numbered counter + i.
AVX2 static void hash8_avx2(const uint32_t key[8], const uint8_t *input, uint64_t counter,
                            uint8_t flags, uint32_t (*out)[8]) {
    __m256i h[8];
    for (int i = 0; i < 8; i++) h[i] = _mm256_set1_epi32((int)key[i]);
    uint32_t lo[8], hi[8];
    for (int i = 0; i < 8; i++) { lo[i] = (uint32_t)(counter + i); hi[i] = (uint32_t)((counter + i) >> 32); }
    const __m256i counter_lo = _mm256_loadu_si256((const __m256i *)lo);
    const __m256i counter_hi = _mm256_loadu_si256((const __m256i *)hi);
    const __m256i block_len = _mm256_set1_epi32(64);
    for (int b = 0; b < 16; b++) {
        __m256i m[16];
        for (int c = 0; c < 8; c++) {
            const uint8_t *block = input + (size_t)c * CBLAKE3_CHUNK_LEN + 64 * b;
            m[c] = _mm256_loadu_si256((const __m256i *)block);
            m[c + 8] = _mm256_loadu_si256((const __m256i *)(block + 32));
        }
        transpose8(m);
        transpose8(m + 8);
        uint8_t f = flags | (b == 0 ? CBLAKE3_CHUNK_START : 0) | (b == 15 ? CBLAKE3_CHUNK_END : 0);
        __m256i v[16] = {
            h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
            _mm256_set1_epi32((int)IV0), _mm256_set1_epi32((int)IV1),
            _mm256_set1_epi32((int)IV2), _mm256_set1_epi32((int)IV3),
            counter_lo, counter_hi, block_len, _mm256_set1_epi32(f),
        };
        // Unrolled, so that the schedule's indexes are constants and the state stays in registers.
#pragma clang loop unroll(full)
        for (int r = 0; r < 7; r++) {
            const uint8_t *s = cblake3_schedule[r];
            G(0, 4, 8, 12, m[s[0]], m[s[1]]);
            G(1, 5, 9, 13, m[s[2]], m[s[3]]);
            G(2, 6, 10, 14, m[s[4]], m[s[5]]);
            G(3, 7, 11, 15, m[s[6]], m[s[7]]);
            G(0, 5, 10, 15, m[s[8]], m[s[9]]);
            G(1, 6, 11, 12, m[s[10]], m[s[11]]);
            G(2, 7, 8, 13, m[s[12]], m[s[13]]);
            G(3, 4, 9, 14, m[s[14]], m[s[15]]);
        }
        for (int i = 0; i < 8; i++) h[i] = xor(v[i], v[i + 8]);
    }
    transpose8(h);
    for (int c = 0; c < 8; c++) _mm256_storeu_si256((__m256i *)out[c], h[c]);
}

static int has_avx2(void) {
    static atomic_int known;  // 0 unknown, 1 no, 2 yes
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k == 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") ? 2 : 1;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k == 2;
}
#else
static int has_avx2(void) { return 0; }
#endif

int cblake3_simd_level(void) {
    return !atomic_load_explicit(&force_portable, memory_order_relaxed) && has_avx2() ? 1 : 0;
}

void cblake3_hash_chunks(const uint32_t key[8], const uint8_t *input, size_t chunks,
                         uint64_t counter, uint8_t flags, uint32_t (*out)[8]) {
#if defined(__x86_64__)
    if (cblake3_simd_level() == 1) {
        while (chunks >= 8) {
            hash8_avx2(key, input, counter, flags, out);
            input += 8 * CBLAKE3_CHUNK_LEN; counter += 8; out += 8; chunks -= 8;
        }
    }
#endif
    cblake3_hash_chunks_portable(key, input, chunks, counter, flags, out);
}
