/* main: the command line, this owner, a refusal if its output already exists, the peers
   file, the connections, every update, the replica comparison, then the output. */
#include "rt.h"

#include <stdio.h>

int rt_main(struct rt *rt, int argc, char **argv) {
    TRY(rt_init(rt, alphac_image));
    TRY(rt_parse_args(rt, argc, argv));
    TRY(rt_select_owner(rt));
    TRY(rt_refuse_if_exists(rt, rt->out_path));
    TRY(rt_read_peers(rt));
    TRY(rt_alloc_peers(rt));
    TRY(rt_alloc(rt));
    TRY(rt_connect(rt));
    TRY(rt_run(rt));
    rt_close_all(rt);
    return rt_write_output(rt);
}

int main(int argc, char **argv) {
    static struct rt rt;
    int rc = rt_main(&rt, argc, argv);
    if (rc == RT_DONE) return EXIT_OK;
    if (rc == RT_OK) return EXIT_OK;
    fprintf(stderr, "refused: %s: %s\n", rt_code_name(rc), rt.msg);
    return rc == RT_USAGE ? EXIT_USAGE : EXIT_REFUSED;
}
