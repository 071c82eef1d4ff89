/* Connections and transport: where each owner listens (struct endpoint), the TCP
   connections and shared-memory rings to the peers (ring.c, transport.c, connect.c), the
   I/O deadlines (io.c) and the exchange that moves every frame (xfer.c). */
#ifndef ALPHAC_NET_H
#define ALPHAC_NET_H

#include <sys/socket.h>

#include "frame.h"

/* The transports the peers file allows an owner (its third column). */
enum { TRANSPORT_TCP, TRANSPORT_SHM, TRANSPORT_SHM_ONLY };

struct endpoint {
    int listed;   /* the peers file names this owner (at `line`) */
    int64_t line;
    int port;
    int transport; /* TRANSPORT_*: what this owner may use */
    char host[256];
    struct sockaddr_storage addr; /* resolved for this owner and its peers only */
    socklen_t addr_len;
};

/* The control page of a pair's shared-memory segment (ring.c): side 0 created it (the
   connector), side 1 mapped it. Ring r carries side r's frames to the other side; each
   counter is the bytes written into / consumed from it, on a cache line of its own. A
   side's bell counts the events it may wait for (data in, space freed); `sleeping` says
   it waits on it in futex(2), so the other side wakes it. */
struct shm_ctl {
    uint64_t magic, bytes, ring_bytes, pad0[5];
    struct { uint64_t v, pad[7]; } written[2], consumed[2];
    struct { uint32_t bell, sleeping; uint64_t pad[7]; } side[2];
};

/* How frames reach a peer: its TCP connection (rt->net.fds), and when shared memory was
   set up, the pair's rings (the TCP connection then only tells that the peer is gone). */
struct link {
    struct shm_ctl *ctl;          /* NULL: TCP */
    size_t map_bytes;
    int side;                     /* this owner's side of the segment */
    unsigned char *tx, *rx;       /* the ring this owner writes, and the one it reads */
    uint64_t ring_bytes;
    uint32_t seen;                /* this owner's bell, read before it last looked at the rings */
    int gone;                     /* the peer's TCP connection ended: nothing more will come */
    int why, err;                 /* why the pair uses TCP (WHY_*, an errno), for the report */
    int64_t whose;                /* ... and which owner could not create or map the segment */
};
enum { WHY_PEERS_FILE = 1, WHY_OTHER_HOST, WHY_CREATE, WHY_MAP };

struct rt_net {
    const char *peers_path;       /* --peers FILE */
    int listen_any;               /* --listen-any */
    int64_t timeout_ms;
    int64_t deadline_ms;          /* of the socket I/O under way: one frame, or the whole connect phase */
    int in_connect;
    struct endpoint *ep;          /* n */
    int *fds;                     /* n: the connection to each peer, -1 if none */
    struct link *links;           /* n: how frames reach each peer */
    unsigned char *accept_from;   /* n: 1 for the higher peers that connect here */
    const char *connections_path; /* --connections FILE */
    char shm_linked[SHM_NAME_WORDS * 8]; /* a segment this owner created and still has to unlink */
};

/* -- io.c ------------------------------------------------------------------------------ */
int64_t rt_now_ms(void);
void rt_start_io(struct rt *rt);
int rt_io_failed(struct rt *rt, ssize_t r, int64_t peer, const char *verb);
void rt_sockopts(struct rt *rt, int fd);
int rt_self_connected(int fd);

/* -- ring.c ---------------------------------------------------------------------------- */
int rt_shm_create(struct rt *rt, struct link *l, uint64_t ring_bytes, uint64_t name[SHM_NAME_WORDS],
                  uint64_t id[3]);
int rt_shm_map(struct link *l, const char *name, const uint64_t id[3]);
void rt_shm_unmap(struct link *l);
size_t rt_ring_room(struct link *l, unsigned char **at);
void rt_ring_commit(struct link *l, size_t n);
size_t rt_ring_put(struct link *l, const void *src, size_t n);
size_t rt_ring_peek(struct link *l, const unsigned char **at);
void rt_ring_release(struct link *l, size_t n);
void rt_ring_look(struct link *l);
int rt_ring_wait(struct link **ls, int count, int64_t ms);

/* -- xfer.c ---------------------------------------------------------------------------- */
int rt_exchange(struct rt *rt, struct xfer *x, int64_t count);
int rt_send_frame(struct rt *rt, int64_t peer, uint64_t kind, uint64_t version, uint64_t step,
                  uint64_t *buf, int64_t len, int reuse);
int rt_recv_frame(struct rt *rt, int fd, int64_t peer, uint64_t kind, uint64_t version,
                  uint64_t step, uint64_t *buf, int64_t len, const struct arrival *add,
                  int64_t *sender);

/* -- transport.c ----------------------------------------------------------------------- */
int rt_shm_offer(struct rt *rt, int64_t peer);
int rt_shm_answer(struct rt *rt, int64_t peer);
int rt_transport(struct rt *rt, int64_t peer, int connector);
int rt_write_connections(struct rt *rt);
void rt_shm_forget(struct rt *rt);

/* -- connect.c ------------------------------------------------------------------------- */
int rt_alloc_peers(struct rt *rt);
int rt_connect(struct rt *rt);
void rt_close_all(struct rt *rt);

#endif
