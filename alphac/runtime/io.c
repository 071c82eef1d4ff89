/* Deadlines and socket refusals: I/O is bounded by a deadline (rt->net.deadline_ms: one
   frame's or exchange's, or the whole connect phase's), never by a per-read timeout, so a
   peer that trickles bytes is refused on time (rt_exchange, xfer.c, does the moving). A
   closed or failed connection is peer-closed, a missed deadline peer-timeout. */
#include "rt.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>

int64_t rt_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rt_start_io(struct rt *rt) {
    if (!rt->net.in_connect) rt->net.deadline_ms = rt_now_ms() + rt->net.timeout_ms;
}

int rt_io_failed(struct rt *rt, ssize_t r, int64_t peer, const char *verb) {
    long long me = (long long)rt->owner;
    if (r == 0)
        return rt_fail(rt, RT_PEER_CLOSED, "owner %lld: owner %lld closed the connection", me, (long long)peer);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT)
        return rt_fail(rt, RT_PEER_TIMEOUT, "owner %lld: %s owner %lld took longer than %lld ms", me, verb,
                       (long long)peer, (long long)rt->net.timeout_ms);
    return rt_fail(rt, RT_PEER_CLOSED, "owner %lld: %s owner %lld failed (errno %d)", me, verb,
                   (long long)peer, errno);
}

void rt_sockopts(struct rt *rt, int fd) {
    (void)rt;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
