/* Digests. SHA-256 and HMAC-SHA-256 through OpenSSL's libcrypto (linked statically into
   every executable): the content addresses of outputs, commit records, checkpoint shards
   and manifests, and every key derived from a key. The library picks the processor's SHA
   instructions where it has them. And the serial FNV-1a of words (frames, replicas). */
#include "rt.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

void rt_sha256_init(struct rt_sha256 *s) {
    s->ctx = EVP_MD_CTX_new();
    s->failed = !s->ctx || EVP_DigestInit_ex2(s->ctx, EVP_sha256(), NULL) != 1;
}

void rt_sha256_update(struct rt_sha256 *s, const void *data, size_t n) {
    if (!s->failed && n > 0) s->failed = EVP_DigestUpdate(s->ctx, data, n) != 1;
}

/* The digest, and 0; or, where libcrypto failed (no memory), 32 zero bytes and -1: a
   caller that publishes refuses, one that verifies finds a mismatch. */
int rt_sha256_final(struct rt_sha256 *s, unsigned char out[32]) {
    unsigned int len = 0;
    if (!s->failed) s->failed = EVP_DigestFinal_ex(s->ctx, out, &len) != 1 || len != 32;
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
    if (s->failed) memset(out, 0, 32);
    return s->failed ? -1 : 0;
}

int rt_sha256_bytes(const void *data, size_t n, unsigned char out[32]) {
    struct rt_sha256 s;
    rt_sha256_init(&s);
    rt_sha256_update(&s, data, n);
    return rt_sha256_final(&s, out);
}

/* libcrypto set up before any work, without reading the system's OpenSSL configuration
   (which could change its algorithms' providers): the library's one-time allocations and
   the algorithms this runtime uses, fetched once, are part of the executable idle, not
   of the learner's measured bytes (docs/runtime.md, "Measured bytes"). */
void rt_crypto_init(void) {
    static const unsigned char zero[32];
    unsigned char out[32];
    unsigned int len = 0;
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
    (void)HMAC(EVP_sha256(), zero, sizeof zero, zero, sizeof zero, out, &len);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    if (c) (void)EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, zero, zero);
    EVP_CIPHER_CTX_free(c);
}

/* HMAC-SHA-256 of data[0..n) under key; 0, or -1 where libcrypto failed (out zeroed). */
int rt_hmac(const unsigned char *key, size_t key_len, const void *data, size_t n, unsigned char out[32]) {
    unsigned int len = 0;
    if (HMAC(EVP_sha256(), key, (int)key_len, data, n, out, &len) && len == 32) return 0;
    memset(out, 0, 32);
    return -1;
}

uint64_t rt_fnv(const uint64_t *p, int64_t n, uint64_t h) {
    for (int64_t i = 0; i < n; i++) h = rt_fnv_fold(h, p[i]);
    return h;
}
