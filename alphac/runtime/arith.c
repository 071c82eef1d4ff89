/* The owner's buffers and the arithmetic ops the interpreter (ops.c) runs: the local sum,
   the combine, the sample tree, the mean and the update, an independent-state rule. Every
   float operation is a kernel call. */
#include "arith.h"

/* Every register's buffer inside the pool, and the words held and their initial values
   inside the learner and the image: an image built for another owner or corrupted on disk
   refuses by name instead of reaching outside its buffers. */
static int check_storage(struct rt *rt, int64_t pool) {
    int64_t tags = (int64_t)img_field(rt, IMG_TAG_WORDS);
    for (int64_t r = 0; r < rt->store.nregs; r++)
        if ((int64_t)rt->store.reg_off[r] + H + words(rt, r) + tags + 1 + TAG_WORDS > pool)
            return corrupt(rt, "register", (long long)r);
    int64_t init_p = img_mine(rt, SEC_INIT_PARAMS), init_s = img_mine(rt, SEC_INIT_STATE);
    if (rt->store.kp > rt->k || rt->store.mp > rt->m || rt->store.alike > rt->store.mp || rt->store.kc > rt->k ||
        init_p + rt->store.kp > (int64_t)img_count(rt, SEC_INITIAL) || rt->store.alike > init_s ||
        init_s + rt->store.mp - rt->store.alike > (int64_t)img_count(rt, SEC_INITIAL_STATE))
        return corrupt(rt, "storage of owner", (long long)rt->owner);
    return RT_OK;
}

/* This owner's buffers, compact (store.c): its parameter and state words with their initial
   values, the register pool (slots shared by registers whose lifetimes do not overlap), the
   contribution buffer when it has two or more samples; its samples are read in place, and
   the kernels' vector temporaries (their stack scratch) are counted as scratch. */
int rt_alloc(struct rt *rt) {
    int rc;
    int64_t share = img_mine(rt, SEC_SHARE), pool = img_mine(rt, SEC_REG_POOL);
    rt->store.nregs = img_mine(rt, SEC_REG_COUNT);
    rt->store.reg_words = img_sec(rt, SEC_REG_WORDS) + img_mine(rt, SEC_REG_START);
    rt->store.reg_off = img_sec(rt, SEC_REG_OFF) + img_mine(rt, SEC_REG_START);
    rt->store.kp = img_mine(rt, SEC_PARAMS_COUNT);
    rt->store.mp = img_mine(rt, SEC_STATE_COUNT);
    rt->store.alike = (int64_t)img_field(rt, IMG_STATE_ALIKE);
#ifndef ALPHAC_FAULTS
    /* three executed mutants compute in a test build only (docs/oracle.md): alphac builds no
       image that asks this runtime for one */
    if (img_field(rt, IMG_LEAF_MEAN) || img_field(rt, IMG_STALE_REPLICA) || img_mine(rt, SEC_MEAN_COUNT) > 0)
        return corrupt(rt, "executed mutant outside a test build at owner", (long long)rt->owner);
#endif
    rt->store.kc = rt_owned_count(rt, rt->owner);
    TRY(check_storage(rt, pool));
    rt->store.regs = rt_buf_alloc(rt, MEM_REGISTERS, pool, &rc);
    TRY(rc);
    rt->store.params = rt_buf_alloc(rt, MEM_PARAMETERS, rt->store.kp, &rc);
    TRY(rc);
    rt->store.state = rt_buf_alloc(rt, MEM_STATE, rt->store.mp, &rc);
    TRY(rc);
    rt_copy_from_image(rt->store.params, img_sec(rt, SEC_INITIAL) + img_mine(rt, SEC_INIT_PARAMS), rt->store.kp);
    rt_copy_from_image(rt->store.state, img_sec(rt, SEC_INITIAL_STATE), rt->store.alike);
    rt_copy_from_image(rt->store.state + rt->store.alike, img_sec(rt, SEC_INITIAL_STATE) + img_mine(rt, SEC_INIT_STATE),
                       rt->store.mp - rt->store.alike);
    /* fixed staleness S, replicated parameters: version v in slot v mod (S + 1) (ops.c: replicas) */
    int64_t stale = (int64_t)img_field(rt, IMG_STALENESS);
    /* (S = 1 with the contribution computed ahead: none, the thread reads the parameters
       themselves before update u changes them: run_update; unless a checkpoint holds
       version u - 1 or a resume restores it) */
    if (stale > 0 && !img_field(rt, IMG_PART_PARAMETERS) &&
        !(stale == 1 && img_field(rt, IMG_AHEAD) && !img_field(rt, IMG_CKPT_INTERVAL) && !rt->ck.resume)) {
        rt->store.history = rt_buf_alloc(rt, MEM_PARAMETERS, (stale + 1) * rt->store.kp, &rc);
        TRY(rc);
    }
    /* local steps: the shared version the owner's own updates start from (rt_record_version) */
    if (img_field(rt, IMG_LOCAL_STEPS)) {
        rt->store.shared = rt_buf_alloc(rt, MEM_PARAMETERS, rt->store.kp, &rc);
        TRY(rc);
    }
    if (img_field(rt, IMG_OUTER)) { /* its outer momentum b, from +0.0 (mapped zeroed) */
        rt->store.outer = rt_buf_alloc(rt, MEM_STATE, rt->store.kp, &rc);
        TRY(rc);
    }
    /* the contributions computed ahead: D sums, a contribution buffer, the thread's scratch */
    struct rt_ahead *a = &rt->store.ahead;
    if (img_field(rt, IMG_AHEAD) && share > 0 && !rt_dev_local) {
        a->depth = (int64_t)img_field(rt, IMG_AHEAD);
        a->sums = rt_buf_alloc(rt, MEM_SCRATCH, a->depth * rt->k, &rc);
        TRY(rc);
        if (share >= 2) a->cbuf = rt_buf_alloc(rt, MEM_SCRATCH, rt->k, &rc);
        TRY(rc);
        rt_buf_hold(rt, MEM_SCRATCH, (int64_t)img_field(rt, IMG_TEMPORARIES));
        a->read = rt_alloc_words(rt, a->depth, &rc);
        TRY(rc);
        a->outcome = rt_alloc_words(rt, (a->depth * (int64_t)sizeof *a->outcome + 7) / 8, &rc);
        TRY(rc);
    }
    if (img_field(rt, IMG_BOUND)) { /* the schedule: the version each contribution read */
        rt->store.reads = rt_buf_alloc(rt, MEM_SCRATCH, rt->updates, &rc);
        TRY(rc);
    }
    /* a mapped mean is selected into it; an independent-state rule runs in place */
    if ((share >= 2 || img_mine(rt, SEC_MEAN_COUNT) > 0) && !img_field(rt, IMG_REGION)) {
        rt->store.cbuf = rt_buf_alloc(rt, MEM_SCRATCH, rt->k, &rc);
        TRY(rc);
    }
    rt_buf_hold(rt, MEM_SAMPLES, share * rt->s);
    /* the programs' vector temporaries: stack scratch of the kernel that runs */
    rt_buf_hold(rt, MEM_SCRATCH, (int64_t)img_field(rt, IMG_TEMPORARIES));
    rt->pub.entries = rt_alloc_words(rt, rt->n * PREPARED_ENTRY_WORDS, &rc);
    return rc;
}

/* A non-finite WHAT coordinate (combine, delta, outer) at update u: refused by name. */
static int coordinate_refused(struct rt *rt, const char *what, int64_t coord, uint64_t u) {
    return rt_fail(rt, RT_NON_FINITE, "%s coordinate %lld at update %llu (owner %lld)", what, (long long)coord,
                   (unsigned long long)u, (long long)rt->owner);
}

/* The update kernel on this owner's parameters and state, reading `mean`. */
static int update_kernel(struct rt *rt, void *mean, uint64_t u) {
    int64_t fail = -1;
    int64_t status = alphac_update(rt->store.params, rt->store.state, mean, &rt->rate, &fail);
    return status ? rt_non_finite_statement(rt, alphac_update_labels, status, fail, u, "update", -1) : RT_OK;
}

static int mean_refused(struct rt *rt, int64_t coord, uint64_t u, uint64_t count) {
    return rt_fail(rt, RT_NON_FINITE, "mean coordinate %lld at update %llu (owner %lld, %llu samples)",
                   (long long)coord, (unsigned long long)u, (long long)rt->owner, (unsigned long long)count);
}

/* Version u as update u starts: a fixed staleness's history keeps it; local steps' shared version. */
void rt_record_version(struct rt *rt, uint64_t u) {
    size_t bytes = (size_t)rt->store.kp * 8;
    if (rt->store.shared) memcpy(rt->store.shared, rt->store.params, bytes);
    if (rt->store.history && !img_field(rt, IMG_PART_PARAMETERS)) memcpy(rt_version_slot(rt, u), rt->store.params, bytes);
}

/* Fixed staleness S: update v reads version max(v - S, 0), after a new contract's resume none
   before its start (its words, as before version 0 the initial words). */
uint64_t rt_read_version(const struct rt *rt, uint64_t v) {
    uint64_t stale = img_field(rt, IMG_STALENESS), read = v > stale ? v - stale : 0;
    return rt->ck.resumed && !rt->ck.history && read < (uint64_t)rt->start ? (uint64_t)rt->start : read;
}

/* What update u's contributions read: the read replica of partitioned parameters (ops.c); a
   fixed staleness's version rt_read_version(u) in the history; else this owner's, version u. */
static const uint64_t *read_params(struct rt *rt, uint64_t u) {
    if (img_field(rt, IMG_PART_PARAMETERS)) return rt->store.replica;
    /* S = 1 ahead without a history: update u's sum is computed from the parameters, version
       u - 1, before update u - 1's kernel changes them (params_enter waits for it) */
    if (!img_field(rt, IMG_STALENESS) || !rt->store.history) return rt->store.params;
    return rt_version_slot(rt, rt_read_version(rt, u));
}

/* Fault injection, in a test build only (ALPHAC_FAULTS, docs/runtime.md): with ALPHAC_DELAY_AT=KIND (an op
   kind's code) and ALPHAC_DELAY_MS=MS, an owner (every one, or only ALPHAC_DELAY_OWNER's) sleeps MS before
   every op of that kind (a kill's window; a contribution's, OP_LOCAL, where the contribution is computed:
   ahead, on its thread, before it picks the version it reads). */
#ifdef ALPHAC_FAULTS
void rt_delay_before(const struct rt *rt, int64_t kind) {
    const char *k = getenv("ALPHAC_DELAY_AT"), *d = getenv("ALPHAC_DELAY_MS"), *o = getenv("ALPHAC_DELAY_OWNER");
    int64_t ms = k && d && strtoll(k, NULL, 10) == kind ? strtoll(d, NULL, 10) : 0;
    if (o && *o && strtoll(o, NULL, 10) != rt->owner) ms = 0;
    if (ms > 0) nanosleep(&(struct timespec){(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L}, NULL);
}
#endif

/* acc <- the sum of this owner's share >= 1 contributions in sample order from +0.0: with a
   lanes kernel of width n (alphac/codegen/lanes.py), acc starts at +0.0 and each aligned
   group of n samples is added at once unless the kernel declines it; the rest one at a
   time, sample 0's straight into acc (+0.0 + c is c but for -0.0). It touches nothing of rt
   but reads (so a thread may run it: below): cbuf is its contribution buffer. */
static struct rt_local_outcome local_sum(const struct rt *rt, const uint64_t *params, uint64_t *acc, uint64_t *cbuf,
                                      int64_t share) {
    const uint64_t *rows = img_sec(rt, SEC_SAMPLES) + img_mine(rt, SEC_SAMPLE_ROW) * rt->s;
    int64_t n = alphac_contribution_lanes_width;
    struct rt_local_outcome out = {0, -1, 0, -1};
    if (n > 1 && share >= n) memset(acc, 0, (size_t)rt->k * 8);
    for (int64_t i = 0; i < share; i++) {
        if (n > 1 && i % n == 0 && i + n <= share && alphac_contribution_lanes(params, rows + i * rt->s, acc, cbuf) == 0) {
            memcpy(acc, cbuf, (size_t)rt->k * 8);
            i += n - 1;
            continue;
        }
        out.at = i;
        out.status = alphac_contribution(params, rows + i * rt->s, i == 0 ? acc : cbuf, &out.fail);
        if (out.status != 0) return out;
        out.bad = i == 0 ? alphac_local_first(acc, rt->k) : alphac_local_add(acc, cbuf, rt->k);
        if (out.bad >= 0) return out;
    }
    return out;
}

static int local_refused(struct rt *rt, struct rt_local_outcome o, uint64_t u) {
    if (o.status != 0) return rt_non_finite_statement(rt, alphac_contribution_labels, o.status, o.fail, u, "contribution", o.at);
    return o.bad >= 0 ? rt_local_refused(rt, o.bad, u, o.at) : RT_OK;
}

/* -- the contributions computed ahead (docs/runtime.md "The contributions computed ahead")
   Under IMG_AHEAD = D a producer thread computes the local sums of updates u, u + 1, ... into
   D slots, update w's once update w - D's was taken, while this thread combines and updates.
   Fixed staleness S (D = 1): version max(w - S, 0), a history slot, or for S = 1 the
   parameters, which update w - 1 changes only once that sum is done (params_enter).
   Bounded staleness S (D = S): the newest version (or installed read replica) when it
   starts, at least w - S, recorded; it and the update wait for each other on the
   parameters. The same kernels on the same words in the same order as in place. */
static void *producer(void *arg) {
    struct rt *rt = arg;
    struct rt_ahead *a = &rt->store.ahead;
    int bounded = img_field(rt, IMG_BOUND) > 0, part = (int)img_field(rt, IMG_PART_PARAMETERS);
    int locks = !part && (bounded || !rt->store.history); /* it reads the parameters themselves */
    pthread_mutex_lock(&a->lock);
    for (uint64_t w = a->ready; w < (uint64_t)rt->updates; w++) {
        while (!a->stop && w >= a->taken + (uint64_t)a->depth) pthread_cond_wait(&a->moved, &a->lock);
        if (a->stop) break;
        pthread_mutex_unlock(&a->lock);
        rt_delay_before(rt, OP_LOCAL);
        pthread_mutex_lock(&a->lock);
        while (locks && a->updating) pthread_cond_wait(&a->moved, &a->lock);
        uint64_t r = bounded ? a->current : w, slot = w % (uint64_t)a->depth;
        a->reading = locks;
        pthread_mutex_unlock(&a->lock);
        /* bounded: the parameters, or (partitioned) the newest read replica installed */
        const uint64_t *from = !bounded ? read_params(rt, w) : part ? rt_version_slot(rt, r) : rt->store.params;
        struct rt_local_outcome o = local_sum(rt, from, a->sums + slot * (uint64_t)rt->k, a->cbuf,
                                              img_mine(rt, SEC_SHARE));
        pthread_mutex_lock(&a->lock);
        a->outcome[slot] = o, a->read[slot] = r, a->reading = 0, a->ready = w + 1;
        pthread_cond_broadcast(&a->moved);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

static int producer_start(struct rt *rt, uint64_t u) {
    struct rt_ahead *a = &rt->store.ahead;
    pthread_attr_t attr;
    a->ready = a->taken = a->current = u;
    /* the kernels' vector temporaries are stack scratch */
    size_t stack = (size_t)img_field(rt, IMG_TEMPORARIES) * 8 + ((size_t)8 << 20);
    int err = pthread_mutex_init(&a->lock, NULL), attr_made = 0;
    if (!err) err = pthread_cond_init(&a->moved, NULL);
    if (!err) attr_made = !(err = pthread_attr_init(&attr));
    if (!err && !(err = pthread_attr_setstacksize(&attr, stack))) err = pthread_create(&a->thread, &attr, producer, rt);
    if (attr_made) pthread_attr_destroy(&attr);
    if (err) return rt_fail(rt, RT_IO_ERROR, "owner %lld: no thread for the contributions from update %llu: %s",
                            (long long)rt->owner, (unsigned long long)u, strerror(err));
    a->running = 1;
    return RT_OK;
}

/* Stop the producer and wait for it (at the end of the run, and on every path out: rt_run). */
void rt_ahead_join(struct rt *rt) {
    struct rt_ahead *a = &rt->store.ahead;
    if (!a->running) return;
    pthread_mutex_lock(&a->lock);
    a->stop = 1;
    pthread_cond_broadcast(&a->moved);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    a->running = 0;
}

/* Update u is about to change the parameters (params_enter), or has (params_leave): a
   producer reading them waits, and is waited for (fixed staleness 1: until update u + 1's
   sum, which reads version u, is done). */
static void params_enter(struct rt *rt, uint64_t u) {
    struct rt_ahead *a = &rt->store.ahead;
    if (!a->running || img_field(rt, IMG_PART_PARAMETERS) || (rt->store.history && !img_field(rt, IMG_BOUND))) return;
    pthread_mutex_lock(&a->lock);
    while (a->reading || (!img_field(rt, IMG_BOUND) && a->ready < u + 2 && u + 1 < (uint64_t)rt->updates))
        pthread_cond_wait(&a->moved, &a->lock);
    a->updating = 1;
    pthread_mutex_unlock(&a->lock);
}

static void now_current(struct rt *rt, uint64_t v) {
    struct rt_ahead *a = &rt->store.ahead;
    if (!a->running) return;
    pthread_mutex_lock(&a->lock);
    a->updating = 0, a->current = v;
    pthread_cond_broadcast(&a->moved);
    pthread_mutex_unlock(&a->lock);
}

static void params_leave(struct rt *rt, uint64_t u) {
    if (!img_field(rt, IMG_PART_PARAMETERS)) now_current(rt, u + 1);
}

/* Partitioned parameters under bounded staleness: the read replica of version v is
   installed, the newest a contribution computed ahead may read (ops.c). */
void rt_ahead_installed(struct rt *rt, uint64_t v) {
    if (img_field(rt, IMG_BOUND)) now_current(rt, v);
}

/* acc <- this owner's sum for update u, the producer's (started at the first) or computed
   here; *read <- the version it read. */
static int local_value(struct rt *rt, uint64_t *acc, int64_t share, uint64_t u, uint64_t *read) {
    struct rt_ahead *a = &rt->store.ahead;
    if (!a->sums) {
        rt_delay_before(rt, OP_LOCAL);
        return local_refused(rt, local_sum(rt, read_params(rt, u), acc, rt->store.cbuf, share), u);
    }
    if (!a->running) TRY(producer_start(rt, u));
    uint64_t slot = u % (uint64_t)a->depth;
    pthread_mutex_lock(&a->lock);
    while (a->ready <= u) pthread_cond_wait(&a->moved, &a->lock);
    struct rt_local_outcome o = a->outcome[slot];
    *read = a->read[slot];
    pthread_mutex_unlock(&a->lock);
    TRY(local_refused(rt, o, u));
    memcpy(acc, a->sums + slot * (uint64_t)rt->k, (size_t)rt->k * 8);
    pthread_mutex_lock(&a->lock);
    a->taken = u + 1;
    pthread_cond_broadcast(&a->moved);
    pthread_mutex_unlock(&a->lock);
    return RT_OK;
}

/* Local steps H (docs/runtime.md "Local steps"): from the shared version, this owner's H
   updates on its own samples alone (its ordered sum, its mean, the update kernel on its own
   parameters), then acc <- (its parameters - the shared version) * its share. */
static int local_steps(struct rt *rt, uint64_t *acc, int64_t share, uint64_t u) {
    for (uint64_t j = 0; j < img_field(rt, IMG_LOCAL_STEPS); j++) {
        rt_delay_before(rt, OP_LOCAL);
        TRY(local_refused(rt, local_sum(rt, rt->store.params, acc, rt->store.cbuf, share), u));
        int64_t bad = alphac_mean(acc, share, rt->k);
        if (bad >= 0) return mean_refused(rt, bad, u, (uint64_t)share);
        TRY(update_kernel(rt, acc, u));
    }
    int64_t bad = alphac_delta(acc, rt->store.params, rt->store.shared, share, rt->k);
    return bad < 0 ? RT_OK : coordinate_refused(rt, "delta", bad, u);
}

/* dst <- (sum of this owner's contributions in sample order from +0.0, its leaf count: the
   share, or an executed mutant's count); the unweighted-mean mutant (a test build) reports
   sum / share */
int rt_op_local(struct rt *rt, uint64_t *dst, uint64_t u) {
    int64_t k = rt->k, share = img_mine(rt, SEC_SHARE);
    uint64_t *acc = dst + H, read = u;
    if (share == 0) {
        rt_delay_before(rt, OP_LOCAL);
        memset(acc, 0, (size_t)k * 8);
    } else if (rt_dev_local) { /* SM86: on the GPU */
        rt_delay_before(rt, OP_LOCAL);
        TRY(rt_dev_local(rt, acc, u));
    } else if (img_field(rt, IMG_LOCAL_STEPS)) {
        TRY(local_steps(rt, acc, share, u));
    } else {
        TRY(local_value(rt, acc, share, u, &read));
    }
    if (rt->store.reads) rt->store.reads[u - (uint64_t)rt->start] = read;
    acc[k] = (uint64_t)img_mine(rt, SEC_LEAF_COUNT);
#ifdef ALPHAC_FAULTS
    if (share > 0 && img_field(rt, IMG_LEAF_MEAN)) {
        int64_t j = alphac_mean(acc, share, k);
        if (j >= 0) return mean_refused(rt, j, u, (uint64_t)share);
    }
#endif
    clear_tags(rt, acc, k + 1);
    return RT_OK;
}

/* dst <- a + b over the sums (left, then right), counts added. After the receive of a
   recv-add, which added on arrival (added = 1), only its flag is left to check, here,
   after that receive verified the frame's checksum, so refusals come in the order of
   receive-then-combine. */
int rt_op_combine(struct rt *rt, int64_t dst, int64_t a, int64_t b, uint64_t u, int added) {
    int64_t sums = words(rt, dst) - 1;
    uint64_t *d = reg(rt, dst) + H, *x = reg(rt, a) + H, *y = reg(rt, b) + H;
    int bad = added ? rt->added_bad : (int)alphac_add_range(d, x, y, 0, sums);
    /* x + y is non-finite whenever x or y is: the first bad sum is the coordinate (an
       exchange's flag is its every add's: this one's sums may all be finite) */
    int64_t at = bad ? alphac_first_nonfinite(d, 0, sums) : -1;
    if (at >= 0) return coordinate_refused(rt, "combine", at, u);
    d[sums] = x[sums] + y[sums];
    clear_tags(rt, d, sums + 1);
    return RT_OK;
}

/* -- the sample tree: a block of this owner's samples on a binary-counter stack ----------- */

/* Level j of the stack in register 0: k sums and a count. */
static uint64_t *level(struct rt *rt, int64_t j) { return reg(rt, 0) + H + j * (rt->k + 1); }

/* level j <- level j + level j+1 (left, then right), counts added; in place by the local
   add kernel (level j is finite: checked when made), twice as fast here as the combine
   kernel given its destination as an operand */
static int merge_levels(struct rt *rt, int64_t j, uint64_t u) {
    uint64_t *x = level(rt, j), *y = level(rt, j + 1);
    int64_t bad = alphac_local_add(x, y, rt->k);
    if (bad >= 0) return coordinate_refused(rt, "combine", bad, u);
    x[rt->k] += y[rt->k];
    return RT_OK;
}

/* dst <- the sample tree over this owner's samples first .. first+count-1, an aligned block
   of the global sample sequence, in tree order (docs/plan.md "The sample tree"): each
   sample's contribution is pushed as a level of count 1 (its words exactly); after the i-th
   sample the two top levels merge once per trailing zero of i + 1, forming the aligned
   subtrees; at the end the levels fold from the top, each right operand first, as the tree
   cut at N does. check_op has checked the range and that register 0 holds the stack. */
int rt_op_sample_block(struct rt *rt, int64_t dst, int64_t first, int64_t count, uint64_t u) {
    int64_t k = rt->k, row0 = img_mine(rt, SEC_SAMPLE_ROW), depth = 0;
    const uint64_t *params = read_params(rt, u);
    const uint64_t *samples = img_sec(rt, SEC_SAMPLES);
    for (int64_t i = 0; i < count; i++) {
        int64_t fail = -1, at = first + i;
        /* a slot the program never writes holds +0.0 in every level (zeroed registers, sums
           of +0.0 since), the oracle's +0.0 start */
        uint64_t *leaf = level(rt, depth++);
        int64_t status = alphac_contribution(params, samples + (row0 + at) * rt->s, leaf, &fail);
        if (status != 0)
            return rt_non_finite_statement(rt, alphac_contribution_labels, status, fail, u, "contribution", at);
        leaf[k] = 1;
        for (int64_t c = i + 1; (c & 1) == 0; c >>= 1, depth--) TRY(merge_levels(rt, depth - 2, u));
    }
    for (; depth > 1; depth--) TRY(merge_levels(rt, depth - 2, u));
    memcpy(reg(rt, dst) + H, level(rt, 0), (size_t)(k + 1) * 8);
    return RT_OK;
}

/* The update kernel on the mean; under local steps the outer update instead: the shared
   version plus the mean of the weighted deltas becomes the parameters. */
static int run_update(struct rt *rt, void *mean, uint64_t u) {
    if (rt_dev_update) return rt_dev_update(rt, mean, u);
    if (img_field(rt, IMG_LOCAL_STEPS)) { /* b := momentum * b + mean, v + rate * b; or v + mean */
        uint64_t *p = rt->store.params;
        int64_t bad = rt->store.outer ? alphac_outer_momentum(p, rt->store.outer, rt->store.shared, mean,
                                                              rt->img + IMG_OUTER_RATE, rt->img + IMG_OUTER_MOMENTUM, rt->k)
                      : alphac_add_range(p, rt->store.shared, mean, 0, rt->k) ? alphac_first_nonfinite(p, 0, rt->k)
                                                                               : -1;
        return bad < 0 ? RT_OK : coordinate_refused(rt, "outer", bad, u);
    }
    params_enter(rt, u);
    int rc = update_kernel(rt, mean, u);
    params_leave(rt, u);
    return rc;
}

/* The delivered sums the mean reads: register a's own, or, in a test build, when the image
   maps this owner's mean words (the deliver-to-next mutant), the sums it names, copied into
   cbuf (the word MEAN_ZERO names none: +0.0). Selection only: words are moved, never computed. */
static int mean_sums(struct rt *rt, int64_t a, uint64_t **sums) {
    uint64_t *p = reg(rt, a) + H;
    *sums = p;
#ifdef ALPHAC_FAULTS
    int64_t count = img_mine(rt, SEC_MEAN_COUNT), have = words(rt, a) - 1;
    const uint64_t *from = img_sec(rt, SEC_MEAN_FROM) + img_mine(rt, SEC_MEAN_START);
    if (count == 0) return RT_OK;
    if (count > rt->k) return corrupt(rt, "mean map", count);
    for (int64_t j = 0; j < count; j++) {
        if (from[j] != MEAN_ZERO && from[j] >= (uint64_t)have)
            return corrupt(rt, "mean source", (long long)from[j]);
        rt->store.cbuf[j] = from[j] == MEAN_ZERO ? 0 : p[from[j]];
    }
    *sums = rt->store.cbuf;
#else
    (void)a;
#endif
    return RT_OK;
}

/* mean <- total / count in place (in the register, or in cbuf when mapped), then the update
   kernel; unless the receive of a recv-update took the mean as the words arrived: then
   only its flag is left to check, as alphac_mean would rescan */
int rt_op_update(struct rt *rt, int64_t a, uint64_t u, int meaned) {
    uint64_t *g, count = reg(rt, a)[H + rt->k];
    TRY(mean_sums(rt, a, &g));
    int64_t j = !meaned ? alphac_mean(g, (int64_t)count, rt->k)
                : rt->added_bad ? alphac_first_nonfinite(reg(rt, a) + H, 0, rt->k) : -1;
    if (j >= 0) return mean_refused(rt, j, u, count);
    return run_update(rt, g, u);
}

/* The mean of this owner's coordinates, sum / count, in place in register a: its j-th word
   becomes the mean of the owner's j-th coordinate, read from the full vector (or, under
   gradient partitioning, from the slice, whose j-th word that coordinate's sum is); then
   the owned update kernel on the compact regions. */
int rt_op_update_owned(struct rt *rt, int64_t a, uint64_t u) {
    if (img_field(rt, IMG_PART_PARAMETERS) && rt->store.replica_held)
        return rt_fail(rt, RT_DATA_PARALLEL_REPLICA_RETAINED, "owner %lld: the read replica of version %lld "
                       "is still held at the update of version %llu", (long long)rt->owner,
                       (long long)rt->store.replica_version, (unsigned long long)u);
    uint64_t *p, count = reg(rt, a)[H + words(rt, a) - 1];
    TRY(mean_sums(rt, a, &p));
    int sliced = (int)img_field(rt, IMG_PART_GRADIENTS);
    struct rt_coords it = rt_coords_of(rt, rt->owner);
    for (int64_t at = 0; it.run < it.end; at += (int64_t)it.run[2], it.run += 3) {
        int64_t i = alphac_mean_owned(p, p, (int64_t)count, at, (int64_t)it.run[0], (int64_t)it.run[1],
                                      (int64_t)it.run[2], sliced);
        if (i >= 0) return mean_refused(rt, i, u, count);
    }
    alphac_update_owner = rt->owner;
    return run_update(rt, p, u);
}

/* An independent-state learner: the rule (the kernel alphac_contribution, over region |
   pair | scale) on this owner's region, its compact parameters, once per input pair in
   pair order, each run reading what the previous one wrote. */
int rt_op_evolve(struct rt *rt, uint64_t u) {
    int64_t share = img_mine(rt, SEC_SHARE), row0 = img_mine(rt, SEC_SAMPLE_ROW);
    const uint64_t *pairs = img_sec(rt, SEC_SAMPLES);
    if (rt->store.kp != (int64_t)img_field(rt, IMG_REGION)) return corrupt(rt, "region of owner", (long long)rt->owner);
    for (int64_t i = 0; i < share; i++) {
        int64_t fail = -1;
        int64_t status = alphac_contribution(rt->store.params, pairs + (row0 + i) * rt->s, &rt->rate, &fail);
        if (status != 0) return rt_non_finite_statement(rt, alphac_contribution_labels, status, fail, u, "rule", i);
    }
    return RT_OK;
}
