/* An owner started by an existing engine (docs/runtime.md "Owner and peers from an
   engine"): its index from --owner, SLURM_PROCID or OMPI_COMM_WORLD_RANK, which must agree
   where present; its peers from a node list (--nodelist, --hostfile, or srun's
   SLURM_STEP_NODELIST with SLURM_STEP_TASKS_PER_NODE): owner i on the i-th host of the
   expanded list, listening on --base-port plus its place among the owners of that host. */
#include "rt.h"

#include <stdlib.h>
#include <string.h>

/* per engine: the variable of the owner index, the variable of its rank on its node */
static const char *const engine[][2] = {
#define PAIR(rank, local) {rank, local},
    ENGINE_RANKS(PAIR)
#undef PAIR
};
#define ENGINES ((int)(sizeof engine / sizeof engine[0]))
_Static_assert(ENGINES == 2, "the messages below name two engines");

/* The variable `name` as a non-negative decimal integer (digits only); *present is 0 when
   it is unset. */
static int env_number(struct rt *rt, const char *name, int64_t *out, int *present) {
    const char *v = getenv(name);
    *present = v != NULL;
    if (!v || rt_decimal(v, out)) return RT_OK;
    return rt_fail(rt, RT_USAGE, "%s='%s' is not a non-negative integer", name, v);
}

int rt_engine_owner(struct rt *rt, int seen_owner) {
    rt->cli.owner_from = seen_owner ? "--owner" : NULL;
    for (int e = 0; e < ENGINES; e++) {
        int64_t v;
        int present;
        TRY(env_number(rt, engine[e][0], &v, &present));
        if (!present) continue;
        if (!rt->cli.owner_from) {
            rt->owner = v;
            rt->cli.owner_from = engine[e][0];
        } else if (v != rt->owner) {
            return rt_fail(rt, RT_OWNER_AMBIGUOUS, "owner %lld from %s, but %s=%lld: two sources of the owner "
                           "index disagree", (long long)rt->owner, rt->cli.owner_from, engine[e][0], (long long)v);
        }
    }
    if (!rt->cli.owner_from)
        return rt_fail(rt, RT_USAGE, "--owner is required unless %s or %s is set (try --help)", engine[0][0],
                       engine[1][0]);
    return RT_OK;
}

/* Whether PATH can name an output file: not empty, and not a directory's name (ending in
   '/', or its last component "." or ".."), so that PATH, PATH.tmp and PATH.commit are three
   files of one directory. */
static int out_path_usable(const char *path) {
    size_t n = strlen(path);
    const char *last = strrchr(path, '/');
    last = last ? last + 1 : path;
    return n > 0 && path[n - 1] != '/' && strcmp(last, ".") != 0 && strcmp(last, "..") != 0;
}

/* DIR/owner-I.out for --out-dir DIR. */
static int out_in_dir(struct rt *rt) {
    char *path = rt_pathf("%s/" OUTPUT_NAME_FORMAT, rt->cli.out_dir, (long long)rt->owner);
    if (!path) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    rt->pub.out_path = path;
    return RT_OK;
}

int rt_engine_sources(struct rt *rt) {
    int given = !!rt->net.peers_path + !!rt->cli.nodelist + !!rt->cli.hostfile;
    if (given > 1)
        return rt_fail(rt, RT_USAGE, "--peers, --nodelist and --hostfile each name every owner's host: give one "
                       "(try --help)");
    if (rt->cli.nodelist) rt->cli.nodes_from = "--nodelist";
    else if (rt->cli.hostfile) rt->cli.nodes_from = "--hostfile";
    else if (!given && (rt->cli.nodelist = getenv(ENV_SLURM_NODELIST)) != NULL) rt->cli.nodes_from = ENV_SLURM_NODELIST;
    if (!rt->net.peers_path && !rt->cli.nodes_from)
        return rt_fail(rt, RT_USAGE, "--peers is required unless --nodelist, --hostfile or " ENV_SLURM_NODELIST
                       " names the hosts (try --help)");
    if (rt->net.peers_path && rt->cli.base_port)
        return rt_fail(rt, RT_USAGE, "--base-port goes with the hosts of a node list, not with --peers (try --help)");
    if (!rt->net.peers_path && !rt->cli.base_port)
        return rt_fail(rt, RT_USAGE, "--base-port is required with the hosts of %s (try --help)", rt->cli.nodes_from);
    if (rt->pub.out_path && rt->cli.out_dir) return rt_fail(rt, RT_USAGE, "give --out or --out-dir, not both (try --help)");
    if (rt->cli.out_dir && !*rt->cli.out_dir) return rt_fail(rt, RT_USAGE, "--out-dir is empty: name the run's directory");
    if (rt->pub.out_path && !out_path_usable(rt->pub.out_path))
        return rt_fail(rt, RT_USAGE, "--out '%s' names no file: give the output file's path (PATH.tmp and "
                       "PATH.commit go beside it)", rt->pub.out_path);
    if (rt->cli.out_dir) TRY(out_in_dir(rt));
    if (!rt->pub.out_path) return rt_fail(rt, RT_USAGE, "--out or --out-dir is required (try --help)");
    return RT_OK;
}

/* The node list's nodes, each repeated by its count in SLURM_STEP_TASKS_PER_NODE (srun's
   block distribution: the first node's tasks first), and how many tasks they are (*placed):
   only when they are the owners, so that counts of up to 2^32 tasks repeat no host. */
static int per_task(struct rt *rt, const struct rt_names *nodes, const char *tasks, struct rt_names *hosts,
                    int64_t *placed) {
    char err[256];
    int rc;
    int64_t *counts = rt_alloc_words(rt, nodes->count, &rc), got;
    TRY(rc);
    if (rt_tasks_per_node(tasks, counts, nodes->count, &got, err, sizeof err) != 0)
        rc = rt_fail(rt, RT_USAGE, "%s '%s': %s", ENV_SLURM_TASKS_PER_NODE, tasks, err);
    else if (got != nodes->count)
        rc = rt_fail(rt, RT_USAGE, "%s '%s' and %s '%s' disagree: %lld task counts, %lld nodes",
                     ENV_SLURM_TASKS_PER_NODE, tasks, rt->cli.nodes_from, rt->cli.nodelist, (long long)got,
                     (long long)nodes->count);
    *placed = 0;
    for (int64_t i = 0; rc == RT_OK && i < nodes->count; i++) *placed += counts[i]; /* at most 2^32 */
    const char *h = nodes->text;
    for (int64_t i = 0; rc == RT_OK && *placed == rt->n && i < nodes->count; i++, h = rt_names_next(h))
        for (int64_t t = 0; rc == RT_OK && t < counts[i]; t++)
            if (rt_names_add(hosts, h, strlen(h), err, sizeof err) != 0) rc = rt_fail(rt, RT_IO_ERROR, "%s", err);
    free(counts);
    return rc;
}

/* One host per owner, in owner order: the hostfile's slots (at least one per owner, the
   first n used), or the node list's entries (exactly one per owner). */
static int owner_hosts(struct rt *rt, struct rt_names *hosts) {
    char err[512];
    if (rt->cli.hostfile) {
        int rc = rt_hostfile_read(rt->cli.hostfile, hosts, err, sizeof err);
        if (rc != 0) return rt_fail(rt, rc == 1 ? RT_IO_ERROR : RT_USAGE, "%s", err);
        if (hosts->count < rt->n)
            return rt_fail(rt, RT_USAGE, "hostfile '%s' has %lld slots for %lld owners", rt->cli.hostfile,
                           (long long)hosts->count, (long long)rt->n);
        return RT_OK;
    }
    struct rt_names nodes = {0};
    if (rt_hostlist_expand(rt->cli.nodelist, &nodes, err, sizeof err) != 0)
        return rt_fail(rt, RT_USAGE, "%s '%s': %s", rt->cli.nodes_from, rt->cli.nodelist, err);
    const char *tasks = strcmp(rt->cli.nodes_from, ENV_SLURM_NODELIST) == 0 ? getenv(ENV_SLURM_TASKS_PER_NODE) : NULL;
    int64_t placed;
    if (tasks) {
        int rc = per_task(rt, &nodes, tasks, hosts, &placed);
        rt_names_free(&nodes);
        TRY(rc);
    } else {
        *hosts = nodes;
        placed = hosts->count;
    }
    if (placed != rt->n)
        return rt_fail(rt, RT_USAGE, "%s '%s'%s%s%s places %lld owners; the deployment has %lld", rt->cli.nodes_from,
                       rt->cli.nodelist, tasks ? " with " ENV_SLURM_TASKS_PER_NODE " '" : "", tasks ? tasks : "",
                       tasks ? "'" : "", (long long)placed, (long long)rt->n);
    return RT_OK;
}

struct slot {
    const char *host;
    int64_t owner;
};

static int by_host(const void *a, const void *b) {
    const struct slot *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->owner > y->owner) - (x->owner < y->owner);
}

/* Each owner's place among the owners of its host (0 for the first), into local[0..n). */
static int local_places(struct rt *rt, const struct rt_names *hosts, int64_t *local) {
    struct slot *slots = malloc(sizeof *slots * (size_t)rt->n);
    if (!slots) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    const char *h = hosts->text;
    for (int64_t i = 0; i < rt->n; i++, h = rt_names_next(h)) slots[i] = (struct slot){h, i};
    qsort(slots, (size_t)rt->n, sizeof *slots, by_host);
    for (int64_t j = 0; j < rt->n; j++)
        local[slots[j].owner] = j && strcmp(slots[j].host, slots[j - 1].host) == 0 ? local[slots[j - 1].owner] + 1 : 0;
    free(slots);
    return RT_OK;
}

/* The engine's rank of this owner on its node, where it gives one, must be its place. */
static int check_local_rank(struct rt *rt, const char *host, int64_t place) {
    for (int e = 0; e < ENGINES; e++) {
        int64_t v;
        int present;
        TRY(env_number(rt, engine[e][1], &v, &present));
        if (present && v != place)
            return rt_fail(rt, RT_LOCAL_RANK_MISMATCH, "%s=%lld, but the hosts of %s put owner %lld at place %lld "
                           "among the owners of host '%s'", engine[e][1], (long long)v,
                           rt->cli.nodes_from, (long long)rt->owner, (long long)place, host);
    }
    return RT_OK;
}

int rt_node_endpoints(struct rt *rt) {
    struct rt_names hosts = {0};
    int rc;
    int64_t *local = rt_alloc_words(rt, rt->n, &rc);
    TRY(rc);
    TRY(owner_hosts(rt, &hosts));
    TRY(local_places(rt, &hosts, local));
    const char *h = hosts.text;
    for (int64_t i = 0; i < rt->n; i++, h = rt_names_next(h)) {
        struct endpoint *e = &rt->net.ep[i];
        if (rt->cli.base_port + local[i] > 65535)
            return rt_fail(rt, RT_USAGE, "owner %lld would listen on port %lld (--base-port %lld + its place %lld "
                           "among the owners of host '%s'), above 65535", (long long)i,
                           (long long)(rt->cli.base_port + local[i]), (long long)rt->cli.base_port, (long long)local[i], h);
        snprintf(e->host, sizeof e->host, "%s", h);
        e->port = (int)(rt->cli.base_port + local[i]);
        e->listed = 1;
        e->line = i;
        if (i == rt->owner) TRY(check_local_rank(rt, h, local[i]));
    }
    rt_names_free(&hosts);
    free(local);
    return RT_OK;
}
