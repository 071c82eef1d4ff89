/* The status channel (--status-fd FD): one line `update V` after each completed update, for
   a launcher showing progress. Written without blocking: a reader that falls behind loses
   lines, never the run; a reader that is gone is ignored (SIGPIPE is ignored). */
#include "rt.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

int rt_status_open(struct rt *rt, int64_t fd) {
    int flags = fd <= 2147483647 ? fcntl((int)fd, F_GETFL) : -1;
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
        return rt_fail(rt, RT_USAGE, "--status-fd %lld is not a descriptor open for writing",
                       (long long)fd);
    if (fcntl((int)fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return rt_fail(rt, RT_USAGE, "--status-fd %lld cannot be made non-blocking", (long long)fd);
    signal(SIGPIPE, SIG_IGN);
    rt->cli.status_fd = (int)fd;
    return RT_OK;
}

void rt_status(struct rt *rt, int64_t version) {
    char line[32];
    if (rt->cli.status_fd < 0)
        return;
    int n = snprintf(line, sizeof line, "update %lld\n", (long long)version);
    if (write(rt->cli.status_fd, line, (size_t)n) < 0) {
        /* full or closed: progress is advisory */
    }
}
