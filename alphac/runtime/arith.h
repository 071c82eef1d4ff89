/* The registers as the ops see them, and the arithmetic ops (arith.c) the interpreter runs. */
#ifndef ALPHAC_ARITH_H
#define ALPHAC_ARITH_H

#include "rt.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define H HEADER_WORDS
static inline uint64_t *reg(struct rt *rt, int64_t r) { return rt->store.regs + rt->store.reg_off[r]; }
static inline int64_t words(struct rt *rt, int64_t r) { return (int64_t)rt->store.reg_words[r]; }
static inline int corrupt(struct rt *rt, const char *what, long long value) {
    return rt_fail(rt, RT_CORRUPT_EXECUTABLE, "owner %lld: corrupt op table (%s %lld)", (long long)rt->owner,
                   what, value);
}
/* A sum register's leaf tags travel in frames as zeros (its slot may have held a selection). */
static inline void clear_tags(struct rt *rt, uint64_t *data, int64_t words) {
    memset(data + words, 0, (size_t)img_field(rt, IMG_TAG_WORDS) * 8);
}

int rt_op_local(struct rt *rt, uint64_t *dst, uint64_t u);
int rt_op_combine(struct rt *rt, int64_t dst, int64_t a, int64_t b, uint64_t u, int added);
int rt_op_sample_block(struct rt *rt, int64_t dst, int64_t first, int64_t count, uint64_t u);
int rt_op_update(struct rt *rt, int64_t a, uint64_t u, int meaned);
int rt_op_update_owned(struct rt *rt, int64_t a, uint64_t u);
int rt_op_evolve(struct rt *rt, uint64_t u);
void rt_record_version(struct rt *rt, uint64_t u);
uint64_t rt_read_version(const struct rt *rt, uint64_t v); /* what a fixed staleness reads */
void rt_ahead_join(struct rt *rt);
void rt_ahead_installed(struct rt *rt, uint64_t v);
/* A test build's (ALPHAC_FAULTS): the fault-injection delay, and the stale-replica mutant's
   kept replica; neither is compiled into another build. */
#ifdef ALPHAC_FAULTS
void rt_delay_before(const struct rt *rt, int64_t kind);
#define rt_keeps_replica(rt) (img_field(rt, IMG_STALE_REPLICA) != 0)
#else
#define rt_delay_before(rt, kind) ((void)(rt), (void)(kind))
#define rt_keeps_replica(rt) ((void)(rt), 0)
#endif

#endif
