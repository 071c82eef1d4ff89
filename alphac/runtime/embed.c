/* The runtime as a library: state made and inspected from outside `main`, so its parts can
   be driven in-process (tests/runtime build the runtime as a host shared library). */
#include "rt.h"

#include <stdlib.h>

/* A runtime over this library's image, with no peers connected; NULL if out of memory or
   the image is corrupt. */
struct rt *rt_new(void) {
    struct rt *rt = calloc(1, sizeof *rt);
    if (!rt || rt_init(rt, alphac_image) != RT_OK || rt_alloc_peers(rt) != RT_OK) {
        free(rt);
        return NULL;
    }
    return rt;
}

const char *rt_message(const struct rt *rt) { return rt->msg; }

/* This owner's staged output. */
struct staged *rt_output(struct rt *rt) { return &rt->pub.out; }

/* Attach `fd` as the connection to `peer` (-1: none), or expect its hello (accept). */
void rt_attach(struct rt *rt, int64_t peer, int fd, int accept) {
    rt->net.fds[peer] = fd;
    rt->net.accept_from[peer] = (unsigned char)accept;
}

/* How large struct xfer is, so a test can lay one out. */
size_t rt_xfer_bytes(void) { return sizeof(struct xfer); }

/* Whether frames to `peer` go through a shared-memory segment. */
int rt_link_shm(const struct rt *rt, int64_t peer) { return rt->net.links[peer].ctl != NULL; }

/* Write n raw bytes to peer's link, TCP or ring, as far as they fit now (a test plays a
   peer that dies in the middle of a frame); how many went. */
size_t rt_link_write(struct rt *rt, int64_t peer, const void *data, size_t n) {
    if (rt->net.links[peer].ctl) return rt_ring_put(&rt->net.links[peer], data, n);
    ssize_t r = send(rt->net.fds[peer], data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    return r > 0 ? (size_t)r : 0;
}

/* The endpoint given for `owner`, as `HOST:PORT`; -1 if none was. */
int rt_endpoint_text(const struct rt *rt, int64_t owner, char *buf, size_t size) {
    const struct endpoint *e = &rt->net.ep[owner];
    if (!e->listed) return -1;
    snprintf(buf, size, "%s:%d", e->host, e->port);
    return 0;
}

/* Where this owner's output goes (--out, or the file --out-dir names). */
const char *rt_out_path(const struct rt *rt) { return rt->pub.out_path; }
