/* Restore from a checkpoint's path alone (`--resume DIR`, docs/checkpoints.md): the root
   manifest (its trailer hash; in a keyed run its tag), the child manifests (hash, version, identity), the learner
   and contract, the coverage of every region (manifest.c), then the shards holding words
   this owner holds now (hash, header, each fragment's hash), from which it selects those
   words. */
#include "manifest.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fragment's runs, parsed: (start, step, count) triples. */
struct runs {
    int64_t *r, n;
};
static int parse_runs(const struct frag *f, struct runs *out) {
    size_t cap = strlen(f->runs) / 6 + 1; /* each run takes at least "0+0x0," */
    out->r = malloc(sizeof *out->r * 3 * cap), out->n = 0;
    if (!out->r) return 0;
    for (const char *r = f->runs; *r && *r != '-' && (size_t)out->n < cap; out->n++) {
        long long v[3];
        size_t used = rt_run_at(r, v); /* checked by rt_manifest_coverage() */
        out->r[3 * out->n] = v[0], out->r[3 * out->n + 1] = v[1], out->r[3 * out->n + 2] = v[2];
        r += used + (r[used] == ',');
    }
    return 1;
}

/* Where a fragment's words go: its runs, and how far they have been walked. */
struct selector {
    struct runs runs;
    int64_t run, i;
};

/* The fragment's next n words (`words`; NULL: only whether this owner holds any of them),
   each word this owner holds selected into its compact storage, a span at a time. */
static int select_words(struct rt *rt, int region, struct selector *s, const uint64_t *words, int64_t n) {
    uint64_t *dst = region == REGION_PARAMETERS ? rt->store.params
                    : region == REGION_OUTER   ? rt->store.outer /* replicated: slot = position */
                                               : rt->store.state;
    int any = 0;
    if ((region == REGION_OUTER && !rt->ck.outer) || (region == REGION_STATE && rt->ck.states)) return 0;
    if (region == REGION_STATES) { /* local steps, continuing the contract: this owner's own block */
        for (int64_t j = 0, pos; j < n && rt->ck.states && s->run < s->runs.n; j++) {
            const int64_t *r = s->runs.r + 3 * s->run;
            pos = r[0] + s->i * r[1];
            any |= pos / rt->m == rt->owner;
            if (words && pos / rt->m == rt->owner) rt->store.state[pos % rt->m] = words[j];
            if (++s->i == r[2]) s->run++, s->i = 0;
        }
        return any;
    }
    if (region == REGION_HISTORY) { /* each version's words into its slot (rt->start: the version) */
        for (int64_t j = 0; j < n && words && rt->ck.history && s->run < s->runs.n; j++) {
            const int64_t *r = s->runs.r + 3 * s->run;
            *rt_version_word(rt, (uint64_t)rt->start, r[0] + s->i * r[1]) = words[j];
            if (++s->i == r[2]) s->run++, s->i = 0;
        }
        return rt->ck.history;
    }
    for (int64_t j = 0, got, slot; j < n && s->run < s->runs.n; j += got) {
        const int64_t *r = s->runs.r + 3 * s->run;
        int64_t left = r[2] - s->i;
        got = left == 0 ? 0 : rt_slot_span(rt, region, r[0] + s->i * r[1], r[1], left < n - j ? left : n - j, &slot);
        if (got && slot >= 0) {
            if (!words) return 1;
            memcpy(dst + slot, words + j, (size_t)got * 8);
            any = 1;
        }
        if ((s->i += got) == r[2]) s->run++, s->i = 0;
    }
    return any;
}

/* Whether this owner holds any of fragment f's positions. */
static int holds_any(struct rt *rt, const struct frag *f) {
    struct selector s = {{0}, 0, 0};
    int any = !parse_runs(f, &s.runs) || select_words(rt, (int)f->region, &s, NULL, f->words); /* OOM: read it */
    free(s.runs.r);
    return any;
}

#define CHUNK_WORDS (1 << 17) /* a shard is read, hashed and selected from 1 MiB at a time */

/* Fragment f's words from the shard open at fd: read, hashed and selected in one pass, a
   chunk at a time; its sha256 into the shard's digest. */
static int read_fragment(struct rt *rt, int fd, const struct frag *f, uint64_t *chunk, struct rt_sha256 *file,
                         char sha[65], const char *path) {
    struct selector s = {{0}, 0, 0};
    if (!parse_runs(f, &s.runs)) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    struct rt_sha256 h;
    unsigned char d[32];
    rt_sha256_init(&h);
    int rc = RT_OK;
    for (int64_t j = 0, n; j < f->words && rc == RT_OK; j += n) {
        n = f->words - j < CHUNK_WORDS ? f->words - j : CHUNK_WORDS;
        rc = rt_read_exact(rt, fd, chunk, (size_t)n * 8, path);
        if (rc == RT_OK) rt_sha256_update(&h, chunk, (size_t)n * 8), select_words(rt, (int)f->region, &s, chunk, n);
    }
    free(s.runs.r);
    rt_sha256_final(&h, d);
    rt_sha256_update(file, d, 32);
    rt_hex(d, 32, sha);
    return rc;
}

/* The header and fragment table: the shard's bytes before its fragments' words, which its
   manifest lays one after another to the end of the file (`size` bytes, as fstat found). */
static int read_head(struct rt *rt, int fd, int64_t size, const struct manifest *m, const struct shard *s,
                     const char *path, uint64_t **head, int64_t *len) {
    if (size != s->bytes)
        return rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 is not the one %s names", path, m->path);
    if (s->bytes < 48) return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is not owner %lld's shard", path, (long long)s->owner);
    int64_t words = 0, at;
    for (int64_t q = 0; q < m->nfrags; q++) {
        const struct frag *f = &m->frags[q];
        if (f->owner != s->owner) continue;
        if (f->words > (s->bytes - 48) / 8 - words) /* the sum stays below the file's words */
            return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: owner %lld's fragment lies outside its shard", m->path,
                           (long long)f->owner);
        words += f->words;
    }
    *len = at = s->bytes - 8 * words;
    for (int64_t q = 0; q < m->nfrags; q++) {
        const struct frag *f = &m->frags[q];
        if (f->owner != s->owner) continue;
        if (f->offset != at)
            return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: owner %lld's fragment lies outside its shard", m->path,
                           (long long)f->owner);
        at += 8 * f->words;
    }
    *head = malloc((size_t)*len);
    if (!*head) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    return rt_read_exact(rt, fd, *head, (size_t)*len, path);
}

/* The header's magic, format, owner, version and identity, once the shard's hash agreed. */
static int check_head(struct rt *rt, const struct manifest *m, const struct shard *s, const char *path,
                      const uint64_t *h) {
    if (h[0] != CKPT_SHARD_MAGIC || h[1] != CKPT_SHARD_FORMAT || h[3] != (uint64_t)s->owner)
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is not owner %lld's shard", path, (long long)s->owner);
    if (h[4] != m->version || h[2] != m->identity)
        return rt_fail(rt, RT_CHECKPOINT_VERSION, "%s holds version %llu of identity %016llx, %s version %llu of %016llx",
                       path, (unsigned long long)h[4], (unsigned long long)h[2], m->path,
                       (unsigned long long)m->version, (unsigned long long)m->identity);
    return RT_OK;
}

/* The shard's digest against its manifest's, then its header: `file` holds the hash of its
   header and fragment table and of its fragments' digests. */
static int check_digest(struct rt *rt, struct rt_sha256 *file, const struct manifest *m, const struct shard *s,
                        const char *path, const uint64_t *head) {
    unsigned char d[32];
    char sha[65];
    rt_sha256_final(file, d);
    rt_hex(d, 32, sha);
    if (strcmp(sha, s->sha) != 0)
        return rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 is not the one %s names", path, m->path);
    return check_head(rt, m, s, path, head);
}

/* A shard this owner needs words of, in one pass: its header, then each fragment read,
   hashed and selected; then its digest (over the header and the fragments' digests), its
   header and each fragment's digest are checked, in that order. */
static int shard_pass(struct rt *rt, int fd, int64_t size, const struct manifest *m, const struct shard *s,
                      const char *path, uint64_t *chunk) {
    uint64_t *head = NULL;
    int64_t len = 0;
    int rc = read_head(rt, fd, size, m, s, path, &head, &len);
    struct rt_sha256 file;
    rt_sha256_init(&file);
    if (rc == RT_OK) rt_sha256_update(&file, head, (size_t)len);
    const struct frag *wrong = NULL;
    for (int64_t q = 0; q < m->nfrags && rc == RT_OK; q++) {
        const struct frag *f = &m->frags[q];
        char sha[65];
        if (f->owner != s->owner) continue;
        rc = read_fragment(rt, fd, f, chunk, &file, sha, path);
        if (rc == RT_OK && !wrong && strcmp(sha, f->sha) != 0) wrong = f;
    }
    if (rc == RT_OK) rc = check_digest(rt, &file, m, s, path, head);
    if (rc == RT_OK && wrong)
        rc = rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: owner %lld's %s fragment does not match its sha256",
                     path, (long long)wrong->owner, CKPT_REGION_NAME(wrong->region));
    free(head);
    return rc;
}

/* 32 bytes from the 64 hex digits of a sha256 (checked by parse). */
static void from_hex(const char *hex64, unsigned char d[32]) {
    for (int i = 0; i < 32; i++) {
        int hi = hex64[2 * i], lo = hex64[2 * i + 1];
        d[i] = (unsigned char)(((hi <= '9' ? hi - '0' : hi - 'a' + 10) << 4) | (lo <= '9' ? lo - '0' : lo - 'a' + 10));
    }
}

/* A shard holding no word this owner needs, checked without reading its fragments: its
   size, and its digest over its header and fragment table (read) and the fragments'
   digests its manifest names; then its header. */
static int head_pass(struct rt *rt, int fd, int64_t size, const struct manifest *m, const struct shard *s,
                     const char *path) {
    uint64_t *head = NULL;
    int64_t len = 0;
    int rc = read_head(rt, fd, size, m, s, path, &head, &len);
    if (rc == RT_OK) {
        struct rt_sha256 file;
        unsigned char d[32];
        rt_sha256_init(&file);
        rt_sha256_update(&file, head, (size_t)len);
        for (int64_t q = 0; q < m->nfrags; q++)
            if (m->frags[q].owner == s->owner) from_hex(m->frags[q].sha, d), rt_sha256_update(&file, d, 32);
        rc = check_digest(rt, &file, m, s, path, head);
    }
    free(head);
    return rc;
}

/* Every shard the manifest names is there as a regular file and checked: read through
   (`needed`: it holds words this owner selects) or by its header alone. */
static int read_shard(struct rt *rt, const char *dir, const struct manifest *m, const struct shard *s,
                      uint64_t *chunk, int needed) {
    char *path = rt_pathf("%s/%s", dir, s->file);
    if (!path) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    int fd = -1;
    int64_t size = 0;
    int rc = rt_open_regular(rt, path, RT_CHECKPOINT_SHARD_MISSING, &fd, &size);
    if (rc == RT_OK) rc = needed ? shard_pass(rt, fd, size, m, s, path, chunk) : head_pass(rt, fd, size, m, s, path);
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

/* What parse allocated for a manifest, and its text. */
static void forget(struct manifest *m) {
    for (int64_t j = 0; j < m->nfrags; j++) free(m->frags[j].runs);
    free(m->frags), free(m->shards), free(m->children), free(m->text);
}

/* A child manifest the root names: the file of its owner, its sha256 the root's, its
   version and identity the root's. */
static int check_child(struct rt *rt, const char *dir, const struct manifest *m, int64_t j) {
    char want[64];
    snprintf(want, sizeof want, "manifest-%lld.txt", (long long)m->children[j].owner);
    if (strcmp(want, m->children[j].file) != 0)
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: '%s' is not owner %lld's manifest file", m->path,
                       m->children[j].file, (long long)m->children[j].owner);
    struct manifest c = {0};
    char *path = rt_pathf("%s/%s", dir, m->children[j].file);
    c.path = path;
    int rc = path ? rt_read_all(rt, path, &c.text, &c.len, RT_CHECKPOINT_SHARD_MISSING)
                  : rt_fail(rt, RT_IO_ERROR, "out of memory");
    char sha[65];
    if (rc == RT_OK) {
        rt_sha_hex(c.text, c.len, sha);
        if (strcmp(sha, m->children[j].sha) != 0)
            rc = rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 is not the one %s names", path, m->path);
    }
    if (rc == RT_OK) rc = rt_manifest_parse(rt, &c);
    if (rc == RT_OK && (c.version != m->version || c.identity != m->identity))
        rc = rt_fail(rt, RT_CHECKPOINT_VERSION, "%s is version %llu of identity %016llx, %s version %llu of %016llx",
                     path, (unsigned long long)c.version, (unsigned long long)c.identity, m->path,
                     (unsigned long long)m->version, (unsigned long long)m->identity);
    /* what the identity stands for, the root's line for line (as alphac.checkpoint reads it) */
    static const char *const same[] = {"learner", "inputs", "contract", "layout"};
    for (size_t i = 0; rc == RT_OK && i < sizeof same / sizeof same[0]; i++) {
        char *mine = rt_manifest_item(&c, same[i]), *root = rt_manifest_item(m, same[i]);
        if (!mine || !root || strcmp(mine, root) != 0)
            rc = rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: its %s line is not the root's", path, same[i]);
        free(mine);
        free(root);
    }
    forget(&c);
    free(path);
    return rc;
}

/* The root manifest's auth line: there; in a keyed run, a tag, and the tag the checkpoint
   key makes over every byte before that line (compared in constant time). */
static int check_tag(struct rt *rt, const struct manifest *m) {
    if (!m->auth) return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s has no auth line", m->path);
    if (!rt->ck.keyed) return RT_OK;
    if (m->auth == 1)
        return rt_fail(rt, RT_CHECKPOINT_AUTH, "%s is not tagged (written by an unkeyed run); a keyed run resumes "
                       "only checkpoints tagged under its checkpoint key", m->path);
    unsigned char d[32];
    char want[65];
    unsigned diff = rt_hmac(rt->ck.key, sizeof rt->ck.key, m->text, m->auth_at, d) != 0;
    rt_hex(d, 32, want);
    for (int i = 0; i < 64; i++) diff |= (unsigned)(want[i] ^ m->tag[i]);
    return diff ? rt_fail(rt, RT_CHECKPOINT_AUTH, "%s: its tag is not the one this run's checkpoint key makes "
                          "(another key's checkpoint, or a forged one)", m->path)
                : RT_OK;
}

static int restore(struct rt *rt, const char *dir, struct manifest *m, unsigned char *count, uint64_t *chunk) {
    int same = rt->ck.resume_mode != 2;
    TRY(rt_manifest_parse(rt, m));
    TRY(check_tag(rt, m));
    TRY(rt_manifest_lines(rt, m, same));
    if (m->version > (uint64_t)rt->updates)
        return rt_fail(rt, RT_CHECKPOINT_VERSION, "%s is version %llu, past this run's %lld updates", m->path,
                       (unsigned long long)m->version, (long long)rt->updates);
    for (int64_t j = 0; j < m->nchildren; j++) TRY(check_child(rt, dir, m, j));
    TRY(rt_manifest_coverage(rt, m, count, 1, rt->k));
    TRY(rt_manifest_coverage(rt, m, count, 2, rt->m));
    /* fixed staleness, continuing the contract: the S versions before the checkpoint's (with
       partitioned parameters, into the read replicas' slots) */
    int part = img_field(rt, IMG_PART_PARAMETERS) && img_field(rt, IMG_STALENESS) && same;
    int64_t history = (int64_t)img_field(rt, IMG_STALENESS) * rt->k;
    if (part) TRY(rt_replica_history(rt));
    rt->ck.history = same && rt_version_word(rt, 0, 0) != NULL;
    if (rt->ck.history) TRY(rt_manifest_coverage(rt, m, count, REGION_HISTORY, history));
    /* local steps' outer momentum, continuing the contract (a new one starts it at +0.0) */
    rt->ck.outer = same && rt->store.outer != NULL;
    if (rt->ck.outer) TRY(rt_manifest_coverage(rt, m, count, REGION_OUTER, rt->store.kp));
    /* local steps with optimizer state, continuing the contract: every owner's own (a new
       contract gives every owner the state region's, owner 0's) */
    rt->ck.states = same && img_field(rt, IMG_LOCAL_STEPS) && rt->m > 0;
    if (rt->ck.states) TRY(rt_manifest_coverage(rt, m, count, REGION_STATES, rt->n * rt->m));
    rt->start = (int64_t)m->version;
    /* every shard named: those holding words this owner holds now read through */
    for (int64_t j = 0; j < m->nshards; j++) {
        int needed = 0;
        for (int64_t q = 0; q < m->nfrags && !needed; q++)
            needed = m->frags[q].owner == m->shards[j].owner && holds_any(rt, &m->frags[q]);
        TRY(read_shard(rt, dir, m, &m->shards[j], chunk, needed));
    }
    /* (a new contract reads no version before the start: rt_read_version) */
    uint64_t S = img_field(rt, IMG_STALENESS);
    for (uint64_t j = 0, w; part && rt->ck.history && j < S; j++) /* the replicas restored, by version */
        w = m->version + j >= S ? m->version + j - S : 0, rt->store.history_versions[w % (S + 1)] = w;
    struct ckpt *c = &rt->ck;
    c->resumed = 1;
    memcpy(c->resumed_sha, m->sha, 65);
    c->resumed_version = (int64_t)m->version;
    char id[17];
    memcpy(id, m->sha, 16);
    id[16] = 0;
    c->resumed_id = strtoull(id, NULL, 16); /* varies the default run id */
    return RT_OK;
}

/* The restore, under one deadline: --timeout-ms from its start (checked after every read). */
int rt_restore(struct rt *rt) {
    const char *dir = rt->ck.resume;
    if (strstr(dir, ".partial-"))
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "'%s' is a partial checkpoint, never loaded", dir);
    rt->net.deadline_ms = rt_now_ms() + rt->net.timeout_ms;
    struct manifest m = {0};
    char *path = rt_pathf("%s/" CKPT_ROOT_MANIFEST, dir);
    m.path = path;
    int64_t most = rt->k > rt->m ? rt->k : rt->m, history = (int64_t)img_field(rt, IMG_STALENESS) * rt->k;
    most = most > history ? most : history;
    most = most > rt->n * rt->m ? most : rt->n * rt->m; /* local steps' every owner's state */
    unsigned char *count = malloc((size_t)most + 1);
    uint64_t *chunk = malloc(CHUNK_WORDS * 8);
    int rc = path && count && chunk ? rt_read_all(rt, path, &m.text, &m.len, RT_CHECKPOINT_MANIFEST)
                                   : rt_fail(rt, RT_IO_ERROR, "out of memory");
    if (rc == RT_OK) rc = restore(rt, dir, &m, count, chunk);
    forget(&m);
    free(path), free(count), free(chunk);
    return rc;
}
