/* SHA-256 through OpenSSL's libcrypto (linked statically into every executable): the
   content addresses of outputs, commit records, checkpoint shards and manifests. The
   library picks the processor's SHA instructions where it has them. */
#include "rt.h"

#include <string.h>

#include <openssl/evp.h>

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
