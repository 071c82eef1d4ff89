/* Which transport each pair uses. Right after a connection's hellos, two owners whose
   peers-file lines both allow shared memory exchange transport frames over TCP (tagged
   like every frame of an authenticated run): the connector creates the pair's segment and
   offers it (its boot id, the segment's name, device, inode and size); the acceptor, if
   its boot id is the same, opens the name, checks it is that very object, private to this
   user, maps it and unlinks the name, and answers. From then on the pair's frames go
   through the rings; the TCP connection stays open, so either side learns when the other
   is gone. A pair that cannot use shared memory uses TCP, unless a line says shm-only. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define H HEADER_WORDS
enum { T_BOOT = 0, T_STATUS = 2, T_ID = 3, T_ERR = 3, T_NAME = 6 };

/* This machine's boot id (16 bytes of /proc/sys/kernel/random/boot_id), or zeros. */
static void boot_id(uint64_t out[2]) {
    out[0] = out[1] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    int c, digits = 0;
    while (digits < 32 && (c = fgetc(f)) != EOF) {
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v >= 0) out[digits / 16] = out[digits / 16] << 4 | (uint64_t)v, digits++;
    }
    fclose(f);
    if (digits != 32) out[0] = out[1] = 0;
}

static int same_host(const uint64_t *theirs) {
    uint64_t mine[2];
    boot_id(mine);
    return (mine[0] || mine[1]) && mine[0] == theirs[0] && mine[1] == theirs[1];
}

/* Rings that hold the protocol's largest frame: a frame is never split across waits. */
static uint64_t ring_bytes(const struct rt *rt) {
    uint64_t need = (uint64_t)(H + img_field(rt, IMG_MAX_PAYLOAD) + 1 + TAG_WORDS) * 8, r = SHM_RING_MIN;
    while (r < need && r < SHM_RING_MAX) r <<= 1;
    return r;
}

static int send_transport(struct rt *rt, int64_t peer, uint64_t status, uint64_t err) {
    uint64_t *q = rt->small + H;
    boot_id(q + T_BOOT);
    q[T_STATUS] = status;
    if (status != TRANSPORT_OFFER) {
        memset(q + T_ID, 0, (TRANSPORT_WORDS - T_ID) * 8);
        q[T_ERR] = err;
    }
    return rt_send_frame(rt, peer, KIND_TRANSPORT, 0, 0, rt->small, TRANSPORT_WORDS, 0);
}

static int recv_transport(struct rt *rt, int64_t peer) {
    return rt_recv_frame(rt, rt->net.fds[peer], peer, KIND_TRANSPORT, 0, 0, rt->small, TRANSPORT_WORDS, NULL, NULL);
}

static int tcp(struct link *l, int why, int err, int64_t whose) {
    l->why = why, l->err = err, l->whose = whose;
    return RT_OK;
}

#define NOT_IT "not the segment offered (another name, device, inode, owner, mode, size or control page)"

static int mismatch(struct rt *rt, int64_t peer, int offered) {
    long long me = (long long)rt->owner, p = (long long)peer;
    if (offered)
        return rt_fail(rt, RT_SHM_SEGMENT, "owner %lld: owner %lld found the shared-memory segment this owner "
                       "offered to be " NOT_IT, me, p);
    return rt_fail(rt, RT_SHM_SEGMENT, "owner %lld: what owner %lld's shared-memory segment name opens is " NOT_IT,
                   me, p);
}

/* The segment this owner created and has not seen unlinked by its peer yet: unlink it. */
void rt_shm_forget(struct rt *rt) {
    if (rt->net.shm_linked[0]) shm_unlink(rt->net.shm_linked);
    rt->net.shm_linked[0] = 0;
}

/* The connector's side: create, offer, read the answer. */
int rt_shm_offer(struct rt *rt, int64_t peer) {
    struct link *l = &rt->net.links[peer], made = {0}; /* frames go over TCP until the answer */
    uint64_t *q = rt->small + H;
    int err = rt_shm_create(rt, &made, ring_bytes(rt), q + T_NAME, q + T_ID);
    TRY(send_transport(rt, peer, err ? TRANSPORT_DECLINED : TRANSPORT_OFFER, (uint64_t)err));
    int rc = recv_transport(rt, peer);
    uint64_t status = q[T_STATUS], theirs = q[T_ERR];
    if (rc == RT_OK && status == TRANSPORT_MAPPED) {
        rt->net.shm_linked[0] = 0; /* the acceptor unlinked it */
        *l = made;
        return RT_OK;
    }
    rt_shm_forget(rt);
    rt_shm_unmap(&made);
    TRY(rc);
    if (status == TRANSPORT_MISMATCH) return mismatch(rt, peer, 1);
    if (status != TRANSPORT_DECLINED)
        return rt_fail(rt, RT_SHM_SEGMENT, "owner %lld: owner %lld answered the offer of a segment with status %llu",
                       (long long)rt->owner, (long long)peer, (unsigned long long)status);
    if (err) return tcp(l, WHY_CREATE, err, rt->owner);
    if (!same_host(q + T_BOOT)) return tcp(l, WHY_OTHER_HOST, 0, peer);
    return tcp(l, WHY_MAP, (int)theirs, peer);
}

/* A segment name as offered: NUL-terminated, SHM_PREFIX then no other '/'. */
static int good_name(const char *name) {
    size_t len = strnlen(name, SHM_NAME_WORDS * 8);
    return len < SHM_NAME_WORDS * 8 && strncmp(name, SHM_PREFIX, strlen(SHM_PREFIX)) == 0 && !strchr(name + 1, '/');
}

/* The acceptor's side: read the offer, map what it names if on this host, answer. */
int rt_shm_answer(struct rt *rt, int64_t peer) {
    struct link *l = &rt->net.links[peer];
    uint64_t *q = rt->small + H;
    TRY(recv_transport(rt, peer));
    if (!same_host(q + T_BOOT)) {
        TRY(send_transport(rt, peer, TRANSPORT_DECLINED, 0));
        return tcp(l, WHY_OTHER_HOST, 0, peer);
    }
    if (q[T_STATUS] == TRANSPORT_DECLINED) {
        int theirs = (int)q[T_ERR];
        TRY(send_transport(rt, peer, TRANSPORT_DECLINED, 0));
        return tcp(l, WHY_CREATE, theirs, peer);
    }
    char name[SHM_NAME_WORDS * 8];
    uint64_t id[3] = {q[T_ID], q[T_ID + 1], q[T_ID + 2]};
    memcpy(name, q + T_NAME, sizeof name);
    struct link made = {0}; /* the answer still goes over TCP */
    int err = q[T_STATUS] == TRANSPORT_OFFER && good_name(name) ? rt_shm_map(&made, name, id) : -1;
    int rc = send_transport(rt, peer, err == 0 ? TRANSPORT_MAPPED : err < 0 ? TRANSPORT_MISMATCH : TRANSPORT_DECLINED,
                            (uint64_t)(err > 0 ? err : 0));
    if (rc != RT_OK) rt_shm_unmap(&made);
    TRY(rc);
    if (err < 0) return mismatch(rt, peer, 0);
    if (err) return tcp(l, WHY_MAP, err, rt->owner);
    *l = made;
    return RT_OK;
}

static const char *const modes[] = {"tcp", "shm", "shm-only"};

/* Why a pair uses TCP, in words. */
static void reason(const struct rt *rt, const struct link *l, char *out, size_t size) {
    long long whose = (long long)l->whose;
    switch (l->why) {
    case WHY_PEERS_FILE: snprintf(out, size, "the peers file says %s for owner %lld", modes[rt->net.ep[whose].transport], whose); break;
    case WHY_OTHER_HOST: snprintf(out, size, "owner %lld runs on another host (another boot id)", whose); break;
    case WHY_CREATE: snprintf(out, size, "owner %lld could not create a segment (%s)", whose, strerror(l->err)); break;
    default: snprintf(out, size, "owner %lld could not map the segment (%s)", whose, strerror(l->err)); break;
    }
}

/* After the hellos with `peer`: shared memory if both lines allow it and it works. */
int rt_transport(struct rt *rt, int64_t peer, int connector) {
    int mine = rt->net.ep[rt->owner].transport, theirs = rt->net.ep[peer].transport;
    struct link *l = &rt->net.links[peer];
    if (mine == TRANSPORT_TCP || theirs == TRANSPORT_TCP)
        tcp(l, WHY_PEERS_FILE, 0, mine == TRANSPORT_TCP ? rt->owner : peer);
    else
        TRY(connector ? rt_shm_offer(rt, peer) : rt_shm_answer(rt, peer));
    if (!l->ctl && (mine == TRANSPORT_SHM_ONLY || theirs == TRANSPORT_SHM_ONLY)) {
        char why[200];
        reason(rt, l, why, sizeof why);
        return rt_fail(rt, RT_TRANSPORT_UNAVAILABLE, "owner %lld: no shared memory with owner %lld (%s), and the "
                       "peers file says %s for owner %lld", (long long)rt->owner, (long long)peer, why,
                       modes[TRANSPORT_SHM_ONLY], (long long)(mine == TRANSPORT_SHM_ONLY ? rt->owner : peer));
    }
    return RT_OK;
}

/* --connections FILE: one line per peer, `PEER shm` or `PEER tcp REASON`. */
int rt_write_connections(struct rt *rt) {
    if (!rt->net.connections_path) return RT_OK;
    const char *path = rt->net.connections_path;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return rt_fail(rt, RT_IO_ERROR, "cannot write the connections report '%s' (%s)", path, strerror(errno));
    }
    const uint64_t *peers = img_sec(rt, SEC_PEERS) + img_mine(rt, SEC_PEER_START);
    for (int64_t j = 0; j < img_mine(rt, SEC_PEER_COUNT); j++) {
        int64_t p = (int64_t)peers[j];
        if (p == rt->owner || rt->net.fds[p] < 0) continue;
        char why[200];
        if (rt->net.links[p].ctl) {
            fprintf(f, "%lld shm\n", (long long)p);
            continue;
        }
        reason(rt, &rt->net.links[p], why, sizeof why);
        fprintf(f, "%lld tcp %s\n", (long long)p, why);
    }
    int bad = ferror(f) | fclose(f);
    return bad ? rt_fail(rt, RT_IO_ERROR, "cannot write the connections report '%s'", path) : RT_OK;
}
