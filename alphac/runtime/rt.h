/* The role runtime of every alphac executable: command line, peers, connections, frames,
   the op interpreter, replica comparison and publication, over the role image the build
   embeds (`alphac_image`, layout in alphac/image/format.py). It performs no floating-point
   arithmetic: every float operation is a call into the llvmlite kernels (dev.h).

   The state of one owner, part by concern, each part's type and the functions that own it
   declared in the concern's header: base.h (refusals, digests), frame.h (frames and their
   authentication), store.h (storage and registers), net.h (connections and transport),
   durable.h (outputs, checkpoints, restore), dev.h (kernels and device), engine.h (engine,
   command line, the op interpreter); manifest.h and arith.h, after this one, are the
   restore's and the ops' own. Headers include only headers before them in that order, and
   a file calls only files below it (tests/unit/test_structure_c.py). */
#ifndef ALPHAC_RT_H
#define ALPHAC_RT_H

#include "base.h"
#include "frame.h"
#include "store.h"
#include "net.h"
#include "durable.h"
#include "dev.h"
#include "engine.h"

struct rt {
    const uint64_t *img;
    int64_t owner, pos, n, k, m, s;
    uint64_t protocol;
    uint64_t run_id;       /* --run-id, else the image's varied by a resumed run's: hellos carry it */
    int64_t updates;
    int64_t start;         /* the version the run starts from: 0, or a resumed checkpoint's */
    uint64_t rate;
    uint64_t *small;                  /* hello, prepared and publish frames (max payload) */
    int added_bad;                    /* the last receive that added on arrival saw a bad word */
    struct rt_auth auth;
    struct rt_store store;
    struct rt_net net;
    struct rt_pub pub;
    struct ckpt ck;
    struct rt_dev dev;
    struct rt_cli cli;
    int code;
    char msg[1024];
};

/* -- the role image -------------------------------------------------------------------- */
static inline uint64_t img_field(const struct rt *rt, int field) { return rt->img[field]; }
static inline const uint64_t *img_sec(const struct rt *rt, int s) {
    return rt->img + rt->img[IMG_SECTIONS + 2 * s];
}
static inline uint64_t img_count(const struct rt *rt, int s) { return rt->img[IMG_SECTIONS + 2 * s + 1]; }
static inline const char *img_text(const struct rt *rt, int field) {
    return (const char *)img_sec(rt, SEC_TEXT) + rt->img[field];
}
/* this owner's entry of a per-role-owner table */
static inline int64_t img_mine(const struct rt *rt, int s) { return (int64_t)img_sec(rt, s)[rt->pos]; }

#endif
