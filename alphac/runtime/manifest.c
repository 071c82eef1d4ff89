/* A checkpoint's manifests (docs/checkpoints.md), for the restore (restore.c): the files
   of a checkpoint read safely, a manifest parsed item by item as the Python reader parses it
   (alphac/checkpoint/manifest.py), its learner, contract and inputs lines checked against
   this executable's, and the coverage of every region by its fragments. */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open a file of the checkpoint for reading: never through a symbolic link, never blocking
   (a FIFO or a device is opened O_NONBLOCK, then refused by its type on the descriptor); a
   regular file only, refused `code` naming the path otherwise. Blocking reads from then on. */
int rt_open_regular(struct rt *rt, const char *path, int code, int *fd, int64_t *size) {
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
int rt_read_exact(struct rt *rt, int fd, void *buf, size_t n, const char *path) {
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
int rt_read_all(struct rt *rt, const char *path, char **out, size_t *len, int missing_code) {
    int fd;
    int64_t size = 0;
    TRY(rt_open_regular(rt, path, missing_code, &fd, &size));
    char *buf = malloc((size_t)size + 1);
    int rc = buf ? rt_read_exact(rt, fd, buf, (size_t)size, path) : rt_fail(rt, RT_IO_ERROR, "out of memory");
    close(fd);
    if (rc != RT_OK) {
        free(buf);
        return rc;
    }
    buf[size] = 0;
    *out = buf, *len = (size_t)size;
    return RT_OK;
}

void rt_sha_hex(const void *data, size_t n, char out[65]) {
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

/* The items a manifest has at most one of, each a bit of `have` (version and identity first:
   a manifest must have both). */
static const char *const ONCE[] = {"version", "identity", "learner", "inputs", "contract", "layout", "owners",
                                   "resumed-from"};

/* One item line (NUL-terminated, without its LF) into m: 1; 0 when it is malformed; -2 out
   of memory; -1 when it is an item given twice, refused as the Python reader refuses it (of two version lines
   the restore kept the last, where `alphac inspect` refused the manifest). */
static int parse_item(struct manifest *m, const char *p, int64_t *have, size_t cap[3]) {
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
        if (rt_grow(&m->shards, &cap[0], (size_t)m->nshards + 1, sizeof *m->shards) != 0) return -2;
        struct shard *s = &m->shards[m->nshards];
        s->owner = number(&f);
        name_field(&f, "shard-", ".bin", s->file);
        s->bytes = number(&f);
        sha_field(&f, s->sha);
        m->nshards += line_done(&f);
    } else if (IS("fragment")) {
        if (rt_grow(&m->frags, &cap[1], (size_t)m->nfrags + 1, sizeof *m->frags) != 0) return -2;
        struct frag *g = &m->frags[m->nfrags];
        g->owner = number(&f);
        if (!m->nshards || m->shards[m->nshards - 1].owner != g->owner) return 0; /* outside its shard's lines */
        const char *region = field(&f, &n);
        g->region = 0;
        for (int r = 1; r <= REGION_STATES; r++)
            if (n == strlen(CKPT_REGION_NAME(r)) && !strncmp(region, CKPT_REGION_NAME(r), n)) g->region = r;
        g->offset = number(&f), g->words = number(&f);
        const char *runs = field(&f, &n);
        sha_field(&f, g->sha);
        if (!line_done(&f) || !g->region || !(g->runs = strndup(runs, n))) return 0;
        m->nfrags++;
    } else if (IS("manifest")) {
        if (rt_grow(&m->children, &cap[2], (size_t)m->nchildren + 1, sizeof *m->children) != 0) return -2;
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
                 IS("owners") || IS("resumed-from") || IS("reads"))) { /* (reads: a schedule, not restored) */
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
int rt_manifest_parse(struct rt *rt, struct manifest *m) {
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
    rt_sha_hex(m->text, (size_t)(trailer - m->text), want);
    if (strcmp(want, m->sha) != 0)
        return rt_fail(rt, RT_CHECKPOINT_HASH_MISMATCH, "%s: its sha256 line does not match its contents", m->path);
    size_t head = strlen(CKPT_HEAD "\n");
    if (strncmp(m->text, "alphac-checkpoint 2\n", head) == 0)
        return bad(rt, m, 1, "format 2 is not read: it names neither the learner's inputs nor an auth line "
                   "(expected '" CKPT_HEAD "')");
    if (strncmp(m->text, CKPT_HEAD "\n", head) != 0) return bad(rt, m, 1, "not an alphac checkpoint manifest");
    int64_t line = 1, have = 0;
    size_t cap[3] = {0, 0, 0};
    for (const char *p = m->text + head; p < trailer; line++) {
        const char *end = memchr(p, '\n', (size_t)(trailer - p)); /* found: trailer[-1] is an LF */
        char *text = strndup(p, (size_t)(end - p));
        if (!text) return rt_fail(rt, RT_IO_ERROR, "out of memory");
        int auth = m->auth, ok = auth ? 0 : parse_item(m, text, &have, cap); /* only the trailer follows auth */
        if (ok > 0 && m->auth && !auth) m->auth_at = (size_t)(p - m->text);
        free(text);
        if (ok == -2) return rt_fail(rt, RT_IO_ERROR, "out of memory");
        if (ok <= 0)
            return bad(rt, m, line + 1, auth ? "a line after the auth line" : ok ? "an item given twice"
                                                                              : "unknown or malformed item");
        p = end + 1;
    }
    if ((have & 3) != 3) return bad(rt, m, line, "no version or identity line");
    return RT_OK;
}

/* The rest of the line after `key ` in the manifest text (NUL-terminated copy). */
char *rt_manifest_item(const struct manifest *m, const char *key) {
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
int rt_manifest_lines(struct rt *rt, const struct manifest *m, int same) {
    char *learner = rt_manifest_item(m, "learner"), *inputs = rt_manifest_item(m, "inputs"), *contract = rt_manifest_item(m, "contract");
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
size_t rt_run_at(const char *r, long long v[3]) {
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
int rt_manifest_coverage(struct rt *rt, const struct manifest *m, unsigned char *count, int64_t region, int64_t domain) {
    memset(count, 0, (size_t)domain);
    const char *name = CKPT_REGION_NAME(region);
    for (int64_t j = 0; j < m->nfrags; j++) {
        const struct frag *f = &m->frags[j];
        if (f->region != region) continue;
        int64_t seen = 0;
        for (const char *r = f->runs; *r && strcmp(r, "-");) {
            long long v[3];
            size_t used = rt_run_at(r, v);
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
