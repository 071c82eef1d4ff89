/* Socket I/O: whole-buffer reads and writes bounded by the socket timeouts; a closed or
   failed connection is peer-closed, a timeout peer-timeout. */
#include "rt.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/time.h>

int rt_io_failed(struct rt *rt, ssize_t r, int64_t peer, const char *verb) {
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
        else return rt_io_failed(rt, r, peer, "reading from");
    }
    return RT_OK;
}

int rt_write_all(struct rt *rt, int fd, const void *buf, size_t n, int64_t peer) {
    for (size_t done = 0; done < n;) {
        ssize_t r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
        if (r > 0) done += (size_t)r;
        else if (r < 0 && errno == EINTR) continue;
        else return rt_io_failed(rt, r < 0 ? r : -1, peer, "writing to");
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
