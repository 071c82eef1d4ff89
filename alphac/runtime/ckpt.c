/* Checkpoints (docs/checkpoints.md): each owner's shard, the digests going up the tree, the
   manifest of each subtree, the root's atomic publication of the directory; and restore
   from a checkpoint's path alone, every hash, header, version and coverage checked before
   each owner selects the words it holds. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* owner, bytes, file sha, a sha per fragment; under bounded staleness the schedule file's sha */
#define ENTRY_WORDS(rt, frags) (6 + 4 * (frags) + (img_field(rt, IMG_BOUND) ? 4 : 0))

static int64_t frag_count(const struct rt *rt, int64_t o) { return (int64_t)img_sec(rt, SEC_FRAG_COUNT)[o]; }
static const uint64_t *frags_of(const struct rt *rt, int64_t o) {
    return img_sec(rt, SEC_FRAGS) + img_sec(rt, SEC_FRAG_START)[o];
}
/* a fragment's descriptor: region, words, run count, runs; the next one after it */
static const uint64_t *next_frag(const uint64_t *f) { return f + 3 + 3 * f[2]; }

static int fsync_path(struct rt *rt, const char *path) {
    return rt_sync_dir(path) == 0 ? RT_OK : rt_fail(rt, RT_IO_ERROR, "cannot make '%s' durable (%s)", path, strerror(errno));
}

/* A new checkpoint file, created exclusively: its descriptor, or -1 with the refusal. */
static int create_file(struct rt *rt, const char *path, int *rc) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    *rc = fd >= 0 ? RT_OK
          : errno == EEXIST ? rt_fail(rt, RT_CHECKPOINT_EXISTS, "'%s' exists (a partial checkpoint of "
                                      "another run with this run id: pass another --run-id, or remove it)", path)
                            : rt_fail(rt, RT_IO_ERROR, "cannot create '%s' (%s)", path, strerror(errno));
    return fd;
}

static int write_file(struct rt *rt, const char *path, const void *data, size_t n) {
    int rc, fd = create_file(rt, path, &rc);
    if (fd < 0) return rc;
    if (rt_write_all(fd, data, n) != 0) rc = rt_fail(rt, RT_IO_ERROR, "writing '%s' failed (%s)", path, strerror(errno));
    if (rc == RT_OK && fsync(fd) != 0) rc = rt_fail(rt, RT_IO_ERROR, "flushing '%s' failed (%s)", path, strerror(errno));
    close(fd);
    return rc;
}

/* Before any work: where checkpoints go, and no scheduled one exists already. */
int rt_ckpt_open(struct rt *rt) {
    struct ckpt *c = &rt->ck;
    c->interval = (int64_t)img_field(rt, IMG_CKPT_INTERVAL);
    if (!c->dir || !*c->dir) c->dir = img_text(rt, IMG_STR_CKPT_DIR);
    if (!rt->run_id) rt->run_id = img_field(rt, IMG_RUN_ID) ^ c->resumed_id;
    if (c->interval == 0) return RT_OK;
    if (!*c->dir)
        return rt_fail(rt, RT_USAGE, "this deployment checkpoints every %lld updates: give --checkpoint-dir DIR",
                       (long long)c->interval);
    if (mkdir(c->dir, 0755) != 0 && errno != EEXIST)
        return rt_fail(rt, RT_IO_ERROR, "cannot make the checkpoint directory '%s' (%s)", c->dir, strerror(errno));
    for (int64_t v = (rt->start / c->interval + 1) * c->interval; v <= rt->updates; v += c->interval) {
        char *final = rt_pathf("%s/ckpt-%lld", c->dir, (long long)v);
        struct stat st;
        int exists = final && lstat(final, &st) == 0;
        int rc = exists ? rt_fail(rt, RT_CHECKPOINT_EXISTS, "'%s' exists; checkpoints are never overwritten", final)
                        : RT_OK;
        free(final);
        TRY(rc);
    }
    int rc;
    c->entries = rt_alloc_words(rt, rt->n * ENTRY_WORDS(rt, 0) + 4 * (int64_t)img_count(rt, SEC_FRAGS), &rc);
    TRY(rc);
    c->manifests = rt_alloc_words(rt, 5 * rt->n, &rc);
    return rc;
}

/* -- writing ---------------------------------------------------------------------------- */

static int64_t entry_words(const struct rt *rt, const uint64_t *e) { return ENTRY_WORDS(rt, frag_count(rt, (int64_t)e[0])); }

/* Bounded staleness: this owner's schedule so far, reads-<o>.bin (docs/checkpoints.md "The
   schedule file"): magic, owner, version, the run's first update, the count, then the
   version each contribution read; its sha256 into `sha`. */
static int stage_schedule(struct rt *rt, uint64_t v, unsigned char sha[32]) {
    uint64_t count = v - (uint64_t)rt->start, *buf;
    int rc;
    if (!(buf = rt_alloc_words(rt, (int64_t)(5 + count), &rc))) return rc;
    uint64_t head[5] = {CKPT_SCHEDULE_MAGIC, (uint64_t)rt->owner, v, (uint64_t)rt->start, count};
    memcpy(buf, head, sizeof head);
    memcpy(buf + 5, rt->store.reads, (size_t)count * 8);
    char *path = rt_pathf("%s/reads-%lld.bin", rt->ck.partial, (long long)rt->owner);
    rc = !path ? rt_fail(rt, RT_IO_ERROR, "out of memory") : write_file(rt, path, buf, (size_t)(5 + count) * 8);
    if (rc == RT_OK && rt_sha256_bytes(buf, (size_t)(5 + count) * 8, sha) != 0)
        rc = rt_fail(rt, RT_IO_ERROR, "libcrypto could not hash '%s'", path);
    free(path);
    free(buf);
    return rc;
}

/* A fragment's words in its runs' order, a span of compact storage at a time (store.c). */
static void put_fragment(struct rt *rt, struct rt_writer *w, const uint64_t *f, uint64_t v) {
    int region = (int)f[0];
    if (region == REGION_HISTORY || region == REGION_STATES) { /* word by word: the versions still
        read (fixed staleness); this owner's own state, its block of every owner's (local steps) */
        for (const uint64_t *run = f + 3; run < next_frag(f); run += 3)
            for (uint64_t i = 0, pos; i < run[2]; i++)
                pos = run[0] + i * run[1], rt_writer_put(w, region == REGION_STATES ? rt->store.state[pos % (uint64_t)rt->m]
                                                                                   : *rt_version_word(rt, v, (int64_t)pos));
        return;
    }
    const uint64_t *src = region == REGION_PARAMETERS ? rt->store.params
                          : region == REGION_OUTER   ? rt->store.outer /* replicated: slot = position */
                                                     : rt->store.state;
    for (const uint64_t *run = f + 3; run < next_frag(f); run += 3)
        for (int64_t i = 0, n, slot; i < (int64_t)run[2]; i += n) {
            n = rt_slot_span(rt, region, (int64_t)(run[0] + (uint64_t)i * run[1]), (int64_t)run[1],
                             (int64_t)run[2] - i, &slot);
            rt_writer_words(w, src + slot, n);
        }
}

/* A shard's words: its header, each fragment's descriptor, then each fragment's words in
   its runs' order (each hashed once, as a part), read from this owner's compact storage. */
static void put_shard(struct rt *rt, struct rt_writer *w, uint64_t v, uint64_t *e) {
    int64_t nf = frag_count(rt, rt->owner);
    uint64_t head[6] = {CKPT_SHARD_MAGIC, CKPT_SHARD_FORMAT, img_field(rt, IMG_CKPT_IDENTITY), (uint64_t)rt->owner, v,
                        (uint64_t)nf};
    for (int j = 0; j < 6; j++) rt_writer_put(w, head[j]);
    const uint64_t *f = frags_of(rt, rt->owner);
    for (int64_t j = 0; j < nf; j++, f = next_frag(f))
        for (const uint64_t *x = f; x < next_frag(f); x++) rt_writer_put(w, *x);
    f = frags_of(rt, rt->owner);
    for (int64_t j = 0; j < nf; j++, f = next_frag(f)) {
        rt_writer_part(w);
        put_fragment(rt, w, f, v);
        rt_writer_part_end(w, (unsigned char *)(e + 6 + 4 * j));
    }
}

/* ckpt-stage: this owner's shard in the partial directory, and its entry. */
int rt_ckpt_stage(struct rt *rt, uint64_t v) {
    struct ckpt *c = &rt->ck;
    free(c->partial);
    c->partial = rt_pathf("%s/ckpt-%llu.partial-%016llx", c->dir, (unsigned long long)v, (unsigned long long)rt->run_id);
    if (!c->partial) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    if (mkdir(c->partial, 0755) != 0 && errno != EEXIST)
        return rt_fail(rt, RT_IO_ERROR, "cannot make '%s' (%s)", c->partial, strerror(errno));
    int64_t nf = frag_count(rt, rt->owner), words = 6;
    const uint64_t *f = frags_of(rt, rt->owner);
    for (int64_t j = 0; j < nf; j++, f = next_frag(f)) words += 3 + 3 * (int64_t)f[2] + (int64_t)f[1];
    uint64_t *e = c->entries;
    e[0] = (uint64_t)rt->owner;
    e[1] = (uint64_t)words * 8;
    char *path = rt_pathf("%s/shard-%lld.bin", c->partial, (long long)rt->owner);
    if (!path) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    int rc, fd = create_file(rt, path, &rc);
    if (fd >= 0) {
        struct rt_writer w;
        rt_writer_init(&w, rt, fd, path);
        put_shard(rt, &w, v, e);
        rc = rt_writer_end(&w, (unsigned char *)(e + 2));
        close(fd);
    }
    free(path);
    if (rc == RT_OK && img_field(rt, IMG_BOUND)) rc = stage_schedule(rt, v, (unsigned char *)(e + 6 + 4 * nf));
    c->nentries = 1;
    c->entry_words = ENTRY_WORDS(rt, nf);
    c->nmanifests = 0;
    rt_digest(rt);
    return rc;
}

/* ckpt-send: [digest, entries, manifests, the entries, the manifests] up to `peer`. */
int rt_ckpt_send(struct rt *rt, int64_t peer, uint64_t v, uint64_t step) {
    struct ckpt *c = &rt->ck;
    uint64_t *p = rt->small + HEADER_WORDS;
    p[0] = rt->store.digest, p[1] = (uint64_t)c->nentries, p[2] = (uint64_t)c->nmanifests;
    memcpy(p + 3, c->entries, (size_t)c->entry_words * 8);
    memcpy(p + 3 + c->entry_words, c->manifests, (size_t)c->nmanifests * 40);
    return rt_send_frame(rt, peer, KIND_CHECKPOINT, v, step, rt->small, 3 + c->entry_words + 5 * c->nmanifests, 0);
}

int rt_ckpt_recv(struct rt *rt, int fd, int64_t peer, uint64_t v, uint64_t step, int64_t len) {
    struct ckpt *c = &rt->ck;
    TRY(rt_recv_frame(rt, fd, peer, KIND_CHECKPOINT, v, step, rt->small, len, NULL, NULL));
    const uint64_t *p = rt->small + HEADER_WORDS;
    if (p[0] != rt->store.digest)
        return rt_fail(rt, RT_REPLICA_DIVERGENCE, "owner %lld's digest 0x%016llx differs from owner %lld's "
                       "0x%016llx at the checkpoint of version %llu", (long long)peer, (unsigned long long)p[0],
                       (long long)rt->owner, (unsigned long long)rt->store.digest, (unsigned long long)v);
    /* the entries must be whole: the length was the plan's, check the counts agree with it */
    int64_t at = 3, words = 0;
    for (uint64_t j = 0; j < p[1] && at < len; j++) {
        if (p[at] >= (uint64_t)rt->n) break;
        words += entry_words(rt, p + at), at += entry_words(rt, p + at);
    }
    if (at + 5 * (int64_t)p[2] != len || c->nentries + (int64_t)p[1] > rt->n || c->nmanifests + (int64_t)p[2] > rt->n)
        return rt_fail(rt, RT_FRAME_COUNT, "owner %lld: owner %lld's checkpoint report does not hold the entries of "
                       "its subtree", (long long)rt->owner, (long long)peer);
    memcpy(c->entries + c->entry_words, p + 3, (size_t)words * 8);
    c->entry_words += words;
    c->nentries += (int64_t)p[1];
    memcpy(c->manifests + 5 * c->nmanifests, p + 3 + words, (size_t)p[2] * 40);
    c->nmanifests += (int64_t)p[2];
    return RT_OK;
}

static const uint64_t *entry_of(const struct rt *rt, int64_t owner) {
    const uint64_t *e = rt->ck.entries;
    for (int64_t j = 0; j < rt->ck.nentries; j++, e += entry_words(rt, e))
        if ((int64_t)e[0] == owner) return e;
    return NULL;
}

/* ckpt-manifest: the manifest of this owner's subtree (the root's is manifest.txt, whose
   auth line holds its tag under the checkpoint key, or `none` in an unkeyed run). */
int rt_ckpt_manifest(struct rt *rt, uint64_t v) {
    struct ckpt *c = &rt->ck;
    char *s = NULL, sha[65];
    size_t n = 0;
    FILE *t = open_memstream(&s, &n); /* s[0..n): the text so far, after each fflush */
    if (!t) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    fprintf(t, CKPT_HEAD "\nversion %llu\nidentity %016llx\nlearner %s\ninputs %s\ncontract %s\nlayout %s\n",
        (unsigned long long)v, (unsigned long long)img_field(rt, IMG_CKPT_IDENTITY),
        img_text(rt, IMG_STR_CKPT_LEARNER), img_text(rt, IMG_STR_CKPT_INPUTS), img_text(rt, IMG_STR_CKPT_CONTRACT),
        img_text(rt, IMG_STR_CKPT_LAYOUT));
    fprintf(t, "region parameters %lld\nregion state %lld\n", (long long)rt->k, (long long)rt->m);
    if (rt_version_word(rt, v, 0)) /* fixed staleness: the S versions before this one */
        fprintf(t, "region history %lld\n", (long long)img_field(rt, IMG_STALENESS) * rt->k);
    if (rt->store.outer) fprintf(t, "region outer %lld\n", (long long)rt->store.kp); /* local steps' momentum */
    if (img_field(rt, IMG_LOCAL_STEPS) && rt->m) /* local steps: every owner's own state */
        fprintf(t, "region states %lld\n", (long long)(rt->n * rt->m));
    fprintf(t, "owners");
    for (int64_t o = 0; o < rt->n; o++)
        if (entry_of(rt, o)) fprintf(t, " %lld", (long long)o);
    fprintf(t, "\n");
    for (int64_t o = 0; o < rt->n; o++)
        for (int64_t j = 0; j < c->nmanifests; j++)
            if ((int64_t)c->manifests[5 * j] == o) {
                rt_hex((const unsigned char *)(c->manifests + 5 * j + 1), 32, sha);
                fprintf(t, "manifest %lld manifest-%lld.txt %s\n", (long long)o, (long long)o, sha);
            }
    for (int64_t o = 0; o < rt->n; o++) {
        const uint64_t *e = entry_of(rt, o);
        if (!e) continue;
        rt_hex((const unsigned char *)(e + 2), 32, sha);
        fprintf(t, "shard %lld shard-%lld.bin %llu %s\n", (long long)o, (long long)o, (unsigned long long)e[1], sha);
        int64_t nf = frag_count(rt, o), offset = 6;
        const uint64_t *f = frags_of(rt, o);
        for (int64_t j = 0; j < nf; j++, f = next_frag(f)) offset += 3 + 3 * (int64_t)f[2];
        f = frags_of(rt, o);
        for (int64_t j = 0; j < nf; j++, f = next_frag(f)) {
            fprintf(t, "fragment %lld %s %lld %llu ", (long long)o, CKPT_REGION_NAME(f[0]),
                (long long)offset * 8, (unsigned long long)f[1]);
            for (uint64_t r = 0; r < f[2]; r++)
                fprintf(t, "%s%llu+%llux%llu", r ? "," : "", (unsigned long long)f[3 + 3 * r],
                    (unsigned long long)f[4 + 3 * r], (unsigned long long)f[5 + 3 * r]);
            rt_hex((const unsigned char *)(e + 6 + 4 * j), 32, sha);
            fprintf(t, "%s %s\n", f[2] ? "" : "-", sha);
            offset += (int64_t)f[1];
        }
        if (img_field(rt, IMG_BOUND)) {
            rt_hex((const unsigned char *)(e + 6 + 4 * nf), 32, sha);
            fprintf(t, "reads %lld reads-%lld.bin %lld %llu %s\n", (long long)o, (long long)o, (long long)rt->start,
                    (unsigned long long)(v - (uint64_t)rt->start), sha);
        }
    }
    if (c->resumed) fprintf(t, "resumed-from %s %lld %s\n", c->resumed_sha, (long long)c->resumed_version,
                        c->resume_mode == 2 ? "new" : "same");
    int root = rt->owner == (int64_t)img_field(rt, IMG_ROOT), rc = RT_OK;
    unsigned char d[32] = {0};
    if (root && !c->keyed) fprintf(t, "auth none\n");
    if (root && c->keyed) { /* the tag: over every byte before the auth line */
        if (fflush(t) != 0 || rt_hmac(c->key, sizeof c->key, s, n, d) != 0)
            rc = rt_fail(rt, RT_IO_ERROR, "the manifest could not be tagged (out of memory, or libcrypto)");
        rt_hex(d, 32, sha);
        fprintf(t, "auth hmac-sha256 %s\n", sha);
    }
    if (rc == RT_OK && (fflush(t) != 0 || rt_sha256_bytes(s, n, d) != 0))
        rc = rt_fail(rt, RT_IO_ERROR, "the manifest could not be hashed (out of memory, or libcrypto)");
    rt_hex(d, 32, sha);
    fprintf(t, "sha256 %s\n", sha);
    if (fclose(t) != 0 && rc == RT_OK) rc = rt_fail(rt, RT_IO_ERROR, "out of memory");
    char *path = root ? rt_pathf("%s/" CKPT_ROOT_MANIFEST, c->partial)
                      : rt_pathf("%s/manifest-%lld.txt", c->partial, (long long)rt->owner);
    if (rc == RT_OK) rc = path ? write_file(rt, path, s, n) : rt_fail(rt, RT_IO_ERROR, "out of memory");
    if (rc == RT_OK && !root) { /* this owner's manifest goes up with its entries */
        uint64_t *mf = c->manifests + 5 * c->nmanifests++;
        mf[0] = (uint64_t)rt->owner;
        if (rt_sha256_bytes(s, n, (unsigned char *)(mf + 1)) != 0)
            rc = rt_fail(rt, RT_IO_ERROR, "libcrypto could not hash the manifest");
    }
    free(path);
    free(s);
    return rc;
}

/* ckpt-publish (the root): every file is fsynced by its writer; the directory, then its
   rename to ckpt-<v> (never over an existing one), then the parent directory. */
int rt_ckpt_publish(struct rt *rt, uint64_t v) {
    struct ckpt *c = &rt->ck;
    /* every shard and manifest reported is in this directory, at its size */
    const uint64_t *e = c->entries;
    for (int64_t j = 0; j < c->nentries; j++, e += entry_words(rt, e)) {
        char *path = rt_pathf("%s/shard-%lld.bin", c->partial, (long long)e[0]);
        char *reads = img_field(rt, IMG_BOUND) ? rt_pathf("%s/reads-%lld.bin", c->partial, (long long)e[0]) : NULL;
        struct stat st;
        int ok = path && stat(path, &st) == 0 && (uint64_t)st.st_size == e[1] &&
                 (!img_field(rt, IMG_BOUND) || (reads && stat(reads, &st) == 0));
        free(reads);
        int rc = ok ? RT_OK : rt_fail(rt, RT_CHECKPOINT_SHARD_MISSING, "owner %lld's shard is not '%s' "
                                      "(were the owners given different --run-id or --checkpoint-dir?)",
                                      (long long)e[0], path ? path : "?");
        free(path);
        TRY(rc);
    }
    for (int64_t j = 0; j < c->nmanifests; j++) {
        char *path = rt_pathf("%s/manifest-%lld.txt", c->partial, (long long)c->manifests[5 * j]);
        struct stat st;
        int rc = path && stat(path, &st) == 0 ? RT_OK
                 : rt_fail(rt, RT_CHECKPOINT_SHARD_MISSING, "owner %lld's manifest is not '%s'",
                           (long long)c->manifests[5 * j], path ? path : "?");
        free(path);
        TRY(rc);
    }
    TRY(fsync_path(rt, c->partial));
    char *final = rt_pathf("%s/ckpt-%llu", c->dir, (unsigned long long)v);
    if (!final) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    int rc = RT_OK;
    if (renameat2(AT_FDCWD, c->partial, AT_FDCWD, final, RENAME_NOREPLACE) != 0)
        rc = errno == EEXIST || errno == ENOTEMPTY
                 ? rt_fail(rt, RT_CHECKPOINT_EXISTS, "'%s' exists; checkpoints are never overwritten", final)
                 : rt_fail(rt, RT_IO_ERROR, "cannot publish '%s' (%s)", final, strerror(errno));
    free(final);
    TRY(rc);
    return fsync_path(rt, c->dir);
}

/* The checkpoint key (docs/checkpoints.md, "Tags"): HMAC-SHA-256(K, CKPT_KEY_LABEL), K the
   --checkpoint-key file's bytes, else the run's key; no key: manifests are written `auth
   none`, and a restore reads a manifest without checking its tag. */
int rt_checkpoint_key(struct rt *rt) {
    struct ckpt *c = &rt->ck;
    unsigned char *own = NULL;
    size_t len = 0;
    if (c->key_path) TRY(rt_read_key_file(rt, c->key_path, "checkpoint key", &own, &len));
    const unsigned char *k = own ? own : rt->auth.key;
    size_t n = own ? len : rt->auth.key_len;
    int rc = RT_OK;
    if (k) {
        static const char label[] = CKPT_KEY_LABEL;
        c->keyed = 1;
        if (rt_hmac(k, n, label, sizeof label - 1, c->key) != 0)
            rc = rt_fail(rt, RT_IO_ERROR, "libcrypto could not derive the checkpoint key");
    }
    if (own) memset(own, 0, len);
    free(own);
    return rc;
}
