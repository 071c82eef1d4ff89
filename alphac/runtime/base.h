/* What every part of the runtime uses: the refusal codes, refusals (fail.c), allocation,
   paths, numbers and hex (fail.c), and SHA-256 (digest.c). The lowest layer: it includes
   no other header of the runtime but the generated one.

   Every fallible function returns 0 or a refusal code (RT_<CODE>, from alphac_gen.h) after
   writing its detail into rt->msg; `main` prints `refused: CODE: detail` and exits. */
#ifndef ALPHAC_BASE_H
#define ALPHAC_BASE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <openssl/types.h>

#include "alphac_gen.h"

struct rt;

enum rt_code {
    RT_OK = 0,
#define RT_ENUM(e, s) e,
    RT_CODES(RT_ENUM)
#undef RT_ENUM
    RT_NCODES
};
#define RT_DONE (-1) /* --help or --version printed: exit 0 */

#define TRY(expr)                \
    do {                         \
        int rc_ = (expr);        \
        if (rc_ != 0) return rc_; \
    } while (0)

/* -- fail.c ---------------------------------------------------------------------------- */
int rt_fail(struct rt *rt, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *rt_code_name(int code);
void *rt_alloc_words(struct rt *rt, int64_t words, int *rc);
/* Room for `need` elements of `size` bytes in *p (capacity *cap, doubled as it grows): 0,
   or -1 with *p and *cap untouched (out of memory, or a size past SIZE_MAX). */
int rt_grow(void *p, size_t *cap, size_t need, size_t size);
/* A path (or any text) formatted into new memory, or NULL when out of memory. */
char *rt_pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether p[0..n) is a non-negative decimal integer that fits in int64_t, digits only (no
   sign, no blanks: strtoll would take both), into *out. rt_decimal: the whole of a string. */
int rt_decimal_n(const char *p, size_t n, int64_t *out);
int rt_decimal(const char *text, int64_t *out);
void rt_hex(const unsigned char *d, size_t n, char *out); /* 2n lowercase digits and a NUL */
/* The kernels' refusals (a non-finite value), shared by the host and the device paths. */
int rt_non_finite_statement(struct rt *rt, const char *const *labels, int64_t status, int64_t coord,
                            uint64_t u, const char *what, int64_t sample);
int rt_local_refused(struct rt *rt, int64_t coord, uint64_t u, int64_t sample);

/* -- digest.c: SHA-256 and HMAC-SHA-256 (libcrypto), FNV-1a ---------------------------- */
void rt_crypto_init(void);
int rt_hmac(const unsigned char *key, size_t key_len, const void *data, size_t n, unsigned char out[32]);
static inline uint64_t rt_fnv_fold(uint64_t h, uint64_t w) { return (h ^ w) * FNV_PRIME; }
uint64_t rt_fnv(const uint64_t *p, int64_t n, uint64_t h);
/* a SHA-256 under way: `failed` once libcrypto failed */
struct rt_sha256 {
    EVP_MD_CTX *ctx;
    int failed;
};
void rt_sha256_init(struct rt_sha256 *s);
void rt_sha256_update(struct rt_sha256 *s, const void *data, size_t n);
int rt_sha256_final(struct rt_sha256 *s, unsigned char out[32]); /* -1: libcrypto failed */
int rt_sha256_bytes(const void *data, size_t n, unsigned char out[32]);

#endif
