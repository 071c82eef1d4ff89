/* The runtime as a library: state made and inspected from outside `main`, so its parts can
   be driven in-process (tests/runtime build the runtime as a host shared library). */
#include "rt.h"

#include <stdlib.h>

/* A runtime over this library's image, with no peers connected; NULL if out of memory or
   the image is corrupt. */
struct rt *rt_new(void) {
    struct rt *rt = calloc(1, sizeof *rt);
    if (!rt || rt_init(rt, alphac_image) != RT_OK) {
        free(rt);
        return NULL;
    }
    rt->fds = malloc(sizeof(int) * (size_t)(rt->n > 0 ? rt->n : 1));
    rt->accept_from = calloc((size_t)(rt->n > 0 ? rt->n : 1), 1);
    if (!rt->fds || !rt->accept_from) return NULL;
    for (int64_t j = 0; j < rt->n; j++) rt->fds[j] = -1;
    return rt;
}

const char *rt_message(const struct rt *rt) { return rt->msg; }

/* Attach `fd` as the connection to `peer` (-1: none), or expect its hello (accept). */
void rt_attach(struct rt *rt, int64_t peer, int fd, int accept) {
    rt->fds[peer] = fd;
    rt->accept_from[peer] = (unsigned char)accept;
}
