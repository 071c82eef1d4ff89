/* Authenticated frames (--key FILE): the run's key, each connection's nonces and session
   key, and the HMAC-SHA-256 tag of a frame (docs/security.md).

   tag = HMAC-SHA-256(session key, seq as 8 little-endian bytes || the 8 header words ||
   SHA-256 of the payload's bytes || the checksum word), where seq counts the frames sent on
   that connection in that direction from 0. (Hashing the payload first lets a payload sent
   to several peers, or forwarded, be hashed once.) Hellos are tagged under the run's key; after both hellos the session
   key is HMAC-SHA-256(run key, "alphac-session-1" || protocol || connector || acceptor ||
   the connector's nonce || the acceptor's nonce), all words little-endian. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_MIN 32
#define KEY_MAX 4096

int rt_read_key(struct rt *rt) {
    const char *path = rt->key_path;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return rt_fail(rt, RT_KEY_FILE, "cannot open the key file '%s' (%s)", path, strerror(errno));
    struct stat st;
    int rc = RT_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = rt_fail(rt, RT_KEY_FILE, "the key file '%s' is not a regular file", path);
    else if (st.st_mode & 077)
        rc = rt_fail(rt, RT_KEY_FILE, "the key file '%s' has mode %04o; it must be private to its owner "
                     "(chmod 600)", path, (unsigned)(st.st_mode & 07777));
    else if (st.st_size < KEY_MIN || st.st_size > KEY_MAX)
        rc = rt_fail(rt, RT_KEY_FILE, "the key file '%s' holds %lld bytes; a key is %d to %d bytes", path,
                     (long long)st.st_size, KEY_MIN, KEY_MAX);
    if (rc == RT_OK) {
        rt->key_len = (size_t)st.st_size;
        rt->key = malloc(rt->key_len);
        size_t got = 0;
        while (rt->key && got < rt->key_len) {
            ssize_t r = read(fd, rt->key + got, rt->key_len - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (!rt->key || got != rt->key_len) rc = rt_fail(rt, RT_KEY_FILE, "cannot read the key file '%s'", path);
    }
    close(fd);
    if (rc == RT_OK)
        rt->sessions = rt_alloc_words(rt, (int64_t)((sizeof(struct session) * (size_t)rt->n + 7) / 8), &rc);
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

static void hmac_words(struct rt_hmac *m, const uint64_t *w, size_t n) {
    rt_hmac_update(m, w, n * 8); /* the executables run on little-endian machines only */
}

void rt_session_key(struct rt *rt, int64_t peer, const uint64_t connector_nonce[2],
                    const uint64_t acceptor_nonce[2], int64_t connector, int64_t acceptor) {
    static const char label[16] = "alphac-session-1";
    uint64_t words[7] = {rt->protocol, (uint64_t)connector, (uint64_t)acceptor, connector_nonce[0],
                         connector_nonce[1], acceptor_nonce[0], acceptor_nonce[1]};
    struct rt_hmac m;
    rt_hmac_init(&m, rt->key, rt->key_len);
    rt_hmac_update(&m, label, sizeof label);
    hmac_words(&m, words, 7);
    rt_hmac_final(&m, rt->sessions[peer].key);
}

void rt_payload_digest(const uint64_t *payload, int64_t len, unsigned char out[32]) {
    struct rt_sha256 s;
    rt_sha256_init(&s);
    rt_sha256_update(&s, payload, (size_t)len * 8);
    rt_sha256_final(&s, out);
}

void rt_frame_tag(const struct rt *rt, int64_t peer, uint64_t seq, const uint64_t *header,
                  const unsigned char payload_digest[32], uint64_t checksum, uint64_t tag[TAG_WORDS]) {
    struct rt_hmac m;
    if (seq == 0) /* a hello: the run's key */
        rt_hmac_init(&m, rt->key, rt->key_len);
    else
        rt_hmac_init(&m, rt->sessions[peer].key, 32);
    hmac_words(&m, &seq, 1);
    hmac_words(&m, header, HEADER_WORDS);
    rt_hmac_update(&m, payload_digest, 32);
    hmac_words(&m, &checksum, 1);
    rt_hmac_final(&m, (unsigned char *)tag);
}
