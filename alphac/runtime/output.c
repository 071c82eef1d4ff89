/* Publication: PATH.tmp written, fsynced, then linked to PATH (link(2) fails when PATH
   exists, so a result is never overwritten, even one another process created meanwhile),
   and PATH.tmp removed. The words are those of the output formats in docs/runtime.md. */
#include "rt.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rt_refuse_if_exists(struct rt *rt, const char *path) {
    if (access(path, F_OK) == 0)
        return rt_fail(rt, RT_OUTPUT_EXISTS, "'%s' exists; results are never overwritten", path);
    return RT_OK;
}

static int write_fd(int fd, const void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r = write(fd, (const char *)buf + done, n - done);
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

int rt_publish(struct rt *rt, const char *path, const void *const *bufs, const size_t *sizes, int count) {
    size_t len = strlen(path) + 5;
    char *tmp = malloc(len);
    if (!tmp) return rt_fail(rt, RT_IO_ERROR, "cannot allocate %zu bytes", len);
    snprintf(tmp, len, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = rt_fail(rt, RT_IO_ERROR, "cannot create '%s'", tmp);
        free(tmp);
        return rc;
    }
    int rc = RT_OK;
    for (int i = 0; i < count && rc == RT_OK; i++)
        if (write_fd(fd, bufs[i], sizes[i]) != 0) rc = rt_fail(rt, RT_IO_ERROR, "writing '%s' failed", tmp);
    if (rc == RT_OK && fsync(fd) != 0) rc = rt_fail(rt, RT_IO_ERROR, "flushing '%s' failed", tmp);
    if (close(fd) != 0 && rc == RT_OK) rc = rt_fail(rt, RT_IO_ERROR, "flushing '%s' failed", tmp);
    if (rc == RT_OK && link(tmp, path) != 0) {
        rc = rt_refuse_if_exists(rt, path);
        if (rc == RT_OK) rc = rt_fail(rt, RT_IO_ERROR, "cannot publish '%s'", path);
    }
    unlink(tmp);
    free(tmp);
    return rc;
}

/* Format 1 (every word of the learner) or, for a partitioned learner, format 2 (the words
   this owner holds, after their positions). */
int rt_write_output(struct rt *rt) {
    TRY(rt_refuse_if_exists(rt, rt->out_path));
    int64_t k = rt->k, m = rt->m;
    if (img_field(rt, IMG_OUTPUT_FORMAT) == OUTPUT_REPLICATED) {
        uint64_t head[7] = {OUTPUT_MAGIC, OUTPUT_REPLICATED, (uint64_t)rt->owner, (uint64_t)rt->updates,
                            rt->protocol, (uint64_t)k, (uint64_t)m};
        const void *bufs[3] = {head, rt->params, rt->state};
        size_t sizes[3] = {sizeof head, (size_t)k * 8, (size_t)m * 8};
        return rt_publish(rt, rt->out_path, bufs, sizes, 3);
    }
    int64_t me = rt->owner;
    int partitioned = (int)img_field(rt, IMG_PART_PARAMETERS);
    int64_t kp = partitioned ? rt_owned_count(rt, me) : k;
    int64_t mp = img_mine(rt, SEC_HELD_COUNT);
    const uint64_t *held = img_sec(rt, SEC_HELD_STATE) + img_mine(rt, SEC_HELD_START);
    int all_state = !img_field(rt, IMG_PART_STATE);
    int64_t total = 9 + 2 * (kp + mp);
    int rc;
    uint64_t *buf = rt_alloc_words(rt, total, &rc);
    TRY(rc);
    uint64_t head[9] = {OUTPUT_MAGIC, OUTPUT_OWNED, (uint64_t)me, (uint64_t)rt->updates, rt->protocol,
                        (uint64_t)k, (uint64_t)m, (uint64_t)kp, (uint64_t)mp};
    memcpy(buf, head, sizeof head);
    uint64_t *pos = buf + 9, *words = buf + 9 + kp + mp;
    if (partitioned) rt_coordinates(rt, me, pos);
    for (int64_t j = 0; j < kp; j++) {
        if (!partitioned) pos[j] = (uint64_t)j;
        words[j] = rt->params[pos[j]];
    }
    for (int64_t j = 0; j < mp; j++) {
        uint64_t off = all_state ? (uint64_t)j : held[j];
        pos[kp + j] = off;
        words[kp + j] = rt->state[off];
    }
    const void *bufs[1] = {buf};
    size_t sizes[1] = {(size_t)total * 8};
    rc = rt_publish(rt, rt->out_path, bufs, sizes, 1);
    free(buf);
    return rc;
}
