/* Learner buffers, counted: every buffer of the learner (parameters, state, the read replica,
   the register pool, scratch) is mapped with mmap(2) and unmapped with munmap(2), so that a
   freed one leaves the process, and its bytes are counted by category as it comes and goes
   (current and high-water mark). `--stats FILE` writes the counts at exit (docs/runtime.md,
   "Measured bytes"); the plan's memory laws (alphac/plan/memory.py) are the same sums. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t empty_buffer[1]; /* what a zero-word buffer points to: never written */

static void count(struct rt *rt, int kind, int64_t bytes) {
    struct rt_mem *m = &rt->store.mem;
    m->current[kind] += bytes;
    if (m->current[kind] > m->peak[kind]) m->peak[kind] = m->current[kind];
    if (kind == MEM_SAMPLES) return; /* read in place from the image: reported apart */
    m->total += bytes;
    if (m->total > m->total_peak) m->total_peak = m->total;
}

/* `words` zeroed words of category `kind`, or NULL with *rc an io-error refusal. */
void *rt_buf_alloc(struct rt *rt, int kind, int64_t words, int *rc) {
    *rc = RT_OK;
    if (words <= 0) return empty_buffer;
    void *p = (uint64_t)words > SIZE_MAX / 8 ? MAP_FAILED
              : mmap(NULL, (size_t)words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        *rc = rt_fail(rt, RT_IO_ERROR, "cannot allocate %lld bytes (%s)", (long long)words * 8, strerror(errno));
        return NULL;
    }
    count(rt, kind, words * 8);
    return p;
}

/* Give back a buffer of rt_buf_alloc (the same kind and words). */
void rt_buf_free(struct rt *rt, int kind, void *p, int64_t words) {
    if (!p || words <= 0) return;
    munmap(p, (size_t)words * 8);
    count(rt, kind, -words * 8);
}

/* Copy words out of the image, a chunk at a time, and tell the kernel that the image's
   pages holding them (every whole page of a chunk) are not needed any more: the initial
   words then live once in the process, in this owner's buffers, not also in the image's
   mapping. (MADV_DONTNEED on a read-only file mapping only drops the pages; a later read
   would map them from the file again.) */
#define COPY_CHUNK_BYTES (1 << 20)
void rt_copy_from_image(uint64_t *dst, const uint64_t *src, int64_t words) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int64_t at = 0; at < words; at += COPY_CHUNK_BYTES / 8) {
        size_t n = (size_t)(words - at < COPY_CHUNK_BYTES / 8 ? words - at : COPY_CHUNK_BYTES / 8) * 8;
        const char *from = (const char *)(src + at);
        memcpy(dst + at, from, n);
        uintptr_t lo = ((uintptr_t)from + page - 1) / page * page, hi = ((uintptr_t)from + n) / page * page;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
}

/* Count `words` this owner holds without allocating them (its samples, in the image). */
void rt_buf_hold(struct rt *rt, int kind, int64_t words) { count(rt, kind, words * 8); }

/* The kilobytes of a `Vm...:` line of /proc/self/status (VmRSS, VmHWM), 0 if unknown. */
static int64_t vm_kb(const char *key) {
    char text[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return 0;
    text[n] = 0;
    const char *at = strstr(text, key);
    return at ? strtoll(at + strlen(key), NULL, 10) : 0;
}

/* Before any work: the stats file, so that an unwritable one refuses before the run, and
   the resident size so far (the executable idle, libcrypto set up: nothing of the learner
   allocated). */
int rt_open_stats(struct rt *rt) {
    rt_crypto_init();
    rt->store.rss_start_kb = vm_kb("VmRSS:");
    if (!rt->store.stats_path) return RT_OK;
    rt->store.stats_fd = open(rt->store.stats_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (rt->store.stats_fd < 0)
        return rt_fail(rt, RT_IO_ERROR, "cannot create '%s' (%s)", rt->store.stats_path, strerror(errno));
    return RT_OK;
}

/* The stats file: `alphac-stats 1`, the owner, how the run ended, then per category its
   bytes now and at their highest, the persistent and peak bytes of the learner buffers
   (every category but samples), and the resident size the kernel reports, idle at the
   start and at its highest (kilobytes). */
int rt_write_stats(struct rt *rt, int code) {
    if (rt->store.stats_fd < 0) return RT_OK;
    static const char *const names[] = {
#define MEM_NAME(s) s,
        MEM_NAMES(MEM_NAME)
#undef MEM_NAME
    };
    const struct rt_mem *m = &rt->store.mem;
    char text[1024];
    int at = snprintf(text, sizeof text, "alphac-stats 1\nowner %lld\nstatus %s\n", (long long)rt->owner,
                      code == RT_OK ? "ok" : rt_code_name(code));
    for (int kind = 0; kind < MEM_KINDS; kind++)
        at += snprintf(text + at, sizeof text - (size_t)at, "bytes %s %lld %lld\n", names[kind],
                       (long long)m->current[kind], (long long)m->peak[kind]);
    at += snprintf(text + at, sizeof text - (size_t)at, "persistent %lld\npeak %lld\nrss_kb %lld %lld\n",
                   (long long)(m->peak[MEM_PARAMETERS] + m->peak[MEM_STATE]), (long long)m->total_peak,
                   (long long)rt->store.rss_start_kb, (long long)vm_kb("VmHWM:"));
    int ok = write(rt->store.stats_fd, text, (size_t)at) == at && fsync(rt->store.stats_fd) == 0;
    close(rt->store.stats_fd);
    rt->store.stats_fd = -1;
    return ok ? RT_OK : rt_fail(rt, RT_IO_ERROR, "writing '%s' failed (%s)", rt->store.stats_path, strerror(errno));
}

/* Partitioned parameters kept by version: the read replicas of S + 1 versions, slot v mod
   (S + 1), each with its version (ops.c), made once. */
int rt_replica_history(struct rt *rt) {
    int64_t slots = (int64_t)rt_replica_versions(rt) + 1;
    int rc = RT_OK;
    if (rt->store.history) return RT_OK;
    rt->store.history = rt_buf_alloc(rt, MEM_REPLICA, slots * rt->k, &rc);
    if (rc == RT_OK) rt->store.history_versions = rt_alloc_words(rt, slots, &rc);
    return rc;
}
