/* A checkpoint's manifest as the restore reads it (manifest.c, restore.c). */
#ifndef ALPHAC_MANIFEST_H
#define ALPHAC_MANIFEST_H

#include "rt.h"

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

/* Open a file of the checkpoint for reading: never through a symbolic link, never blocking;
   a regular file only, refused `code` naming the path otherwise. */
int rt_open_regular(struct rt *rt, const char *path, int code, int *fd, int64_t *size);
int rt_read_exact(struct rt *rt, int fd, void *buf, size_t n, const char *path);
int rt_read_all(struct rt *rt, const char *path, char **out, size_t *len, int missing_code);
void rt_sha_hex(const void *data, size_t n, char out[65]);
int rt_manifest_parse(struct rt *rt, struct manifest *m);
char *rt_manifest_item(const struct manifest *m, const char *key);
int rt_manifest_lines(struct rt *rt, const struct manifest *m, int same);
size_t rt_run_at(const char *r, long long v[3]);
int rt_manifest_coverage(struct rt *rt, const struct manifest *m, unsigned char *count, int64_t region,
                         int64_t domain);

#endif
