/* Publication of a run (docs/runtime.md "Publication"): every output is staged in PATH.tmp,
   created O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600) before the first update, so a planted file
   or link, a shared --out, or an unwritable directory is refused before any work; it is
   written and fsynced after the last update, and linked to PATH only once the root's commit
   record (PATH.commit of the root's output) is written: in a run directory the root links
   every owner's output with its record, before the verdict goes out (publish_run). link(2)
   never overwrites. Words are written through a buffer (rt_writer), so no output needs a
   copy of the state. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rt_refuse_if_exists(struct rt *rt, const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0) /* a dangling link counts: link(2) would not replace it */
        return rt_fail(rt, RT_OUTPUT_EXISTS, "'%s' exists; results are never overwritten", path);
    return RT_OK;
}

/* Stage `path` + suffix: refuse if it or its .tmp exists; create the .tmp, private. */
int rt_stage_create(struct rt *rt, struct staged *s, const char *path, const char *suffix) {
    s->fd = -1;
    s->path = rt_pathf("%s%s", path, suffix);
    s->tmp = s->path ? rt_pathf("%s.tmp", s->path) : NULL;
    if (!s->tmp) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    TRY(rt_refuse_if_exists(rt, s->path));
    s->fd = open(s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    s->created = s->fd >= 0;
    struct stat st;
    if (s->fd >= 0 && fstat(s->fd, &st) == 0) {
        s->dev = (uint64_t)st.st_dev, s->ino = (uint64_t)st.st_ino;
        return RT_OK;
    }
    if (s->fd >= 0) return rt_fail(rt, RT_IO_ERROR, "cannot stat '%s' (%s)", s->tmp, strerror(errno));
    if (errno == EEXIST)
        return rt_fail(rt, RT_OUTPUT_EXISTS, "'%s' exists (a file or link planted there, or another owner "
                       "staging the same output); nothing was written", s->tmp);
    return rt_fail(rt, RT_IO_ERROR, "cannot create '%s' (%s)", s->tmp, strerror(errno));
}

int rt_write_all(int fd, const void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r = write(fd, (const char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

/* Write the pieces into the staged file and fsync it; their sha256 in `digest`. */
int rt_stage_write(struct rt *rt, struct staged *s, const void *const *bufs, const size_t *sizes, int count,
                   unsigned char digest[32]) {
    struct rt_sha256 h;
    rt_sha256_init(&h);
    for (int i = 0; i < count; i++) {
        if (rt_write_all(s->fd, bufs[i], sizes[i]) != 0)
            return rt_fail(rt, RT_IO_ERROR, "writing '%s' failed (%s)", s->tmp, strerror(errno));
        rt_sha256_update(&h, bufs[i], sizes[i]);
    }
    if (fsync(s->fd) != 0) return rt_fail(rt, RT_IO_ERROR, "flushing '%s' failed (%s)", s->tmp, strerror(errno));
    if (rt_sha256_final(&h, digest) != 0) return rt_fail(rt, RT_IO_ERROR, "libcrypto could not hash '%s'", s->tmp);
    return RT_OK;
}

int rt_sync_dir(const char *dir) {
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;
    if (fd >= 0) close(fd);
    return rc;
}

/* fsync the directory holding `path`, so a link or unlink in it is durable. */
static int sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int rc = rt_sync_dir(dir);
    free(dir);
    return rc;
}

/* Whether `path` names the staged file itself (not a link to it, nor another file). */
static int is_staged_file(const struct staged *s, const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_dev == s->dev &&
           (uint64_t)st.st_ino == s->ino;
}

/* Close the staged file; a close that fails is io-error (its bytes may not be written). */
static int close_staged(struct rt *rt, struct staged *s) {
    int rc = s->fd >= 0 ? close(s->fd) : 0;
    s->fd = -1;
    return rc == 0 ? RT_OK : rt_fail(rt, RT_IO_ERROR, "flushing '%s' failed (%s)", s->tmp, strerror(errno));
}

/* Link the staged file to its final path, never over an existing file; the root may have
   linked it already (publish_run), and then the final path is the staged file itself. */
static int link_staged(struct rt *rt, struct staged *s) {
    if (link(s->tmp, s->path) == 0) return RT_OK;
    int e = errno;
    if (is_staged_file(s, s->path)) return RT_OK;
    TRY(rt_refuse_if_exists(rt, s->path));
    return rt_fail(rt, RT_IO_ERROR, "cannot publish '%s' (%s)", s->path, strerror(e));
}

/* Link the staged file to its final path, remove the .tmp and make both durable. */
int rt_stage_publish(struct rt *rt, struct staged *s) {
    TRY(close_staged(rt, s));
    TRY(link_staged(rt, s));
    if (is_staged_file(s, s->tmp)) unlink(s->tmp);
    s->created = 0;
    if (sync_dir(s->path) != 0) return rt_fail(rt, RT_IO_ERROR, "cannot make '%s' durable", s->path);
    return RT_OK;
}

void rt_stage_discard(struct staged *s) {
    if (s->fd >= 0) close(s->fd);
    if (s->created) unlink(s->tmp);
    s->fd = -1;
    s->created = 0;
}

/* Before the first update: the output (and, at the root, the commit record) staged. */
int rt_open_outputs(struct rt *rt) {
    rt->pub.out.fd = rt->pub.commit.fd = -1;
    TRY(rt_stage_create(rt, &rt->pub.out, rt->pub.out_path, ""));
    if (rt->owner == (int64_t)img_field(rt, IMG_ROOT)) TRY(rt_stage_create(rt, &rt->pub.commit, rt->pub.out_path, ".commit"));
    return RT_OK;
}

/* -- a file of words written through a buffer, hashed as it goes ---------------------- */

#define SYNC_BYTES (8 << 20) /* writeback is started every 8 MiB, so the disk works while we hash */
#define DIRECT_WORDS (1 << 17) /* long spans are hashed and written 1 MiB at a time, uncopied */

void rt_writer_init(struct rt_writer *w, struct rt *rt, int fd, const char *path) {
    memset(w, 0, sizeof *w);
    w->rt = rt, w->fd = fd, w->path = path;
    rt_sha256_init(&w->sha);
}

/* n bytes: hashed (into the part, or the file's digest outside parts), then written. */
static void emit(struct rt_writer *w, const void *p, size_t n) {
    if (w->rc != RT_OK || n == 0) return;
    rt_sha256_update(w->in_part ? &w->part : &w->sha, p, n);
    if (rt_write_all(w->fd, p, n) != 0) {
        w->rc = rt_fail(w->rt, RT_IO_ERROR, "writing '%s' failed (%s)", w->path, strerror(errno));
        return;
    }
    w->written += (int64_t)n;
    if (w->written - w->synced >= SYNC_BYTES) {
        sync_file_range(w->fd, w->synced, w->written - w->synced, SYNC_FILE_RANGE_WRITE); /* a hint */
        w->synced = w->written;
    }
}

static void flush(struct rt_writer *w) {
    emit(w, w->buf, (size_t)w->used * 8);
    w->used = 0;
}

void rt_writer_put(struct rt_writer *w, uint64_t word) {
    w->buf[w->used++] = word;
    if (w->used == WRITER_WORDS) flush(w);
}

/* n words in a row: a short span through the buffer, a long one straight from `words`. */
void rt_writer_words(struct rt_writer *w, const uint64_t *words, int64_t n) {
    if (n < WRITER_WORDS) {
        for (int64_t j = 0; j < n; j++) rt_writer_put(w, words[j]);
        return;
    }
    flush(w);
    for (int64_t j = 0; j < n; j += DIRECT_WORDS)
        emit(w, words + j, (size_t)(n - j < DIRECT_WORDS ? n - j : DIRECT_WORDS) * 8);
}

/* The words put from here to rt_writer_part_end are a part with a sha256 of its own, which
   stands for them in the file's digest (docs/checkpoints.md, "The shard file"). */
void rt_writer_part(struct rt_writer *w) {
    flush(w);
    rt_sha256_init(&w->part);
    w->in_part = 1;
}

void rt_writer_part_end(struct rt_writer *w, unsigned char digest[32]) {
    flush(w);
    w->in_part = 0;
    if (rt_sha256_final(&w->part, digest) != 0 && w->rc == RT_OK)
        w->rc = rt_fail(w->rt, RT_IO_ERROR, "libcrypto could not hash a part of '%s'", w->path);
    rt_sha256_update(&w->sha, digest, 32);
}

/* Flush and make durable; the file's digest in `digest`: the sha256 of every byte written
   outside parts and of each part's digest in its place. */
int rt_writer_end(struct rt_writer *w, unsigned char digest[32]) {
    flush(w);
    TRY(w->rc);
    if (fdatasync(w->fd) != 0) return rt_fail(w->rt, RT_IO_ERROR, "flushing '%s' failed (%s)", w->path, strerror(errno));
    if (rt_sha256_final(&w->sha, digest) != 0)
        return rt_fail(w->rt, RT_IO_ERROR, "libcrypto could not hash '%s'", w->path);
    return RT_OK;
}

struct put_ctx {
    struct rt_writer *w;
    const uint64_t *words; /* NULL: put the positions */
};
static void put_held(void *ctx, int64_t pos, int64_t slot) {
    struct put_ctx *c = ctx;
    rt_writer_put(c->w, c->words ? c->words[slot] : (uint64_t)pos);
}

/* The "stage" op: format 1 (every word of the learner), format 3 under bounded staleness
   (then the version each of the run's contributions read) or, for a partitioned learner,
   format 2 (the words this owner holds, after their positions, both by ascending position;
   format 4 under bounded staleness, then the reads), staged and fsynced. */
int rt_stage_output(struct rt *rt) {
    int64_t k = rt->k, m = rt->m;
    uint64_t format = img_field(rt, IMG_OUTPUT_FORMAT), reads = (uint64_t)(rt->updates - rt->start);
    if (format == OUTPUT_REPLICATED || format == OUTPUT_SCHEDULED) { /* format 3: then the reads */
        int scheduled = format == OUTPUT_SCHEDULED;
        uint64_t head[8] = {OUTPUT_MAGIC, format, (uint64_t)rt->owner, (uint64_t)rt->updates,
                            rt->protocol, (uint64_t)k, (uint64_t)m, reads};
        const void *bufs[4] = {head, rt->store.params, rt->store.state, rt->store.reads};
        size_t sizes[4] = {(size_t)(7 + scheduled) * 8, (size_t)k * 8, (size_t)m * 8, (size_t)reads * 8};
        return rt_stage_write(rt, &rt->pub.out, bufs, sizes, 3 + scheduled, rt->pub.out_digest);
    }
    int scheduled = format == OUTPUT_OWNED_SCHEDULED; /* format 4: then the reads */
    uint64_t head[10] = {OUTPUT_MAGIC, scheduled ? OUTPUT_OWNED_SCHEDULED : OUTPUT_OWNED, (uint64_t)rt->owner,
                         (uint64_t)rt->updates, rt->protocol, (uint64_t)k, (uint64_t)m, (uint64_t)rt->store.kp,
                         (uint64_t)rt->store.mp, reads};
    struct rt_writer w;
    rt_writer_init(&w, rt, rt->pub.out.fd, rt->pub.out.tmp);
    for (int j = 0; j < 9 + scheduled; j++) rt_writer_put(&w, head[j]);
    struct put_ctx c = {&w, NULL};
    rt_each_held(rt, REGION_PARAMETERS, put_held, &c);
    rt_each_held(rt, REGION_STATE, put_held, &c);
    c.words = rt->store.params;
    rt_each_held(rt, REGION_PARAMETERS, put_held, &c);
    c.words = rt->store.state;
    rt_each_held(rt, REGION_STATE, put_held, &c);
    if (scheduled) rt_writer_words(&w, rt->store.reads, (int64_t)reads);
    return rt_writer_end(&w, rt->pub.out_digest);
}

/* Whether the root's output is DIR/owner-R.out, R its index: a run directory (--out-dir,
   alphac launch), where every owner's output is DIR/owner-I.out. *dir_len: DIR's length,
   with its '/'. */
static int in_run_dir(const struct rt *rt, size_t *dir_len) {
    const char *slash = strrchr(rt->pub.out_path, '/');
    *dir_len = slash ? (size_t)(slash - rt->pub.out_path) + 1 : 0;
    char mine[64];
    snprintf(mine, sizeof mine, OUTPUT_NAME_FORMAT, (long long)rt->owner);
    return strcmp(rt->pub.out_path + *dir_len, mine) == 0;
}

/* Owner I's output in the run directory of the root's: its final name, or with `suffix`
   ".tmp" its staged one (NULL when out of memory). */
static char *run_dir_output(const struct rt *rt, size_t dir_len, int64_t owner, const char *suffix) {
    char name[64];
    snprintf(name, sizeof name, OUTPUT_NAME_FORMAT "%s", (long long)owner, suffix);
    size_t n = dir_len + strlen(name) + 1;
    char *path = malloc(n);
    if (path) snprintf(path, n, "%.*s%s", (int)dir_len, rt->pub.out_path, name);
    return path;
}

enum { LINK_OUTPUT, DROP_STAGED_NAME, DROP_FINAL_NAME };

/* Another owner's staged output in the run directory: LINK_OUTPUT links it to its final
   name (only a regular file of this user, never over a file); where both names are one
   file, DROP_STAGED_NAME removes the .tmp, DROP_FINAL_NAME the final name (the record could
   not be linked after all). Nothing here refuses: what it cannot link, its owner's
   "finalize" or the launcher's settling does. */
static void other_output(const struct rt *rt, size_t dir_len, int64_t owner, int action) {
    char *tmp = run_dir_output(rt, dir_len, owner, ".tmp"), *path = run_dir_output(rt, dir_len, owner, "");
    struct stat t, p;
    if (tmp && path && lstat(tmp, &t) == 0 && S_ISREG(t.st_mode)) {
        int same = lstat(path, &p) == 0 && p.st_dev == t.st_dev && p.st_ino == t.st_ino;
        if (action == LINK_OUTPUT && t.st_uid == geteuid()) (void)link(tmp, path);
        else if (action != LINK_OUTPUT && same) unlink(action == DROP_STAGED_NAME ? tmp : path);
    }
    free(tmp);
    free(path);
}

/* Every owner's output in the run directory (`run_dir`) and then the root's own linked
   to its final name, or with `undo` those links removed again. */
static void link_outputs(struct rt *rt, int run_dir, size_t dir_len, int undo) {
    for (int64_t o = 0; run_dir && o < rt->n; o++)
        if (o != rt->owner) other_output(rt, dir_len, o, undo ? DROP_FINAL_NAME : LINK_OUTPUT);
    /* the root's own output: where it cannot be linked, "finalize" says why once the owners
       have the verdict */
    if (!undo && link(rt->pub.out.tmp, rt->pub.out.path) == 0) rt->pub.out.created = 0, rt->pub.finalized = 1;
    if (undo && rt->pub.finalized && is_staged_file(&rt->pub.out, rt->pub.out.path))
        unlink(rt->pub.out.path), rt->pub.out.created = 1, rt->pub.finalized = 0;
}

/* The root's publication, once its commit record is written and fsynced: in a run
   directory every other owner's staged output linked to its final name, then the root's
   own output, one link(2) after the other, and last the record (from that link on the run
   is committed, and every output is there already); then the directory fsynced once and
   the .tmp names removed. All this before any owner hears the verdict, so an owner that
   died after "prepared" leaves no final name missing (docs/runtime.md "Publication"). */
static int publish_run(struct rt *rt) {
    TRY(close_staged(rt, &rt->pub.commit));
    TRY(close_staged(rt, &rt->pub.out));
    size_t dir_len;
    int run_dir = in_run_dir(rt, &dir_len);
    link_outputs(rt, run_dir, dir_len, 0);
    int rc = link_staged(rt, &rt->pub.commit);
    if (rc != RT_OK) { /* not committed: no final name stays */
        link_outputs(rt, run_dir, dir_len, 1);
        return rc;
    }
    rt->pub.commit.created = 0;
    rt->pub.committed = 1;
    if (sync_dir(rt->pub.commit.path) != 0) return rt_fail(rt, RT_IO_ERROR, "cannot make '%s' durable", rt->pub.commit.path);
    if (is_staged_file(&rt->pub.commit, rt->pub.commit.tmp)) unlink(rt->pub.commit.tmp);
    if (rt->pub.finalized && is_staged_file(&rt->pub.out, rt->pub.out.tmp)) unlink(rt->pub.out.tmp);
    for (int64_t o = 0; run_dir && o < rt->n; o++)
        if (o != rt->owner) other_output(rt, dir_len, o, DROP_STAGED_NAME);
    return RT_OK;
}

/* The "commit" op at the root: the record naming every owner's output digest (from the
   "prepared" messages), written, fsynced, and published with the run's outputs. */
int rt_write_commit(struct rt *rt) {
    size_t cap = 256 + (size_t)rt->pub.nentries * 96, at = 0;
    char *text = malloc(cap);
    if (!text) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    at += (size_t)snprintf(text + at, cap - at, "alphac-commit 1\nprotocol %016llx\nupdates %lld\nowners %lld\n",
                           (unsigned long long)rt->protocol, (long long)rt->updates, (long long)rt->n);
    /* entries arrive in tree order; the record lists them by owner */
    for (int64_t o = 0; o < rt->n; o++)
        for (int64_t e = 0; e < rt->pub.nentries; e++) {
            const uint64_t *w = rt->pub.entries + e * PREPARED_ENTRY_WORDS;
            if ((int64_t)w[0] != o) continue;
            const unsigned char *d = (const unsigned char *)(w + 1);
            at += (size_t)snprintf(text + at, cap - at, "owner %lld ", (long long)o);
            for (int b = 0; b < 32; b++) at += (size_t)snprintf(text + at, cap - at, "%02x", d[b]);
            at += (size_t)snprintf(text + at, cap - at, "\n");
        }
    unsigned char digest[32];
    const void *bufs[1] = {text};
    size_t sizes[1] = {at};
    int rc = rt_stage_write(rt, &rt->pub.commit, bufs, sizes, 1, digest);
    free(text);
    TRY(rc);
    return publish_run(rt);
}

/* A refused run: staged files go unless this owner has prepared (the root's commit record,
   which it cannot see, decides) or the run is committed. */
void rt_abandon(struct rt *rt) {
    if (rt->pub.prepared || rt->pub.committed) {
        if (rt->pub.out.fd >= 0) close(rt->pub.out.fd);
        rt->pub.out.fd = -1;
        return;
    }
    rt_stage_discard(&rt->pub.out);
    rt_stage_discard(&rt->pub.commit);
}
