/* Host lists of existing engines, expanded to one host name per entry: Slurm's hostlist
   syntax (`node[1-3,7]`, `n[01-10]`, `a[1-2],b3`, `rack[1-2]-node[1-2]`), the task counts
   of SLURM_STEP_TASKS_PER_NODE (`2(x3),1`) and Open MPI's hostfile (`HOST [slots=N]`).
   These functions know nothing of a run: each returns 0, or -1 with a one-line message in
   `err`. alphac/launch/hostlist.py is the same hostlist parser, message for message; both
   are held to one table of cases (tests/hostlist_cases.py). The lines of a hostfile (and
   of a peers file, peers.c) are read by rt_read_line, which sees a NUL byte, from a file
   rt_open_text opened without waiting for a FIFO's writer. */
#include "rt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_NAME_MAX_LEN 255
#define MAX_DIGITS 18          /* every number of a range fits in a u64 */
#define HOSTFILE_MAX_HOSTS 4096

static int fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* Append one name (len bytes) and its NUL. */
int rt_names_add(struct rt_names *out, const char *name, size_t len, char *err, size_t size) {
    if (len > SIZE_MAX - out->used - 1 || rt_grow(&out->text, &out->cap, out->used + len + 1, 1) != 0)
        return fail(err, size, "out of memory");
    memcpy(out->text + out->used, name, len);
    out->text[out->used + len] = 0;
    out->used += len + 1;
    out->count++;
    return 0;
}

const char *rt_names_next(const char *name) { return name + strlen(name) + 1; }

void rt_names_free(struct rt_names *names) {
    free(names->text);
    memset(names, 0, sizeof *names);
}

/* A text file opened for reading without waiting for a writer (fopen(3) waits, before any
   deadline, on a FIFO none has opened: then it reads as empty); a pipe with a writer, such
   as `--peers <(...)`, reads as a file. NULL with errno as fopen's. */
FILE *rt_open_text(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), flags;
    if (fd < 0) return NULL;
    int blocking = (flags = fcntl(fd, F_GETFL)) >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0;
    FILE *f = blocking ? fdopen(fd, "r") : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

/* The next line of f into buf, its LF kept, NUL-terminated: 1, or 0 at the end of the file;
   LINE_LONG when it is longer than size - 2 characters (room for its LF and NUL, the last
   line too), LINE_NUL when a NUL byte comes first (fgets would end the line there unseen). */
int rt_read_line(FILE *f, char *buf, size_t size) {
    size_t n = 0;
    int c = 0;
    while (c != '\n' && (c = getc(f)) != EOF) {
        if (c == 0) return LINE_NUL;
        if (c != '\n' && n + 2 >= size) return LINE_LONG;
        buf[n++] = (char)c;
    }
    buf[n] = 0;
    return n > 0;
}

static int is_name_char(int c) { return isalnum(c) || c == '-' || c == '.' || c == '_'; }

/* One range of a bracket group, text[a..b): N or N-M, N <= M, at most MAX_DIGITS digits
   each. Its bounds, and the width of N (zero padding: `01-10` gives 01, 02, ..., 10). */
struct range {
    uint64_t lo, hi;
    int width;
};

static int digits(const char *p, const char *end) {
    const char *q = p;
    while (q < end && isdigit((unsigned char)*q)) q++;
    return (int)(q - p);
}

static uint64_t number(const char *p, int n) { /* n digits, at most MAX_DIGITS */
    int64_t v = 0;
    (void)rt_decimal_n(p, (size_t)n, &v);
    return (uint64_t)v;
}

static int parse_range(const char *text, size_t a, size_t b, struct range *r, char *err, size_t size) {
    const char *p = text + a, *end = text + b;
    int w1 = digits(p, end), w2 = 0;
    int ok = w1 > 0 && (p + w1 == end || (p[w1] == '-' && (w2 = digits(p + w1 + 1, end)) > 0 &&
                                          p + w1 + 1 + w2 == end));
    if (!ok)
        return fail(err, size, "bad range '%.*s' at character %zu: expected N or N-M", (int)(b - a), p, a + 1);
    if (w1 > MAX_DIGITS || w2 > MAX_DIGITS)
        return fail(err, size, "number in range '%.*s' at character %zu has more than %d digits", (int)(b - a), p,
                    a + 1, MAX_DIGITS);
    r->lo = number(p, w1);
    r->hi = w2 ? number(p + w1 + 1, w2) : r->lo;
    r->width = w1;
    if (r->lo > r->hi) return fail(err, size, "range '%.*s' at character %zu runs backwards", (int)(b - a), p, a + 1);
    return 0;
}

static int decimal_width(uint64_t v) {
    int w = 1;
    while (v >= 10) v /= 10, w++;
    return w;
}

/* The group text[a..b) (inside its brackets): every range checked; how many numbers it
   holds (capped just above MAX_HOSTS) and the widest one. */
static int scan_group(const char *text, size_t a, size_t b, uint64_t *count, int *widest, char *err, size_t size) {
    *count = 0;
    *widest = 0;
    for (size_t s = a;; s++) {
        size_t e = s;
        while (e < b && text[e] != ',') e++;
        struct range r;
        if (parse_range(text, s, e, &r, err, size) != 0) return -1;
        uint64_t span = r.hi - r.lo;
        *count = span >= MAX_HOSTS || *count + span + 1 > MAX_HOSTS ? MAX_HOSTS + 1 : *count + span + 1;
        int w = decimal_width(r.hi) > r.width ? decimal_width(r.hi) : r.width;
        if (w > *widest) *widest = w;
        if (e == b) return 0;
        s = e;
    }
}

/* One entry, text[a..b) (no top-level comma): literal runs and bracket groups, nothing
   after the last group. How many names it expands to and how long the longest is. */
static int scan_entry(const char *text, size_t a, size_t b, uint64_t *count, size_t *longest, char *err,
                      size_t size) {
    *count = 1;
    *longest = 0;
    if (a == b) return fail(err, size, "empty entry at character %zu", a + 1);
    size_t last_close = 0;
    int closed = 0;
    for (size_t i = a; i < b; i++) {
        if (text[i] == ']') return fail(err, size, "unexpected ']' at character %zu", i + 1);
        if (text[i] != '[') {
            if (!is_name_char((unsigned char)text[i]))
                return fail(err, size, "character '%c' at character %zu is not allowed in a host name", text[i], i + 1);
            (*longest)++;
            continue;
        }
        size_t close = i + 1;
        while (close < b && text[close] != ']' && text[close] != '[') close++;
        if (close < b && text[close] == '[') return fail(err, size, "'[' inside brackets at character %zu", close + 1);
        if (close == b) return fail(err, size, "unclosed '[' at character %zu", i + 1);
        uint64_t n;
        int widest;
        if (scan_group(text, i + 1, close, &n, &widest, err, size) != 0) return -1;
        *count = *count * n > MAX_HOSTS ? MAX_HOSTS + 1 : *count * n;
        *longest += (size_t)widest;
        last_close = close;
        closed = 1;
        i = close;
    }
    if (closed && last_close + 1 < b) return fail(err, size, "text after the last ']' at character %zu", last_close + 2);
    if (*longest > HOST_NAME_MAX_LEN)
        return fail(err, size, "entry at character %zu expands to a host name longer than %d characters", a + 1,
                    HOST_NAME_MAX_LEN);
    return 0;
}

/* The end of the entry starting at a: the next comma outside brackets, or the end. */
static size_t entry_end(const char *text, size_t a, size_t len) {
    int depth = 0;
    size_t i = a;
    for (; i < len; i++) {
        if (text[i] == '[') depth = 1;
        else if (text[i] == ']') depth = 0;
        else if (text[i] == ',' && !depth) break;
    }
    return i;
}

/* Write every name of text[a..b) after `name[0..len)`, groups outermost first. */
static int expand(const char *text, size_t a, size_t b, char *name, size_t len, struct rt_names *out, char *err,
                  size_t size) {
    while (a < b && text[a] != '[') name[len++] = text[a++];
    if (a == b) return rt_names_add(out, name, len, err, size);
    size_t close = a + 1;
    while (text[close] != ']') close++;
    for (size_t s = a + 1;; s++) {
        size_t e = s;
        while (e < close && text[e] != ',') e++;
        struct range r;
        (void)parse_range(text, s, e, &r, err, size); /* checked by scan_entry */
        for (uint64_t v = r.lo;; v++) {
            int w = snprintf(name + len, HOST_NAME_MAX_LEN + 1 - len, "%0*llu", r.width, (unsigned long long)v);
            if (expand(text, close + 1, b, name, len + (size_t)w, out, err, size) != 0) return -1;
            if (v == r.hi) break;
        }
        if (e == close) return 0;
        s = e;
    }
}

int rt_hostlist_expand(const char *text, struct rt_names *out, char *err, size_t size) {
    size_t len = strlen(text);
    if (!len) return fail(err, size, "empty host list");
    uint64_t total = 0;
    for (size_t a = 0;; a++) { /* every entry checked, and counted, before any is expanded */
        size_t b = entry_end(text, a, len), longest;
        uint64_t n;
        if (scan_entry(text, a, b, &n, &longest, err, size) != 0) return -1;
        total += n;
        if (total > MAX_HOSTS) return fail(err, size, "expands to more than %d hosts", MAX_HOSTS);
        if (b == len) break;
        a = b;
    }
    char name[HOST_NAME_MAX_LEN + 1];
    for (size_t a = 0;; a++) {
        size_t b = entry_end(text, a, len);
        if (expand(text, a, b, name, 0, out, err, size) != 0) return -1;
        if (b == len) return 0;
        a = b;
    }
}

/* The names of `list`, one per line, into out[0..out_size) (the in-process tests read them). */
int rt_hostlist_text(const char *list, char *out, size_t out_size, char *err, size_t err_size) {
    struct rt_names names = {0};
    int rc = rt_hostlist_expand(list, &names, err, err_size);
    size_t at = 0;
    const char *h = names.text;
    for (int64_t i = 0; rc == 0 && i < names.count; i++, h = rt_names_next(h)) {
        size_t n = strlen(h);
        if (at + n + 2 > out_size) {
            rc = fail(err, err_size, "more than %zu bytes of names", out_size);
            break;
        }
        memcpy(out + at, h, n);
        out[at + n] = '\n';
        at += n + 1;
    }
    if (out_size) out[rc == 0 ? at : 0] = 0;
    rt_names_free(&names);
    return rc;
}

/* A decimal count of at least 1 (and at most MAX_HOSTS) at *p; *p moves past it. */
static int count_at(const char **p, int64_t *out) {
    int n = digits(*p, *p + strlen(*p));
    if (n == 0 || n > 6) return -1;
    *out = (int64_t)number(*p, n);
    *p += n;
    return *out >= 1 && *out <= MAX_HOSTS ? 0 : -1;
}

int rt_tasks_per_node(const char *text, int64_t *counts, int64_t max, int64_t *nodes, char *err, size_t size) {
    const char *p = text;
    *nodes = 0;
    for (;;) {
        const char *start = p;
        int64_t tasks, times = 1;
        int ok = count_at(&p, &tasks) == 0;
        if (ok && strncmp(p, "(x", 2) == 0) {
            p += 2;
            ok = count_at(&p, &times) == 0 && *p++ == ')';
        }
        if (!ok || (*p && *p != ',')) {
            size_t n = strcspn(start, ",");
            return fail(err, size, "bad entry '%.*s' at character %zu: expected N or N(xM), N and M in 1..%d",
                        (int)n, start, (size_t)(start - text) + 1, MAX_HOSTS);
        }
        for (int64_t t = 0; t < times; t++, (*nodes)++) /* counted past `max`, stored up to it */
            if (*nodes < max) counts[*nodes] = tasks;
        if (!*p++) return 0;
    }
}

/* One line of a hostfile: `HOST` or `HOST slots=N`, then blanks or a `#` comment. */
static int hostfile_line(char *text, char **host, int64_t *slots) {
    char *save = NULL, *hash = strchr(text, '#');
    if (hash) *hash = 0;
    *host = strtok_r(text, " \t\r\n", &save);
    *slots = 1;
    if (!*host) return 0;
    if (strlen(*host) > HOST_NAME_MAX_LEN) return -1;
    for (char *p = *host; *p; p++)
        if (!is_name_char((unsigned char)*p)) return -1;
    char *opt = strtok_r(NULL, " \t\r\n", &save);
    if (opt) {
        const char *p = opt + 6;
        if (strncmp(opt, "slots=", 6) != 0 || count_at(&p, slots) != 0 || *p) return -1;
    }
    return strtok_r(NULL, " \t\r\n", &save) ? -1 : 1;
}

int rt_hostfile_read(const char *path, struct rt_names *out, char *err, size_t size) {
    FILE *f = rt_open_text(path);
    if (!f) {
        fail(err, size, "cannot read the hostfile '%s' (%s)", path, strerror(errno));
        return 1;
    }
    struct rt_names hosts = {0};
    int64_t slots[HOSTFILE_MAX_HOSTS], total = 0, line = 0;
    char text[1024];
    int rc = 0;
    for (int r; rc == 0 && (r = rt_read_line(f, text, sizeof text)) != 0;) {
        line++;
        char *host;
        int64_t n;
        if (r == LINE_NUL) {
            rc = fail(err, size, "hostfile '%s' line %lld holds a NUL byte", path, (long long)line);
            break;
        }
        int got = r == LINE_LONG ? -1 : hostfile_line(text, &host, &n);
        if (got < 0) {
            rc = fail(err, size, "hostfile '%s' line %lld: expected 'HOST' or 'HOST slots=N' (N in 1..%d)", path,
                      (long long)line, MAX_HOSTS);
            break;
        }
        if (!got) continue;
        /* a host listed again adds its slots to its first line, as Open MPI does */
        int64_t i = 0;
        const char *h = hosts.text;
        for (; i < hosts.count && strcmp(h, host) != 0; i++) h = rt_names_next(h);
        if (i == hosts.count) {
            if (i == HOSTFILE_MAX_HOSTS)
                rc = fail(err, size, "hostfile '%s' names more than %d hosts", path, HOSTFILE_MAX_HOSTS);
            else if ((rc = rt_names_add(&hosts, host, strlen(host), err, size)) == 0)
                slots[i] = 0;
        }
        total += n;
        if (rc == 0 && total > MAX_HOSTS) rc = fail(err, size, "hostfile '%s' has more than %d slots", path, MAX_HOSTS);
        if (rc == 0) slots[i] += n;
    }
    fclose(f);
    if (rc == 0 && hosts.count == 0) rc = fail(err, size, "hostfile '%s' names no host", path);
    const char *h = hosts.text;
    for (int64_t i = 0; rc == 0 && i < hosts.count; i++, h = rt_names_next(h))
        for (int64_t s = 0; rc == 0 && s < slots[i]; s++) rc = rt_names_add(out, h, strlen(h), err, size);
    rt_names_free(&hosts);
    return rc;
}
