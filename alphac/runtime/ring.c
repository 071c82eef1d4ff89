/* The same-host transport: a pair's POSIX shared-memory segment (a control page, then one
   single-producer single-consumer ring per direction), and the futex(2) bells that wake a
   side waiting for data or for space. Only words move here: a ring holds whole frames'
   bytes, written and consumed in multiples of 8 bytes.

   Ordering: a producer stores its `written` counter (release) and then bumps the other
   side's bell (sequentially consistent); a waiter reads its bell (acquire) before it looks
   at the rings, says it sleeps, and sleeps only while the bell still has the value it
   read: whichever comes first, the wake-up is not lost. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449 /* the same number on x86-64 and AArch64 */
#endif

struct waitv { /* struct futex_waitv of <linux/futex.h>, Linux 5.16 */
    uint64_t val, uaddr;
    uint32_t flags, reserved;
};

static uint64_t load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

/* The other side's bell rings: it is woken if it sleeps on it. */
static void ring_bell(struct link *l) {
    uint32_t *bell = &l->ctl->side[1 - l->side].bell;
    __atomic_add_fetch(bell, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&l->ctl->side[1 - l->side].sleeping, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Where this owner may write into its ring next, and how many bytes there are contiguous. */
size_t rt_ring_room(struct link *l, unsigned char **at) {
    uint64_t w = l->ctl->written[l->side].v, r = load(&l->ctl->consumed[l->side].v);
    size_t off = (size_t)(w % l->ring_bytes), room = (size_t)(l->ring_bytes - (w - r));
    *at = l->tx + off;
    return room < l->ring_bytes - off ? room : (size_t)(l->ring_bytes - off);
}

/* n bytes written where rt_ring_room said: the peer may read them. */
void rt_ring_commit(struct link *l, size_t n) {
    store(&l->ctl->written[l->side].v, l->ctl->written[l->side].v + n);
    ring_bell(l);
}

/* Copy up to n bytes into this owner's ring; how many fitted. */
size_t rt_ring_put(struct link *l, const void *src, size_t n) {
    size_t done = 0;
    for (int part = 0; part < 2 && done < n; part++) { /* up to the ring's end, then from its start */
        unsigned char *at;
        size_t room = rt_ring_room(l, &at), m = n - done < room ? n - done : room;
        if (m == 0) break;
        memcpy(at, (const char *)src + done, m);
        rt_ring_commit(l, m);
        done += m;
    }
    return done;
}

/* The bytes that have arrived in the peer's ring, contiguous from where this owner reads. */
size_t rt_ring_peek(struct link *l, const unsigned char **at) {
    int in = 1 - l->side;
    uint64_t r = l->ctl->consumed[in].v, w = load(&l->ctl->written[in].v);
    size_t off = (size_t)(r % l->ring_bytes), n = (size_t)(w - r);
    *at = l->rx + off;
    return n < l->ring_bytes - off ? n : (size_t)(l->ring_bytes - off);
}

void rt_ring_release(struct link *l, size_t n) {
    int in = 1 - l->side;
    store(&l->ctl->consumed[in].v, l->ctl->consumed[in].v + n);
    ring_bell(l);
}

/* Before looking at the rings: what this owner's bell says now. */
void rt_ring_look(struct link *l) {
    l->seen = __atomic_load_n(&l->ctl->side[l->side].bell, __ATOMIC_ACQUIRE);
}

static void sleeping(struct link **ls, int count, uint32_t v) {
    for (int i = 0; i < count; i++) __atomic_store_n(&ls[i]->ctl->side[ls[i]->side].sleeping, v, __ATOMIC_SEQ_CST);
}

static long wait_one(struct link *l, int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    return syscall(SYS_futex, &l->ctl->side[l->side].bell, FUTEX_WAIT, l->seen, &ts, NULL, 0);
}

static long wait_all(struct link **ls, int count, int64_t ms) {
    struct waitv v[count];
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    int64_t ns = (int64_t)end.tv_nsec + (ms % 1000) * 1000000L;
    end.tv_sec += (time_t)(ms / 1000 + ns / 1000000000L);
    end.tv_nsec = (long)(ns % 1000000000L);
    for (int i = 0; i < count; i++)
        v[i] = (struct waitv){ls[i]->seen, (uint64_t)(uintptr_t)&ls[i]->ctl->side[ls[i]->side].bell, FUTEX_32, 0};
    return syscall(SYS_futex_waitv, v, (unsigned)count, 0, &end, CLOCK_MONOTONIC);
}

/* Sleep until a bell of one of these links (distinct) rings after it was looked at, or ms
   pass: 1 if the time ran out, else 0. Several bells are waited on at once with
   futex_waitv(2); where that does not exist (Linux before 5.16, qemu-user) on the first
   one for at most a millisecond, so the others are looked at again soon. */
int rt_ring_wait(struct link **ls, int count, int64_t ms) {
    static int no_waitv;
    long r = -1;
    sleeping(ls, count, 1);
    if (count > 1 && !no_waitv && (r = wait_all(ls, count, ms)) < 0 && errno == ENOSYS) no_waitv = 1;
    if (count == 1 || no_waitv) r = wait_one(ls[0], count > 1 && ms > 1 ? 1 : ms);
    int out = r < 0 && errno == ETIMEDOUT;
    sleeping(ls, count, 0);
    return out;
}

/* -- the segment ------------------------------------------------------------------------ */

static void layout(struct link *l, void *map, uint64_t ring_bytes, int side) {
    l->ctl = map;
    l->side = side;
    l->ring_bytes = ring_bytes;
    unsigned char *rings = (unsigned char *)map + SHM_HEADER_BYTES;
    l->tx = rings + (size_t)side * ring_bytes;
    l->rx = rings + (size_t)(1 - side) * ring_bytes;
}

/* Create a segment with rings of ring_bytes under a fresh unguessable name
   (SHM_PREFIX PID-RANDOM, O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), its pages reserved (so a
   full /dev/shm is an error here, not a SIGBUS later), and map it as side 0. `name` gets
   the name, `id` its device, inode and size. 0, or an errno (nothing is left behind). */
int rt_shm_create(struct rt *rt, struct link *l, uint64_t ring_bytes, uint64_t name[SHM_NAME_WORDS],
                  uint64_t id[3]) {
    uint64_t nonce[2];
    if (rt_nonce(rt, nonce) != RT_OK) return EIO;
    char *text = (char *)name;
    memset(name, 0, SHM_NAME_WORDS * 8);
    snprintf(text, SHM_NAME_WORDS * 8, SHM_PREFIX "%ld-%016llx%016llx", (long)getpid(),
             (unsigned long long)nonce[0], (unsigned long long)nonce[1]);
    size_t bytes = SHM_HEADER_BYTES + 2 * (size_t)ring_bytes;
    int fd = shm_open(text, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    struct stat st;
    void *map = MAP_FAILED;
    int err = fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)bytes) != 0 ? errno : 0;
    if (!err) err = posix_fallocate(fd, 0, (off_t)bytes);
    if (!err && fstat(fd, &st) != 0) err = errno;
    if (!err && (map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) err = errno;
    close(fd);
    if (err) {
        shm_unlink(text);
        return err;
    }
    memcpy(rt->net.shm_linked, text, sizeof rt->net.shm_linked);
    layout(l, map, ring_bytes, 0);
    l->map_bytes = bytes;
    struct shm_ctl *c = map;
    c->bytes = bytes;
    c->ring_bytes = ring_bytes;
    store(&c->magic, SHM_MAGIC);
    id[0] = (uint64_t)st.st_dev, id[1] = (uint64_t)st.st_ino, id[2] = bytes;
    return 0;
}

/* Map the segment a peer created and named, as side 1, and unlink its name. 0; an errno
   when it cannot be opened or mapped (-> TCP); -1 when what the name opens is not what the
   peer created: another device or inode, owner, mode, size or control page. */
int rt_shm_map(struct link *l, const char *name, const uint64_t id[3]) {
    int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return errno;
    struct stat st;
    int err = fstat(fd, &st) != 0 ? errno : 0;
    if (!err && (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600 ||
                 (uint64_t)st.st_dev != id[0] || (uint64_t)st.st_ino != id[1] || (uint64_t)st.st_size != id[2] ||
                 id[2] < SHM_HEADER_BYTES + 2 * (uint64_t)SHM_RING_MIN))
        err = -1;
    void *map = err ? MAP_FAILED : mmap(NULL, (size_t)id[2], PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!err && map == MAP_FAILED) err = errno;
    close(fd);
    if (err) return err;
    const struct shm_ctl *c = map;
    uint64_t ring = c->ring_bytes;
    if (load(&c->magic) != SHM_MAGIC || c->bytes != id[2] || ring < SHM_RING_MIN || ring > SHM_RING_MAX ||
        (ring & (ring - 1)) || SHM_HEADER_BYTES + 2 * ring != id[2]) {
        munmap(map, (size_t)id[2]);
        return -1;
    }
    shm_unlink(name); /* both sides have it mapped: the name is gone, the memory lives on */
    layout(l, map, ring, 1);
    l->map_bytes = (size_t)id[2];
    return 0;
}

void rt_shm_unmap(struct link *l) {
    if (l->ctl) munmap(l->ctl, l->map_bytes);
    l->ctl = NULL;
}
