/* A driver of the elementary-function kernels (alphac/codegen/elementary/): reads
 * binary64 words from stdin, applies the function named by argv[1] with the emitted
 * alphac_vNAME, writes the result words to stdout. It moves words only: every
 * floating-point operation is the kernel's. Used by `alphac conform --target` and the
 * tests, to run the kernels of another instruction set (under its runner). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*kernel_fn)(const double *, double *, int64_t);
void alphac_vexp(const double *, double *, int64_t);
void alphac_vlog(const double *, double *, int64_t);
void alphac_vlog1p(const double *, double *, int64_t);
void alphac_vexpm1(const double *, double *, int64_t);
void alphac_vsigmoid(const double *, double *, int64_t);
void alphac_vtanh(const double *, double *, int64_t);

static const struct { const char *name; kernel_fn fn; } KERNELS[] = {
    {"exp", alphac_vexp}, {"log", alphac_vlog}, {"log1p", alphac_vlog1p},
    {"expm1", alphac_vexpm1}, {"sigmoid", alphac_vsigmoid}, {"tanh", alphac_vtanh},
};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s exp|log|log1p|expm1|sigmoid|tanh < words > words\n", argv[0]);
        return 2;
    }
    kernel_fn fn = NULL;
    for (size_t i = 0; i < sizeof KERNELS / sizeof KERNELS[0]; i++)
        if (strcmp(argv[1], KERNELS[i].name) == 0) fn = KERNELS[i].fn;
    if (fn == NULL) {
        fprintf(stderr, "refused: unknown-function: %s\n", argv[1]);
        return 2;
    }
    size_t cap = 1 << 16, n = 0;
    double *x = malloc(cap * sizeof *x);
    for (;;) {
        if (x == NULL) { fprintf(stderr, "refused: out-of-memory\n"); return 1; }
        size_t got = fread(x + n, sizeof *x, cap - n, stdin);
        n += got;
        if (n < cap) break;
        double *more = realloc(x, (cap *= 2) * sizeof *x); /* the old block is freed on failure */
        x = more ? more : (free(x), (double *)NULL);
    }
    double *y = malloc((n ? n : 1) * sizeof *y);
    if (y == NULL) { fprintf(stderr, "refused: out-of-memory\n"); return 1; }
    fn(x, y, (int64_t)n);
    if (fwrite(y, sizeof *y, n, stdout) != n) { fprintf(stderr, "refused: write-failed\n"); return 1; }
    return 0;
}
