/* The command line (getopt_long: `--owner 1` and `--owner=1`, --help, --version) and the
   owner's position in its role; an engine's owner index and hosts are engine.c's. */
#include "rt.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

int rt_init(struct rt *rt, const uint64_t *image) {
    memset(rt, 0, sizeof *rt);
    rt->store.stats_fd = -1;
    rt->img = image;
    if (image[IMG_MAGIC] != IMAGE_MAGIC || image[IMG_FORMAT] != IMAGE_FORMAT)
        return rt_fail(rt, RT_CORRUPT_EXECUTABLE, "the embedded role image has magic 0x%016llx "
                       "format %llu, expected 0x%016llx format %d",
                       (unsigned long long)image[IMG_MAGIC], (unsigned long long)image[IMG_FORMAT],
                       (unsigned long long)IMAGE_MAGIC, IMAGE_FORMAT);
    rt->n = (int64_t)image[IMG_N];
    rt->k = (int64_t)image[IMG_K];
    rt->m = (int64_t)image[IMG_M];
    rt->s = (int64_t)image[IMG_S];
    rt->protocol = image[IMG_PROTOCOL];
    rt->updates = (int64_t)image[IMG_UPDATES];
    rt->rate = image[IMG_RATE];
    rt->net.timeout_ms = DEFAULT_TIMEOUT_MS;
    rt->owner = -1;
    rt->cli.status_fd = -1;
    return RT_OK;
}

static int parse_num(struct rt *rt, const char *text, const char *flag, int64_t *out) {
    if (!rt_decimal(text, out))
        return rt_fail(rt, RT_USAGE, "%s needs a non-negative integer, got '%s' (try --help)", flag, text);
    return RT_OK;
}

/* the options and their O_ codes: alphac/wire.py OPTIONS */
static const struct option options[] = {RT_OPTIONS {NULL, 0, NULL, 0}};

int rt_parse_args(struct rt *rt, int argc, char **argv) {
    int c, seen_owner = 0;
    optind = 0; /* a full re-initialisation: the parser may run more than once in a process */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:", options, NULL)) != -1) {
        const char *arg = argv[optind - 1];
        switch (c) {
        case O_OWNER:
            TRY(parse_num(rt, optarg, "--owner", &rt->owner));
            seen_owner = 1;
            break;
        case O_PEERS: rt->net.peers_path = optarg; break;
        case O_OUT: rt->pub.out_path = optarg; break;
        case O_UPDATES: TRY(parse_num(rt, optarg, "--updates", &rt->updates)); break;
        case O_TIMEOUT_MS:
            TRY(parse_num(rt, optarg, "--timeout-ms", &rt->net.timeout_ms));
            /* bounded so that deadlines and poll(2)'s int timeout cannot overflow */
            if (rt->net.timeout_ms < 1 || rt->net.timeout_ms > MAX_TIMEOUT_MS)
                return rt_fail(rt, RT_USAGE, "--timeout-ms must be in 1..%d", MAX_TIMEOUT_MS);
            break;
        case O_KEY: rt->auth.key_path = optarg; break;
        case O_LISTEN_ANY: rt->net.listen_any = 1; break;
        case O_INSECURE: rt->auth.insecure = 1; break;
        case O_CHECKPOINT_DIR: rt->ck.dir = optarg; break;
        case O_RESUME: rt->ck.resume = optarg; break;
        case O_CHECKPOINT_KEY: rt->ck.key_path = optarg; break;
        case O_NEW_CONTRACT: rt->ck.resume_mode = 2; break;
        case O_RUN_ID: { /* hex digits only: strtoull would take a sign, blanks and 0x as well */
            size_t digits = strspn(optarg, "0123456789abcdefABCDEF");
            rt->run_id = digits > 0 && digits <= 16 && !optarg[digits] ? strtoull(optarg, NULL, 16) : 0;
            if (!rt->run_id)
                return rt_fail(rt, RT_USAGE, "--run-id needs a non-zero hexadecimal number of at most 16 digits, "
                               "got '%s' (try --help)", optarg);
            break;
        }
        case O_STATS: rt->store.stats_path = optarg; break;
        case O_CONNECTIONS: rt->net.connections_path = optarg; break;
        case O_STATUS_FD: {
            int64_t fd;
            TRY(parse_num(rt, optarg, "--status-fd", &fd));
            TRY(rt_status_open(rt, fd));
            break;
        }
        case O_BASE_PORT:
            TRY(parse_num(rt, optarg, "--base-port", &rt->cli.base_port));
            if (rt->cli.base_port < 1 || rt->cli.base_port > 65535)
                return rt_fail(rt, RT_USAGE, "--base-port must be in 1..65535");
            break;
        case O_NODELIST: rt->cli.nodelist = optarg; break;
        case O_HOSTFILE: rt->cli.hostfile = optarg; break;
        case O_OUT_DIR: rt->cli.out_dir = optarg; break;
        case O_GPU:
            if (!rt_dev_open) return rt_fail(rt, RT_USAGE, "--gpu: this executable runs on no GPU (try --help)");
            rt->dev.gpu = optarg;
            break;
        case O_HELP: fputs(img_text(rt, IMG_STR_USAGE), stdout); fflush(stdout); return RT_DONE;
        case O_VERSION: fputs(img_text(rt, IMG_STR_VERSION), stdout); fflush(stdout); return RT_DONE;
        case ':': return rt_fail(rt, RT_USAGE, "'%s' is an option with a value (try --help)", arg);
        default: return rt_fail(rt, RT_USAGE, "unknown option '%s' (try --help)", arg);
        }
    }
    if (optind < argc)
        return rt_fail(rt, RT_USAGE, "unexpected argument '%s' (try --help)", argv[optind]);
    /* a resume the spec declared, unless the command line names another */
    if (!rt->ck.resume && *img_text(rt, IMG_STR_RESUME)) {
        rt->ck.resume = img_text(rt, IMG_STR_RESUME);
        if (!rt->ck.resume_mode) rt->ck.resume_mode = (int)img_field(rt, IMG_RESUME_MODE);
    }
    if (rt->ck.resume && !rt->ck.resume_mode) rt->ck.resume_mode = 1;
    if (rt->ck.resume_mode == 2 && !rt->ck.resume)
        return rt_fail(rt, RT_USAGE, "--new-contract goes with --resume PATH (try --help)");
    TRY(rt_engine_owner(rt, seen_owner));
    return rt_engine_sources(rt);
}

int rt_select_owner(struct rt *rt) {
    const uint64_t *owners = img_sec(rt, SEC_ROLE_OWNERS);
    int64_t size = (int64_t)img_field(rt, IMG_ROLE_SIZE);
    for (int64_t p = 0; p < size; p++)
        if ((int64_t)owners[p] == rt->owner) {
            rt->pos = p;
            return RT_OK;
        }
    return rt_fail(rt, RT_OWNER_NOT_IN_ROLE, "owner %lld is not in role %s (owners %s) of deployment %s",
                   (long long)rt->owner, img_text(rt, IMG_STR_ROLE), img_text(rt, IMG_STR_OWNERS),
                   img_text(rt, IMG_STR_DEPLOYMENT));
}

/* An owner runs authenticated (--key) unless told --insecure, never both: without a key
   anyone who can reach its port can play an owner (docs/security.md). */
int rt_key_or_insecure(struct rt *rt) {
    if (rt->auth.key_path && rt->auth.insecure)
        return rt_fail(rt, RT_USAGE, "--key and --insecure exclude each other (try --help)");
    if (!rt->auth.key_path && !rt->auth.insecure)
        return rt_fail(rt, RT_USAGE, "no --key: give the run's key file, or --insecure to run without "
                       "authentication, where anyone who can reach an owner's port can play an owner (try --help)");
    return RT_OK;
}
