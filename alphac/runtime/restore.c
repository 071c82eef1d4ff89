/* Restore from a checkpoint's path alone (`--resume DIR`, docs/checkpoints.md): the root
   manifest (its trailer hash), the child manifests (hash, version, identity), the learner
   and contract, the coverage of every region, then the shards holding words this owner
   holds now (hash, header, each fragment's hash), from which it selects those words. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARD_MAGIC UINT64_C(0x54504B4341484C41)
#define SHARD_FORMAT 2

struct frag {
    int64_t owner, region, offset, words;
    char *runs; /* "start+stepxcount,..." or "-" */
    char sha[65];
};
struct shard {
    int64_t owner, bytes;
    char file[64], sha[65];
};

struct manifest {
    char *text;
    size_t len;
    const char *path;
    uint64_t version, identity;
    struct frag *frags;
    int64_t nfrags;
    struct shard *shards;
    int64_t nshards;
    struct {
        int64_t owner;
        char file[64], sha[65];
    } *children;
    int64_t nchildren;
    char sha[65];
};

static int read_all(struct rt *rt, const char *path, char **out, size_t *len, int missing_code) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rt_fail(rt, missing_code, "'%s' is missing", path);
    struct stat st;
    char *buf = NULL;
    int rc = RT_OK;
    if (fstat(fd, &st) != 0 || !(buf = malloc((size_t)st.st_size + 1))) rc = rt_fail(rt, RT_IO_ERROR, "cannot read '%s'", path);
    size_t done = 0;
    while (rc == RT_OK && done < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + done, (size_t)st.st_size - done);
        if (r <= 0) rc = rt_fail(rt, RT_IO_ERROR, "cannot read '%s'", path);
        else done += (size_t)r;
    }
    close(fd);
    if (rc != RT_OK) {
        free(buf);
        return rc;
    }
    buf[done] = 0;
    *out = buf, *len = done;
    return RT_OK;
}

static void to_hex(const unsigned char d[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void sha_hex(const void *data, size_t n, char out[65]) {
    unsigned char d[32];
    (void)rt_sha256_bytes(data, n, d); /* zeros where libcrypto failed: no manifest matches them */
    to_hex(d, out);
}

static int bad(struct rt *rt, const struct manifest *m, int64_t line, const char *what) {
    return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s line %lld: %s", m->path, (long long)line, what);
}

/* The text, checked by its trailer, split into items. Learner and contract lines are
   compared by the caller (`check_lines`). */
static int parse(struct rt *rt, struct manifest *m) {
    size_t n = m->len;
    if (n < 72 || m->text[n - 1] != '\n') return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is truncated", m->path);
    const char *trailer = m->text + n - 72;
    if (strncmp(trailer, "sha256 ", 7) != 0 || (trailer != m->text && trailer[-1] != '\n'))
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is truncated (no sha256 line)", m->path);
    memcpy(m->sha, trailer + 7, 64);
    m->sha[64] = 0;
    char want[65];
    sha_hex(m->text, (size_t)(trailer - m->text), want);
    if (strcmp(want, m->sha) != 0)
        return rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 line does not match its contents", m->path);
    if (strncmp(m->text, "alphac-checkpoint 2\n", 20) != 0) return bad(rt, m, 1, "not an alphac checkpoint manifest");
    int64_t line = 1, cap_f = 0, cap_s = 0, cap_c = 0, have = 0;
    for (char *p = m->text + 20; p < trailer; line++) {
        char *end = strchr(p, '\n');
        *end = 0;
        char a[70], b[70];
        long long x, y, z;
        if (sscanf(p, "version %llu", (unsigned long long *)&m->version) == 1) {
            have |= 1;
        } else if (sscanf(p, "identity %llx", (unsigned long long *)&m->identity) == 1) {
            have |= 2;
        } else if (sscanf(p, "shard %lld %63s %lld %64s", &x, a, &y, b) == 4) {
            if (m->nshards == cap_s) m->shards = realloc(m->shards, sizeof *m->shards * (size_t)(cap_s = 2 * cap_s + 8));
            struct shard *s = &m->shards[m->nshards++];
            s->owner = x, s->bytes = y;
            snprintf(s->file, sizeof s->file, "%s", a);
            snprintf(s->sha, sizeof s->sha, "%s", b);
        } else if (!strncmp(p, "fragment ", 9)) {
            char region[16], *runs = malloc(strlen(p)), sha[70];
            if (!runs || sscanf(p, "fragment %lld %15s %lld %lld %s %64s", &x, region, &y, &z, runs, sha) != 6 ||
                (strcmp(region, "parameters") && strcmp(region, "state"))) {
                free(runs);
                return bad(rt, m, line + 1, "malformed fragment");
            }
            if (m->nfrags == cap_f) m->frags = realloc(m->frags, sizeof *m->frags * (size_t)(cap_f = 2 * cap_f + 8));
            struct frag *f = &m->frags[m->nfrags++];
            f->owner = x, f->region = region[0] == 'p' ? 1 : 2, f->offset = y, f->words = z, f->runs = runs;
            snprintf(f->sha, sizeof f->sha, "%s", sha);
        } else if (sscanf(p, "manifest %lld %63s %64s", &x, a, b) == 3) {
            if (m->nchildren == cap_c) m->children = realloc(m->children, sizeof *m->children * (size_t)(cap_c = 2 * cap_c + 8));
            m->children[m->nchildren].owner = x;
            snprintf(m->children[m->nchildren].file, 64, "%s", a);
            snprintf(m->children[m->nchildren++].sha, 65, "%s", b);
        } else if (strncmp(p, "learner ", 8) && strncmp(p, "contract ", 9) && strncmp(p, "layout ", 7) &&
                   strncmp(p, "region ", 7) && strncmp(p, "owners ", 7) && strncmp(p, "resumed-from ", 13)) {
            return bad(rt, m, line + 1, "unknown or malformed item");
        }
        *end = '\n';
        p = end + 1;
    }
    if (have != 3) return bad(rt, m, line, "no version or identity line");
    return RT_OK;
}

/* The rest of the line after `key ` in the manifest text (NUL-terminated copy). */
static char *item(const struct manifest *m, const char *key) {
    size_t k = strlen(key);
    for (const char *p = m->text; *p;) {
        const char *end = strchr(p, '\n');
        if (!end) break;
        if (!strncmp(p, key, k) && p[k] == ' ') return strndup(p + k + 1, (size_t)(end - p - (long)k - 1));
        p = end + 1;
    }
    return NULL;
}

static int check_lines(struct rt *rt, const struct manifest *m, int same) {
    char *learner = item(m, "learner"), *contract = item(m, "contract");
    int rc = RT_OK;
    if (!learner || !contract) rc = rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s has no learner or contract line", m->path);
    else if (strcmp(learner, img_text(rt, IMG_STR_CKPT_LEARNER)) != 0)
        rc = rt_fail(rt, RT_CHECKPOINT_LEARNER_MISMATCH, "%s holds learner '%s', this executable runs '%s'", m->path,
                     learner, img_text(rt, IMG_STR_CKPT_LEARNER));
    else {
        /* profile (4 fields) and relation, then the order digest */
        const char *mine = img_text(rt, IMG_STR_CKPT_CONTRACT);
        const char *a = contract, *b = mine;
        for (int field = 0; field < 6 && rc == RT_OK; field++) {
            size_t la = strcspn(a, " "), lb = strcspn(b, " ");
            if (la != lb || strncmp(a, b, la) != 0) {
                if (field < 5)
                    rc = rt_fail(rt, RT_NUMERICAL_PROFILE_MISMATCH, "%s was written under contract '%s', this run "
                                 "executes '%s'", m->path, contract, mine);
                else if (same)
                    rc = rt_fail(rt, RT_NUMERICAL_ORDER_MISMATCH, "%s continues another ordered operation list "
                                 "(order %.*s, this run %.*s): resume with --new-contract to start a new contract "
                                 "on its state", m->path, (int)la, a, (int)lb, b);
            }
            a += la + (a[la] == ' '), b += lb + (b[lb] == ' ');
        }
    }
    free(learner);
    free(contract);
    return rc;
}

/* Count each position's fragments (saturating at 2): missing, duplicated, outside. */
static int coverage(struct rt *rt, const struct manifest *m, unsigned char *count, int64_t region, int64_t domain) {
    memset(count, 0, (size_t)domain);
    for (int64_t j = 0; j < m->nfrags; j++) {
        const struct frag *f = &m->frags[j];
        if (f->region != region) continue;
        int64_t seen = 0;
        for (const char *r = f->runs; *r && *r != '-';) {
            long long s, st, c;
            int used = 0;
            if (sscanf(r, "%lld+%lldx%lld%n", &s, &st, &c, &used) != 3 || s < 0 || st < 0 || c < 0)
                return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: malformed runs of owner %lld's fragment", m->path,
                               (long long)f->owner);
            for (long long i = 0; i < c; i++) {
                long long p = s + i * st;
                if (p >= domain)
                    return rt_fail(rt, RT_SHARD_COVERAGE_OUTSIDE, "%s: owner %lld's %s fragment holds position %lld "
                                   "outside the region's %lld words", m->path, (long long)f->owner,
                                   region == 1 ? "parameters" : "state", p, (long long)domain);
                if (count[p] < 2) count[p]++;
            }
            seen += c;
            r += used + (r[used] == ',');
        }
        if (seen != f->words)
            return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: owner %lld's fragment lists %lld positions for %lld words",
                           m->path, (long long)f->owner, (long long)seen, (long long)f->words);
    }
    for (int64_t p = 0; p < domain; p++)
        if (count[p] != 1)
            return rt_fail(rt, count[p] ? RT_SHARD_COVERAGE_DUPLICATED : RT_SHARD_COVERAGE_MISSING,
                           "%s: %s word %lld is held by %s", m->path, region == 1 ? "parameters" : "state",
                           (long long)p, count[p] ? "two fragments" : "no fragment");
    return RT_OK;
}

/* A fragment's runs, parsed: (start, step, count) triples. */
struct runs {
    int64_t *r, n;
};
static int parse_runs(const struct frag *f, struct runs *out) {
    size_t cap = strlen(f->runs) / 6 + 1; /* each run takes at least "0+0x0," */
    out->r = malloc(sizeof *out->r * 3 * cap), out->n = 0;
    if (!out->r) return 0;
    for (const char *r = f->runs; *r && *r != '-' && (size_t)out->n < cap; out->n++) {
        long long s, st, c;
        int used = 0;
        sscanf(r, "%lld+%lldx%lld%n", &s, &st, &c, &used); /* checked by coverage() */
        out->r[3 * out->n] = s, out->r[3 * out->n + 1] = st, out->r[3 * out->n + 2] = c;
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
    uint64_t *dst = region == REGION_PARAMETERS ? rt->params : rt->state;
    int any = 0;
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

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", dir, file);
    return s;
}

#define CHUNK_WORDS (1 << 17) /* a shard is read, hashed and selected from 1 MiB at a time */

static int read_exact(int fd, void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

/* Fragment f's words from the shard open at fd: read, hashed and selected in one pass, a
   chunk at a time; its sha256 into the shard's digest. */
static int read_fragment(struct rt *rt, int fd, const struct frag *f, uint64_t *chunk, struct rt_sha256 *file,
                         char sha[65]) {
    struct selector s = {{0}, 0, 0};
    if (!parse_runs(f, &s.runs)) return -1;
    struct rt_sha256 h;
    unsigned char d[32];
    rt_sha256_init(&h);
    int rc = 0;
    for (int64_t j = 0, n; j < f->words && rc == 0; j += n) {
        n = f->words - j < CHUNK_WORDS ? f->words - j : CHUNK_WORDS;
        rc = read_exact(fd, chunk, (size_t)n * 8);
        if (rc == 0) rt_sha256_update(&h, chunk, (size_t)n * 8), select_words(rt, (int)f->region, &s, chunk, n);
    }
    free(s.runs.r);
    rt_sha256_final(&h, d);
    rt_sha256_update(file, d, 32);
    to_hex(d, sha);
    return rc;
}

/* The header and fragment table: the shard's bytes before its fragments' words, which its
   manifest lays one after another to the end of the file. */
static int read_head(struct rt *rt, int fd, const struct manifest *m, const struct shard *s, const char *path,
                     uint64_t **head, int64_t *len) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size != s->bytes)
        return rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 is not the one %s names", path, m->path);
    int64_t words = 0, at;
    for (int64_t q = 0; q < m->nfrags; q++)
        if (m->frags[q].owner == s->owner) words += m->frags[q].words;
    *len = at = s->bytes - 8 * words;
    for (int64_t q = 0; q < m->nfrags; q++) {
        const struct frag *f = &m->frags[q];
        if (f->owner != s->owner) continue;
        if (f->offset != at)
            return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: owner %lld's fragment lies outside its shard", m->path,
                           (long long)f->owner);
        at += 8 * f->words;
    }
    if (*len < 48) return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is not owner %lld's shard", path, (long long)s->owner);
    *head = malloc((size_t)*len);
    if (!*head || read_exact(fd, *head, (size_t)*len) != 0)
        return rt_fail(rt, RT_IO_ERROR, "cannot read '%s'", path);
    return RT_OK;
}

/* The header's magic, format, owner, version and identity, once the shard's hash agreed. */
static int check_head(struct rt *rt, const struct manifest *m, const struct shard *s, const char *path,
                      const uint64_t *h) {
    if (h[0] != SHARD_MAGIC || h[1] != SHARD_FORMAT || h[3] != (uint64_t)s->owner)
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is not owner %lld's shard", path, (long long)s->owner);
    if (h[4] != m->version || h[2] != m->identity)
        return rt_fail(rt, RT_CHECKPOINT_VERSION, "%s holds version %llu of identity %016llx, %s version %llu of %016llx",
                       path, (unsigned long long)h[4], (unsigned long long)h[2], m->path,
                       (unsigned long long)m->version, (unsigned long long)m->identity);
    return RT_OK;
}

/* A shard this owner needs words of, in one pass: its header, then each fragment read,
   hashed and selected; then its digest (over the header and the fragments' digests), each
   fragment's, and its header are checked, in that order. */
static int shard_pass(struct rt *rt, int fd, const struct manifest *m, const struct shard *s, const char *path,
                      uint64_t *chunk) {
    uint64_t *head = NULL;
    int64_t len = 0;
    int rc = read_head(rt, fd, m, s, path, &head, &len);
    struct rt_sha256 file;
    rt_sha256_init(&file);
    if (rc == RT_OK) rt_sha256_update(&file, head, (size_t)len);
    const struct frag *wrong = NULL;
    for (int64_t q = 0; q < m->nfrags && rc == RT_OK; q++) {
        const struct frag *f = &m->frags[q];
        char sha[65];
        if (f->owner != s->owner) continue;
        if (read_fragment(rt, fd, f, chunk, &file, sha) != 0) rc = rt_fail(rt, RT_IO_ERROR, "cannot read '%s'", path);
        else if (!wrong && strcmp(sha, f->sha) != 0) wrong = f;
    }
    unsigned char d[32];
    char sha[65];
    rt_sha256_final(&file, d);
    to_hex(d, sha);
    if (rc == RT_OK && strcmp(sha, s->sha) != 0)
        rc = rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 is not the one %s names", path, m->path);
    if (rc == RT_OK) rc = check_head(rt, m, s, path, head);
    if (rc == RT_OK && wrong)
        rc = rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: owner %lld's %s fragment does not match its sha256",
                     path, (long long)wrong->owner, wrong->region == 1 ? "parameters" : "state");
    free(head);
    return rc;
}

static int read_shard(struct rt *rt, const char *dir, const struct manifest *m, const struct shard *s,
                      uint64_t *chunk) {
    char *path = join(dir, s->file);
    if (!path) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd < 0 ? rt_fail(rt, RT_CHECKPOINT_SHARD_MISSING, "'%s' is missing", path)
                    : shard_pass(rt, fd, m, s, path, chunk);
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

static int restore(struct rt *rt, const char *dir, struct manifest *m, unsigned char *count, uint64_t *chunk) {
    int same = rt->ck.resume_mode != 2;
    TRY(parse(rt, m));
    TRY(check_lines(rt, m, same));
    if (m->version > (uint64_t)rt->updates)
        return rt_fail(rt, RT_CHECKPOINT_VERSION, "%s is version %llu, past this run's %lld updates", m->path,
                       (unsigned long long)m->version, (long long)rt->updates);
    for (int64_t j = 0; j < m->nchildren; j++) {
        struct manifest c = {0};
        char *path = join(dir, m->children[j].file);
        c.path = path;
        int rc = path ? read_all(rt, path, &c.text, &c.len, RT_CHECKPOINT_SHARD_MISSING) : RT_IO_ERROR;
        char sha[65];
        if (rc == RT_OK) {
            sha_hex(c.text, c.len, sha);
            if (strcmp(sha, m->children[j].sha) != 0)
                rc = rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 is not the one %s names", path, m->path);
        }
        if (rc == RT_OK) rc = parse(rt, &c);
        if (rc == RT_OK && (c.version != m->version || c.identity != m->identity))
            rc = rt_fail(rt, RT_CHECKPOINT_VERSION, "%s is version %llu of identity %016llx, %s version %llu of %016llx",
                         path, (unsigned long long)c.version, (unsigned long long)c.identity, m->path,
                         (unsigned long long)m->version, (unsigned long long)m->identity);
        free(c.text);
        free(path);
        TRY(rc);
    }
    TRY(coverage(rt, m, count, 1, rt->k));
    TRY(coverage(rt, m, count, 2, rt->m));
    /* the shards holding words this owner holds now */
    for (int64_t j = 0; j < m->nshards; j++) {
        int needed = 0;
        for (int64_t q = 0; q < m->nfrags && !needed; q++)
            needed = m->frags[q].owner == m->shards[j].owner && holds_any(rt, &m->frags[q]);
        if (needed) TRY(read_shard(rt, dir, m, &m->shards[j], chunk));
    }
    rt->start = (int64_t)m->version;
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

int rt_restore(struct rt *rt) {
    const char *dir = rt->ck.resume;
    if (strstr(dir, ".partial-"))
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "'%s' is a partial checkpoint, never loaded", dir);
    struct manifest m = {0};
    char *path = join(dir, "manifest.txt");
    m.path = path;
    int64_t most = rt->k > rt->m ? rt->k : rt->m;
    unsigned char *count = malloc((size_t)most + 1);
    uint64_t *chunk = malloc(CHUNK_WORDS * 8);
    int rc = path && count && chunk ? read_all(rt, path, &m.text, &m.len, RT_CHECKPOINT_MANIFEST)
                                   : rt_fail(rt, RT_IO_ERROR, "out of memory");
    if (rc == RT_OK) rc = restore(rt, dir, &m, count, chunk);
    for (int64_t j = 0; j < m.nfrags; j++) free(m.frags[j].runs);
    free(m.frags), free(m.shards), free(m.children), free(m.text), free(path), free(count), free(chunk);
    return rc;
}
