/* Connection setup: the higher-indexed owner of each pair connects to the lower one and
   sends a hello; the lower one accepts, reads it and replies with its own. Then the pair
   agrees on its transport (transport.c). */
#include "rt.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The hello payload: this run's update count and this owner's nonce of the connection. */
static int send_hello(struct rt *rt, int64_t peer) {
    uint64_t *p = rt->small + HEADER_WORDS;
    p[0] = (uint64_t)rt->updates;
    p[1] = (uint64_t)rt->start;
    p[2] = rt->run_id;
    if (rt->auth.key) {
        TRY(rt_nonce(rt, rt->auth.sessions[peer].nonce));
        p[3] = rt->auth.sessions[peer].nonce[0];
        p[4] = rt->auth.sessions[peer].nonce[1];
    } else {
        p[3] = p[4] = 0;
    }
    return rt_send_frame(rt, peer, KIND_HELLO, 0, 0, rt->small, HELLO_WORDS, 0);
}

/* A received hello (in rt->small) from `sender`: its update count must be this owner's. */
static int check_hello(struct rt *rt, int64_t sender) {
    const uint64_t *p = rt->small + HEADER_WORDS;
    if (p[0] != (uint64_t)rt->updates)
        return rt_fail(rt, RT_FRAME_PROTOCOL, "owner %lld: owner %lld runs %llu updates, this owner %lld "
                       "(another --updates)", (long long)rt->owner, (long long)sender,
                       (unsigned long long)p[0], (long long)rt->updates);
    if (p[1] != (uint64_t)rt->start)
        return rt_fail(rt, RT_FRAME_PROTOCOL, "owner %lld: owner %lld starts from version %llu, this owner %lld "
                       "(another --resume)", (long long)rt->owner, (long long)sender, (unsigned long long)p[1],
                       (long long)rt->start);
    if (p[2] != rt->run_id)
        return rt_fail(rt, RT_FRAME_PROTOCOL, "owner %lld: owner %lld runs as run %016llx, this owner %016llx "
                       "(another --run-id)", (long long)rt->owner, (long long)sender, (unsigned long long)p[2],
                       (unsigned long long)rt->run_id);
    return RT_OK;
}

/* In an authenticated run, once both hellos of a connection are through, its session key
   from both nonces (`accepted`: this owner accepted the connection). */
static void derive(struct rt *rt, int64_t sender, const uint64_t theirs[2], int accepted) {
    if (!rt->auth.key) return;
    const uint64_t *mine = rt->auth.sessions[sender].nonce;
    if (accepted)
        rt_session_key(rt, sender, theirs, mine, sender, rt->owner);
    else
        rt_session_key(rt, sender, mine, theirs, rt->owner, sender);
}

/* Whether `fd` is connected to itself. A dial retried at a port in the ephemeral range on
   which nobody listens yet can be given that very port as its source, and TCP's simultaneous
   open then connects the socket to itself: the owner would read its own hello back. */
int rt_self_connected(int fd) {
    struct sockaddr_storage mine, theirs;
    socklen_t ml = sizeof mine, tl = sizeof theirs;
    if (getsockname(fd, (struct sockaddr *)&mine, &ml) != 0 || getpeername(fd, (struct sockaddr *)&theirs, &tl) != 0)
        return 0;
    return ml == tl && memcmp(&mine, &theirs, ml) == 0;
}

/* connect(2) to `e` within the phase's deadline, retrying every 10 ms while it is refused
   (or while the connection it makes is to itself). */
static int dial(struct rt *rt, int64_t p, int *out) {
    struct endpoint *e = &rt->net.ep[p];
    for (;;) {
        int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return rt_fail(rt, RT_IO_ERROR, "owner %lld: no socket (%s)", (long long)rt->owner, strerror(errno));
        int err = connect(fd, (struct sockaddr *)&e->addr, e->addr_len) == 0 ? 0 : errno;
        if (err == EINPROGRESS) {
            int64_t left = rt->net.deadline_ms - rt_now_ms();
            struct pollfd pfd = {fd, POLLOUT, 0};
            socklen_t len = sizeof err;
            err = poll(&pfd, 1, left > 0 ? (int)left : 0) == 1 &&
                          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 ? err : ETIMEDOUT;
        }
        if (err == 0 && !rt_self_connected(fd)) {
            *out = fd;
            return RT_OK;
        }
        close(fd);
        if (rt_now_ms() >= rt->net.deadline_ms)
            return rt_fail(rt, RT_CONNECT_TIMEOUT, "owner %lld could not connect to owner %lld (port %d) "
                           "within %lld ms", (long long)rt->owner, (long long)p, e->port,
                           (long long)rt->net.timeout_ms);
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

static int setup(struct rt *rt) {
    long long me = (long long)rt->owner;
    const uint64_t *peers = img_sec(rt, SEC_PEERS) + img_mine(rt, SEC_PEER_START);
    int64_t count = img_mine(rt, SEC_PEER_COUNT), nacc = 0;
    for (int64_t j = 0; j < count; j++)
        if ((int64_t)peers[j] > rt->owner) {
            rt->net.accept_from[peers[j]] = 1;
            nacc++;
        }
    int lfd = -1;
    if (nacc > 0) {
        struct endpoint *e = &rt->net.ep[rt->owner];
        int one = 1;
        lfd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (lfd >= 0) setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        /* A peer's dial that connected to itself holds this port until it sees so and closes
           (rt_self_connected): a port in use is tried again for a second. */
        int bound = 0;
        if (lfd >= 0) {
            int64_t until = rt_now_ms() + 1000;
            while (!(bound = bind(lfd, (struct sockaddr *)&e->addr, e->addr_len) == 0) && errno == EADDRINUSE &&
                   rt_now_ms() < until && rt_now_ms() < rt->net.deadline_ms) {
                struct timespec pause = {0, 10 * 1000 * 1000};
                nanosleep(&pause, NULL);
            }
        }
        if (!bound || listen(lfd, rt->n > 128 ? (int)rt->n : 128) != 0) /* the hub of a large star */
            return rt_fail(rt, RT_IO_ERROR, "owner %lld cannot listen on %s port %d (errno %d: %s)", me,
                           e->host, e->port, errno, strerror(errno));
    }
    for (int64_t j = 0; j < count; j++) {
        int64_t p = (int64_t)peers[j], sender;
        if (p >= rt->owner) continue; /* higher peers connect here */
        TRY(dial(rt, p, &rt->net.fds[p]));
        rt_sockopts(rt, rt->net.fds[p]);
        TRY(send_hello(rt, p));
        TRY(rt_recv_frame(rt, rt->net.fds[p], p, KIND_HELLO, 0, 0, rt->small, HELLO_WORDS, NULL, &sender));
        TRY(check_hello(rt, p));
        derive(rt, p, rt->small + HEADER_WORDS + 3, 0);
        TRY(rt_transport(rt, p, 1));
    }
    for (int64_t j = 0; j < nacc; j++) {
        int64_t left = rt->net.deadline_ms - rt_now_ms();
        struct pollfd pfd = {lfd, POLLIN, 0};
        if (poll(&pfd, 1, left < 0 ? 0 : (int)left) <= 0)
            return rt_fail(rt, RT_CONNECT_TIMEOUT, "owner %lld: %lld of %lld peers did not connect within %lld ms",
                           me, (long long)(nacc - j), (long long)nacc, (long long)rt->net.timeout_ms);
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return rt_fail(rt, RT_IO_ERROR, "owner %lld: accepting a peer's connection failed", me);
        rt_sockopts(rt, fd);
        int64_t sender;
        int rc = rt_recv_frame(rt, fd, -1, KIND_HELLO, 0, 0, rt->small, HELLO_WORDS, NULL, &sender);
        if (rc) {
            close(fd);
            return rc;
        }
        rt->net.fds[sender] = fd;
        uint64_t theirs[2] = {rt->small[HEADER_WORDS + 3], rt->small[HEADER_WORDS + 4]};
        TRY(check_hello(rt, sender));
        TRY(send_hello(rt, sender));
        derive(rt, sender, theirs, 1);
        TRY(rt_transport(rt, sender, 0));
    }
    if (lfd >= 0) close(lfd);
    return RT_OK;
}

/* Listen if a higher owner talks to this one; connect (retrying every 10 ms) to every lower
   peer in ascending order, send hello and read its reply; accept every higher peer, read
   its hello (whose sender word identifies the connection) and reply. One deadline bounds
   the whole phase. */
int rt_connect(struct rt *rt) {
    rt->net.in_connect = 1;
    rt->net.deadline_ms = rt_now_ms() + rt->net.timeout_ms;
    int rc = setup(rt);
    rt->net.in_connect = 0;
    return rc;
}

/* No connection yet (-1 for every owner), no hello expected, every link TCP, and the
   buffer of the hello, transport, "prepared" and verdict frames. */
int rt_alloc_peers(struct rt *rt) {
    int rc;
    rt->net.fds = rt_alloc_words(rt, (rt->n * (int64_t)sizeof(int) + 7) / 8, &rc);
    TRY(rc);
    rt->net.links = rt_alloc_words(rt, (rt->n * (int64_t)sizeof(struct link) + 7) / 8, &rc);
    TRY(rc);
    for (int64_t j = 0; j < rt->n; j++) rt->net.fds[j] = -1;
    rt->net.accept_from = rt_alloc_words(rt, (rt->n + 7) / 8, &rc);
    TRY(rc);
    rt->small = rt_alloc_words(rt, HEADER_WORDS + (int64_t)img_field(rt, IMG_SMALL_PAYLOAD) + 1 + TAG_WORDS, &rc);
    return rc;
}

void rt_close_all(struct rt *rt) {
    for (int64_t j = 0; rt->net.fds && j < rt->n; j++) {
        if (rt->net.fds[j] >= 0) {
            close(rt->net.fds[j]);
            rt->net.fds[j] = -1;
        }
        rt_shm_unmap(&rt->net.links[j]);
    }
}
