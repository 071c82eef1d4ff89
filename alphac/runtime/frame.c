/* Frames: [8 header words | payload | checksum], all u64 little-endian. A register is laid
   out the same way, so a combine value comes in straight into the register that holds it
   (the moving itself is rt_exchange's, xfer.c). The checksum (docs/runtime.md) hashes the payload in LANES
   independent FNV-1a lanes, then folds the header on top: a payload sent to several peers
   in a row is hashed once (struct sent_cache). */
#include "rt.h"

#include <string.h>

/* Fold payload words [lo, hi) into the lanes, word i into lane i % LANES, from w (w[0] is
   word lo), and with `to`, copy them there in the same pass; called on consecutive ranges
   as a payload arrives or is sent. */
static inline __attribute__((always_inline)) void fold_range(uint64_t *to, const uint64_t *w, int64_t lo,
                                                             int64_t hi, uint64_t lanes[LANES]) {
    int64_t i = lo;
    for (; i < hi && (i % LANES) != 0; i++) {
        if (to) to[i - lo] = w[i - lo];
        lanes[i % LANES] = rt_fnv_fold(lanes[i % LANES], w[i - lo]);
    }
    uint64_t h0 = lanes[0], h1 = lanes[1], h2 = lanes[2], h3 = lanes[3];
    for (; i + LANES <= hi; i += LANES) {
        const uint64_t *q = w + (i - lo);
        if (to) memcpy(to + (i - lo), q, LANES * 8);
        h0 = rt_fnv_fold(h0, q[0]);
        h1 = rt_fnv_fold(h1, q[1]);
        h2 = rt_fnv_fold(h2, q[2]);
        h3 = rt_fnv_fold(h3, q[3]);
    }
    lanes[0] = h0, lanes[1] = h1, lanes[2] = h2, lanes[3] = h3;
    for (; i < hi; i++) {
        if (to) to[i - lo] = w[i - lo];
        lanes[i % LANES] = rt_fnv_fold(lanes[i % LANES], w[i - lo]);
    }
}

void rt_lanes_at(const uint64_t *w, int64_t lo, int64_t hi, uint64_t lanes[LANES]) { fold_range(NULL, w, lo, hi, lanes); }

void rt_lanes_copy(uint64_t *to, const uint64_t *w, int64_t lo, int64_t hi, uint64_t lanes[LANES]) {
    fold_range(to, w, lo, hi, lanes);
}

void rt_lanes(const uint64_t *p, int64_t lo, int64_t hi, uint64_t lanes[LANES]) { rt_lanes_at(p + lo, lo, hi, lanes); }

void rt_lanes_init(uint64_t lanes[LANES]) {
    for (int j = 0; j < LANES; j++) lanes[j] = FNV_OFFSET ^ (uint64_t)j;
}

uint64_t rt_checksum(const uint64_t *header, const uint64_t *payload, int64_t n) {
    uint64_t lanes[LANES];
    rt_lanes_init(lanes);
    rt_lanes(payload, 0, n, lanes);
    return rt_fnv(header, HEADER_WORDS, rt_fnv(lanes, LANES, FNV_OFFSET));
}

/* -- the sent-payload hash cache (struct sent_cache): its validity rule, here alone ------ */

/* A send of the register whose payload hash is kept, which went unchanged since (any op
   but a send forgets it: rt_sent_forget), reuses that hash; a tagged one its MAC too,
   when that was kept. */
int rt_sent_hit(const struct rt *rt, const struct xfer *x) {
    const struct sent_cache *c = &rt->auth.sent;
    return x->reuse && c->buf == x->buf && (!x->tagged || c->mac_valid);
}

void rt_sent_forget(struct rt *rt) { rt->auth.sent.buf = NULL, rt->auth.sent.mac_valid = 0; }

/* Keep buf's payload hash and, with `mac`, its payload MAC; `fresh`: what was kept of an
   earlier payload (its MAC) does not hold for this one. */
static void keep(struct rt *rt, const uint64_t *buf, uint64_t hash, const unsigned char *mac, int fresh) {
    struct sent_cache *c = &rt->auth.sent;
    if (fresh) rt_sent_forget(rt);
    c->buf = buf, c->hash = hash;
    if (mac) memcpy(c->mac, mac, sizeof c->mac), c->mac_valid = 1;
}

/* A send whose payload is hashed: its checksum and, in an authenticated run, its tag (the
   payload's MAC is the cached one when the same register is sent again). A register sent
   with `reuse` and its payload hash (and MAC) are kept for the next send of it. */
void rt_seal(struct rt *rt, struct xfer *x) {
    uint64_t ph = x->hit ? rt->auth.sent.hash : rt_fnv(x->lanes, LANES, FNV_OFFSET);
    unsigned char mac[PAYLOAD_MAC_BYTES];
    x->trail[0] = rt_fnv(x->head, HEADER_WORDS, ph);
    x->sealed = 1;
    if (x->tagged) {
        /* a MAC libcrypto failed on is zeros: the receiver, which computes its own, refuses */
        if (x->hit) memcpy(mac, rt->auth.sent.mac, sizeof mac);
        else if (rt_payload_mac_final(x->mac, mac) != 0 || x->mac_failed) memset(mac, 0, sizeof mac);
        rt_frame_tag(rt, x->peer, rt->auth.sessions[x->peer].sent++, x->head, mac, x->trail[0], x->trail + 1);
    }
    if (x->reuse) keep(rt, x->buf, ph, x->tagged ? mac : NULL, !x->hit);
}

#define WHO "owner %lld: frame from owner %lld"

/* A received header, in the order of alphac.wire.FRAME_CHECKS: magic (an untagged frame
   in an authenticated run, or a tagged one in a run without a key, is frame-auth),
   protocol, sender (the peer; or, for a hello, an owner still expected to connect: it
   names the connection), receiver, version, step, kind, length (oversized before any
   payload is read). */
int rt_check_header(struct rt *rt, struct xfer *x) {
    const uint64_t *f = x->buf;
    long long me = (long long)rt->owner;
    int hello = x->peer < 0;
    long long claimed = hello ? (long long)f[H_SENDER] : (long long)x->peer;
    unsigned long long from = f[H_SENDER];
    if (f[H_MAGIC] == (x->tagged ? FRAME_MAGIC : FRAME_MAGIC_AUTH))
        return rt_fail(rt, RT_FRAME_AUTH, x->tagged ? WHO ": no authentication tag (the peer runs without a key)"
                                          : rt->auth.key ? WHO ": a tag on a frame over shared memory (another runtime)"
                                                    : WHO ": authenticated, and this owner runs without --key",
                       me, claimed);
    if (f[H_MAGIC] != (x->tagged ? FRAME_MAGIC_AUTH : FRAME_MAGIC))
        return rt_fail(rt, RT_FRAME_MAGIC, WHO ": magic 0x%016llx, expected 0x%016llx", me, claimed,
                       (unsigned long long)f[H_MAGIC], (unsigned long long)FRAME_MAGIC);
    if (f[H_PROTOCOL] != rt->protocol)
        return rt_fail(rt, RT_FRAME_PROTOCOL, WHO ": protocol 0x%016llx, expected 0x%016llx (another "
                       "plan, topology or contract)", me, claimed, (unsigned long long)f[H_PROTOCOL],
                       (unsigned long long)rt->protocol);
    if (hello) {
        if (!x->expected)
            return rt_fail(rt, RT_FRAME_SENDER, "owner %lld: a hello names sender %lld, not a peer still "
                           "expected to connect", me, (long long)from);
    } else if (from != (uint64_t)x->peer) {
        return rt_fail(rt, RT_FRAME_SENDER, "owner %lld: frame names sender %lld, expected owner %lld", me,
                       (long long)from, (long long)x->peer);
    }
    if (f[H_RECEIVER] != (uint64_t)rt->owner)
        return rt_fail(rt, RT_FRAME_RECEIVER, WHO ": addressed to owner %lld", me, (long long)from,
                       (long long)f[H_RECEIVER]);
    if (f[H_VERSION] != x->version)
        return rt_fail(rt, RT_FRAME_VERSION, WHO ": version %llu, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_VERSION], (unsigned long long)x->version);
    if (f[H_STEP] != x->step)
        return rt_fail(rt, RT_FRAME_STEP, WHO ": step %llu, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_STEP], (unsigned long long)x->step);
    if (f[H_KIND] != x->kind)
        return rt_fail(rt, RT_FRAME_KIND, WHO ": kind %llu, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_KIND], (unsigned long long)x->kind);
    uint64_t max = img_field(rt, IMG_MAX_PAYLOAD);
    if (f[H_LENGTH] > max)
        return rt_fail(rt, RT_FRAME_OVERSIZED, WHO ": %llu payload words, this protocol allows at most %llu",
                       me, (long long)from, (unsigned long long)f[H_LENGTH], (unsigned long long)max);
    if (f[H_LENGTH] != (uint64_t)x->len)
        return rt_fail(rt, RT_FRAME_LENGTH, WHO ": %llu payload words, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_LENGTH], (unsigned long long)x->len);
    x->from = (int64_t)from;
    return RT_OK;
}

/* A received frame's checksum and, when keyed, its tag. */
int rt_check_trailer(struct rt *rt, struct xfer *x) {
    uint64_t *buf = x->buf, *payload = buf + HEADER_WORDS;
    int64_t len = x->len, from = x->from;
    long long me = (long long)rt->owner;
    uint64_t ph = rt_fnv(x->lanes, LANES, FNV_OFFSET);
    uint64_t h = rt_fnv(buf, HEADER_WORDS, ph);
    if (payload[len] != h)
        return rt_fail(rt, RT_FRAME_CHECKSUM, WHO ": checksum 0x%016llx, computed 0x%016llx", me,
                       (long long)from, (unsigned long long)payload[len], (unsigned long long)h);
    unsigned char mac[PAYLOAD_MAC_BYTES];
    if (x->tagged) {
        uint64_t want[TAG_WORDS];
        uint64_t seq = rt->auth.sessions[from].received;
        if (rt_payload_mac_final(x->mac, mac) != 0 || x->mac_failed)
            return rt_fail(rt, RT_FRAME_AUTH, WHO ": libcrypto could not compute the MAC of frame %llu's payload",
                           me, (long long)from, (unsigned long long)seq);
        rt_frame_tag(rt, from, seq, buf, mac, payload[len], want);
        uint64_t diff = 0; /* compared in constant time */
        for (int j = 0; j < TAG_WORDS; j++) diff |= want[j] ^ payload[len + 1 + j];
        if (diff != 0)
            return rt_fail(rt, RT_FRAME_AUTH, WHO ": the authentication tag of frame %llu does not verify "
                           "(another key, or a forged or replayed frame)", me, (long long)from,
                           (unsigned long long)seq);
        rt->auth.sessions[from].received++;
    }
    /* A combine value received intact is what this owner may send on next (a hierarchy's
       inner owner forwards the total down): keep its payload hash, unless it was added on
       arrival (then the register need not hold it). */
    if (x->kind == KIND_COMBINE && !x->add) keep(rt, buf, ph, x->tagged ? mac : NULL, 1);
    return RT_OK;
}
