/* Restore from a checkpoint's path alone (`--resume DIR`, docs/checkpoints.md): the root
   manifest (its trailer hash; in a keyed run its tag), the child manifests (hash, version, identity), the learner
   and contract, the coverage of every region, then the shards holding words this owner
   holds now (hash, header, each fragment's hash), from which it selects those words. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


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
    int auth;              /* its auth line: 0 none, 1 `auth none`, 2 a tag */
    size_t auth_at;        /* the auth line's offset: the tag covers every byte before it */
    char tag[65];
};

/* Open a file of the checkpoint for reading: never through a symbolic link, never blocking
   (a FIFO or a device is opened O_NONBLOCK, then refused by its type on the descriptor); a
   regular file only, refused `code` naming the path otherwise. Blocking reads from then on. */
static int open_regular(struct rt *rt, const char *path, int code, int *fd, int64_t *size) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0 && errno == ELOOP) return rt_fail(rt, code, "'%s' is not a regular file (a symbolic link)", path);
    if (*fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? rt_fail(rt, code, "'%s' is missing", path)
                                                   : rt_fail(rt, code, "cannot open '%s' (%s)", path, strerror(errno));
    struct stat st;
    int rc = RT_OK, flags;
    if (fstat(*fd, &st) != 0) rc = rt_fail(rt, RT_IO_ERROR, "cannot read '%s' (%s)", path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) rc = rt_fail(rt, code, "'%s' is not a regular file", path);
    else if ((flags = fcntl(*fd, F_GETFL)) < 0 || fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        rc = rt_fail(rt, RT_IO_ERROR, "cannot read '%s' (%s)", path, strerror(errno));
    if (rc != RT_OK) {
        close(*fd);
        *fd = -1;
        return rc;
    }
    *size = (int64_t)st.st_size;
    return RT_OK;
}

/* n bytes from fd, within the restore's deadline (rt->net.deadline_ms, --timeout-ms after the
   restore began), checked after every read. */
static int read_exact(struct rt *rt, int fd, void *buf, size_t n, const char *path) {
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return rt_fail(rt, RT_IO_ERROR, "cannot read '%s' (%s)", path, strerror(errno));
        if (r == 0) return rt_fail(rt, RT_IO_ERROR, "cannot read '%s' (it ended early)", path);
        done += (size_t)r;
        if (rt_now_ms() > rt->net.deadline_ms)
            return rt_fail(rt, RT_CHECKPOINT_TIMEOUT, "reading '%s' took longer than the restore's %lld ms "
                           "(--timeout-ms)", path, (long long)rt->net.timeout_ms);
    }
    return RT_OK;
}

/* A whole (regular) file, NUL-terminated after its `len` bytes. */
static int read_all(struct rt *rt, const char *path, char **out, size_t *len, int missing_code) {
    int fd;
    int64_t size = 0;
    TRY(open_regular(rt, path, missing_code, &fd, &size));
    char *buf = malloc((size_t)size + 1);
    int rc = buf ? read_exact(rt, fd, buf, (size_t)size, path) : rt_fail(rt, RT_IO_ERROR, "out of memory");
    close(fd);
    if (rc != RT_OK) {
        free(buf);
        return rc;
    }
    buf[size] = 0;
    *out = buf, *len = (size_t)size;
    return RT_OK;
}

static void sha_hex(const void *data, size_t n, char out[65]) {
    unsigned char d[32];
    (void)rt_sha256_bytes(data, n, d); /* zeros where libcrypto failed: no manifest matches them */
    rt_hex(d, 32, out);
}

static int bad(struct rt *rt, const struct manifest *m, int64_t line, const char *what) {
    return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s line %lld: %s", m->path, (long long)line, what);
}

/* A line read field by field (fields separated by one space); `ok` turns 0 at the first
   field that is empty or malformed. */
struct fields {
    const char *p;
    int ok;
};

/* The next field: its start and length. */
static const char *field(struct fields *f, size_t *len) {
    const char *s = f->p;
    *len = strcspn(s, " ");
    if (*len == 0) f->ok = 0;
    f->p = s + *len + (s[*len] == ' ');
    return s;
}

/* Whether every field was read: the line ends after the last, without a space. */
static int line_done(const struct fields *f) { return f->ok && *f->p == 0 && f->p[-1] != ' '; }

/* The next field as a decimal number: digits only, at most 18 (so it fits, unsigned). */
static int64_t number(struct fields *f) {
    size_t n;
    const char *s = field(f, &n);
    int64_t v = 0;
    if (n > 18 || !rt_decimal_n(s, n, &v)) f->ok = 0;
    return v;
}

/* Whether s[0..n) are n lowercase hex digits. */
static int hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* The next field as a sha256 (64 lowercase hex digits), copied into out. */
static void sha_field(struct fields *f, char out[65]) {
    size_t n;
    const char *s = field(f, &n);
    if (n != 64 || !hex(s, n)) f->ok = 0;
    snprintf(out, 65, "%.*s", (int)(n < 64 ? n : 64), s);
}

/* The next field as the name of a file of the checkpoint: PREFIX, decimal digits, SUFFIX
   (`shard-N.bin`, `manifest-N.txt`, as the Python reader's rule), so a name never holds a
   '/', a '..' or a leading '.', and names a file inside the checkpoint directory. */
static void name_field(struct fields *f, const char *prefix, const char *suffix, char out[64]) {
    size_t n, a = strlen(prefix), b = strlen(suffix), digits = 0;
    const char *s = field(f, &n);
    if (n >= 64 || n <= a + b || strncmp(s, prefix, a) || strncmp(s + n - b, suffix, b)) f->ok = 0;
    while (f->ok && digits < n - a - b && s[a + digits] >= '0' && s[a + digits] <= '9') digits++;
    if (digits != n - a - b) f->ok = 0;
    snprintf(out, 64, "%.*s", (int)(n < 63 ? n : 63), s);
}

/* Room for one more element in *arr (of *n, capacity *cap); 0 when out of memory. */
static int grow(void **arr, int64_t n, int64_t *cap, size_t size) {
    if (n < *cap) return 1;
    void *more = realloc(*arr, size * (size_t)(2 * *cap + 8));
    if (!more) return 0;
    *arr = more, *cap = 2 * *cap + 8;
    return 1;
}

/* The items a manifest has at most one of, each a bit of `have` (version and identity first:
   a manifest must have both). */
static const char *const ONCE[] = {"version", "identity", "learner", "inputs", "contract", "layout", "owners",
                                   "resumed-from"};

/* One item line (NUL-terminated, without its LF) into m: 1; 0 when it is malformed; -1 when
   it is an item given twice, refused as the Python reader refuses it (of two version lines
   the restore kept the last, where `alphac inspect` refused the manifest). */
static int parse_item(struct manifest *m, const char *p, int64_t *have, int64_t cap[3]) {
    struct fields f = {p, 1};
    size_t n;
    const char *key = field(&f, &n);
#define IS(k) (n == strlen(k) && !strncmp(key, k, n))
    for (int64_t j = 0; j < (int64_t)(sizeof ONCE / sizeof ONCE[0]); j++)
        if (IS(ONCE[j])) {
            if (*have & (INT64_C(1) << j)) return -1;
            *have |= INT64_C(1) << j;
        }
    if (IS("version")) {
        m->version = (uint64_t)number(&f);
    } else if (IS("identity")) {
        const char *s = field(&f, &n);
        if (n != 16 || !hex(s, n)) return 0;
        m->identity = strtoull(s, NULL, 16);
    } else if (IS("shard")) {
        if (!grow((void **)&m->shards, m->nshards, &cap[0], sizeof *m->shards)) return 0;
        struct shard *s = &m->shards[m->nshards];
        s->owner = number(&f);
        name_field(&f, "shard-", ".bin", s->file);
        s->bytes = number(&f);
        sha_field(&f, s->sha);
        m->nshards += line_done(&f);
    } else if (IS("fragment")) {
        if (!grow((void **)&m->frags, m->nfrags, &cap[1], sizeof *m->frags)) return 0;
        struct frag *g = &m->frags[m->nfrags];
        g->owner = number(&f);
        if (!m->nshards || m->shards[m->nshards - 1].owner != g->owner) return 0; /* outside its shard's lines */
        const char *region = field(&f, &n);
        g->region = 0;
        for (int r = 1; r <= 2; r++)
            if (n == strlen(CKPT_REGION_NAME(r)) && !strncmp(region, CKPT_REGION_NAME(r), n)) g->region = r;
        g->offset = number(&f), g->words = number(&f);
        const char *runs = field(&f, &n);
        sha_field(&f, g->sha);
        if (!line_done(&f) || !g->region || !(g->runs = strndup(runs, n))) return 0;
        m->nfrags++;
    } else if (IS("manifest")) {
        if (!grow((void **)&m->children, m->nchildren, &cap[2], sizeof *m->children)) return 0;
        m->children[m->nchildren].owner = number(&f);
        name_field(&f, "manifest-", ".txt", m->children[m->nchildren].file);
        sha_field(&f, m->children[m->nchildren].sha);
        m->nchildren += line_done(&f);
    } else if (IS("auth")) {
        const char *kind = field(&f, &n);
        if (n == 4 && !strncmp(kind, "none", 4)) {
            m->auth = 1;
        } else if (n == 11 && !strncmp(kind, "hmac-sha256", 11)) {
            sha_field(&f, m->tag);
            m->auth = 2;
        } else {
            return 0;
        }
    } else if (!(IS("learner") || IS("inputs") || IS("contract") || IS("layout") || IS("region") ||
                 IS("owners") || IS("resumed-from"))) {
        return 0;
    } else {
        return f.ok; /* compared by the caller (learner, contract) or not read here */
    }
#undef IS
    return line_done(&f);
}

/* The text, checked by its trailer, split into items, each line bounded by the bytes read
   (a NUL byte anywhere is a malformed manifest). Learner and contract lines are compared
   by the caller (`check_lines`). */
static int parse(struct rt *rt, struct manifest *m) {
    size_t n = m->len;
    if (n < 72 || m->text[n - 1] != '\n') return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is truncated", m->path);
    const char *nul = memchr(m->text, 0, n);
    if (nul) {
        int64_t at = 1;
        for (const char *q = m->text; q < nul; q++) at += *q == '\n';
        return bad(rt, m, at, "holds a NUL byte");
    }
    const char *trailer = m->text + n - 72;
    if (strncmp(trailer, "sha256 ", 7) != 0 || !hex(trailer + 7, 64) || (trailer != m->text && trailer[-1] != '\n'))
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s is truncated (no sha256 line)", m->path);
    memcpy(m->sha, trailer + 7, 64);
    m->sha[64] = 0;
    char want[65];
    sha_hex(m->text, (size_t)(trailer - m->text), want);
    if (strcmp(want, m->sha) != 0)
        return rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 line does not match its contents", m->path);
    size_t head = strlen(CKPT_HEAD "\n");
    if (strncmp(m->text, "alphac-checkpoint 2\n", head) == 0)
        return bad(rt, m, 1, "format 2 is not read: it names neither the learner's inputs nor an auth line "
                   "(expected '" CKPT_HEAD "')");
    if (strncmp(m->text, CKPT_HEAD "\n", head) != 0) return bad(rt, m, 1, "not an alphac checkpoint manifest");
    int64_t line = 1, have = 0, cap[3] = {0, 0, 0};
    for (const char *p = m->text + head; p < trailer; line++) {
        const char *end = memchr(p, '\n', (size_t)(trailer - p)); /* found: trailer[-1] is an LF */
        char *text = strndup(p, (size_t)(end - p));
        if (!text) return rt_fail(rt, RT_IO_ERROR, "out of memory");
        int auth = m->auth, ok = auth ? 0 : parse_item(m, text, &have, cap); /* only the trailer follows auth */
        if (ok > 0 && m->auth && !auth) m->auth_at = (size_t)(p - m->text);
        free(text);
        if (ok <= 0)
            return bad(rt, m, line + 1, auth ? "a line after the auth line" : ok ? "an item given twice"
                                                                              : "unknown or malformed item");
        p = end + 1;
    }
    if ((have & 3) != 3) return bad(rt, m, line, "no version or identity line");
    return RT_OK;
}

/* The rest of the line after `key ` in the manifest text (NUL-terminated copy). */
static char *item(const struct manifest *m, const char *key) {
    size_t k = strlen(key);
    for (const char *p = m->text, *end; p < m->text + m->len; p = end + 1) {
        end = memchr(p, '\n', (size_t)(m->text + m->len - p));
        if (!end) break;
        if ((size_t)(end - p) > k && !strncmp(p, key, k) && p[k] == ' ') return strndup(p + k + 1, (size_t)(end - p) - k - 1);
    }
    return NULL;
}

/* The learner, contract and inputs lines against this executable's: the learner, profile
   and relation always; continuing the same contract, the order digest, then the inputs
   (samples and rate). */
static int check_lines(struct rt *rt, const struct manifest *m, int same) {
    char *learner = item(m, "learner"), *inputs = item(m, "inputs"), *contract = item(m, "contract");
    int rc = RT_OK;
    if (!learner || !inputs || !contract)
        rc = rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s has no learner, inputs or contract line", m->path);
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
        if (rc == RT_OK && same && strcmp(inputs, img_text(rt, IMG_STR_CKPT_INPUTS)) != 0)
            rc = rt_fail(rt, RT_CHECKPOINT_LEARNER_MISMATCH, "%s was taken on inputs '%s', this executable reads "
                         "'%s': resume with --new-contract to go on from its state with these", m->path, inputs,
                         img_text(rt, IMG_STR_CKPT_INPUTS));
    }
    free(learner);
    free(inputs);
    free(contract);
    return rc;
}

/* One run `START+STEPxCOUNT` at r into v, each number decimal digits and nothing else (the
   Python reader's rule: sscanf would take a sign or blanks before one), a value past
   LLONG_MAX taken as LLONG_MAX; its length, or 0 when it is malformed. */
static size_t run_at(const char *r, long long v[3]) {
    const char *p = r;
    for (int i = 0; i < 3; i++) {
        size_t n = 0;
        for (v[i] = 0; p[n] >= '0' && p[n] <= '9'; n++)
            v[i] = v[i] > (LLONG_MAX - 9) / 10 ? LLONG_MAX : v[i] * 10 + (p[n] - '0');
        if (n == 0) return 0;
        p += n;
        if (i < 2 && *p++ != "+x"[i]) return 0;
    }
    return (size_t)(p - r);
}

/* Count each position's fragments (saturating at 2): missing, duplicated, outside. Each
   run is bounded before it is walked (no position computed can overflow), and a run of
   step 0 is walked twice at most (its position is then duplicated anyway). */
static int coverage(struct rt *rt, const struct manifest *m, unsigned char *count, int64_t region, int64_t domain) {
    memset(count, 0, (size_t)domain);
    const char *name = CKPT_REGION_NAME(region);
    for (int64_t j = 0; j < m->nfrags; j++) {
        const struct frag *f = &m->frags[j];
        if (f->region != region) continue;
        int64_t seen = 0;
        for (const char *r = f->runs; *r && strcmp(r, "-");) {
            long long v[3];
            size_t used = run_at(r, v);
            if (!used || (r[used] && (r[used] != ',' || !r[used + 1])))
                return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: malformed runs of owner %lld's fragment", m->path,
                               (long long)f->owner);
            long long s = v[0], st = v[1], c = v[2];
            if (c > f->words - seen)
                return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "%s: owner %lld's fragment lists more positions than "
                               "its %lld words", m->path, (long long)f->owner, (long long)f->words);
            if (c > 0 && (s >= domain || (st > 0 && c - 1 > (domain - 1 - s) / st))) {
                /* the first position outside: s + st * i0 < 2 * 2^63, so it fits unsigned */
                unsigned long long p = s >= domain ? (unsigned long long)s
                                     : (unsigned long long)s + (unsigned long long)st *
                                           (unsigned long long)((domain - 1 - s) / st + 1);
                return rt_fail(rt, RT_SHARD_COVERAGE_OUTSIDE, "%s: owner %lld's %s fragment holds position %llu "
                               "outside the region's %lld words", m->path, (long long)f->owner, name, p,
                               (long long)domain);
            }
            for (long long i = 0, walk = st == 0 && c > 2 ? 2 : c; i < walk; i++)
                if (count[s + i * st] < 2) count[s + i * st]++;
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
                           "%s: %s word %lld is held by %s", m->path, name, (long long)p,
                           count[p] ? "two fragments" : "no fragment");
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
        long long v[3];
        size_t used = run_at(r, v); /* checked by coverage() */
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
    uint64_t *dst = region == REGION_PARAMETERS ? rt->store.params : rt->store.state;
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
        rc = read_exact(rt, fd, chunk, (size_t)n * 8, path);
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
    return read_exact(rt, fd, *head, (size_t)*len, path);
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
    int rc = open_regular(rt, path, RT_CHECKPOINT_SHARD_MISSING, &fd, &size);
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
    int rc = path ? read_all(rt, path, &c.text, &c.len, RT_CHECKPOINT_SHARD_MISSING)
                  : rt_fail(rt, RT_IO_ERROR, "out of memory");
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
    /* what the identity stands for, the root's line for line (as alphac.checkpoint reads it) */
    static const char *const same[] = {"learner", "inputs", "contract", "layout"};
    for (size_t i = 0; rc == RT_OK && i < sizeof same / sizeof same[0]; i++) {
        char *mine = item(&c, same[i]), *root = item(m, same[i]);
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
    TRY(parse(rt, m));
    TRY(check_tag(rt, m));
    TRY(check_lines(rt, m, same));
    if (m->version > (uint64_t)rt->updates)
        return rt_fail(rt, RT_CHECKPOINT_VERSION, "%s is version %llu, past this run's %lld updates", m->path,
                       (unsigned long long)m->version, (long long)rt->updates);
    for (int64_t j = 0; j < m->nchildren; j++) TRY(check_child(rt, dir, m, j));
    TRY(coverage(rt, m, count, 1, rt->k));
    TRY(coverage(rt, m, count, 2, rt->m));
    /* every shard named: those holding words this owner holds now read through */
    for (int64_t j = 0; j < m->nshards; j++) {
        int needed = 0;
        for (int64_t q = 0; q < m->nfrags && !needed; q++)
            needed = m->frags[q].owner == m->shards[j].owner && holds_any(rt, &m->frags[q]);
        TRY(read_shard(rt, dir, m, &m->shards[j], chunk, needed));
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

/* The restore, under one deadline: --timeout-ms from its start (checked after every read). */
int rt_restore(struct rt *rt) {
    const char *dir = rt->ck.resume;
    if (strstr(dir, ".partial-"))
        return rt_fail(rt, RT_CHECKPOINT_MANIFEST, "'%s' is a partial checkpoint, never loaded", dir);
    rt->net.deadline_ms = rt_now_ms() + rt->net.timeout_ms;
    struct manifest m = {0};
    char *path = rt_pathf("%s/" CKPT_ROOT_MANIFEST, dir);
    m.path = path;
    int64_t most = rt->k > rt->m ? rt->k : rt->m;
    unsigned char *count = malloc((size_t)most + 1);
    uint64_t *chunk = malloc(CHUNK_WORDS * 8);
    int rc = path && count && chunk ? read_all(rt, path, &m.text, &m.len, RT_CHECKPOINT_MANIFEST)
                                   : rt_fail(rt, RT_IO_ERROR, "out of memory");
    if (rc == RT_OK) rc = restore(rt, dir, &m, count, chunk);
    forget(&m);
    free(path), free(count), free(chunk);
    return rc;
}
