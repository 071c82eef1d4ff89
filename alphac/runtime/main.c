/* main: the command line, the CPU check, this owner, the stats file, the keys, the peers
   file, the staged output, the connections (and their report), every update, then the
   publication of the run (stage, prepare, commit, finalize), and the measured bytes. A
   refusal removes what this owner staged unless the run may be committed. */
#include "rt.h"

int rt_main(struct rt *rt, int argc, char **argv) {
    TRY(rt_init(rt, alphac_image));
    TRY(rt_parse_args(rt, argc, argv));
    TRY(rt_key_or_insecure(rt));
    TRY(rt_check_cpu(rt)); /* before any kernel runs (--help and --version answer anyway) */
    TRY(rt_select_owner(rt));
    TRY(rt_open_stats(rt));
    TRY(rt_open_outputs(rt)); /* before any work: a refused location costs nothing */
    if (rt->auth.key_path) TRY(rt_read_key(rt));
    TRY(rt_checkpoint_key(rt)); /* --checkpoint-key, else the run's key: tags and checks manifests */
    TRY(rt_read_peers(rt));
    TRY(rt_alloc_peers(rt));
    TRY(rt_alloc(rt));
    if (rt->ck.resume) TRY(rt_restore(rt));
    if (rt_dev_open) TRY(rt_dev_open(rt)); /* SM86: bind, admit, upload once */
    TRY(rt_ckpt_open(rt));
    TRY(rt_connect(rt));
    TRY(rt_write_connections(rt));
    TRY(rt_run(rt));
    rt_close_all(rt);
    return RT_OK;
}

int main(int argc, char **argv) {
    static struct rt rt;
    int rc = rt_main(&rt, argc, argv);
    if (rc == RT_DONE) return EXIT_OK;
    int stats = rt_write_stats(&rt, rc); /* the learner's measured bytes, on a refusal too */
    if (rc == RT_OK) rc = stats;
    if (rc == RT_OK) return EXIT_OK;
    rt_abandon(&rt);
    rt_shm_forget(&rt);
    const char *kept = "";
    if (rt.pub.committed && !rt.pub.finalized)
        kept = "; the run is committed: its staged output stays for the launcher to finalize";
    else if (rt.pub.prepared && !rt.pub.committed)
        kept = "; the staged output stays until the run's commit record decides";
    fprintf(stderr, "refused: %s: %s%s\n", rt_code_name(rc), rt.msg, kept);
    return rc == RT_USAGE ? EXIT_USAGE : EXIT_REFUSED;
}
