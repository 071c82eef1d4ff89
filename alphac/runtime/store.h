/* Storage and registers: the learner's compact storage (which words this owner holds, and
   where: store.c), its counted buffers and the --stats file (mem.c), the register pool, the
   read replica and the digest every owner compares. */
#ifndef ALPHAC_STORE_H
#define ALPHAC_STORE_H

#include "base.h"

#include <pthread.h>

/* The learner buffers' bytes by category (MEM_*), now and at their highest, and the
   high-water mark of their sum (samples apart). */
struct rt_mem {
    int64_t current[MEM_KINDS], peak[MEM_KINDS];
    int64_t total, total_peak;
};

/* A local sum's outcome (arith.c): status 0 (every contribution finite and added), or the
   failed contribution's status and coordinate (sample `at`), or (status 0) the first
   non-finite sum's coordinate `bad` >= 0 after sample `at`. */
struct rt_local_outcome {
    int64_t status, fail, at, bad;
};

/* Under IMG_AHEAD = D, the contributions computed ahead by a producer thread (arith.c
   "The contributions computed ahead"): the local sums of up to D updates in D slots
   (sums NULL: no producer), each slot's version read and outcome; ready: the sums of
   updates below it are done; taken: the sums below it were taken; current: the version the
   parameters hold; reading, updating: which thread is on the parameters. */
struct rt_ahead {
    uint64_t *sums, *cbuf, *read;
    struct rt_local_outcome *outcome;
    int64_t depth;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t moved;
    int running, stop, reading, updating;
    uint64_t ready, taken, current;
};

struct rt_store {
    /* compact storage (alphac/image/image.py): kp parameter words, mp state words, the
       first `alike` of which every owner holds alike; kc coordinates of its own */
    uint64_t *params, *state, *replica, *cbuf;
    uint64_t *history;          /* fixed staleness S: version v (parameters or read replica) in slot v mod (S + 1) */
    uint64_t *history_versions; /* the version each replica slot holds */
    uint64_t *shared;           /* local steps: the shared version this round's own updates start from */
    uint64_t *outer;            /* local steps' outer momentum b */
    uint64_t *reads;            /* bounded staleness: the version each of this run's contributions read */
    int64_t kp, mp, alike, kc;
    struct rt_ahead ahead;
    uint64_t *regs;             /* the register pool: [header | payload | checksum | tag] each */
    const uint64_t *reg_off;    /* word offset of each register in regs (slots are shared) */
    const uint64_t *reg_words;  /* data words of each register */
    int64_t nregs;
    uint64_t digest;            /* rt_digest's */
    int replica_held;
    int64_t replica_version;
    int replica_installed;      /* a replica was installed in this run */
    struct rt_mem mem;
    int64_t rss_start_kb;       /* VmRSS before anything of the learner is allocated */
    const char *stats_path;     /* --stats FILE */
    int stats_fd;
};

/* -- mem.c ----------------------------------------------------------------------------- */
void *rt_buf_alloc(struct rt *rt, int kind, int64_t words, int *rc);
void rt_buf_free(struct rt *rt, int kind, void *p, int64_t words);
void rt_buf_hold(struct rt *rt, int kind, int64_t words);
void rt_copy_from_image(uint64_t *dst, const uint64_t *src, int64_t words);
int rt_open_stats(struct rt *rt);
int rt_write_stats(struct rt *rt, int code);
int rt_replica_history(struct rt *rt);

/* -- store.c: which words this owner holds, and where in its compact storage ----------- */
struct rt_coords { /* owner t's coordinates, ascending: `while (rt_next_coord(&it, &i))` */
    const uint64_t *run, *end;
    int64_t c;
};
struct rt_coords rt_coords_of(const struct rt *rt, int64_t t);
int rt_next_coord(struct rt_coords *it, int64_t *i);
int64_t rt_coords_move(const struct rt *rt, int64_t t, uint64_t *full, uint64_t *slice, int gather);
int64_t rt_owned_count(const struct rt *rt, int64_t t);   /* coordinates owner t holds */
int64_t rt_state_offset(const struct rt *rt, int64_t rank); /* of the rank-th non-shared word */
int64_t rt_slot(const struct rt *rt, int region, int64_t pos); /* where it keeps a word, or -1 */
int64_t rt_slot_span(const struct rt *rt, int region, int64_t pos, int64_t step, int64_t count, int64_t *slot);
typedef void (*rt_word_fn)(void *ctx, int64_t pos, int64_t slot);
void rt_each_held(const struct rt *rt, int region, rt_word_fn fn, void *ctx); /* ascending */
void rt_digest(struct rt *rt);
uint64_t rt_replica_versions(const struct rt *rt); /* S: versions kept, S + 1 slots of the history */
uint64_t *rt_version_slot(const struct rt *rt, uint64_t v);
uint64_t *rt_version_word(struct rt *rt, uint64_t v, int64_t pos); /* a checkpoint's history word */

#endif
