/* Frames: [8 header words | payload | checksum], all u64 little-endian. A register is laid
   out the same way, so a combine value goes out in one write and comes in straight into the
   register that holds it. The checksum (docs/runtime.md) hashes the payload in LANES
   independent FNV-1a lanes, then folds the header on top: a payload sent to several peers
   in a row is hashed once (rt->sent_buf). */
#include "rt.h"

#include <string.h>

static inline uint64_t fold(uint64_t h, uint64_t w) { return (h ^ w) * FNV_PRIME; }

uint64_t rt_fnv(const uint64_t *p, int64_t n, uint64_t h) {
    for (int64_t i = 0; i < n; i++) h = fold(h, p[i]);
    return h;
}

/* Fold payload words [lo, hi) into the lanes, word i into lane i % LANES; called on
   consecutive ranges as a payload arrives or is sent. */
void rt_lanes(const uint64_t *p, int64_t lo, int64_t hi, uint64_t lanes[LANES]) {
    int64_t i = lo;
    for (; i < hi && (i % LANES) != 0; i++) lanes[i % LANES] = fold(lanes[i % LANES], p[i]);
    uint64_t h0 = lanes[0], h1 = lanes[1], h2 = lanes[2], h3 = lanes[3];
    for (; i + LANES <= hi; i += LANES) {
        h0 = fold(h0, p[i]);
        h1 = fold(h1, p[i + 1]);
        h2 = fold(h2, p[i + 2]);
        h3 = fold(h3, p[i + 3]);
    }
    lanes[0] = h0, lanes[1] = h1, lanes[2] = h2, lanes[3] = h3;
    for (; i < hi; i++) lanes[i % LANES] = fold(lanes[i % LANES], p[i]);
}

static void lanes_init(uint64_t lanes[LANES]) {
    for (int j = 0; j < LANES; j++) lanes[j] = FNV_OFFSET ^ (uint64_t)j;
}

uint64_t rt_checksum(const uint64_t *header, const uint64_t *payload, int64_t n) {
    uint64_t lanes[LANES];
    lanes_init(lanes);
    rt_lanes(payload, 0, n, lanes);
    return rt_fnv(header, HEADER_WORDS, rt_fnv(lanes, LANES, FNV_OFFSET));
}

/* In an authenticated run, the frame's tag after its checksum (buf has room for it); the
   payload's SHA-256 is rt->sent_sha when `hit` (the same register, sent again). */
static void tag(struct rt *rt, int64_t peer, uint64_t *buf, int64_t len, int hit) {
    if (!rt->key) return;
    if (!hit) rt_payload_digest(buf + HEADER_WORDS, len, rt->sent_sha);
    rt_frame_tag(rt, peer, rt->sessions[peer].sent++, buf, rt->sent_sha, buf + HEADER_WORDS + len + 1);
}

int rt_send_frame(struct rt *rt, int64_t peer, uint64_t kind, uint64_t version, uint64_t step,
                  uint64_t *buf, int64_t len, int reuse) {
    const uint64_t head[HEADER_WORDS] = {rt->key ? FRAME_MAGIC_AUTH : FRAME_MAGIC, rt->protocol,
                                         (uint64_t)rt->owner, (uint64_t)peer, version, step, kind,
                                         (uint64_t)len};
    memcpy(buf, head, sizeof head);
    rt_start_io(rt);
    int fd = rt->fds[peer];
    int64_t tags = rt->key ? TAG_WORDS : 0;
    uint64_t *payload = buf + HEADER_WORDS, ph;
    uint64_t lanes[LANES];
    lanes_init(lanes);
    int hit = reuse && rt->sent_buf == buf;
    if (hit || len <= SEND_CHUNK_WORDS) { /* one write for the whole frame */
        if (hit) {
            ph = rt->sent_hash;
        } else {
            rt_lanes(payload, 0, len, lanes);
            ph = rt_fnv(lanes, LANES, FNV_OFFSET);
        }
        payload[len] = rt_fnv(buf, HEADER_WORDS, ph);
        tag(rt, peer, buf, len, hit);
        TRY(rt_write_all(rt, fd, buf, (size_t)(HEADER_WORDS + len + 1 + tags) * 8, peer));
    } else {
        /* hash and send in chunks: the receiver reads (and hashes) one chunk while this owner
           hashes the next; the header goes with the first chunk, the checksum last */
        for (int64_t lo = 0; lo < len; lo += SEND_CHUNK_WORDS) {
            int64_t hi = lo + SEND_CHUNK_WORDS < len ? lo + SEND_CHUNK_WORDS : len;
            rt_lanes(payload, lo, hi, lanes);
            int64_t start = lo == 0 ? 0 : lo + HEADER_WORDS;
            TRY(rt_write_all(rt, fd, buf + start, (size_t)(hi + HEADER_WORDS - start) * 8, peer));
        }
        ph = rt_fnv(lanes, LANES, FNV_OFFSET);
        payload[len] = rt_fnv(buf, HEADER_WORDS, ph);
        tag(rt, peer, buf, len, 0);
        TRY(rt_write_all(rt, fd, payload + len, (size_t)(1 + tags) * 8, peer));
    }
    if (reuse) {
        rt->sent_buf = buf;
        rt->sent_hash = ph;
    }
    return RT_OK;
}

/* Like rt_read_all, folding the first `words` words into the payload lanes as they arrive
   (a large payload is hashed while the rest of it is still in flight) and, with `add`,
   adding each arrived word j < add->words in the kernel (dst[j] = a[j] + b[j], one of a, b
   being buf) while it is still in cache, OR-ing the non-finite flag into rt->added_bad. */
int rt_read_hashed(struct rt *rt, int fd, uint64_t *buf, size_t nbytes, int64_t peer,
                   uint64_t lanes[LANES], int64_t words, const struct arrival *add) {
    int64_t folded = 0;
    for (size_t done = 0, got; done < nbytes;) {
        TRY(rt_receive(rt, fd, (char *)buf + done, nbytes - done, peer, &got));
        done += got;
        int64_t upto = (int64_t)(done / 8) < words ? (int64_t)(done / 8) : words;
        rt_lanes(buf, folded, upto, lanes);
        if (add) {
            int64_t lo = folded < add->words ? folded : add->words;
            int64_t hi = upto < add->words ? upto : add->words;
            if (lo < hi) rt->added_bad |= (int)alphac_add_range(add->dst, add->a, add->b, lo, hi);
        }
        folded = upto;
    }
    return RT_OK;
}

#define WHO "owner %lld: frame from owner %lld"

/* Read a frame into buf, checking (in the order of alphac.wire.FRAME_CHECKS) magic (an
   untagged frame in an authenticated run, or a tagged one in a run without a key, is
   frame-auth), protocol, sender (peer; or, for peer -1, a hello from an owner still
   expected to connect), receiver, version, step, kind, length (oversized before the payload
   is read), checksum and, when keyed, the tag. With `add`, the payload is added as it arrives (rt_read_hashed); those sums
   are used only if the checksum holds, since a failing check refuses here. */
int rt_recv_frame(struct rt *rt, int fd, int64_t peer, uint64_t kind, uint64_t version,
                  uint64_t step, uint64_t *buf, int64_t len, const struct arrival *add,
                  int64_t *sender) {
    rt_start_io(rt);
    TRY(rt_read_all(rt, fd, buf, HEADER_WORDS * 8, peer));
    const uint64_t *f = buf;
    long long me = (long long)rt->owner;
    int hello = peer < 0;
    long long claimed = hello ? (long long)f[H_SENDER] : (long long)peer;
    unsigned long long from = f[H_SENDER];
    if (f[H_MAGIC] == (rt->key ? FRAME_MAGIC : FRAME_MAGIC_AUTH))
        return rt_fail(rt, RT_FRAME_AUTH, rt->key ? WHO ": no authentication tag (the peer runs without a key)"
                                                  : WHO ": authenticated, and this owner runs without --key",
                       me, claimed);
    if (f[H_MAGIC] != (rt->key ? FRAME_MAGIC_AUTH : FRAME_MAGIC))
        return rt_fail(rt, RT_FRAME_MAGIC, WHO ": magic 0x%016llx, expected 0x%016llx", me, claimed,
                       (unsigned long long)f[H_MAGIC], (unsigned long long)FRAME_MAGIC);
    if (f[H_PROTOCOL] != rt->protocol)
        return rt_fail(rt, RT_FRAME_PROTOCOL, WHO ": protocol 0x%016llx, expected 0x%016llx (another "
                       "plan, topology or contract)", me, claimed, (unsigned long long)f[H_PROTOCOL],
                       (unsigned long long)rt->protocol);
    if (hello) {
        int ok = from < (uint64_t)rt->n && rt->accept_from[from] && rt->fds[from] < 0;
        if (!ok)
            return rt_fail(rt, RT_FRAME_SENDER, "owner %lld: a hello names sender %lld, not a peer still "
                           "expected to connect", me, (long long)from);
    } else if (from != (uint64_t)peer) {
        return rt_fail(rt, RT_FRAME_SENDER, "owner %lld: frame names sender %lld, expected owner %lld", me,
                       (long long)from, (long long)peer);
    }
    if (f[H_RECEIVER] != (uint64_t)rt->owner)
        return rt_fail(rt, RT_FRAME_RECEIVER, WHO ": addressed to owner %lld", me, (long long)from,
                       (long long)f[H_RECEIVER]);
    if (f[H_VERSION] != version)
        return rt_fail(rt, RT_FRAME_VERSION, WHO ": version %llu, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_VERSION], (unsigned long long)version);
    if (f[H_STEP] != step)
        return rt_fail(rt, RT_FRAME_STEP, WHO ": step %llu, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_STEP], (unsigned long long)step);
    if (f[H_KIND] != kind)
        return rt_fail(rt, RT_FRAME_KIND, WHO ": kind %llu, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_KIND], (unsigned long long)kind);
    uint64_t max = img_field(rt, IMG_MAX_PAYLOAD);
    if (f[H_LENGTH] > max)
        return rt_fail(rt, RT_FRAME_OVERSIZED, WHO ": %llu payload words, this protocol allows at most %llu",
                       me, (long long)from, (unsigned long long)f[H_LENGTH], (unsigned long long)max);
    if (f[H_LENGTH] != (uint64_t)len)
        return rt_fail(rt, RT_FRAME_LENGTH, WHO ": %llu payload words, expected %llu", me, (long long)from,
                       (unsigned long long)f[H_LENGTH], (unsigned long long)len);
    uint64_t lanes[LANES];
    lanes_init(lanes);
    rt->added_bad = 0;
    uint64_t *payload = buf + HEADER_WORDS;
    int64_t tags = rt->key ? TAG_WORDS : 0;
    TRY(rt_read_hashed(rt, fd, payload, (size_t)(len + 1 + tags) * 8, (int64_t)from, lanes, len, add));
    uint64_t ph = rt_fnv(lanes, LANES, FNV_OFFSET);
    uint64_t h = rt_fnv(buf, HEADER_WORDS, ph);
    if (payload[len] != h)
        return rt_fail(rt, RT_FRAME_CHECKSUM, WHO ": checksum 0x%016llx, computed 0x%016llx", me,
                       (long long)from, (unsigned long long)payload[len], (unsigned long long)h);
    unsigned char sha[32];
    if (rt->key) {
        uint64_t want[TAG_WORDS];
        uint64_t seq = rt->sessions[from].received;
        rt_payload_digest(payload, len, sha);
        rt_frame_tag(rt, (int64_t)from, seq, buf, sha, want);
        uint64_t diff = 0; /* compared in constant time */
        for (int j = 0; j < TAG_WORDS; j++) diff |= want[j] ^ payload[len + 1 + j];
        if (diff != 0)
            return rt_fail(rt, RT_FRAME_AUTH, WHO ": the authentication tag of frame %llu does not verify "
                           "(another key, or a forged or replayed frame)", me, (long long)from,
                           (unsigned long long)seq);
        rt->sessions[from].received++;
    }
    /* A combine value received intact is what this owner may send on next (a hierarchy's
       inner owner forwards the total down): keep its payload hash, unless the add on
       arrival wrote into buf itself. */
    if (kind == KIND_COMBINE && !(add && add->dst == payload)) {
        rt->sent_buf = buf;
        rt->sent_hash = ph;
        if (rt->key) memcpy(rt->sent_sha, sha, 32);
    }
    if (sender) *sender = (int64_t)from;
    return RT_OK;
}
