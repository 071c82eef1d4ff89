/* The op interpreter: one owner's op table (the kinds of alphac/plan/ops.py), once per
   update and once for the finish, over registers sized by the image. It serves replicated
   and partitioned plans alike; the arithmetic ops are arith.c's. Which coordinates an
   owner holds is the image's: the plan's owner layout as (start, step, count) runs. */
#include "arith.h"

#include <stdlib.h>

static int64_t frame_len(struct rt *rt, int64_t r) { return words(rt, r) + (int64_t)img_field(rt, IMG_TAG_WORDS); }

static int has(uint64_t mask, uint64_t region) { return (mask & region) != 0; }
static int64_t per_coordinate(struct rt *rt, uint64_t mask) {
    return has(mask, REGION_PARAMETERS) + (has(mask, REGION_STATE) ? (int64_t)img_field(rt, IMG_W) : 0);
}

/* -- partitioned ops: selection, never arithmetic ------------------------------------------ */

/* dst <- a's sums at coordinate owner t's coordinates, then a's count */
static void op_slice(struct rt *rt, uint64_t *dst, uint64_t *a, int64_t t) {
    int64_t j = rt_coords_move(rt, t, a + H, dst + H, 1);
    dst[H + j] = a[H + rt->k];
    clear_tags(rt, dst + H, j + 1);
}

/* dst's sums at coordinate owner t's coordinates <- a's words (a slice to t), dst's count <-
   a's count: the block placement's assembly of a full vector, selection only */
static int op_place(struct rt *rt, int64_t dst, int64_t a, int64_t t) {
    if (words(rt, a) != rt_owned_count(rt, t) + 1 || words(rt, dst) != rt->k + 1)
        return corrupt(rt, "placed register", (long long)a);
    uint64_t *d = reg(rt, dst) + H;
    uint64_t *x = reg(rt, a) + H;
    d[rt->k] = x[rt_coords_move(rt, t, d, x, 0)];
    clear_tags(rt, d, rt->k + 1);
    return RT_OK;
}

/* dst <- this owner's words of the regions in mask, by coordinate (the parameter, then its
   w state words), tagged with this owner's leaf position */
static void op_offer(struct rt *rt, int64_t dst, uint64_t mask) {
    uint64_t *d = reg(rt, dst) + H;
    int64_t per = per_coordinate(rt, mask), w = (int64_t)img_field(rt, IMG_W), me = rt->owner, i;
    struct rt_coords it = rt_coords_of(rt, me);
    for (int64_t j = 0; rt_next_coord(&it, &i); j++) {
        int64_t at = j * per;
        if (has(mask, REGION_PARAMETERS)) d[at++] = rt->store.params[rt_slot(rt, REGION_PARAMETERS, i)];
        if (has(mask, REGION_STATE))
            for (int64_t b = 0; b < w; b++)
                d[at + b] = rt->store.state[rt_slot(rt, REGION_STATE, rt_state_offset(rt, b * rt->k + i))];
    }
    uint64_t lo = img_sec(rt, SEC_LEAF_POS)[me];
    d[words(rt, dst)] = lo;
    d[words(rt, dst) + 1] = lo + 1;
}

/* Refuse unless [lo, hi) == [want_lo, want_hi): an overlap is a duplicated coverage, a gap
   a missing one (decided on leaf positions, never on word counts). */
static int check_tags(struct rt *rt, int64_t lo, int64_t hi, int64_t want_lo, int64_t want_hi,
                      const char *what, uint64_t u) {
    if (lo == want_lo && hi == want_hi) return RT_OK;
    int overlap = lo < want_lo || hi > want_hi;
    return rt_fail(rt, overlap ? RT_DATA_PARALLEL_ASSEMBLY_OVERLAP : RT_DATA_PARALLEL_ASSEMBLY_COVERAGE,
                   "owner %lld: %s at update %llu covers leaves %lld..%lld, expected %lld..%lld: a leaf's "
                   "coordinates would be %s", (long long)rt->owner, what, (unsigned long long)u, (long long)lo,
                   (long long)hi, (long long)want_lo, (long long)want_hi,
                   overlap ? "assembled twice" : "missing");
}

/* dst <- a's words then b's (adjacent leaf ranges, left then right) */
static int op_select(struct rt *rt, int64_t dst, int64_t a, int64_t b, uint64_t u) {
    int64_t wa = words(rt, a), wb = words(rt, b);
    const uint64_t *x = reg(rt, a) + H, *y = reg(rt, b) + H;
    int64_t a_lo = (int64_t)x[wa], a_hi = (int64_t)x[wa + 1], b_lo = (int64_t)y[wb], b_hi = (int64_t)y[wb + 1];
    /* b must start where a ends: before is a duplicate, after is a gap */
    TRY(check_tags(rt, b_lo, b_hi, a_hi, b_hi > a_hi ? b_hi : a_hi, "a selection's right operand", u));
    if (wa + wb != words(rt, dst))
        return rt_fail(rt, RT_CORRUPT_EXECUTABLE, "owner %lld: a selection of %lld + %lld words into a "
                       "register of %lld", (long long)rt->owner, (long long)wa, (long long)wb,
                       (long long)words(rt, dst));
    uint64_t *d = reg(rt, dst) + H;
    memcpy(d, x, (size_t)wa * 8);
    memcpy(d + wa, y, (size_t)wb * 8);
    d[wa + wb] = (uint64_t)a_lo;
    d[wa + wb + 1] = (uint64_t)b_hi;
    return RT_OK;
}

/* Check that register a covers every leaf, then scatter its words (leaf order, each owner's
   coordinates ascending) into `params` (the read replica, or the parameters) and the state,
   each of which must hold every position (a replicated region). */
static int op_install(struct rt *rt, int64_t a, uint64_t mask, uint64_t *params, uint64_t u) {
    int64_t wa = words(rt, a), leaves = (int64_t)img_field(rt, IMG_LEAVES);
    const uint64_t *x = reg(rt, a) + H, *order = img_sec(rt, SEC_LEAF_ORDER);
    if ((has(mask, REGION_PARAMETERS) && params == rt->store.params && img_field(rt, IMG_PART_PARAMETERS)) ||
        (has(mask, REGION_STATE) && img_field(rt, IMG_PART_STATE)))
        return corrupt(rt, "install into a partitioned region", (long long)mask);
    TRY(check_tags(rt, (int64_t)x[wa], (int64_t)x[wa + 1], 0, leaves, "an assembled vector", u));
    int64_t per = per_coordinate(rt, mask), w = (int64_t)img_field(rt, IMG_W), need = 0;
    for (int64_t li = 0; li < leaves; li++) need += rt_owned_count(rt, (int64_t)order[li]) * per;
    if (need != wa)
        return rt_fail(rt, RT_DATA_PARALLEL_ASSEMBLY_COVERAGE, "owner %lld: an assembled vector at update %llu "
                       "holds %lld words, its owners' coordinates %lld", (long long)rt->owner,
                       (unsigned long long)u, (long long)wa, (long long)need);
    int64_t at = 0, i;
    for (int64_t li = 0; li < leaves; li++) {
        struct rt_coords it = rt_coords_of(rt, (int64_t)order[li]);
        while (rt_next_coord(&it, &i)) {
            if (has(mask, REGION_PARAMETERS)) params[i] = x[at++];
            if (has(mask, REGION_STATE))
                for (int64_t b = 0; b < w; b++) rt->store.state[rt_state_offset(rt, b * rt->k + i)] = x[at++];
        }
    }
    return RT_OK;
}

/* -- the interpreter ----------------------------------------------------------------------- */

/* The stack levels a block of `count` samples needs: its bit length. */
static int64_t block_depth(int64_t count) { return count > 0 ? 64 - __builtin_clzll((uint64_t)count) : 0; }

/* A sample block lies inside this owner's share, and register 0 holds its stack. */
static int check_block(struct rt *rt, int64_t first, int64_t count) {
    if (first < 0 || count < 1 || first + count > img_mine(rt, SEC_SHARE)) return corrupt(rt, "sample block at", first);
    if (rt->store.nregs < 1 || block_depth(count) * (rt->k + 1) > words(rt, 0)) return corrupt(rt, "sample block of", count);
    return RT_OK;
}

/* What each operand word of an op is, by kind: the op table (alphac/plan/ops.py). */
static const uint8_t operand_types[OP_KINDS][4] = OP_OPERANDS;

/* An op's words are what its kind's row of the op table says: a word that is no operand is
   -1, its registers and owners exist, its peer is connected, its mask names regions only,
   its group lies inside the `rest` ops from it to the end, its sample block inside this
   owner's share with the stack in register 0. A table built for another owner count or
   corrupted on disk refuses by name instead of reading outside its buffers. */
static int check_op(struct rt *rt, const int64_t *op, int64_t rest) {
    int64_t kind = op[0];
    if (kind < 0 || kind >= OP_KINDS) return corrupt(rt, "kind", kind);
    for (int j = 1; j <= 4; j++) {
        int64_t v = op[j];
        switch (operand_types[kind][j - 1]) {
        case OPND_NONE: if (v != -1) return corrupt(rt, "unused operand", v); break;
        case OPND_READ:
        case OPND_WRITE:
        case OPND_ARRIVE: if (v < 0 || v >= rt->store.nregs) return corrupt(rt, "register", v); break;
        case OPND_PEER: if (v < 0 || v >= rt->n || rt->net.fds[v] < 0) return corrupt(rt, "peer", v); break;
        case OPND_OWNER: if (v < 0 || v >= rt->n) return corrupt(rt, "owner", v); break;
        case OPND_MASK:
            if (v < 1 || (v & ~(int64_t)(REGION_PARAMETERS | REGION_STATE))) return corrupt(rt, "region mask", v);
            break;
        case OPND_GROUP: if (v < 1 || v >= rest) return corrupt(rt, "exchange of", v); break;
        case OPND_FIRST: break; /* checked with its count, the next word */
        case OPND_SAMPLES: TRY(check_block(rt, op[j - 1], v)); break;
        default: return corrupt(rt, "operand type of kind", kind);
        }
    }
    return RT_OK;
}

/* Under parameter partitioning a contribution reads the held read replica of version max(v - S, 0). */
static int replica_readable(struct rt *rt, uint64_t v) {
    long long me = (long long)rt->owner;
    uint64_t read = rt_read_version(rt, v);
    if (!img_field(rt, IMG_PART_PARAMETERS)) return RT_OK;
    if (!rt->store.replica_held)
        return rt_fail(rt, RT_DATA_PARALLEL_REPLICA_RELEASED, "owner %lld: the contribution of "
                       "version %llu reads no held replica (released or never installed)", me,
                       (unsigned long long)v);
    if ((uint64_t)rt->store.replica_version != read)
        return rt_fail(rt, RT_DATA_PARALLEL_REPLICA_VERSION, "owner %lld: the contribution of "
                       "version %llu reads a replica of version %lld, not %llu", me, (unsigned long long)v,
                       (long long)rt->store.replica_version, (unsigned long long)read);
    return RT_OK;
}


/* A sum received into register r carries the sample count the plan declares beneath it (op[6]). */
static int check_count(struct rt *rt, const int64_t *op, int64_t r) {
    uint64_t count = reg(rt, r)[H + words(rt, r) - 1];
    if ((uint64_t)op[6] == NO_EXPECT || count == (uint64_t)op[6]) return RT_OK;
    return rt_fail(rt, RT_FRAME_COUNT, "owner %lld: frame from owner %lld: %llu samples, the plan "
                   "declares %llu beneath this value", (long long)rt->owner, (long long)op[1],
                   (unsigned long long)count, (unsigned long long)op[6]);
}

/* What an op of an exchange does once its frame has moved, or (a combine) once its
   operands are complete: a received count checked as a lone receive checks it; then a
   recv-add's flag and count, or a combine. */
static int exchanged(struct rt *rt, const struct xfer *x) {
    const int64_t *op = x->op;
    int64_t kind = op[0], dst = op[2], a = op[3], b = op[4];
    if (kind != OP_COMBINE) TRY(check_count(rt, op, kind == OP_RECV ? dst : kind == OP_RECV_ADD_LEFT ? a : b));
    return kind == OP_RECV ? RT_OK : rt_op_combine(rt, dst, a, b, x->version, 1);
}

/* The `count` ops at `ops` (the block placement's reduce-scatter and gather) at once, every
   frame in flight together (rt_exchange), so no owner waits on another's turn; each add runs
   as far as the ops writing its operands have written them (pipelined). */
static int op_exchange(struct rt *rt, const int64_t *ops, int64_t count, uint64_t v) {
    int rc;
    struct xfer *x = rt_alloc_words(rt, (int64_t)(((sizeof *x + sizeof(struct arrival)) * (size_t)count + 7) / 8), &rc);
    if (!x) return rc;
    struct arrival *adds = (struct arrival *)(x + count);
    for (int64_t j = 0; j < count && rc == RT_OK; j++) {
        const int64_t *op = ops + j * OP_WORDS;
        int64_t kind = op[0], dst = op[2], a = op[3], b = op[4];
        int send = kind == OP_SEND, left = kind == OP_RECV_ADD_LEFT, added = left || kind == OP_RECV_ADD_RIGHT;
        int local = kind == OP_COMBINE; /* an add without a frame */
        rc = !send && kind != OP_RECV && !added && !local ? corrupt(rt, "exchanged kind", (long long)kind)
                                                          : check_op(rt, op, count - j);
        if (rc != RT_OK) break;
        int64_t r = send ? a : added ? (left ? a : b) : dst, need[2] = {left ? -1 : a, left || local ? b : -1};
        if (added || local) adds[j] = (struct arrival){reg(rt, dst) + H, reg(rt, a) + H, reg(rt, b) + H, words(rt, dst) - 1, -1};
        x[j] = (struct xfer){.peer = local ? -1 : op[1], .send = send, .kind = KIND_COMBINE, .version = v, .op = op,
                             .step = (uint64_t)op[5], .buf = reg(rt, r), .len = frame_len(rt, r), .reuse = send,
                             .local = local, .add = added || local ? &adds[j] : NULL, .then = send ? NULL : exchanged};
        for (int64_t i = 0; i < j && !send && kind != OP_RECV; i++) /* the ops writing its operands */
            for (int s = 0; s < 2; s++)
                if (ops[i * OP_WORDS] != OP_SEND && ops[i * OP_WORDS + 2] == need[s]) x[j].after[s] = i + 1;
    }
    if (rc == RT_OK) rc = rt_exchange(rt, x, count);
    free(x);
    return rc;
}

/* Fixed staleness S (or bounded by S): the read replicas of versions v - S .. v, slot v mod
   (S + 1) with its version beside it, kept across updates; version v's contributions read
   max(v - S, 0)'s (bounded: the newest a contribution computed ahead finds, arith.c). */
static int install_versioned(struct rt *rt, int64_t a, uint64_t v) {
    uint64_t slots = rt_replica_versions(rt) + 1, read = rt_read_version(rt, v);
    TRY(rt_replica_history(rt));
    TRY(op_install(rt, a, REGION_PARAMETERS, rt_version_slot(rt, v), v));
    rt->store.history_versions[v % slots] = v;
    rt->store.replica = rt_version_slot(rt, read);
    rt->store.replica_version = (int64_t)rt->store.history_versions[read % slots];
    rt->store.replica_held = 1;
    rt_ahead_installed(rt, v); /* bounded staleness: the newest version a contribution may read */
    return RT_OK;
}

static void release_replica(struct rt *rt) {
    rt_buf_free(rt, MEM_REPLICA, rt->store.replica, rt->k);
    rt->store.replica = NULL;
    rt->store.replica_held = 0;
}

static int rt_run_ops(struct rt *rt, int64_t first, int64_t count, uint64_t v) {
    int rc;
    const int64_t *ops = (const int64_t *)img_sec(rt, SEC_OPS) + (img_mine(rt, SEC_OP_START) + first) * OP_WORDS;
    int owned = img_field(rt, IMG_OUTPUT_FORMAT) == OUTPUT_OWNED;
    long long me = (long long)rt->owner;
    for (int64_t i = 0; i < count; i++) {
        const int64_t *op = ops + i * OP_WORDS;
        int64_t kind = op[0], peer = op[1], dst = op[2], a = op[3], b = op[4];
        uint64_t step = (uint64_t)op[5];
        TRY(check_op(rt, op, count - i));
        if (kind != OP_LOCAL) rt_delay_before(rt, kind); /* a contribution's: where it is computed */
        int fd = peer >= 0 && peer < rt->n ? rt->net.fds[peer] : -1;
        /* the payload hash kept for a register is valid until an op other than a send */
        if (kind != OP_SEND) rt_sent_forget(rt);
        switch (kind) {
        case OP_LOCAL:
            TRY(replica_readable(rt, v));
            TRY(rt_op_local(rt, reg(rt, dst), v));
            break;
        case OP_SAMPLE_BLOCK:
            TRY(replica_readable(rt, v));
            TRY(rt_op_sample_block(rt, dst, a, b, v));
            break;
        case OP_SEND: /* a lone frame: an exchange of one (a recv-add's sums computed as the */
        case OP_RECV: /* words arrive, and checked once the receive has verified the frame) */
        case OP_RECV_ADD_LEFT:
        case OP_RECV_ADD_RIGHT: TRY(op_exchange(rt, op, 1, v)); break;
        case OP_RECV_UPDATE: { /* the mean is taken as the words arrive, of the count declared */
            if ((uint64_t)op[6] == NO_EXPECT) return corrupt(rt, "recv-update of no count at", (long long)i);
            struct arrival mean = {reg(rt, a) + H, NULL, NULL, words(rt, a) - 1, op[6]};
            TRY(rt_recv_frame(rt, fd, peer, KIND_COMBINE, v, step, reg(rt, a), frame_len(rt, a), &mean, NULL));
            TRY(check_count(rt, op, a));
            TRY(rt_op_update(rt, a, v, 1));
            break;
        }
        case OP_COMBINE: TRY(rt_op_combine(rt, dst, a, b, v, 0)); break;
        case OP_UPDATE: TRY(rt_op_update(rt, a, v, 0)); break;
        case OP_DIGEST_SEND: { /* "prepared": the digest, then this subtree's output digests */
            uint64_t *p = rt->small + H;
            p[0] = rt->store.digest;
            p[1] = (uint64_t)(rt->pub.nentries + 1);
            p[2] = (uint64_t)rt->owner;
            memcpy(p + 3, rt->pub.out_digest, 32);
            memcpy(p + 2 + PREPARED_ENTRY_WORDS, rt->pub.entries, (size_t)rt->pub.nentries * PREPARED_ENTRY_WORDS * 8);
            TRY(rt_send_frame(rt, peer, KIND_DIGEST, v, step, rt->small, (int64_t)(2 + p[1] * PREPARED_ENTRY_WORDS), 0));
            rt->pub.prepared = 1;
            break;
        }
        case OP_DIGEST_RECV: {
            int64_t owners = op[6];
            TRY(rt_recv_frame(rt, fd, peer, KIND_DIGEST, v, step, rt->small, 2 + owners * PREPARED_ENTRY_WORDS,
                              NULL, NULL));
            const uint64_t *p = rt->small + H;
            if (p[0] != rt->store.digest)
                return rt_fail(rt, RT_REPLICA_DIVERGENCE, "owner %lld's %s 0x%016llx differs from owner %lld's "
                               "0x%016llx after %llu updates", (long long)peer,
                               owned ? "digest of the replicated words" : "state digest",
                               (unsigned long long)p[0], me, (unsigned long long)rt->store.digest,
                               (unsigned long long)v);
            if ((int64_t)p[1] != owners || rt->pub.nentries + owners > rt->n)
                return rt_fail(rt, RT_FRAME_COUNT, "owner %lld: owner %lld prepared %llu owners, the plan has "
                               "%lld beneath it", me, (long long)peer, (unsigned long long)p[1], (long long)owners);
            memcpy(rt->pub.entries + rt->pub.nentries * PREPARED_ENTRY_WORDS, p + 2,
                   (size_t)owners * PREPARED_ENTRY_WORDS * 8);
            rt->pub.nentries += owners;
            break;
        }
        case OP_PUBLISH_SEND: TRY(rt_send_frame(rt, peer, KIND_PUBLISH, v, step, rt->small, 0, 0)); break;
        case OP_PUBLISH_RECV:
            TRY(rt_recv_frame(rt, fd, peer, KIND_PUBLISH, v, step, rt->small, 0, NULL, NULL));
            rt->pub.committed = 1;
            break;
        case OP_STAGE: TRY(rt_stage_output(rt)); break;
        case OP_COMMIT: /* the root's own entry, then the record */
            rt->pub.entries[rt->pub.nentries * PREPARED_ENTRY_WORDS] = (uint64_t)rt->owner;
            memcpy(rt->pub.entries + rt->pub.nentries * PREPARED_ENTRY_WORDS + 1, rt->pub.out_digest, 32);
            rt->pub.nentries++;
            TRY(rt_write_commit(rt)); /* and the root's output: finalized */
            break;
        case OP_FINALIZE: /* the root's output was linked with its commit record */
            if (!rt->pub.finalized) TRY(rt_stage_publish(rt, &rt->pub.out));
            rt->pub.finalized = 1;
            break;
        case OP_CKPT_STAGE: TRY(rt_ckpt_stage(rt, v)); break;
        case OP_CKPT_SEND: TRY(rt_ckpt_send(rt, peer, v, step)); break;
        case OP_CKPT_RECV: TRY(rt_ckpt_recv(rt, fd, peer, v, step, op[6])); break;
        case OP_CKPT_MANIFEST: TRY(rt_ckpt_manifest(rt, v)); break;
        case OP_CKPT_PUBLISH: TRY(rt_ckpt_publish(rt, v)); break;
        case OP_SLICE: op_slice(rt, reg(rt, dst), reg(rt, a), peer); break;
        case OP_PLACE: TRY(op_place(rt, dst, a, peer)); break;
        case OP_EXCHANGE:
            TRY(op_exchange(rt, op + OP_WORDS, b, v));
            i += b;
            break;
        case OP_OFFER:
            if (rt_dev_capture) TRY(rt_dev_capture(rt)); /* the words are the device's */
            op_offer(rt, dst, (uint64_t)a);
            break;
        case OP_SELECT: TRY(op_select(rt, dst, a, b, v)); break;
        case OP_INSTALL:
            TRY(op_install(rt, a, (uint64_t)b, rt->store.params, v));
            /* the offers of this assembly copied the device's words back first, so the words
               the install leaves alone are the device's too */
            if (rt_dev_upload) TRY(rt_dev_upload(rt, (uint64_t)b, rt->store.params));
            break;
        case OP_REPLICA_INSTALL: /* the replica exists only while held */
            if (rt_replica_versions(rt)) { TRY(install_versioned(rt, a, v)); break; } /* kept by version */
            /* the stale-replica mutant (a test build) keeps the replica of its first update instead */
            if (!(rt_keeps_replica(rt) && rt->store.replica_installed)) {
                release_replica(rt);
                rt->store.replica = rt_buf_alloc(rt, MEM_REPLICA, rt->k, &rc);
                TRY(rc);
                TRY(op_install(rt, a, REGION_PARAMETERS, rt->store.replica, v));
                if (rt_dev_upload) TRY(rt_dev_upload(rt, REGION_PARAMETERS, rt->store.replica));
                rt->store.replica_version = (int64_t)v;
                rt->store.replica_installed = 1;
            }
            rt->store.replica_held = 1;
            break;
        case OP_REPLICA_RELEASE: /* the stale-replica mutant keeps its buffer for the next update */
            if (rt_keeps_replica(rt) || rt_replica_versions(rt)) rt->store.replica_held = 0;
            else release_replica(rt);
            break;
        case OP_UPDATE_OWNED: TRY(rt_op_update_owned(rt, a, v)); break;
        case OP_EVOLVE: TRY(rt_op_evolve(rt, v)); break;
        default: return corrupt(rt, "kind", kind);
        }
    }
    return RT_OK;
}

/* Every update from the start version (0, or a resumed checkpoint's), a checkpoint after
   every I-th, then the digest and the finish (replica comparison and publication). */
int rt_run(struct rt *rt) {
    int64_t n_update = img_mine(rt, SEC_N_UPDATE), n_finish = img_mine(rt, SEC_N_FINISH);
    int64_t every = rt->ck.interval;
    for (int64_t u = rt->start; u < rt->updates; u++) {
        rt_record_version(rt, (uint64_t)u);
        int rc = rt_run_ops(rt, 0, n_update, (uint64_t)u);
        if (rc != RT_OK) rt_ahead_join(rt); /* the next update's contribution, computed ahead */
        TRY(rc);
        if (every && (u + 1) % every == 0) {
            if (rt_dev_capture) TRY(rt_dev_capture(rt)); /* a checkpoint holds the device's words */
            TRY(rt_run_ops(rt, n_update + n_finish, img_mine(rt, SEC_N_CHECKPOINT), (uint64_t)(u + 1)));
        }
        rt_status(rt, u + 1);
    }
    rt_ahead_join(rt);
    if (rt_dev_capture) TRY(rt_dev_capture(rt)); /* the digest and the output read the host's copy */
    rt_digest(rt);
    return rt_run_ops(rt, n_update, n_finish, (uint64_t)rt->updates);
}
