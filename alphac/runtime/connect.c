/* Connection setup: the higher-indexed owner of each pair connects to the lower one and
   sends a hello; the lower one accepts and reads it. */
#include "rt.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Listen if a higher owner talks to this one; connect (retrying every 10 ms until the
   deadline) to every lower peer in ascending order and send hello; accept and check
   every higher peer's hello, whose sender word identifies the connection. */
int rt_connect(struct rt *rt) {
    long long me = (long long)rt->owner;
    int64_t deadline = now_ms() + rt->timeout_ms;
    const uint64_t *peers = img_sec(rt, SEC_PEERS) + img_mine(rt, SEC_PEER_START);
    int64_t count = img_mine(rt, SEC_PEER_COUNT), nacc = 0;
    for (int64_t j = 0; j < count; j++)
        if ((int64_t)peers[j] > rt->owner) {
            rt->accept_from[peers[j]] = 1;
            nacc++;
        }
    int lfd = -1;
    if (nacc > 0) {
        struct endpoint *e = &rt->ep[rt->owner];
        int one = 1;
        lfd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd >= 0) setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&e->addr, e->addr_len) != 0 ||
            listen(lfd, rt->n > 128 ? (int)rt->n : 128) != 0) /* the hub of a large star */
            return rt_fail(rt, RT_IO_ERROR, "owner %lld cannot listen on %s port %d (errno %d: %s)", me,
                           e->host, e->port, errno, strerror(errno));
        rt_sockopts(rt, lfd); /* SO_RCVTIMEO bounds accept(2) too */
    }
    for (int64_t j = 0; j < count; j++) {
        int64_t p = (int64_t)peers[j];
        if (p >= rt->owner) continue; /* higher peers connect here; a slice names this owner */
        struct endpoint *e = &rt->ep[p];
        int fd;
        for (;;) {
            fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && connect(fd, (struct sockaddr *)&e->addr, e->addr_len) == 0) break;
            if (fd >= 0) close(fd);
            if (now_ms() >= deadline)
                return rt_fail(rt, RT_CONNECT_TIMEOUT, "owner %lld could not connect to owner %lld (port %d) "
                               "within %lld ms", me, (long long)p, e->port, (long long)rt->timeout_ms);
            struct timespec pause = {0, 10 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        rt_sockopts(rt, fd);
        rt->fds[p] = fd;
        TRY(rt_send_frame(rt, p, KIND_HELLO, 0, 0, rt->small, 0, 0));
    }
    for (int64_t j = 0; j < nacc; j++) {
        int64_t left = deadline - now_ms();
        struct pollfd pfd = {lfd, POLLIN, 0};
        if (poll(&pfd, 1, left < 0 ? 0 : (int)left) <= 0)
            return rt_fail(rt, RT_CONNECT_TIMEOUT, "owner %lld: %lld of %lld peers did not connect within %lld ms",
                           me, (long long)(nacc - j), (long long)nacc, (long long)rt->timeout_ms);
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) return rt_fail(rt, RT_IO_ERROR, "owner %lld: accepting a peer's connection failed", me);
        rt_sockopts(rt, fd);
        int64_t sender;
        int rc = rt_recv_frame(rt, fd, -1, KIND_HELLO, 0, 0, rt->small, 0, NULL, &sender);
        if (rc) {
            close(fd);
            return rc;
        }
        rt->fds[sender] = fd;
    }
    if (lfd >= 0) close(lfd);
    return RT_OK;
}

/* No connection yet (-1 for every owner) and no hello expected. */
int rt_alloc_peers(struct rt *rt) {
    int rc;
    rt->fds = rt_alloc_words(rt, (rt->n * (int64_t)sizeof(int) + 7) / 8, &rc);
    TRY(rc);
    for (int64_t j = 0; j < rt->n; j++) rt->fds[j] = -1;
    rt->accept_from = rt_alloc_words(rt, (rt->n + 7) / 8, &rc);
    return rc;
}

void rt_close_all(struct rt *rt) {
    for (int64_t j = 0; rt->fds && j < rt->n; j++)
        if (rt->fds[j] >= 0) {
            close(rt->fds[j]);
            rt->fds[j] = -1;
        }
}
