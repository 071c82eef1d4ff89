/* Frames and their authentication: the run's key and each connection's session (auth.c),
   a frame's checksum, checks and seal, and the sent-payload hash cache (frame.c). The
   moving of frames is the transport's (net.h). */
#ifndef ALPHAC_FRAME_H
#define ALPHAC_FRAME_H

#include "base.h"

/* One connection's authentication: the session key (the run's key until both hellos are
   through) and the sequence number of the next frame each way. */
struct session {
    unsigned char key[32];
    uint64_t sent, received;
    uint64_t nonce[2]; /* this owner's half of the connection's nonce */
};

/* The register whose payload hash (and, if mac_valid, payload MAC) was computed last, so a
   register sent to several peers in a row, or forwarded as received, is hashed once. Only
   frame.c reads or writes it: rt_sent_hit, rt_sent_keep, rt_sent_forget. */
struct sent_cache {
    const uint64_t *buf; /* NULL: none */
    uint64_t hash;
    unsigned char mac[PAYLOAD_MAC_BYTES];
    int mac_valid;
};

struct rt_auth {
    const char *key_path;     /* --key FILE */
    int insecure;             /* --insecure: no key, and said so */
    unsigned char *key;       /* NULL: frames are not authenticated */
    size_t key_len;
    struct session *sessions; /* n, when keyed */
    EVP_CIPHER_CTX **macs;    /* keyed: the payload MACs of the frames of one exchange */
    int64_t nmacs;            /* ... set up, of macs_cap */
    size_t macs_cap;
    struct sent_cache sent;
};

/* What a receive computes on arrival, for j < words, in the pass that hashes each piece:
   the add of the combine that comes next, dst[j] = a[j] + b[j] (a or b the payload being
   received); or, with count >= 0, the mean of the update that comes next, dst[j] =
   payload[j] / count (dst: the payload itself). Over shared memory those words are read
   where they lie in the ring and not copied into the register (its words from `words` on
   are). */
struct arrival {
    uint64_t *dst;
    const uint64_t *a, *b;
    int64_t words;
    int64_t count; /* -1: the add */
};

/* One frame on its way over a peer's link, for rt_exchange (net.h): a send of `len`
   payload words from buf + HEADER_WORDS (its header and trailer are kept here, so one
   register can go to several peers at once), or a receive into buf ([header | payload |
   checksum | tag], a register's layout), checked as rt_recv_frame checks it. Fill the
   first group of fields; rt_exchange owns the rest. */
struct xfer {
    int64_t peer;                 /* -1: a hello on `fd` from whichever expected owner it names */
    int fd;                       /* the connection of a hello (peer -1) */
    int send;
    uint64_t kind, version, step;
    uint64_t *buf;
    int64_t len;
    const struct arrival *add;    /* receives: add the payload on arrival; a local step: its add */
    int reuse;                    /* sends: reuse the payload hash of the register sent last */
    int local;                    /* no frame: a combine of `add`, made as its operands are */
    int64_t after[2];             /* 1 + the index of the x writing an operand of its add; 0: none */
    int (*then)(struct rt *rt, const struct xfer *x); /* once it is done (a local step: its work) */
    const int64_t *op;            /* then's op */
    /* progress */
    uint64_t head[HEADER_WORDS], trail[1 + TAG_WORDS];
    size_t done, total;
    int64_t hashed, from;         /* payload words hashed (a local step: sums made); sender */
    int hit, sealed, finished, checked;
    int expected;                 /* a hello: its sender is a peer still expected to connect */
    int tagged;                   /* keyed, over TCP: the frame carries a tag */
    int mac_failed;               /* libcrypto could not begin the payload MAC */
    uint64_t lanes[LANES];
    EVP_CIPHER_CTX *mac;          /* keyed runs: the payload's MAC under way (auth.c) */
};

/* -- auth.c ---------------------------------------------------------------------------- */
/* A key file: a regular file of this user (or root), private to it, of 32 to 4096 bytes,
   never a link; its bytes in *out (malloc'd), else refused key-file naming `flag`. */
int rt_read_key_file(struct rt *rt, const char *path, const char *flag, unsigned char **out, size_t *len);
int rt_read_key(struct rt *rt);
int rt_nonce(struct rt *rt, uint64_t out[2]);
void rt_session_key(struct rt *rt, int64_t peer, const uint64_t connector_nonce[2],
                    const uint64_t acceptor_nonce[2], int64_t connector, int64_t acceptor);
int rt_payload_macs(struct rt *rt, int64_t count);
int rt_payload_mac_begin(EVP_CIPHER_CTX *c);
void rt_payload_mac_update(EVP_CIPHER_CTX *c, const void *data, size_t n);
int rt_payload_mac_final(EVP_CIPHER_CTX *c, unsigned char out[PAYLOAD_MAC_BYTES]);
int rt_payload_mac(struct rt *rt, const uint64_t *payload, int64_t len, unsigned char out[PAYLOAD_MAC_BYTES]);
void rt_frame_tag(const struct rt *rt, int64_t peer, uint64_t seq, const uint64_t *header,
                  const unsigned char payload_mac[PAYLOAD_MAC_BYTES], uint64_t checksum, uint64_t tag[TAG_WORDS]);

/* -- frame.c --------------------------------------------------------------------------- */
void rt_lanes(const uint64_t *p, int64_t lo, int64_t hi, uint64_t lanes[LANES]);
void rt_lanes_at(const uint64_t *w, int64_t lo, int64_t hi, uint64_t lanes[LANES]);
void rt_lanes_copy(uint64_t *to, const uint64_t *w, int64_t lo, int64_t hi, uint64_t lanes[LANES]);
void rt_lanes_init(uint64_t lanes[LANES]);
uint64_t rt_checksum(const uint64_t *header, const uint64_t *payload, int64_t n);
int rt_check_header(struct rt *rt, struct xfer *x);
int rt_check_trailer(struct rt *rt, struct xfer *x);
void rt_seal(struct rt *rt, struct xfer *x);
int rt_sent_hit(const struct rt *rt, const struct xfer *x); /* x's payload hash (and MAC) is cached */
void rt_sent_forget(struct rt *rt); /* a register may have changed: nothing is cached */

#endif
