/* The exchange: several frames sent to and received from several peers at once, over TCP
   sockets (non-blocking, poll(2)-driven) and shared-memory rings (futex(2) bells), so an
   all-to-all step neither deadlocks nor serialises. Every frame is checked as one received
   alone (rt_check_header, rt_check_trailer); a sender hashes its payload chunk by chunk
   while the bytes before it drain, a receiver hashes (and adds on arrival) each piece as
   it arrives; over shared memory a piece is read where it lies in the ring. Frames to or
   from one peer in one direction go in array order. One deadline (rt->net.deadline_ms)
   bounds the whole exchange. */
#include "rt.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/uio.h>

#define H HEADER_WORDS
#define LIVENESS_MS 20 /* how often a side asleep on a bell asks whether its peer is still there */
#define MIXED_MS 1     /* sockets and rings waited on together: the rings are looked at this often */
#define PIECE (SEND_CHUNK_WORDS * 8)

static struct link *link_of(struct rt *rt, const struct xfer *x) {
    return x->peer >= 0 && rt->net.links && rt->net.links[x->peer].ctl ? &rt->net.links[x->peer] : NULL;
}
static int fd_of(const struct rt *rt, const struct xfer *x) { return x->peer >= 0 ? rt->net.fds[x->peer] : x->fd; }
/* the owner a message names: the sender once a received header named it */
static int64_t who(const struct xfer *x) { return x->checked ? x->from : x->peer; }
static const char *verb(const struct xfer *x) { return x->send ? "writing to" : "reading from"; }

static size_t tags(const struct xfer *x) { return x->tagged ? TAG_WORDS : 0; }

/* Hash the next chunk of a send's payload; the trailer once all of it is hashed. */
static void hash_ahead(struct rt *rt, struct xfer *x) {
    int64_t hi = x->hashed + SEND_CHUNK_WORDS < x->len ? x->hashed + SEND_CHUNK_WORDS : x->len;
    const uint64_t *p = x->buf + H;
    rt_lanes(p, x->hashed, hi, x->lanes);
    if (x->tagged) rt_payload_mac_update(x->mac, p + x->hashed, (size_t)(hi - x->hashed) * 8);
    x->hashed = hi;
    if (hi == x->len) rt_seal(rt, x);
}

static void start(struct rt *rt, struct xfer *x) {
    x->done = 0;
    x->hashed = 0;
    x->finished = x->checked = x->hit = x->sealed = 0;
    x->from = x->peer;
    if (x->local) return;
    rt_lanes_init(x->lanes);
    /* in an authenticated run, frames over TCP carry tags; over a ring, whose segment was
       authenticated when it was set up, none (docs/security.md, "The trust boundary") */
    x->tagged = rt->auth.key && !link_of(rt, x);
    x->mac_failed = x->tagged && rt_payload_mac_begin(x->mac) != 0;
    x->total = (size_t)(H + x->len + 1 + (int64_t)tags(x)) * 8;
    if (!x->send) {
        x->total = H * 8; /* until the header says how long the frame is */
        return;
    }
    const uint64_t head[H] = {x->tagged ? FRAME_MAGIC_AUTH : FRAME_MAGIC, rt->protocol, (uint64_t)rt->owner,
                              (uint64_t)x->peer, x->version, x->step, x->kind, (uint64_t)x->len};
    memcpy(x->head, head, sizeof head);
    x->hit = rt_sent_hit(rt, x);
    if (x->hit)
        rt_seal(rt, x);
    else if (!link_of(rt, x))
        hash_ahead(rt, x); /* the first chunk (a short payload whole) goes with the header */
}

/* A frame before another one to or from the same peer in the same direction waits. */
static int blocked(const struct xfer *x, int64_t i) {
    for (int64_t j = 0; j < i; j++)
        if (!x[j].finished && x[j].send == x[i].send && x[j].peer == x[i].peer && x[i].peer >= 0) return 1;
    return 0;
}

/* The leading words of its operands an add of x[i] may read now: as many as the x's writing
   them have (hashed), all once they are done; so chained adds run pipelined behind them. */
static int64_t ready(const struct xfer *x, int64_t i) {
    int64_t n = INT64_MAX;
    for (int s = 0; s < 2; s++) {
        const struct xfer *d = x[i].after[s] ? &x[x[i].after[s] - 1] : NULL;
        if (d && !d->finished && d->hashed < n) n = d->hashed;
    }
    return n;
}

/* The bytes of x[i]'s frame it may take now: until what it waits for is done, only the
   header and the sums it can add (never its count or trailer: it ends after them). */
static size_t limit(const struct xfer *x, int64_t i) {
    int64_t n = ready(x, i);
    size_t cap = n == INT64_MAX || !x[i].add ? x[i].total : (size_t)(H + (n < x[i].add->words ? n : x[i].add->words)) * 8;
    return cap < x[i].total ? cap : x[i].total;
}

/* -- sending ------------------------------------------------------------------------------ */

/* The bytes [from, to) of a send's frame as up to three pieces: header, payload, trailer. */
static int pieces(const struct xfer *x, size_t from, size_t to, struct iovec v[3]) {
    const size_t ends[3] = {H * 8, (size_t)(H + x->len) * 8, x->total};
    const char *bases[3] = {(const char *)x->head, (const char *)(x->buf + H), (const char *)x->trail};
    int n = 0;
    for (int r = 0; r < 3; r++) {
        size_t a = r == 0 ? 0 : ends[r - 1], lo = from > a ? from : a, hi = to < ends[r] ? to : ends[r];
        if (lo < hi) v[n++] = (struct iovec){(void *)(bases[r] + (lo - a)), hi - lo};
    }
    return n;
}

/* Over TCP: what is hashed goes as far as the socket takes it; while it takes nothing,
   the next chunk is hashed. */
static int tcp_send(struct rt *rt, struct xfer *x, int *moved) {
    size_t limit = x->sealed ? x->total : (size_t)(H + x->hashed) * 8;
    struct iovec v[3];
    int n = pieces(x, x->done, limit, v);
    size_t sent = 0;
    if (n > 0) {
        struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)n};
        ssize_t r = sendmsg(fd_of(rt, x), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return rt_io_failed(rt, -1, x->peer, verb(x));
        sent = r > 0 ? (size_t)r : 0;
    }
    x->done += sent;
    *moved = sent > 0;
    if (!sent && !x->sealed) { /* the link is full: hash the next chunk meanwhile */
        hash_ahead(rt, x);
        *moved = 1;
    }
    return RT_OK;
}

/* The payload words after those hashed, copied into the ring and folded into the lanes in
   one pass (a chunk at most, as far as the ring has room); the bytes that went. */
static size_t copy_hashed(struct link *l, struct xfer *x) {
    unsigned char *at;
    int64_t room = (int64_t)(rt_ring_room(l, &at) / 8), n = x->len - x->hashed;
    n = n < room ? n : room;
    n = n < SEND_CHUNK_WORDS ? n : SEND_CHUNK_WORDS;
    if (n == 0) return 0;
    const uint64_t *p = x->buf + H + x->hashed;
    rt_lanes_copy((uint64_t *)(void *)at, p, x->hashed, x->hashed + n, x->lanes); /* untagged: a ring */
    rt_ring_commit(l, (size_t)n * 8);
    x->hashed += n;
    return (size_t)n * 8;
}

/* Over a ring: header and trailer (and a payload hashed already) are copied as they fit;
   the rest of the payload is hashed as it is copied in. */
static int ring_send(struct rt *rt, struct link *l, struct xfer *x, int *moved) {
    *moved = 0;
    for (;;) {
        if (!x->sealed && x->hashed == x->len) rt_seal(rt, x);
        size_t limit = x->sealed ? x->total : (size_t)(H + x->hashed) * 8, before = x->done;
        if (x->done < limit) {
            struct iovec v[3];
            int n = pieces(x, x->done, limit, v);
            for (int i = 0; i < n; i++) {
                size_t got = rt_ring_put(l, v[i].iov_base, v[i].iov_len);
                x->done += got;
                if (got < v[i].iov_len) break;
            }
        } else {
            x->done += copy_hashed(l, x);
        }
        if (x->done == before || x->done == x->total) break;
        *moved = 1;
    }
    if (x->done != x->total && !*moved && l->gone) return rt_io_failed(rt, 0, x->peer, verb(x));
    *moved |= x->done == x->total;
    return RT_OK;
}

static int step_send(struct rt *rt, struct xfer *x, int *moved) {
    struct link *l = link_of(rt, x);
    TRY(l ? ring_send(rt, l, x, moved) : tcp_send(rt, x, moved));
    if (x->done == x->total) x->finished = 1;
    return RT_OK;
}

/* -- receiving ---------------------------------------------------------------------------- */

/* Payload words [lo, hi) arrived, at w (w[0] is word lo): the payload MAC of an authenticated
   frame, then the lanes with the add or the mean on arrival in one pass, or alone. */
static void absorb(struct rt *rt, struct xfer *x, const uint64_t *w, int64_t lo, int64_t hi) {
    const struct arrival *add = x->add;
    int64_t mid = lo;
    if (x->tagged) rt_payload_mac_update(x->mac, w, (size_t)(hi - lo) * 8);
    if (add && lo < add->words) {
        mid = hi < add->words ? hi : add->words;
        const uint64_t *payload = x->buf + H;
        const uint64_t *a = add->a == payload ? w : add->a + lo, *b = add->b == payload ? w : add->b + lo;
        rt->added_bad |= (int)(add->count >= 0
                                   ? alphac_mean_lanes(add->dst + lo, w, mid - lo, lo % LANES, x->lanes, add->count)
                                   : alphac_add_lanes(add->dst + lo, a, b, w, mid - lo, lo % LANES, x->lanes));
    }
    rt_lanes_at(w + (mid - lo), mid, hi, x->lanes);
}

/* Bytes [x->done, x->done + n) of the frame arrived at `at`: in buf itself (TCP), or in the
   ring (shared memory, whole words), where header and trailer are copied into buf and
   payload words too unless added on arrival. Every payload word complete now is absorbed
   (x->hashed counts them); then the header or the trailer is checked. */
static int arrived(struct rt *rt, struct xfer *x, const unsigned char *at, size_t n) {
    unsigned char *buf = (unsigned char *)x->buf;
    size_t from = x->done, to = from + n, pay_lo = H * 8, pay_hi = (size_t)(H + x->len) * 8;
    int in_ring = at != buf + from;
    int64_t lo = x->hashed, hi = to > pay_lo ? (int64_t)((to < pay_hi ? to : pay_hi) - pay_lo) / 8 : 0;
    if (in_ring) {
        if (from < pay_lo) memcpy(buf + from, at, (to < pay_lo ? to : pay_lo) - from);
        size_t t = from > pay_hi ? from : pay_hi;
        if (to > t) memcpy(buf + t, at + (t - from), to - t);
    }
    if (lo < hi) {
        const uint64_t *w = in_ring ? (const uint64_t *)(at + (pay_lo + (size_t)lo * 8 - from)) : x->buf + H + lo;
        int64_t keep = x->add && x->add->words > lo ? x->add->words : lo; /* the words not added */
        if (in_ring && keep < hi) memcpy(x->buf + H + keep, w + (keep - lo), (size_t)(hi - keep) * 8);
        absorb(rt, x, w, lo, hi);
        x->hashed = hi;
    }
    x->done = to;
    if (!x->checked && x->done == H * 8) {
        uint64_t s = x->buf[H_SENDER]; /* a hello's sender: a peer still expected to connect? */
        x->expected = x->peer < 0 && s < (uint64_t)rt->n && rt->net.accept_from[s] && rt->net.fds[s] < 0;
        TRY(rt_check_header(rt, x));
        x->checked = 1;
        x->total = (size_t)(H + x->len + 1 + (int64_t)tags(x)) * 8;
    }
    if (x->checked && x->done == x->total) {
        TRY(rt_check_trailer(rt, x));
        x->finished = 1;
    }
    return RT_OK;
}

static int step_recv(struct rt *rt, struct xfer *x, size_t upto, int *moved) {
    size_t want = upto - x->done;
    struct link *l = link_of(rt, x);
    *moved = 0;
    if (want == 0) return RT_OK;
    if (l) {
        const unsigned char *at;
        size_t n = rt_ring_peek(l, &at);
        if (n > want) n = want;
        if (n > PIECE) n = PIECE;
        if (n == 0) return l->gone ? rt_io_failed(rt, 0, who(x), verb(x)) : RT_OK;
        int rc = arrived(rt, x, at, n);
        rt_ring_release(l, n);
        *moved = 1;
        return rc;
    }
    ssize_t r = recv(fd_of(rt, x), (char *)x->buf + x->done, want, MSG_DONTWAIT);
    if (r > 0) {
        *moved = 1;
        return arrived(rt, x, (const unsigned char *)x->buf + x->done, (size_t)r);
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return RT_OK;
    return rt_io_failed(rt, r, who(x), verb(x));
}

/* A combine in the exchange: its sums a chunk at a time, as far as its operands are
   written (the exchange's flag gathers what adds saw); done once all are and they are. */
static void step_local(struct rt *rt, struct xfer *x, int64_t i, int *moved) {
    const struct arrival *add = x[i].add;
    int64_t n = ready(x, i), lo = x[i].hashed, hi = n < add->words ? n : add->words;
    if (hi > lo + SEND_CHUNK_WORDS) hi = lo + SEND_CHUNK_WORDS;
    if (hi > lo) {
        rt->added_bad |= (int)alphac_add_range(add->dst, add->a, add->b, lo, hi);
        x[i].hashed = hi;
        *moved = 1;
    }
    if (x[i].hashed == add->words && n == INT64_MAX) x[i].finished = *moved = 1;
}

/* -- waiting ------------------------------------------------------------------------------ */

static int peer_gone(int fd) {
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0;
}

static int add_link(struct link **ls, int n, struct link *l) {
    for (int i = 0; i < n; i++)
        if (ls[i] == l) return n;
    ls[n] = l;
    return n + 1;
}

/* Until a pending frame can move, or the deadline (peer-timeout, naming the first frame
   still pending). A ring's peer that is gone is marked, so its frame refuses once the
   ring holds nothing more. */
static int wait_any(struct rt *rt, struct xfer *x, int64_t count) {
    struct pollfd fds[count];
    struct link *ls[count];
    int64_t peers[count];
    int nf = 0, nl = 0, first = -1;
    for (int64_t i = 0; i < count; i++) {
        if (x[i].finished || x[i].local || blocked(x, i) || (!x[i].send && x[i].done >= limit(x, i))) continue;
        if (first < 0) first = (int)i;
        struct link *l = link_of(rt, &x[i]);
        if (l) {
            int before = nl;
            nl = add_link(ls, nl, l);
            if (nl > before) peers[nl - 1] = x[i].peer;
        } else {
            fds[nf++] = (struct pollfd){fd_of(rt, &x[i]), (short)(x[i].send ? POLLOUT : POLLIN), 0};
        }
    }
    int64_t left = rt->net.deadline_ms - rt_now_ms();
    if (left <= 0) {
        errno = ETIMEDOUT;
        return rt_io_failed(rt, -1, who(&x[first]), verb(&x[first]));
    }
    if (nl == 0) {
        int r = poll(fds, (nfds_t)nf, (int)left);
        return r < 0 && errno != EINTR ? rt_io_failed(rt, -1, who(&x[first]), verb(&x[first])) : RT_OK;
    }
    if (nf > 0) { /* sockets and rings: poll the sockets, and the rings' peers for their end */
        for (int i = 0; i < nl; i++) fds[nf + i] = (struct pollfd){rt->net.fds[peers[i]], POLLIN | POLLRDHUP, 0};
        poll(fds, (nfds_t)(nf + nl), left < MIXED_MS ? (int)left : MIXED_MS);
        for (int i = 0; i < nl; i++) ls[i]->gone |= fds[nf + i].revents != 0;
        return RT_OK;
    }
    if (rt_ring_wait(ls, nl, left < LIVENESS_MS ? left : LIVENESS_MS))
        for (int i = 0; i < nl; i++) ls[i]->gone |= peer_gone(rt->net.fds[peers[i]]);
    return RT_OK;
}

/* Send and receive every frame of x[0..count) at once; the first refusal ends it. */
int rt_exchange(struct rt *rt, struct xfer *x, int64_t count) {
    rt_start_io(rt);
    rt->added_bad = 0; /* what the adds on arrival of this exchange saw */
    if (rt->auth.key) { /* each frame its own payload MAC */
        TRY(rt_payload_macs(rt, count));
        for (int64_t i = 0; i < count; i++) x[i].mac = rt->auth.macs[i];
    }
    for (int64_t i = 0; i < count; i++) start(rt, &x[i]);
    for (;;) {
        int pending = 0, moved = 0;
        for (int64_t i = 0; i < count; i++) {
            struct link *l = link_of(rt, &x[i]);
            if (l) rt_ring_look(l);
        }
        for (int64_t i = 0; i < count; i++) {
            if (x[i].finished || blocked(x, i)) continue;
            int m = 0;
            if (x[i].local) step_local(rt, x, i, &m);
            else TRY(x[i].send ? step_send(rt, &x[i], &m) : step_recv(rt, &x[i], limit(x, i), &m));
            if (x[i].finished && x[i].then) TRY(x[i].then(rt, &x[i]));
            moved |= m;
            pending |= !x[i].finished;
        }
        if (!pending) {
            for (int64_t i = 0; i < count; i++) pending |= !x[i].finished;
            if (!pending) return RT_OK;
        }
        if (!moved) TRY(wait_any(rt, x, count));
    }
}

int rt_send_frame(struct rt *rt, int64_t peer, uint64_t kind, uint64_t version, uint64_t step,
                  uint64_t *buf, int64_t len, int reuse) {
    struct xfer x = {.peer = peer, .send = 1, .kind = kind, .version = version, .step = step, .buf = buf,
                     .len = len, .reuse = reuse};
    return rt_exchange(rt, &x, 1);
}

/* Read a frame into buf and check it (rt_check_header, rt_check_trailer): from `peer`, or
   for peer -1 a hello on fd from whichever expected owner it names (*sender). With `add`,
   the payload is added as it arrives; those sums are used only if the checksum holds,
   since a failing check refuses here. */
int rt_recv_frame(struct rt *rt, int fd, int64_t peer, uint64_t kind, uint64_t version,
                  uint64_t step, uint64_t *buf, int64_t len, const struct arrival *add,
                  int64_t *sender) {
    struct xfer x = {.peer = peer, .fd = fd, .kind = kind, .version = version, .step = step, .buf = buf,
                     .len = len, .add = add};
    TRY(rt_exchange(rt, &x, 1));
    if (sender) *sender = x.from;
    return RT_OK;
}
