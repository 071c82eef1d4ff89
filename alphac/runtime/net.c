/* Sockets: whole-buffer reads and writes bounded by the socket timeouts, and connection
   setup (the higher-indexed owner of a pair connects to the lower one and sends a hello). */
#include "rt.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int io_failed(struct rt *rt, ssize_t r, int64_t peer, const char *verb) {
    long long me = (long long)rt->owner;
    if (r == 0)
        return rt_fail(rt, RT_PEER_CLOSED, "owner %lld: owner %lld closed the connection", me, (long long)peer);
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return rt_fail(rt, RT_PEER_TIMEOUT, "owner %lld: %s owner %lld took longer than %lld ms", me, verb,
                       (long long)peer, (long long)rt->timeout_ms);
    return rt_fail(rt, RT_PEER_CLOSED, "owner %lld: %s owner %lld failed (errno %d)", me, verb,
                   (long long)peer, errno);
}

int rt_read_all(struct rt *rt, int fd, void *buf, size_t n, int64_t peer) {
    for (size_t done = 0; done < n;) {
        ssize_t r = recv(fd, (char *)buf + done, n - done, 0);
        if (r > 0) done += (size_t)r;
        else if (r != 0 && errno == EINTR) continue;
        else return io_failed(rt, r, peer, "reading from");
    }
    return RT_OK;
}

int rt_write_all(struct rt *rt, int fd, const void *buf, size_t n, int64_t peer) {
    for (size_t done = 0; done < n;) {
        ssize_t r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
        if (r > 0) done += (size_t)r;
        else if (r < 0 && errno == EINTR) continue;
        else return io_failed(rt, r < 0 ? r : -1, peer, "writing to");
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
    for (size_t done = 0; done < nbytes;) {
        ssize_t r = recv(fd, (char *)buf + done, nbytes - done, 0);
        if (r <= 0) {
            if (r != 0 && errno == EINTR) continue;
            return io_failed(rt, r, peer, "reading from");
        }
        done += (size_t)r;
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

void rt_sockopts(struct rt *rt, int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {(time_t)(rt->timeout_ms / 1000), (suseconds_t)(rt->timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

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
