/* The device: the learner's kernels (llvmlite, alphac/codegen), every float operation of an
   executable, and an SM86 executable's device side (device/cuda.c) with its --gpu. */
#ifndef ALPHAC_DEV_H
#define ALPHAC_DEV_H

#include "base.h"

struct rt_dev {
    const char *gpu; /* --gpu UUID (SM86 executables) */
};

/* -- the kernels ----------------------------------------------------------------------- */
extern const uint64_t alphac_image[];
extern int64_t alphac_contribution(const void *params, const void *sample, void *out, int64_t *fail);
extern int64_t alphac_update(void *params, void *state, void *mean, const void *rate, int64_t *fail);
extern const char *const alphac_contribution_labels[];
extern int64_t alphac_contribution_lanes(const void *params, const void *rows, const void *acc, void *out);
extern const int64_t alphac_contribution_lanes_width; /* out <- acc + _width samples' in order (lanes.py) */
extern const char *const alphac_update_labels[];
extern int64_t alphac_update_owner;
extern int64_t alphac_local_first(void *acc, int64_t k);
extern int64_t alphac_local_add(void *acc, const void *c, int64_t k);
extern int64_t alphac_add_range(void *dst, const void *a, const void *b, int64_t lo, int64_t hi);
extern int64_t alphac_add_lanes(void *dst, const void *a, const void *b, const void *h, int64_t n,
                                int64_t phase, uint64_t *lanes);
extern int64_t alphac_mean_lanes(void *dst, const void *src, int64_t n, int64_t phase, uint64_t *lanes,
                                 int64_t count);
extern int64_t alphac_first_nonfinite(const void *p, int64_t lo, int64_t hi);
extern int64_t alphac_mean(void *g, int64_t count, int64_t k);
extern int64_t alphac_mean_owned(void *mean, const void *src, int64_t count, int64_t at, int64_t first,
                                 int64_t step, int64_t cnt, int64_t sliced);
extern int64_t alphac_delta(void *d, const void *x, const void *v, int64_t count, int64_t k);
extern int64_t alphac_outer_momentum(void *x, void *b, const void *v, const void *mean, const void *rate,
                                     const void *momentum, int64_t k);

/* -- device/cuda.c: SM86 executables only. Weak: in a CPU executable they are null, and
   every caller tests them first. ------------------------------------------------------- */
int rt_dev_open(struct rt *rt) __attribute__((weak));
int rt_dev_local(struct rt *rt, uint64_t *acc, uint64_t u) __attribute__((weak));
int rt_dev_update(struct rt *rt, const uint64_t *mean, uint64_t u) __attribute__((weak));
int rt_dev_capture(struct rt *rt) __attribute__((weak));
int rt_dev_upload(struct rt *rt, uint64_t mask, const uint64_t *params) __attribute__((weak));

#endif
