/* SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for authenticated frames, output
   digests and commit records. Integer arithmetic only. The compression function uses the
   processor's SHA instructions where it has them (x86-64 SHA-NI, AArch64 SHA2; detected at
   run time, 5-10x faster), else portable C; all three give the same digests. */
#include "rt.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_SHA2
#define HWCAP_SHA2 (1 << 6)
#endif
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void rt_sha256_portable(uint32_t h[8], const unsigned char *p, size_t blocks);
void rt_sha256_native(uint32_t h[8], const unsigned char *p, size_t blocks);
int rt_sha256_has_native(void);

static void block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void rt_sha256_portable(uint32_t h[8], const unsigned char *p, size_t blocks) {
    for (; blocks; blocks--, p += 64) block(h, p);
}

#if defined(__x86_64__)
int rt_sha256_has_native(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1)) return 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}

/* Four rounds of SHA-NI: the state (ABEF, CDGH) advanced by message words w + K. */
#define ROUNDS4(w, i)                                                              \
    do {                                                                           \
        __m128i t_ = _mm_add_epi32((w), _mm_loadu_si128((const __m128i *)&K[4 * (i)])); \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, t_);                              \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(t_, 0x0E));     \
    } while (0)

__attribute__((target("sha,sse4.1,ssse3")))
void rt_sha256_native(uint32_t h[8], const unsigned char *p, size_t blocks) {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
    __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
    __m128i abef = _mm_alignr_epi8(t, cdgh, 8);
    cdgh = _mm_blend_epi16(cdgh, t, 0xF0);
    for (; blocks; blocks--, p += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh, w[4];
        for (int j = 0; j < 4; j++) {
            w[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), swap);
            ROUNDS4(w[j], j);
        }
        for (int j = 4; j < 16; j++) { /* W[4j..4j+3] from the four vectors before */
            __m128i x = _mm_add_epi32(_mm_sha256msg1_epu32(w[j & 3], w[(j + 1) & 3]),
                                      _mm_alignr_epi8(w[(j + 3) & 3], w[(j + 2) & 3], 4));
            w[j & 3] = _mm_sha256msg2_epu32(x, w[(j + 3) & 3]);
            ROUNDS4(w[j & 3], j);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    t = _mm_shuffle_epi32(abef, 0x1B);      /* FEBA */
    cdgh = _mm_shuffle_epi32(cdgh, 0xB1);   /* DCHG */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, cdgh, 0xF0)); /* DCBA */
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(cdgh, t, 8));    /* HGFE */
}
#elif defined(__aarch64__)
int rt_sha256_has_native(void) { return (getauxval(AT_HWCAP) & HWCAP_SHA2) != 0; }

__attribute__((target("+crypto")))
void rt_sha256_native(uint32_t h[8], const unsigned char *p, size_t blocks) {
    uint32x4_t abcd = vld1q_u32(h), efgh = vld1q_u32(h + 4);
    for (; blocks; blocks--, p += 64) {
        uint32x4_t abcd0 = abcd, efgh0 = efgh, w[4];
        for (int j = 0; j < 16; j++) {
            if (j < 4)
                w[j] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(p + 16 * j)));
            else
                w[j & 3] = vsha256su1q_u32(vsha256su0q_u32(w[j & 3], w[(j + 1) & 3]), w[(j + 2) & 3],
                                           w[(j + 3) & 3]);
            uint32x4_t t = vaddq_u32(w[j & 3], vld1q_u32(&K[4 * j])), prev = abcd;
            abcd = vsha256hq_u32(abcd, efgh, t);
            efgh = vsha256h2q_u32(efgh, prev, t);
        }
        abcd = vaddq_u32(abcd, abcd0);
        efgh = vaddq_u32(efgh, efgh0);
    }
    vst1q_u32(h, abcd);
    vst1q_u32(h + 4, efgh);
}
#else
int rt_sha256_has_native(void) { return 0; }
void rt_sha256_native(uint32_t h[8], const unsigned char *p, size_t blocks) { rt_sha256_portable(h, p, blocks); }
#endif

/* The compression function for this processor, chosen once. */
static void compress(uint32_t h[8], const unsigned char *p, size_t blocks) {
    static int native = -1;
    if (native < 0) native = rt_sha256_has_native();
    if (native)
        rt_sha256_native(h, p, blocks);
    else
        rt_sha256_portable(h, p, blocks);
}

void rt_sha256_init(struct rt_sha256 *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->used = 0;
}

void rt_sha256_update(struct rt_sha256 *s, const void *data, size_t n) {
    const unsigned char *p = data;
    s->len += n;
    if (s->used) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->buf + s->used, p, take);
        s->used += take, p += take, n -= take;
        if (s->used < 64) return;
        compress(s->h, s->buf, 1);
        s->used = 0;
    }
    compress(s->h, p, n / 64);
    p += n / 64 * 64, n %= 64;
    memcpy(s->buf, p, n);
    s->used = n;
}

void rt_sha256_final(struct rt_sha256 *s, unsigned char out[32]) {
    uint64_t bits = s->len * 8;
    unsigned char pad[72] = {0x80};
    size_t n = (s->used < 56 ? 56 : 120) - s->used;
    for (int i = 0; i < 8; i++) pad[n + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    rt_sha256_update(s, pad, n + 8);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (unsigned char)(s->h[i] >> (24 - 8 * j));
}

void rt_hmac_init(struct rt_hmac *m, const unsigned char *key, size_t len) {
    unsigned char k[64] = {0}, pad[64];
    if (len > 64) {
        struct rt_sha256 s;
        rt_sha256_init(&s);
        rt_sha256_update(&s, key, len);
        rt_sha256_final(&s, k);
    } else {
        memcpy(k, key, len);
    }
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    rt_sha256_init(&m->inner);
    rt_sha256_update(&m->inner, pad, 64);
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    rt_sha256_init(&m->outer);
    rt_sha256_update(&m->outer, pad, 64);
}

void rt_hmac_final(struct rt_hmac *m, unsigned char out[32]) {
    unsigned char inner[32];
    rt_sha256_final(&m->inner, inner);
    rt_sha256_update(&m->outer, inner, 32);
    rt_sha256_final(&m->outer, out);
}
