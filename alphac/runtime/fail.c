/* Refusals: a code and a one-line detail, kept in the runtime state until main prints them. */
#include "rt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
