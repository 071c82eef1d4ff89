/* The role runtime of every alphac executable: command line, peers, connections, frames,
   the op interpreter, replica comparison and publication, over the role image the build
   embeds (`alphac_image`, layout in alphac/image/format.py). It performs no floating-point
   arithmetic: every float operation is a call into the llvmlite kernels declared below.

   Every fallible function returns 0 or a refusal code (RT_<CODE>, from alphac_gen.h) after
   writing its detail into rt->msg; `main` prints `refused: CODE: detail` and exits. */
#ifndef ALPHAC_RT_H
#define ALPHAC_RT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <openssl/types.h>

#include "alphac_gen.h"

/* The transports the peers file allows an owner (its third column). */
enum { TRANSPORT_TCP, TRANSPORT_SHM, TRANSPORT_SHM_ONLY };

enum rt_code {
    RT_OK = 0,
#define RT_ENUM(e, s) e,
    RT_CODES(RT_ENUM)
#undef RT_ENUM
    RT_NCODES
};
#define RT_DONE (-1) /* --help or --version printed: exit 0 */

#define TRY(expr)                \
    do {                         \
        int rc_ = (expr);        \
        if (rc_ != 0) return rc_; \
    } while (0)

struct endpoint {
    int listed;   /* the peers file names this owner (at `line`) */
    int64_t line;
    int port;
    int transport; /* TRANSPORT_*: what this owner may use */
    char host[256];
    struct sockaddr_storage addr; /* resolved for this owner and its peers only */
    socklen_t addr_len;
};

/* Host names, each NUL-terminated, one after another (hostlist.c). */
struct rt_names {
    char *text;
    size_t used, cap;
    int64_t count;
};

/* A SHA-256 under way (digest.c, libcrypto): `failed` once libcrypto failed. */
struct rt_sha256 {
    EVP_MD_CTX *ctx;
    int failed;
};

/* What a receive computes on arrival, for j < words, in the pass that hashes each piece:
   the add of the combine that comes next, dst[j] = a[j] + b[j] (a or b the payload being
   received); or, with count >= 0, the mean of the update that comes next, dst[j] =
   payload[j] / count (dst: the payload itself). Over shared memory those words are read
   where they lie in the ring and not copied into the register (its words from `words` on
   are). */
struct arrival {
    uint64_t *dst;
    const uint64_t *a, *b;
    int64_t words;
    int64_t count; /* -1: the add */
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

/* How frames reach a peer: its TCP connection (rt->fds), and when shared memory was set
   up, the pair's rings (the TCP connection then only tells that the peer is gone). */
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

/* One frame on its way over a peer's link, for rt_exchange: a send of `len` payload words
   from buf + HEADER_WORDS (its header and trailer are kept here, so one register can go to
   several peers at once), or a receive into buf ([header | payload | checksum | tag], a
   register's layout), checked as rt_recv_frame checks it. Fill the first group of fields;
   rt_exchange owns the rest. */
struct xfer {
    int64_t peer;                 /* -1: a hello on `fd` from whichever expected owner it names */
    int fd;                       /* the connection of a hello (peer -1) */
    int send;
    uint64_t kind, version, step;
    uint64_t *buf;
    int64_t len;
    const struct arrival *add;    /* receives: add the payload on arrival */
    int reuse;                    /* sends: reuse the payload hash of the register sent last */
    /* progress */
    uint64_t head[HEADER_WORDS], trail[1 + TAG_WORDS];
    size_t done, total;
    int64_t hashed, from;
    int hit, sealed, finished, checked;
    int tagged;                   /* keyed, over TCP: the frame carries a tag */
    int mac_failed;               /* libcrypto could not begin the payload MAC */
    uint64_t lanes[LANES];
    EVP_CIPHER_CTX *mac;          /* keyed runs: the payload's MAC under way (auth.c) */
};

/* A file written under `tmp` (created O_EXCL|O_NOFOLLOW before the first update) and
   linked to `path` only once the run is committed. */
struct staged {
    char *path, *tmp;
    int fd;
    int created; /* the .tmp is this owner's (created, not yet linked): it removes it on refusal */
    uint64_t dev, ino; /* the .tmp's file, to know it under its final name (linked by the root) */
};

/* One connection's authentication: the session key (the run's key until both hellos are
   through) and the sequence number of the next frame each way. */
struct session {
    unsigned char key[32];
    uint64_t sent, received;
    uint64_t nonce[2]; /* this owner's half of the connection's nonce */
};

/* Checkpoints: where they go, this run's id, and what one checkpoint's reports collected. */
struct ckpt {
    const char *dir, *resume; /* --checkpoint-dir (or the image's), --resume (or the image's) */
    char *partial;            /* the partial directory of the checkpoint being written */
    uint64_t run_id, resumed_id;
    int64_t interval;
    uint64_t *entries;        /* (owner, shard bytes, shard sha256, fragment sha256s) per owner */
    int64_t nentries, entry_words;
    uint64_t *manifests;      /* (owner, manifest sha256) per owner below with a manifest */
    int64_t nmanifests;
    int resume_mode;          /* 0 none, 1 the same contract, 2 a new one */
    int resumed;
    char resumed_sha[65];
    int64_t resumed_version;
    const char *key_path;     /* --checkpoint-key FILE (else the run's --key) */
    int keyed;                /* 1: manifests are tagged, and a restore checks the tag */
    unsigned char key[32];    /* the checkpoint key: HMAC-SHA-256(key, CKPT_KEY_LABEL) */
};

/* The learner buffers' bytes by category (MEM_*), now and at their highest, and the
   high-water mark of their sum (samples apart). */
struct rt_mem {
    int64_t current[MEM_KINDS], peak[MEM_KINDS];
    int64_t total, total_peak;
};

struct rt {
    const uint64_t *img;
    int64_t owner, pos, n, k, m, s;
    uint64_t protocol;
    int64_t updates, timeout_ms;
    int64_t start;         /* the version the run starts from: 0, or a resumed checkpoint's */
    struct ckpt ck;
    int64_t deadline_ms;   /* of the socket I/O under way: one frame, or the whole connect phase */
    int in_connect;
    const char *peers_path, *out_path, *key_path, *stats_path;
    int stats_fd;
    struct rt_mem mem;
    int64_t rss_start_kb;       /* VmRSS before anything of the learner is allocated */
    int listen_any;
    int insecure; /* --insecure: no key, and said so */
    int status_fd;         /* --status-fd: where progress lines go, -1 for none */
    /* an engine's owner index and hosts (engine.c): what gave the owner index; the node
       list (--nodelist or SLURM_STEP_NODELIST) or --hostfile, and which of the three
       (nodes_from, for messages); the owners' first port; --out-dir */
    const char *owner_from, *nodelist, *nodes_from, *hostfile, *out_dir;
    int64_t base_port;
    unsigned char *key;    /* NULL: frames are not authenticated */
    size_t key_len;
    struct session *sessions; /* n, when keyed */
    EVP_CIPHER_CTX **macs;    /* keyed: the payload MACs of the frames of one exchange (auth.c) */
    int64_t nmacs;
    struct endpoint *ep;        /* n */
    int *fds;                   /* n: the connection to each peer, -1 if none */
    struct link *links;         /* n: how frames reach each peer */
    const char *connections_path; /* --connections FILE */
    char shm_linked[SHM_NAME_WORDS * 8]; /* a segment this owner created and still has to unlink */
    unsigned char *accept_from; /* n: 1 for the higher peers that connect here */
    /* compact storage (alphac/image/image.py): kp parameter words, mp state words, the
       first `alike` of which every owner holds alike; kc coordinates of its own */
    uint64_t *params, *state, *replica, *cbuf;
    int64_t kp, mp, alike, kc;
    uint64_t *regs;             /* the register pool: [header | payload | checksum | tag] each */
    const uint64_t *reg_off;    /* word offset of each register in regs (slots are shared) */
    const uint64_t *reg_words;  /* data words of each register */
    int64_t nregs;
    uint64_t rate;
    uint64_t digest;
    uint64_t *small;                  /* hello, prepared and publish frames (max payload) */
    int added, added_bad;             /* the last receive added on arrival; it saw a bad word */
    int meaned;                       /* ... or took the mean of what it received */
    const uint64_t *sent_buf;         /* the register whose payload hash sent_hash is */
    uint64_t sent_hash;
    unsigned char sent_mac[PAYLOAD_MAC_BYTES]; /* ... and, if sent_mac_valid, its payload's MAC */
    int sent_mac_valid;
    int replica_held;
    int64_t replica_version;
    int replica_installed;            /* a replica was installed in this run */
    /* publication: the staged output (and, at the root, the commit record) */
    struct staged out, commit;
    unsigned char out_digest[32];      /* sha256 of the staged output's bytes */
    uint64_t *entries;                 /* (owner, 4 digest words) of this owner's subtree */
    int64_t nentries;
    int prepared, committed, finalized;
    int code;
    char msg[1024];
    const char *gpu;                   /* --gpu UUID (SM86 executables) */
};

/* -- the kernels (llvmlite; alphac/codegen) ------------------------------------------ */
extern const uint64_t alphac_image[];
extern int64_t alphac_contribution(const void *params, const void *sample, void *out, int64_t *fail);
extern int64_t alphac_update(void *params, void *state, void *mean, const void *rate, int64_t *fail);
extern const char *const alphac_contribution_labels[];
extern const char *const alphac_update_labels[];
extern int64_t alphac_update_owner;
extern int64_t alphac_local_first(void *acc, int64_t k);
extern int64_t alphac_local_add(void *acc, const void *c, int64_t k);
extern int64_t alphac_add_range(void *dst, const void *a, const void *b, int64_t lo, int64_t hi);
extern int64_t alphac_add_lanes(void *dst, const void *a, const void *b, const void *h, int64_t n,
                                int64_t phase, uint64_t *lanes);
extern int64_t alphac_mean_lanes(void *dst, const void *src, int64_t n, int64_t phase, uint64_t *lanes,
                                 int64_t count);
extern int64_t alphac_first_nonfinite(const void *p, int64_t lo, int64_t hi);
extern int64_t alphac_mean(void *g, int64_t count, int64_t k);
extern int64_t alphac_mean_owned(void *mean, const void *src, int64_t count, int64_t at, int64_t first,
                                 int64_t step, int64_t cnt, int64_t sliced);

/* -- the role image -------------------------------------------------------------------- */
static inline uint64_t img_field(const struct rt *rt, int field) { return rt->img[field]; }
static inline const uint64_t *img_sec(const struct rt *rt, int s) {
    return rt->img + rt->img[IMG_SECTIONS + 2 * s];
}
static inline uint64_t img_count(const struct rt *rt, int s) { return rt->img[IMG_SECTIONS + 2 * s + 1]; }
static inline const char *img_text(const struct rt *rt, int field) {
    return (const char *)img_sec(rt, SEC_TEXT) + rt->img[field];
}
/* this owner's entry of a per-role-owner table */
static inline int64_t img_mine(const struct rt *rt, int s) { return (int64_t)img_sec(rt, s)[rt->pos]; }

/* -- fail.c ---------------------------------------------------------------------------- */
int rt_fail(struct rt *rt, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *rt_code_name(int code);
void *rt_alloc_words(struct rt *rt, int64_t words, int *rc);

/* -- mem.c ----------------------------------------------------------------------------- */
void *rt_buf_alloc(struct rt *rt, int kind, int64_t words, int *rc);
void rt_buf_free(struct rt *rt, int kind, void *p, int64_t words);
void rt_buf_hold(struct rt *rt, int kind, int64_t words);
void rt_copy_from_image(uint64_t *dst, const uint64_t *src, int64_t words);
int rt_open_stats(struct rt *rt);
int rt_write_stats(struct rt *rt, int code);

/* -- store.c: which words this owner holds, and where in its compact storage ----------- */
struct rt_coords { /* owner t's coordinates, ascending: `while (rt_next_coord(&it, &i))` */
    const uint64_t *run, *end;
    int64_t c;
};
struct rt_coords rt_coords_of(const struct rt *rt, int64_t t);
int rt_next_coord(struct rt_coords *it, int64_t *i);
int64_t rt_owned_count(const struct rt *rt, int64_t t);   /* coordinates owner t holds */
int64_t rt_state_offset(const struct rt *rt, int64_t rank); /* of the rank-th non-shared word */
int64_t rt_slot(const struct rt *rt, int region, int64_t pos); /* where it keeps a word, or -1 */
int64_t rt_slot_span(const struct rt *rt, int region, int64_t pos, int64_t step, int64_t count, int64_t *slot);
typedef void (*rt_word_fn)(void *ctx, int64_t pos, int64_t slot);
void rt_each_held(const struct rt *rt, int region, rt_word_fn fn, void *ctx); /* ascending */

/* -- digest.c -------------------------------------------------------------------------- */
void rt_sha256_init(struct rt_sha256 *s);
void rt_sha256_update(struct rt_sha256 *s, const void *data, size_t n);
int rt_sha256_final(struct rt_sha256 *s, unsigned char out[32]); /* -1: libcrypto failed */
int rt_sha256_bytes(const void *data, size_t n, unsigned char out[32]);

/* -- auth.c ---------------------------------------------------------------------------- */
void rt_crypto_init(void);
int rt_read_key(struct rt *rt);
int rt_checkpoint_key(struct rt *rt);
int rt_hmac(const unsigned char *key, size_t key_len, const void *data, size_t n, unsigned char out[32]);
int rt_nonce(struct rt *rt, uint64_t out[2]);
void rt_session_key(struct rt *rt, int64_t peer, const uint64_t connector_nonce[2],
                    const uint64_t acceptor_nonce[2], int64_t connector, int64_t acceptor);
int rt_payload_macs(struct rt *rt, int64_t count);
int rt_payload_mac_begin(EVP_CIPHER_CTX *c);
void rt_payload_mac_update(EVP_CIPHER_CTX *c, const void *data, size_t n);
int rt_payload_mac_final(EVP_CIPHER_CTX *c, unsigned char out[PAYLOAD_MAC_BYTES]);
int rt_payload_mac(struct rt *rt, const uint64_t *payload, int64_t len, unsigned char out[PAYLOAD_MAC_BYTES]);
void rt_frame_tag(const struct rt *rt, int64_t peer, uint64_t seq, const uint64_t *header,
                  const unsigned char payload_mac[PAYLOAD_MAC_BYTES], uint64_t checksum, uint64_t tag[TAG_WORDS]);

/* -- cpu.c ----------------------------------------------------------------------------- */
int rt_check_cpu(struct rt *rt);

/* -- cli.c ----------------------------------------------------------------------------- */
int rt_init(struct rt *rt, const uint64_t *image);
/* Whether the whole of `text` is a non-negative decimal integer (digits only), into *out. */
int rt_decimal(const char *text, int64_t *out);
int rt_parse_args(struct rt *rt, int argc, char **argv);
int rt_key_or_insecure(struct rt *rt);
int rt_select_owner(struct rt *rt);

/* -- hostlist.c, engine.c ------------------------------------------------------------- */
int rt_hostlist_expand(const char *text, struct rt_names *out, char *err, size_t size);
int rt_hostlist_text(const char *list, char *out, size_t out_size, char *err, size_t err_size);
int rt_tasks_per_node(const char *text, int64_t *counts, int64_t max, int64_t *nodes, char *err, size_t size);
int rt_hostfile_read(const char *path, struct rt_names *out, char *err, size_t size); /* 1: unreadable */
int rt_names_add(struct rt_names *out, const char *name, size_t len, char *err, size_t size);
const char *rt_names_next(const char *name);
void rt_names_free(struct rt_names *names);
#define LINE_LONG (-1) /* rt_read_line: the line does not fit */
#define LINE_NUL (-2)  /* rt_read_line: the line holds a NUL byte */
int rt_read_line(FILE *f, char *buf, size_t size);
FILE *rt_open_text(const char *path);
int rt_engine_owner(struct rt *rt, int seen_owner);
int rt_engine_sources(struct rt *rt);
int rt_node_endpoints(struct rt *rt);

/* -- peers.c --------------------------------------------------------------------------- */
int rt_parse_endpoint(const char *text, char *host, size_t host_size, int *port);
int rt_read_peers(struct rt *rt);

/* -- frame.c --------------------------------------------------------------------------- */
uint64_t rt_fnv(const uint64_t *p, int64_t n, uint64_t h);
void rt_lanes(const uint64_t *p, int64_t lo, int64_t hi, uint64_t lanes[LANES]);
void rt_lanes_at(const uint64_t *w, int64_t lo, int64_t hi, uint64_t lanes[LANES]);
void rt_lanes_copy(uint64_t *to, const uint64_t *w, int64_t lo, int64_t hi, uint64_t lanes[LANES]);
void rt_lanes_init(uint64_t lanes[LANES]);
uint64_t rt_checksum(const uint64_t *header, const uint64_t *payload, int64_t n);
int rt_check_header(struct rt *rt, struct xfer *x);
int rt_check_trailer(struct rt *rt, struct xfer *x);
void rt_seal(struct rt *rt, struct xfer *x);
int rt_send_frame(struct rt *rt, int64_t peer, uint64_t kind, uint64_t version, uint64_t step,
                  uint64_t *buf, int64_t len, int reuse);
int rt_recv_frame(struct rt *rt, int fd, int64_t peer, uint64_t kind, uint64_t version,
                  uint64_t step, uint64_t *buf, int64_t len, const struct arrival *add,
                  int64_t *sender);

/* -- xfer.c ---------------------------------------------------------------------------- */
int rt_exchange(struct rt *rt, struct xfer *x, int64_t count);

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

/* -- transport.c ----------------------------------------------------------------------- */
int rt_shm_offer(struct rt *rt, int64_t peer);
int rt_shm_answer(struct rt *rt, int64_t peer);
int rt_transport(struct rt *rt, int64_t peer, int connector);
int rt_write_connections(struct rt *rt);
void rt_shm_forget(struct rt *rt);

/* -- io.c ------------------------------------------------------------------------------ */
int64_t rt_now_ms(void);
void rt_start_io(struct rt *rt);
int rt_io_failed(struct rt *rt, ssize_t r, int64_t peer, const char *verb);
void rt_sockopts(struct rt *rt, int fd);
int rt_self_connected(int fd);

/* -- connect.c ------------------------------------------------------------------------- */
int rt_alloc_peers(struct rt *rt);
int rt_connect(struct rt *rt);
void rt_close_all(struct rt *rt);

/* -- ops.c ----------------------------------------------------------------------------- */
int rt_alloc(struct rt *rt);
int rt_run_ops(struct rt *rt, int64_t first, int64_t count, uint64_t version);
int rt_run(struct rt *rt);
int rt_status_open(struct rt *rt, int64_t fd);
void rt_status(struct rt *rt, int64_t version);
void rt_digest(struct rt *rt);
int rt_non_finite_statement(struct rt *rt, const char *const *labels, int64_t status, int64_t coord,
                            uint64_t u, const char *what, int64_t sample);
int rt_local_refused(struct rt *rt, int64_t coord, uint64_t u, int64_t sample);

/* -- device/cuda.c: SM86 executables only. Weak: in a CPU executable they are null, and
   every caller tests them first. ------------------------------------------------------- */
int rt_dev_open(struct rt *rt) __attribute__((weak));
int rt_dev_local(struct rt *rt, uint64_t *acc, uint64_t u) __attribute__((weak));
int rt_dev_update(struct rt *rt, const uint64_t *mean, uint64_t u) __attribute__((weak));
int rt_dev_capture(struct rt *rt) __attribute__((weak));
int rt_dev_upload(struct rt *rt, uint64_t mask, const uint64_t *params) __attribute__((weak));

/* -- ckpt.c, restore.c ------------------------------------------------------------------ */
int rt_ckpt_open(struct rt *rt);
int rt_ckpt_stage(struct rt *rt, uint64_t v);
int rt_ckpt_send(struct rt *rt, int64_t peer, uint64_t v, uint64_t step);
int rt_ckpt_recv(struct rt *rt, int fd, int64_t peer, uint64_t v, uint64_t step, int64_t len);
int rt_ckpt_manifest(struct rt *rt, uint64_t v);
int rt_ckpt_publish(struct rt *rt, uint64_t v);
int rt_restore(struct rt *rt);

/* -- output.c -------------------------------------------------------------------------- */
#define WRITER_WORDS 8192
struct rt_writer { /* a file of words written through a buffer, hashed as it goes */
    struct rt *rt;
    int fd;
    const char *path;
    struct rt_sha256 sha, part;
    int in_part, used, rc;
    int64_t written, synced; /* bytes written; bytes whose writeback was started */
    uint64_t buf[WRITER_WORDS];
};
void rt_writer_init(struct rt_writer *w, struct rt *rt, int fd, const char *path);
void rt_writer_put(struct rt_writer *w, uint64_t word);
void rt_writer_words(struct rt_writer *w, const uint64_t *words, int64_t n);
void rt_writer_part(struct rt_writer *w);
void rt_writer_part_end(struct rt_writer *w, unsigned char digest[32]);
int rt_writer_end(struct rt_writer *w, unsigned char digest[32]);
int rt_refuse_if_exists(struct rt *rt, const char *path);
int rt_stage_create(struct rt *rt, struct staged *s, const char *path, const char *suffix);
int rt_stage_write(struct rt *rt, struct staged *s, const void *const *bufs, const size_t *sizes, int count,
                   unsigned char digest[32]);
int rt_stage_publish(struct rt *rt, struct staged *s);
void rt_stage_discard(struct staged *s);
int rt_open_outputs(struct rt *rt);
int rt_stage_output(struct rt *rt);
int rt_write_commit(struct rt *rt);
void rt_abandon(struct rt *rt);

/* -- main.c ---------------------------------------------------------------------------- */
int rt_main(struct rt *rt, int argc, char **argv);

/* -- embed.c --------------------------------------------------------------------------- */
struct rt *rt_new(void);
struct staged *rt_output(struct rt *rt);
const char *rt_message(const struct rt *rt);
void rt_attach(struct rt *rt, int64_t peer, int fd, int accept);
size_t rt_xfer_bytes(void);
int rt_link_shm(const struct rt *rt, int64_t peer);
size_t rt_link_write(struct rt *rt, int64_t peer, const void *data, size_t n);
int rt_endpoint_text(const struct rt *rt, int64_t owner, char *buf, size_t size);
const char *rt_out_path(const struct rt *rt);

#endif
