/* Authenticated frames (--key FILE): the run's key, each connection's nonces and session
   key, and the tag of a frame (docs/security.md, "How a frame is tagged"), all through
   OpenSSL's libcrypto.

   tag = HMAC-SHA-256(session key, seq as 8 little-endian bytes || the 8 header words ||
   the payload's MAC || the checksum word), where seq counts the frames sent on that
   connection in that direction from 0, and the payload's MAC is AES-256-GMAC(payload key,
   the zero IV, the payload's bytes as associated data), with payload key =
   HMAC-SHA-256(run key, "alphac-payload-1" || protocol). The MAC of a payload is the same
   towards every peer, so a payload sent to several peers, or forwarded, is read once.
   Under a fixed IV, GMAC is GHASH (an almost-universal hash keyed by a secret) plus a
   constant; its value is never sent, only HMAC'd: the classic hash-then-PRF MAC, whose
   forgery chance is at most (blocks + 1) / 2^128 per attempt beyond HMAC's own. GHASH runs
   at the speed of a read where the processor has carry-less multiplication.

   Hellos are tagged under the run's key; after both hellos the session key is
   HMAC-SHA-256(run key, "alphac-session-1" || protocol || connector || acceptor || the
   connector's nonce || the acceptor's nonce), all words little-endian. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#define KEY_MIN 32
#define KEY_MAX 4096

int rt_read_key_file(struct rt *rt, const char *path, const char *flag, unsigned char **out, size_t *len) {
    /* O_NONBLOCK: a FIFO in the key's place is refused by its type, not waited on for a writer */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return rt_fail(rt, RT_KEY_FILE, "cannot open the %s file '%s' (%s)", flag, path, strerror(errno));
    struct stat st;
    int rc = RT_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = rt_fail(rt, RT_KEY_FILE, "the %s file '%s' is not a regular file", flag, path);
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        rc = rt_fail(rt, RT_KEY_FILE, "the %s file '%s' belongs to uid %lu; it must be this user's (uid %lu) "
                     "or root's", flag, path, (unsigned long)st.st_uid, (unsigned long)geteuid());
    else if (st.st_mode & 077)
        rc = rt_fail(rt, RT_KEY_FILE, "the %s file '%s' has mode %04o; it must be private to its owner "
                     "(chmod 600)", flag, path, (unsigned)(st.st_mode & 07777));
    else if (st.st_size < KEY_MIN || st.st_size > KEY_MAX)
        rc = rt_fail(rt, RT_KEY_FILE, "the %s file '%s' holds %lld bytes; a key is %d to %d bytes", flag, path,
                     (long long)st.st_size, KEY_MIN, KEY_MAX);
    if (rc == RT_OK) {
        *len = (size_t)st.st_size;
        *out = malloc(*len);
        size_t got = 0;
        while (*out && got < *len) {
            ssize_t r = read(fd, *out + got, *len - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (!*out || got != *len) rc = rt_fail(rt, RT_KEY_FILE, "cannot read the %s file '%s'", flag, path);
    }
    close(fd);
    return rc;
}

int rt_read_key(struct rt *rt) {
    int rc = rt_read_key_file(rt, rt->auth.key_path, "key", &rt->auth.key, &rt->auth.key_len);
    if (rc == RT_OK)
        rt->auth.sessions = rt_alloc_words(rt, (int64_t)((sizeof(struct session) * (size_t)rt->n + 7) / 8), &rc);
    return rc;
}

int rt_nonce(struct rt *rt, uint64_t out[2]) {
    size_t got = 0;
    while (got < 16) {
        ssize_t r = getrandom((char *)out + got, 16 - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return rt_fail(rt, RT_IO_ERROR, "no random bytes for a connection nonce (%s)", strerror(errno));
        got += (size_t)r;
    }
    return RT_OK;
}

void rt_session_key(struct rt *rt, int64_t peer, const uint64_t connector_nonce[2],
                    const uint64_t acceptor_nonce[2], int64_t connector, int64_t acceptor) {
    static const char label[16] = "alphac-session-1";
    uint64_t words[7] = {rt->protocol, (uint64_t)connector, (uint64_t)acceptor, connector_nonce[0],
                         connector_nonce[1], acceptor_nonce[0], acceptor_nonce[1]};
    unsigned char msg[sizeof label + sizeof words];
    memcpy(msg, label, sizeof label);
    memcpy(msg + sizeof label, words, sizeof words); /* the executables run on little-endian machines only */
    /* a failure leaves a zero key, under which the peer's tags do not verify: frame-auth */
    (void)rt_hmac(rt->auth.key, rt->auth.key_len, msg, sizeof msg, rt->auth.sessions[peer].key);
}

static const unsigned char ZERO_IV[12];

/* At least `count` payload MACs for one exchange's frames, each keyed with the payload key
   (made on the first call; the key schedule is computed once per context). */
int rt_payload_macs(struct rt *rt, int64_t count) {
    if (count <= rt->auth.nmacs) return RT_OK;
    static const char label[16] = "alphac-payload-1";
    unsigned char msg[sizeof label + 8], key[32];
    memcpy(msg, label, sizeof label);
    memcpy(msg + sizeof label, &rt->protocol, 8);
    if (rt_grow(&rt->auth.macs, &rt->auth.macs_cap, (size_t)count, sizeof *rt->auth.macs) != 0)
        return rt_fail(rt, RT_IO_ERROR, "out of memory for the payload MACs");
    int ok = rt_hmac(rt->auth.key, rt->auth.key_len, msg, sizeof msg, key) == 0;
    while (ok && rt->auth.nmacs < count) { /* nmacs counts only contexts set up */
        EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        ok = c && EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, ZERO_IV) == 1;
        if (ok)
            rt->auth.macs[rt->auth.nmacs++] = c;
        else
            EVP_CIPHER_CTX_free(c);
    }
    memset(key, 0, sizeof key);
    return ok ? RT_OK : rt_fail(rt, RT_IO_ERROR, "libcrypto could not set up AES-256-GMAC");
}

/* A payload's MAC: begun (the key kept), fed its bytes in order, finished. A failure makes
   the MAC all zeros and returns -1: a sender's frame then fails its tag at the receiver,
   and a receiver refuses frame-auth itself. */
int rt_payload_mac_begin(EVP_CIPHER_CTX *c) {
    return EVP_EncryptInit_ex(c, NULL, NULL, NULL, ZERO_IV) == 1 ? 0 : -1;
}

void rt_payload_mac_update(EVP_CIPHER_CTX *c, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) { /* libcrypto takes an int length */
        int piece = n < (size_t)INT_MAX / 2 ? (int)n : INT_MAX / 2, out = 0;
        (void)EVP_EncryptUpdate(c, NULL, &out, p, piece); /* associated data: cannot fail once begun */
        p += piece;
        n -= (size_t)piece;
    }
}

int rt_payload_mac_final(EVP_CIPHER_CTX *c, unsigned char out[PAYLOAD_MAC_BYTES]) {
    unsigned char none[16];
    int len = 0;
    if (EVP_EncryptFinal_ex(c, none, &len) == 1 &&
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, PAYLOAD_MAC_BYTES, out) == 1)
        return 0;
    memset(out, 0, PAYLOAD_MAC_BYTES);
    return -1;
}

/* The payload MAC of len words at once (tests and benchmarks). */
int rt_payload_mac(struct rt *rt, const uint64_t *payload, int64_t len, unsigned char out[PAYLOAD_MAC_BYTES]) {
    TRY(rt_payload_macs(rt, 1));
    if (rt_payload_mac_begin(rt->auth.macs[0]) != 0)
        return rt_fail(rt, RT_IO_ERROR, "libcrypto could not begin a payload MAC");
    rt_payload_mac_update(rt->auth.macs[0], payload, (size_t)len * 8);
    return rt_payload_mac_final(rt->auth.macs[0], out) == 0 ? RT_OK
                                                        : rt_fail(rt, RT_IO_ERROR, "libcrypto could not finish a payload MAC");
}

void rt_frame_tag(const struct rt *rt, int64_t peer, uint64_t seq, const uint64_t *header,
                  const unsigned char payload_mac[PAYLOAD_MAC_BYTES], uint64_t checksum, uint64_t tag[TAG_WORDS]) {
    unsigned char msg[8 * (1 + HEADER_WORDS) + PAYLOAD_MAC_BYTES + 8];
    memcpy(msg, &seq, 8);
    memcpy(msg + 8, header, 8 * HEADER_WORDS);
    memcpy(msg + 8 * (1 + HEADER_WORDS), payload_mac, PAYLOAD_MAC_BYTES);
    memcpy(msg + 8 * (1 + HEADER_WORDS) + PAYLOAD_MAC_BYTES, &checksum, 8);
    if (seq == 0) /* a hello: the run's key */
        (void)rt_hmac(rt->auth.key, rt->auth.key_len, msg, sizeof msg, (unsigned char *)tag);
    else
        (void)rt_hmac(rt->auth.sessions[peer].key, 32, msg, sizeof msg, (unsigned char *)tag);
}
