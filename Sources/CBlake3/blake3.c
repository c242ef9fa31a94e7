// blake3.c - BLAKE3 as the paper describes it: 1 KiB chunks of 64-byte blocks compressed into
// chaining values, chunks joined pairwise in a binary tree of parent nodes, the root compressed
// once more with the ROOT flag for each 64 bytes of output.
#include "CBlake3.h"
#include "blake3_impl.h"
#include <string.h>

static const uint32_t IV[8] = {
    0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
    0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u,
};


static inline uint32_t rotr32(uint32_t w, unsigned c) { return (w >> c) | (w << (32 - c)); }

static inline uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void store32(uint8_t *p, uint32_t w) {
    p[0] = (uint8_t)w; p[1] = (uint8_t)(w >> 8); p[2] = (uint8_t)(w >> 16); p[3] = (uint8_t)(w >> 24);
}

static inline void mix(uint32_t *v, int a, int b, int c, int d, uint32_t x, uint32_t y) {
    v[a] = v[a] + v[b] + x; v[d] = rotr32(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];     v[b] = rotr32(v[b] ^ v[c], 12);
    v[a] = v[a] + v[b] + y; v[d] = rotr32(v[d] ^ v[a], 8);
    v[c] = v[c] + v[d];     v[b] = rotr32(v[b] ^ v[c], 7);
}

// The compression function's 16-word state after its seven rounds (not yet folded).
static void compress_state(uint32_t v[16], const uint32_t cv[8], const uint8_t block[64],
                           uint8_t block_len, uint64_t counter, uint8_t flags) {
    uint32_t m[16];
    for (int i = 0; i < 16; i++) m[i] = load32(block + 4 * i);
    for (int i = 0; i < 8; i++) v[i] = cv[i];
    v[8] = IV[0]; v[9] = IV[1]; v[10] = IV[2]; v[11] = IV[3];
    v[12] = (uint32_t)counter; v[13] = (uint32_t)(counter >> 32);
    v[14] = block_len; v[15] = flags;
    // Unrolled, so that the schedule's indexes are constants and the state stays in registers.
#pragma clang loop unroll(full)
    for (int r = 0; r < 7; r++) {
        const uint8_t *s = cblake3_schedule[r];
        mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
        mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
        mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
        mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
        mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
        mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
        mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
        mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
}

void cblake3_compress_in_place(uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                               uint64_t counter, uint8_t flags) {
    uint32_t v[16];
    compress_state(v, cv, block, block_len, counter, flags);
    for (int i = 0; i < 8; i++) cv[i] = v[i] ^ v[i + 8];
}

// 64 bytes of extended output: the folded first half, and the second half folded with cv.
static void compress_xof(const uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                         uint64_t counter, uint8_t flags, uint8_t out[64]) {
    uint32_t v[16];
    compress_state(v, cv, block, block_len, counter, flags);
    for (int i = 0; i < 8; i++) {
        store32(out + 4 * i, v[i] ^ v[i + 8]);
        store32(out + 32 + 4 * i, v[i + 8] ^ cv[i]);
    }
}

void cblake3_hash_chunks_portable(const uint32_t key[8], const uint8_t *input, size_t chunks,
                                  uint64_t counter, uint8_t flags, uint32_t (*out)[8]) {
    for (size_t c = 0; c < chunks; c++) {
        uint32_t cv[8];
        memcpy(cv, key, sizeof cv);
        const uint8_t *chunk = input + c * CBLAKE3_CHUNK_LEN;
        for (int b = 0; b < 16; b++) {
            uint8_t f = flags | (b == 0 ? CBLAKE3_CHUNK_START : 0) | (b == 15 ? CBLAKE3_CHUNK_END : 0);
            cblake3_compress_in_place(cv, chunk + 64 * b, 64, counter + c, f);
        }
        memcpy(out[c], cv, sizeof cv);
    }
}

// What the root or any node is before its last compression: enough to make its chaining value
// (non-root) or any length of output (root).
typedef struct {
    uint32_t cv[8];
    uint8_t block[64];
    uint8_t block_len;
    uint64_t counter;
    uint8_t flags;
} node_output;

static void output_cv(const node_output *o, uint32_t cv[8]) {
    memcpy(cv, o->cv, 32);
    cblake3_compress_in_place(cv, o->block, o->block_len, o->counter, o->flags);
}

static node_output parent_output(const uint32_t left[8], const uint32_t right[8],
                                 const uint32_t key[8], uint8_t flags) {
    node_output o;
    memcpy(o.cv, key, 32);
    for (int i = 0; i < 8; i++) { store32(o.block + 4 * i, left[i]); store32(o.block + 32 + 4 * i, right[i]); }
    o.block_len = 64;
    o.counter = 0;
    o.flags = flags | CBLAKE3_PARENT;
    return o;
}

static node_output chunk_output(const cblake3_hasher *self) {
    node_output o;
    memcpy(o.cv, self->cv, 32);
    memset(o.block, 0, 64);
    memcpy(o.block, self->block, self->block_len);
    o.block_len = self->block_len;
    o.counter = self->chunk_counter;
    o.flags = self->flags | CBLAKE3_CHUNK_END | (self->blocks_compressed == 0 ? CBLAKE3_CHUNK_START : 0);
    return o;
}

static void init_with(cblake3_hasher *self, const uint32_t key[8], uint8_t flags) {
    memset(self, 0, sizeof *self);
    memcpy(self->key, key, 32);
    memcpy(self->cv, key, 32);
    self->flags = flags;
}

void cblake3_init(cblake3_hasher *self) { init_with(self, IV, 0); }

void cblake3_init_keyed(cblake3_hasher *self, const uint8_t key[CBLAKE3_KEY_LEN]) {
    uint32_t words[8];
    for (int i = 0; i < 8; i++) words[i] = load32(key + 4 * i);
    init_with(self, words, CBLAKE3_KEYED_HASH);
}

void cblake3_init_derive_key(cblake3_hasher *self, const void *context, size_t context_len) {
    cblake3_hasher context_hasher;
    init_with(&context_hasher, IV, CBLAKE3_DERIVE_KEY_CONTEXT);
    cblake3_update(&context_hasher, context, context_len);
    uint8_t context_key[32];
    cblake3_finalize(&context_hasher, context_key, 32);
    uint32_t words[8];
    for (int i = 0; i < 8; i++) words[i] = load32(context_key + 4 * i);
    init_with(self, words, CBLAKE3_DERIVE_KEY_MATERIAL);
}

// A finished chunk's chaining value joins the tree: the number of chunks so far says how many
// completed subtrees it closes (one per trailing zero bit).
static void push_chunk_cv(cblake3_hasher *self, uint32_t cv[8], uint64_t total_chunks) {
    while ((total_chunks & 1) == 0) {
        self->cv_stack_len--;
        node_output p = parent_output(self->cv_stack[self->cv_stack_len], cv, self->key, self->flags);
        output_cv(&p, cv);
        total_chunks >>= 1;
    }
    memcpy(self->cv_stack[self->cv_stack_len], cv, 32);
    self->cv_stack_len++;
}

static size_t chunk_len(const cblake3_hasher *self) {
    return (size_t)self->blocks_compressed * CBLAKE3_BLOCK_LEN + self->block_len;
}

static void start_next_chunk(cblake3_hasher *self) {
    memcpy(self->cv, self->key, 32);
    self->chunk_counter++;
    self->block_len = 0;
    self->blocks_compressed = 0;
}

void cblake3_update(cblake3_hasher *self, const void *input, size_t input_len) {
    const uint8_t *in = input;
    while (input_len > 0) {
        // The current chunk is full and more input follows, so it is not the root: close it.
        if (chunk_len(self) == CBLAKE3_CHUNK_LEN) {
            node_output o = chunk_output(self);
            uint32_t cv[8];
            output_cv(&o, cv);
            push_chunk_cv(self, cv, self->chunk_counter + 1);
            start_next_chunk(self);
        }
        // Whole chunks straight from the input, several at a time, while more input follows them.
        if (chunk_len(self) == 0 && input_len > CBLAKE3_CHUNK_LEN) {
            size_t whole = (input_len - 1) / CBLAKE3_CHUNK_LEN;
            if (whole > CBLAKE3_BATCH) whole = CBLAKE3_BATCH;
            uint32_t cvs[CBLAKE3_BATCH][8];
            cblake3_hash_chunks(self->key, in, whole, self->chunk_counter, self->flags, cvs);
            for (size_t c = 0; c < whole; c++) {
                push_chunk_cv(self, cvs[c], self->chunk_counter + 1);
                self->chunk_counter++;
            }
            memcpy(self->cv, self->key, 32);
            in += whole * CBLAKE3_CHUNK_LEN;
            input_len -= whole * CBLAKE3_CHUNK_LEN;
            continue;
        }
        // Within one chunk, block by block; the last block stays buffered until more input shows
        // it is not the chunk's end.
        if (self->block_len == CBLAKE3_BLOCK_LEN) {
            uint8_t f = self->flags | (self->blocks_compressed == 0 ? CBLAKE3_CHUNK_START : 0);
            cblake3_compress_in_place(self->cv, self->block, 64, self->chunk_counter, f);
            self->blocks_compressed++;
            self->block_len = 0;
        }
        size_t take = CBLAKE3_BLOCK_LEN - self->block_len;
        size_t room = CBLAKE3_CHUNK_LEN - chunk_len(self);
        if (take > room) take = room;
        if (take > input_len) take = input_len;
        memcpy(self->block + self->block_len, in, take);
        self->block_len += (uint8_t)take;
        in += take;
        input_len -= take;
    }
}

void cblake3_finalize(const cblake3_hasher *self, uint8_t *out, size_t out_len) {
    node_output o = chunk_output(self);
    for (size_t i = self->cv_stack_len; i > 0; i--) {
        uint32_t right[8];
        output_cv(&o, right);
        o = parent_output(self->cv_stack[i - 1], right, self->key, self->flags);
    }
    uint8_t block[64];
    for (uint64_t counter = 0; out_len > 0; counter++) {
        compress_xof(o.cv, o.block, o.block_len, counter, o.flags | CBLAKE3_ROOT, block);
        size_t take = out_len < 64 ? out_len : 64;
        memcpy(out, block, take);
        out += take;
        out_len -= take;
    }
}
