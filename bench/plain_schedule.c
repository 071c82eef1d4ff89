/* The combine bench's learner as plain C over loopback TCP, without anything alphac adds:
   no frames, checksums, tags, checks or plan. Each update every owner computes c = w * x
   (its one sample), the owners combine in the star's order, ((c0 + c1) + c2) + ..., then
   mean = sum / n and w = w - rate * mean at every owner. Two schedules of that order:

     star  every owner sends c to owner 0, which receives them all, adds them in owner
           order and sends the sum back to everyone;
     rs    the ordered reduce-scatter and gather: coordinate block t (contiguous) goes to
           owner t from everyone at once, owner t adds its block in owner order and sends
           it to everyone at once.

   Sends and receives of one step go at once (non-blocking sockets, poll(2)). Compiled
   with -ffp-contract=off, so every owner's final w is the oracle's, word for word; owner
   0 writes it to OUT. Prints the slowest owner's seconds for UPDATES updates after a
   first untimed one, and all owners' CPU seconds.

     plain_schedule star|rs OWNERS K UPDATES OUT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int n, me, *fds;

static void die(const char *what) {
    fprintf(stderr, "plain_schedule owner %d: %s: %s\n", me, what, strerror(errno));
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Owner i listens on ls[i] (made before the fork, on a port the kernel chose: ports[i]);
   each owner connects to those below it and accepts the rest. */
static void connect_all(const int *ls, const int *ports) {
    fds = calloc((size_t)n, sizeof *fds);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int p = 0; p < me; p++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        a.sin_port = htons((uint16_t)ports[p]);
        while (connect(s, (struct sockaddr *)&a, sizeof a)) {
            close(s);
            usleep(1000);
            s = socket(AF_INET, SOCK_STREAM, 0);
        }
        if (write(s, &me, sizeof me) != sizeof me) die("hello");
        fds[p] = s;
    }
    for (int i = me + 1; i < n; i++) {
        int s = accept(ls[me], NULL, NULL), who;
        if (s < 0 || read(s, &who, sizeof who) != sizeof who) die("accept");
        fds[who] = s;
    }
    for (int p = 0; p < n; p++) close(ls[p]);
    for (int p = 0; p < n; p++)
        if (p != me) setsockopt(fds[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Send out[p] (out_len[p] bytes) to and receive in[p] (in_len[p] bytes) from every peer p
   at once; a length 0 moves nothing. */
static void exchange(char **out, const size_t *out_len, char **in, const size_t *in_len) {
    size_t sent[n], got[n];
    memset(sent, 0, sizeof sent);
    memset(got, 0, sizeof got);
    for (;;) {
        struct pollfd pf[2 * n];
        int np = 0;
        for (int p = 0; p < n; p++) {
            if (p == me) continue;
            if (sent[p] < out_len[p]) pf[np++] = (struct pollfd){fds[p], POLLOUT, 0};
            if (got[p] < in_len[p]) pf[np++] = (struct pollfd){fds[p], POLLIN, 0};
        }
        if (np == 0) return;
        if (poll(pf, (nfds_t)np, -1) < 0 && errno != EINTR) die("poll");
        for (int p = 0; p < n; p++) {
            if (p == me) continue;
            if (sent[p] < out_len[p]) {
                ssize_t r = send(fds[p], out[p] + sent[p], out_len[p] - sent[p], MSG_DONTWAIT | MSG_NOSIGNAL);
                if (r > 0) sent[p] += (size_t)r;
                else if (r < 0 && errno != EAGAIN && errno != EINTR) die("send");
            }
            if (got[p] < in_len[p]) {
                ssize_t r = recv(fds[p], in[p] + got[p], in_len[p] - got[p], MSG_DONTWAIT);
                if (r > 0) got[p] += (size_t)r;
                else if (r == 0 || (errno != EAGAIN && errno != EINTR)) die("recv");
            }
        }
    }
}

static int64_t lo_of(int t, int64_t k) { return (int64_t)t * k / n; }

static void owner(int rs, int64_t k, int updates, const int *ls, const int *ports, const char *out_path,
                  double *secs) {
    static const double xs[4] = {0.5, 0.25, 1.0, 2.0};
    const double x = xs[me % 4], rate = 0.01;
    double *w = malloc((size_t)k * 8), *c = malloc((size_t)k * 8), *sum = malloc((size_t)k * 8);
    double *got = malloc((size_t)k * 8 * (size_t)n);
    char *out[n], *in[n];
    size_t out_len[n], in_len[n];
    const double step = 2.0 / (double)(k - 1); /* numpy's linspace(-1, 1, k): i * step + start, then the end */
    for (int64_t i = 0; i < k; i++) w[i] = (double)i * step + -1.0;
    w[k - 1] = 1.0;
    connect_all(ls, ports);
    double t0 = 0;
    for (int u = 0; u <= updates; u++) {
        if (u == 1) t0 = now();
        for (int64_t i = 0; i < k; i++) c[i] = w[i] * x;
        memset(out_len, 0, sizeof out_len);
        memset(in_len, 0, sizeof in_len);
        if (!rs) { /* star: everything to owner 0, the sum back */
            if (me == 0) {
                for (int p = 1; p < n; p++) in[p] = (char *)(got + (size_t)p * (size_t)k), in_len[p] = (size_t)k * 8;
                exchange(out, out_len, in, in_len);
                for (int64_t i = 0; i < k; i++) sum[i] = c[i];
                for (int p = 1; p < n; p++)
                    for (int64_t i = 0; i < k; i++) sum[i] = sum[i] + got[(size_t)p * (size_t)k + (size_t)i];
                memset(in_len, 0, sizeof in_len);
                for (int p = 1; p < n; p++) out[p] = (char *)sum, out_len[p] = (size_t)k * 8;
                exchange(out, out_len, in, in_len);
            } else {
                out[0] = (char *)c, out_len[0] = (size_t)k * 8;
                exchange(out, out_len, in, in_len);
                memset(out_len, 0, sizeof out_len);
                in[0] = (char *)sum, in_len[0] = (size_t)k * 8;
                exchange(out, out_len, in, in_len);
            }
        } else { /* rs: block t to owner t, added there in owner order, then to everyone */
            int64_t mlo = lo_of(me, k), mhi = lo_of(me + 1, k);
            for (int p = 0; p < n; p++) {
                if (p == me) continue;
                out[p] = (char *)(c + lo_of(p, k)), out_len[p] = (size_t)(lo_of(p + 1, k) - lo_of(p, k)) * 8;
                in[p] = (char *)(got + (size_t)p * (size_t)k), in_len[p] = (size_t)(mhi - mlo) * 8;
            }
            exchange(out, out_len, in, in_len);
            for (int64_t i = mlo; i < mhi; i++) {
                double s = me == 0 ? c[i] : got[i - mlo];
                for (int p = 1; p < n; p++) s = s + (p == me ? c[i] : got[(size_t)p * (size_t)k + (size_t)(i - mlo)]);
                sum[i] = s;
            }
            for (int p = 0; p < n; p++) {
                if (p == me) continue;
                out[p] = (char *)(sum + mlo), out_len[p] = (size_t)(mhi - mlo) * 8;
                in[p] = (char *)(sum + lo_of(p, k)), in_len[p] = (size_t)(lo_of(p + 1, k) - lo_of(p, k)) * 8;
            }
            exchange(out, out_len, in, in_len);
        }
        for (int64_t i = 0; i < k; i++) w[i] = w[i] - rate * (sum[i] / (double)n);
    }
    *secs = now() - t0;
    if (me == 0) {
        FILE *f = fopen(out_path, "wb");
        if (!f || fwrite(w, 8, (size_t)k, f) != (size_t)k || fclose(f)) die(out_path);
    }
}

int main(int argc, char **argv) {
    if (argc != 6 || (strcmp(argv[1], "star") && strcmp(argv[1], "rs"))) {
        fprintf(stderr, "usage: plain_schedule star|rs OWNERS K UPDATES OUT\n");
        return 2;
    }
    int rs = !strcmp(argv[1], "rs"), updates = atoi(argv[4]), pipes[2];
    int64_t k = atoll(argv[3]);
    n = atoi(argv[2]);
    if (n < 2 || k < n || updates < 1 || pipe(pipes)) return 2;
    int ls[n], ports[n];
    for (int p = 0; p < n; p++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        ls[p] = socket(AF_INET, SOCK_STREAM, 0);
        if (bind(ls[p], (struct sockaddr *)&a, sizeof a) || listen(ls[p], n) ||
            getsockname(ls[p], (struct sockaddr *)&a, &len))
            die("listen");
        ports[p] = ntohs(a.sin_port);
    }
    for (me = 1; me < n; me++) {
        if (fork() == 0) {
            double s;
            owner(rs, k, updates, ls, ports, argv[5], &s);
            if (write(pipes[1], &s, sizeof s) != sizeof s) die("report");
            _exit(0);
        }
    }
    me = 0;
    double slowest;
    owner(rs, k, updates, ls, ports, argv[5], &slowest);
    for (int p = 1; p < n; p++) {
        double s;
        if (read(pipes[0], &s, sizeof s) != sizeof s) die("report");
        if (s > slowest) slowest = s;
    }
    int status, ok = 1;
    while (wait(&status) > 0) ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    double cpu = (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) +
                 1e-6 * (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec + kids.ru_stime.tv_usec);
    printf("%.9f %.6f\n", slowest, cpu);
    return ok ? 0 : 1;
}
