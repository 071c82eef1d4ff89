/* The engine and the command line: the arguments (cli.c), the owner index and hosts an
   engine gives (engine.c, hostlist.c), the peers file (peers.c), the CPU check (cpu.c),
   progress lines (status.c), the op interpreter (ops.c, arith.c), main (main.c) and the
   in-process entry points of the tests (embed.c). */
#ifndef ALPHAC_ENGINE_H
#define ALPHAC_ENGINE_H

#include "base.h"

/* Host names, each NUL-terminated, one after another (hostlist.c). */
struct rt_names {
    char *text;
    size_t used, cap;
    int64_t count;
};

/* An engine's owner index and hosts (engine.c): what gave the owner index; the node list
   (--nodelist or SLURM_STEP_NODELIST) or --hostfile, and which of the three (nodes_from,
   for messages); the owners' first port; --out-dir; and --status-fd. */
struct rt_cli {
    const char *owner_from, *nodelist, *nodes_from, *hostfile, *out_dir;
    int64_t base_port;
    int status_fd; /* where progress lines go, -1 for none */
};

/* -- hostlist.c ------------------------------------------------------------------------ */
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

/* -- engine.c, peers.c ----------------------------------------------------------------- */
int rt_engine_owner(struct rt *rt, int seen_owner);
int rt_engine_sources(struct rt *rt);
int rt_node_endpoints(struct rt *rt);
int rt_parse_endpoint(const char *text, char *host, size_t host_size, int *port);
int rt_read_peers(struct rt *rt);

/* -- cpu.c, status.c, cli.c ------------------------------------------------------------ */
int rt_check_cpu(struct rt *rt);
int rt_status_open(struct rt *rt, int64_t fd);
void rt_status(struct rt *rt, int64_t version);
int rt_init(struct rt *rt, const uint64_t *image);
int rt_parse_args(struct rt *rt, int argc, char **argv);
int rt_key_or_insecure(struct rt *rt);
int rt_select_owner(struct rt *rt);

/* -- arith.c, ops.c -------------------------------------------------------------------- */
int rt_alloc(struct rt *rt);
int rt_run(struct rt *rt);

/* -- main.c, embed.c ------------------------------------------------------------------- */
int rt_main(struct rt *rt, int argc, char **argv);
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
