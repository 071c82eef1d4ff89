/* Refusals: a code and a one-line detail, kept in the runtime state until main prints them;
   and the helpers every part uses (base.h): allocation, paths, numbers, hex. */
#include "rt.h"

#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
    "ok",
#define RT_NAME(e, s) s,
    RT_CODES(RT_NAME)
#undef RT_NAME
};

const char *rt_code_name(int code) {
    return code > 0 && code < RT_NCODES ? names[code] : "corrupt-executable";
}

/* The detail stays one line whatever it quotes (an argument, a file's line, a variable):
   each control character is printed as '?', so no input can end it or forge a line after. */
int rt_fail(struct rt *rt, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->msg, sizeof rt->msg, fmt, ap);
    va_end(ap);
    for (char *c = rt->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    rt->code = code;
    return code;
}

/* `words` zeroed u64 words (at least one), or NULL with *rc set to an io-error refusal. */
void *rt_alloc_words(struct rt *rt, int64_t words, int *rc) {
    size_t n = words > 0 ? (size_t)words : 1;
    void *p = n > SIZE_MAX / 8 ? NULL : calloc(n, 8);
    *rc = p ? RT_OK : rt_fail(rt, RT_IO_ERROR, "cannot allocate %zu bytes", n * 8);
    return p;
}

int rt_grow(void *p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 8;
    while (n < need) n = n > SIZE_MAX / 2 ? need : 2 * n;
    void *more = n > SIZE_MAX / size ? NULL : realloc(*(void **)p, n * size);
    if (!more) return -1;
    *(void **)p = more, *cap = n;
    return 0;
}

char *rt_pathf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

int rt_decimal_n(const char *p, size_t n, int64_t *out) {
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (INT64_MAX - (p[i] - '0')) / 10) return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return n > 0;
}

int rt_decimal(const char *text, int64_t *out) { return rt_decimal_n(text, strlen(text), out); }

void rt_hex(const unsigned char *d, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int rt_non_finite_statement(struct rt *rt, const char *const *labels, int64_t status, int64_t coord,
                            uint64_t u, const char *what, int64_t sample) {
    if (sample < 0)
        return rt_fail(rt, RT_NON_FINITE, "%s statement '%s' coordinate %lld at update %llu", what,
                       labels[status - 1], (long long)coord, (unsigned long long)u);
    return rt_fail(rt, RT_NON_FINITE, "%s statement '%s' coordinate %lld at update %llu (owner %lld, "
                   "sample %lld)", what, labels[status - 1], (long long)coord, (unsigned long long)u,
                   (long long)rt->owner, (long long)sample);
}

int rt_local_refused(struct rt *rt, int64_t coord, uint64_t u, int64_t sample) {
    return rt_fail(rt, RT_NON_FINITE, "local sum coordinate %lld at update %llu (owner %lld, sample %lld)",
                   (long long)coord, (unsigned long long)u, (long long)rt->owner, (long long)sample);
}
