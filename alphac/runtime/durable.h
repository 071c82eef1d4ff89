/* Durability: the files a run leaves, written through a hashing writer, staged and
   published only once the run is committed (output.c); checkpoints (ckpt.c) and the
   restore from one (manifest.c, restore.c). */
#ifndef ALPHAC_DURABLE_H
#define ALPHAC_DURABLE_H

#include "base.h"

/* A file written under `tmp` (created O_EXCL|O_NOFOLLOW before the first update) and
   linked to `path` only once the run is committed. */
struct staged {
    char *path, *tmp;
    int fd;
    int created; /* the .tmp is this owner's (created, not yet linked): it removes it on refusal */
    uint64_t dev, ino; /* the .tmp's file, to know it under its final name (linked by the root) */
};

/* Publication: the staged output (and, at the root, the commit record). */
struct rt_pub {
    const char *out_path;              /* --out FILE (or made from --out-dir) */
    struct staged out, commit;
    unsigned char out_digest[32];      /* sha256 of the staged output's bytes */
    uint64_t *entries;                 /* (owner, 4 digest words) of this owner's subtree */
    int64_t nentries;
    int prepared, committed, finalized;
};

/* Checkpoints: where they go, this run's id, and what one checkpoint's reports collected. */
struct ckpt {
    const char *dir, *resume; /* --checkpoint-dir (or the image's), --resume (or the image's) */
    char *partial;            /* the partial directory of the checkpoint being written */
    uint64_t resumed_id;
    int64_t interval;
    uint64_t *entries;        /* (owner, shard bytes, shard sha256, fragment sha256s) per owner */
    int64_t nentries, entry_words;
    uint64_t *manifests;      /* (owner, manifest sha256) per owner below with a manifest */
    int64_t nmanifests;
    int resume_mode;          /* 0 none, 1 the same contract, 2 a new one */
    int history, outer, states; /* the restore selects a fixed staleness's history, local steps'
                                 momentum, their every owner's own state */
    int resumed;
    char resumed_sha[65];
    int64_t resumed_version;
    const char *key_path;     /* --checkpoint-key FILE (else the run's --key) */
    int keyed;                /* 1: manifests are tagged, and a restore checks the tag */
    unsigned char key[32];    /* the checkpoint key: HMAC-SHA-256(key, CKPT_KEY_LABEL) */
};

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
int rt_write_all(int fd, const void *buf, size_t n); /* every byte (EINTR retried): 0, else -1 */
int rt_sync_dir(const char *dir);                    /* fsync a directory: 0, else -1 */
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

/* -- ckpt.c, restore.c ------------------------------------------------------------------ */
int rt_checkpoint_key(struct rt *rt);
int rt_ckpt_open(struct rt *rt);
int rt_ckpt_stage(struct rt *rt, uint64_t v);
int rt_ckpt_send(struct rt *rt, int64_t peer, uint64_t v, uint64_t step);
int rt_ckpt_recv(struct rt *rt, int fd, int64_t peer, uint64_t v, uint64_t step, int64_t len);
int rt_ckpt_manifest(struct rt *rt, uint64_t v);
int rt_ckpt_publish(struct rt *rt, uint64_t v);
int rt_restore(struct rt *rt);

#endif
