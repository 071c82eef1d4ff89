/* Socket I/O: whole-buffer reads and writes bounded by a deadline (rt->deadline_ms: one
   frame's, or the whole connect phase's), never by a per-read timeout, so a peer that
   trickles bytes is refused on time. A closed or failed connection is peer-closed, a
   missed deadline peer-timeout. */
#include "rt.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <time.h>

int64_t rt_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rt_start_io(struct rt *rt) {
    if (!rt->in_connect) rt->deadline_ms = rt_now_ms() + rt->timeout_ms;
}

int rt_io_failed(struct rt *rt, ssize_t r, int64_t peer, const char *verb) {
    long long me = (long long)rt->owner;
    if (r == 0)
        return rt_fail(rt, RT_PEER_CLOSED, "owner %lld: owner %lld closed the connection", me, (long long)peer);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT)
        return rt_fail(rt, RT_PEER_TIMEOUT, "owner %lld: %s owner %lld took longer than %lld ms", me, verb,
                       (long long)peer, (long long)rt->timeout_ms);
    return rt_fail(rt, RT_PEER_CLOSED, "owner %lld: %s owner %lld failed (errno %d)", me, verb,
                   (long long)peer, errno);
}

/* Wait until fd is ready for `events` or the deadline passes (peer-timeout). */
static int ready(struct rt *rt, int fd, short events, int64_t peer, const char *verb) {
    for (;;) {
        int64_t left = rt->deadline_ms - rt_now_ms();
        struct pollfd p = {fd, events, 0};
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r > 0) return RT_OK;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return rt_io_failed(rt, -1, peer, verb);
        errno = ETIMEDOUT;
        return rt_io_failed(rt, -1, peer, verb);
    }
}

/* One recv(2) of at most n bytes, after waiting for data; the count, or a refusal. */
int rt_receive(struct rt *rt, int fd, char *buf, size_t n, int64_t peer, size_t *got) {
    for (;;) {
        TRY(ready(rt, fd, POLLIN, peer, "reading from"));
        ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);
        if (r > 0) {
            *got = (size_t)r;
            return RT_OK;
        }
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        return rt_io_failed(rt, r, peer, "reading from");
    }
}

int rt_read_all(struct rt *rt, int fd, void *buf, size_t n, int64_t peer) {
    for (size_t done = 0, got; done < n; done += got) TRY(rt_receive(rt, fd, (char *)buf + done, n - done, peer, &got));
    return RT_OK;
}

int rt_write_all(struct rt *rt, int fd, const void *buf, size_t n, int64_t peer) {
    for (size_t done = 0; done < n;) {
        TRY(ready(rt, fd, POLLOUT, peer, "writing to"));
        ssize_t r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) done += (size_t)r;
        else if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        else return rt_io_failed(rt, r < 0 ? r : -1, peer, "writing to");
    }
    return RT_OK;
}

void rt_sockopts(struct rt *rt, int fd) {
    (void)rt;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
