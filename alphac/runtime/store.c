/* Compact storage: which words of the learner this owner holds and where it keeps them
   (alphac/image/image.py, docs/runtime.md "Partitioned learners"). Coordinate i belongs to
   owner (i / B) mod n; the image gives each owner's coordinates as (start, step, count)
   runs. An owner's parameters are its coordinates' (ascending) when parameters are
   partitioned, else all k; its state, when the optimizer state is partitioned, is the
   shared words (ascending offsets) and then, block after block, the block's word of each of
   its coordinates, else all m. The state words not declared shared form w blocks of k: block
   b's word for coordinate i is the (b*k + i)-th non-shared word. No arithmetic on words. */
#include "rt.h"

#include <string.h>

struct rt_coords rt_coords_of(const struct rt *rt, int64_t t) {
    const uint64_t *run = img_sec(rt, SEC_RUNS) + 3 * img_sec(rt, SEC_RUN_START)[t];
    return (struct rt_coords){run, run + 3 * img_sec(rt, SEC_RUN_COUNT)[t], 0};
}

int rt_next_coord(struct rt_coords *it, int64_t *i) {
    while (it->run < it->end && it->c >= (int64_t)it->run[2]) {
        it->run += 3;
        it->c = 0;
    }
    if (it->run >= it->end) return 0;
    *i = (int64_t)it->run[0] + it->c++ * (int64_t)it->run[1];
    return 1;
}

/* Owner t's coordinates between a vector of every coordinate (`full`) and their ascending
   slice: slice[j] <- full[i_j] (`gather`), else full[i_j] <- slice[j], a run at a time;
   how many there are. */
int64_t rt_coords_move(const struct rt *rt, int64_t t, uint64_t *full, uint64_t *slice, int gather) {
    int64_t j = 0;
    for (struct rt_coords it = rt_coords_of(rt, t); it.run < it.end; it.run += 3) {
        int64_t c = (int64_t)it.run[2], step = (int64_t)it.run[1];
        uint64_t *f = full + it.run[0], *p = slice + j;
        if (step == 1) memmove(gather ? p : f, gather ? f : p, (size_t)c * 8);
        else if (gather) for (int64_t q = 0; q < c; q++) p[q] = f[q * step];
        else for (int64_t q = 0; q < c; q++) f[q * step] = p[q];
        j += c;
    }
    return j;
}

int64_t rt_owned_count(const struct rt *rt, int64_t t) {
    int64_t count = 0;
    struct rt_coords it = rt_coords_of(rt, t);
    for (; it.run < it.end; it.run += 3) count += (int64_t)it.run[2];
    return count;
}

static int64_t shared_count(const struct rt *rt) { return (int64_t)img_count(rt, SEC_SHARED); }

/* How many shared offsets lie below p. */
static int64_t shared_below(const struct rt *rt, int64_t p) {
    const uint64_t *s = img_sec(rt, SEC_SHARED);
    int64_t lo = 0, hi = shared_count(rt);
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)s[mid] < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The offset of the rank-th non-shared state word: rank + t, t the number of shared
   offsets s_j with s_j - j <= rank (s_j - j does not decrease). */
int64_t rt_state_offset(const struct rt *rt, int64_t rank) {
    const uint64_t *s = img_sec(rt, SEC_SHARED);
    int64_t lo = 0, hi = shared_count(rt);
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)s[mid] - mid <= rank) lo = mid + 1;
        else hi = mid;
    }
    return rank + lo;
}

static int64_t owner_of(const struct rt *rt, int64_t i) {
    return (i / (int64_t)img_field(rt, IMG_BLOCK_WORDS)) % rt->n;
}

/* The position of coordinate i among its owner's coordinates. */
static int64_t local_of(const struct rt *rt, int64_t i) {
    int64_t B = (int64_t)img_field(rt, IMG_BLOCK_WORDS);
    return i / (rt->n * B) * B + i % B;
}

static int partitioned(const struct rt *rt, int region) {
    return (int)img_field(rt, region == REGION_PARAMETERS ? IMG_PART_PARAMETERS : IMG_PART_STATE);
}

/* Where this owner keeps the word at position `pos` of a region (REGION_*), or -1 when it
   does not hold it. */
int64_t rt_slot(const struct rt *rt, int region, int64_t pos) {
    if (!partitioned(rt, region)) return pos;
    if (region == REGION_PARAMETERS) return owner_of(rt, pos) == rt->owner ? local_of(rt, pos) : -1;
    int64_t below = shared_below(rt, pos), rank = pos - below;
    if (below < shared_count(rt) && (int64_t)img_sec(rt, SEC_SHARED)[below] == pos) return below;
    if (rank >= (int64_t)img_field(rt, IMG_W) * rt->k || owner_of(rt, rank % rt->k) != rt->owner) return -1;
    return rt->store.alike + rank / rt->k * rt->store.kc + local_of(rt, rank % rt->k);
}

/* How many of the coordinates i, i + step, ... (at most count, count >= 1) one owner holds
   one after another in its local order: a block's (step 1) or, with B = 1, every n-th. */
static int64_t coord_span(const struct rt *rt, int64_t i, int64_t step, int64_t count) {
    int64_t B = (int64_t)img_field(rt, IMG_BLOCK_WORDS);
    if (step == 1 && rt->n == 1) return count;
    if (step == 1) return B - i % B < count ? B - i % B : count;
    return B == 1 && step == rt->n ? count : 1;
}

/* The state word at position pos (not shared) and the positions pos + step, ... after it
   with no shared word between them and inside its block of k: how many (at most count) this
   owner keeps one after another from *slot on, or does not hold (*slot = -1). */
static int64_t state_span(const struct rt *rt, int64_t pos, int64_t below, int64_t step, int64_t count,
                          int64_t *slot) {
    int64_t rank = pos - below, w = (int64_t)img_field(rt, IMG_W);
    if (rank >= w * rt->k) return *slot = -1, 1;
    int64_t i = rank % rt->k, limit = (rt->k - i + step - 1) / step;
    if (below < shared_count(rt)) {
        int64_t gap = ((int64_t)img_sec(rt, SEC_SHARED)[below] - pos + step - 1) / step;
        limit = gap < limit ? gap : limit;
    }
    int64_t n = coord_span(rt, i, step, limit < count ? limit : count);
    *slot = owner_of(rt, i) == rt->owner ? rt->store.alike + rank / rt->k * rt->store.kc + local_of(rt, i) : -1;
    return n;
}

/* The positions pos, pos + step, ... (count >= 1 of them, step >= 1) of a region: how many
   from the first on this owner keeps at *slot, *slot + 1, ... (at least 1), or does not hold
   (*slot = -1): copies between a run of positions and compact storage, a span at a time. */
int64_t rt_slot_span(const struct rt *rt, int region, int64_t pos, int64_t step, int64_t count, int64_t *slot) {
    if (count == 1) step = 1;
    if (!partitioned(rt, region)) return *slot = pos, step == 1 ? count : 1;
    if (region == REGION_PARAMETERS) {
        *slot = owner_of(rt, pos) == rt->owner ? local_of(rt, pos) : -1;
        return coord_span(rt, pos, step, count);
    }
    int64_t below = shared_below(rt, pos);
    if (below < shared_count(rt) && (int64_t)img_sec(rt, SEC_SHARED)[below] == pos) return *slot = below, 1;
    return state_span(rt, pos, below, step, count, slot);
}

/* fn(ctx, position, slot) for every word of the region this owner holds, by ascending
   position: a partitioned state merges the shared words with the blocks' words. */
void rt_each_held(const struct rt *rt, int region, rt_word_fn fn, void *ctx) {
    int64_t size = region == REGION_PARAMETERS ? rt->k : rt->m, i;
    if (!partitioned(rt, region)) {
        for (int64_t p = 0; p < size; p++) fn(ctx, p, p);
        return;
    }
    if (region == REGION_PARAMETERS) {
        struct rt_coords it = rt_coords_of(rt, rt->owner);
        for (int64_t j = 0; rt_next_coord(&it, &i); j++) fn(ctx, i, j);
        return;
    }
    const uint64_t *shared = img_sec(rt, SEC_SHARED);
    int64_t next = 0, S = shared_count(rt), w = (int64_t)img_field(rt, IMG_W);
    for (int64_t b = 0; b < w; b++) {
        struct rt_coords it = rt_coords_of(rt, rt->owner);
        for (int64_t j = 0; rt_next_coord(&it, &i); j++) {
            int64_t p = rt_state_offset(rt, b * rt->k + i);
            for (; next < S && (int64_t)shared[next] < p; next++) fn(ctx, (int64_t)shared[next], next);
            fn(ctx, p, rt->store.alike + b * rt->store.kc + j);
        }
    }
    for (; next < S; next++) fn(ctx, (int64_t)shared[next], next);
}

/* The serial FNV-1a digest of the words every owner holds alike: the parameters (unless
   partitioned), then the state (all of it, or the shared words in offset order: the first
   words of a compact state). */
void rt_digest(struct rt *rt) {
    uint64_t h = FNV_OFFSET;
    if (img_field(rt, IMG_DIGEST_PARAMS)) h = rt_fnv(rt->store.params, rt->k, h);
    rt->store.digest = rt_fnv(rt->store.state, rt->store.alike, h);
}

/* S when parameter versions are kept, S + 1 of them, version v in slot v mod (S + 1) of the
   history: a fixed staleness S (the parameters' copies, or partitioned, the read replicas),
   or staleness bounded by S (partitioned: the read replicas); else 0. */
uint64_t rt_replica_versions(const struct rt *rt) {
    return img_field(rt, IMG_STALENESS) ? img_field(rt, IMG_STALENESS) : img_field(rt, IMG_BOUND);
}

/* The history's slot of version v: k words (a replicated owner's kp is k). */
uint64_t *rt_version_slot(const struct rt *rt, uint64_t v) {
    return rt->store.history + (v % (rt_replica_versions(rt) + 1)) * (uint64_t)rt->k;
}

/* Fixed staleness S with a history: word `pos` of a checkpoint's history region at version
   v, j = pos / k, i = pos mod k: word i of version max(v - S + j, 0), in its slot
   (docs/checkpoints.md "The history region"). NULL without a history. */
uint64_t *rt_version_word(struct rt *rt, uint64_t v, int64_t pos) {
    uint64_t S = img_field(rt, IMG_STALENESS), k = (uint64_t)rt->k;
    if (!rt->store.history || k == 0 || !S) return NULL;
    uint64_t j = (uint64_t)pos / k;
    return rt_version_slot(rt, v + j >= S ? v + j - S : 0) + (uint64_t)pos % k;
}
