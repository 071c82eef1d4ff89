/* A stand-in for libcuda.so.1 in hardware-free tests. It is NOT a GPU and proves nothing
   about one: no PTX or cubin is ever run. "Device memory" is host memory of this process,
   and cuLaunchKernel runs the host-compiled twin of the same kernel IR (alphac.codegen.device
   with twin=True, linked as a shared object named by $ALPHAC_STUB_TWIN), one thread after
   another, each with its thread indices set in the twin's globals. What it does show: the
   executable's host flow (binding by UUID, admission, one upload, in-place updates, explicit
   copies back, refusals) with kernels that perform the same IEEE operations.

   Environment:
     ALPHAC_STUB_TWIN      a directory holding EXE.twin.so, the twin of executable EXE
                           (required by cuModuleLoadData)
     ALPHAC_STUB_UUIDS     comma-separated 32-hex-digit device UUIDs (default: one device)
     ALPHAC_STUB_SM        the compute capability it claims (default 86): another refuses
                           an ELF (cubin) image with CUDA_ERROR_NO_BINARY_FOR_GPU, so the
                           executable must JIT-load the PTX
     ALPHAC_STUB_MEM_FREE, ALPHAC_STUB_MEM_TOTAL   bytes cuMemGetInfo reports (default 8 GiB)
     ALPHAC_STUB_FAIL      NAME=CODE: the entry point NAME returns CUresult CODE
     ALPHAC_STUB_LOG       a file to which every call of interest appends one line, `PID WHAT`
     ALPHAC_STUB_SCRIBBLE  N,M,...: after the N-th host-to-device copy, fill its host source
                           with 0xff bytes (corrupting the host shadow)
     ALPHAC_STUB_CORRUPT   NAME:N: after the N-th launch of kernel NAME, flip the lowest bit
                           of the first word its first argument points at (device memory) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;

static void *twin;
static int64_t htod_count, launches;
static size_t allocated;

#include <stdarg.h>
static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    const char *path = getenv("ALPHAC_STUB_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%d ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* The injected failure of entry point `name`, or 0. */
static CUresult injected(const char *name) {
    const char *spec = getenv("ALPHAC_STUB_FAIL");
    size_t n = strlen(name);
    if (spec && strncmp(spec, name, n) == 0 && spec[n] == '=') return atoi(spec + n + 1);
    return 0;
}
#define INJECT(name)                          \
    do {                                      \
        CUresult r_ = injected(name);         \
        if (r_) return r_;                    \
    } while (0)

static size_t env_size(const char *name, size_t fallback) {
    const char *v = getenv(name);
    return v && *v ? (size_t)strtoull(v, NULL, 10) : fallback;
}

static int device_count(void) {
    const char *u = getenv("ALPHAC_STUB_UUIDS");
    if (!u || !*u) return 1;
    int n = 1;
    for (; *u; u++) n += *u == ',';
    return n;
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    INJECT("cuInit");
    log_line("init");
    return 0;
}

CUresult cuDeviceGetCount(int *count) {
    INJECT("cuDeviceGetCount");
    *count = device_count();
    return 0;
}

CUresult cuDeviceGet(int *dev, int ordinal) {
    INJECT("cuDeviceGet");
    if (ordinal < 0 || ordinal >= device_count()) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

CUresult cuDeviceGetUuid_v2(unsigned char *uuid, int dev) {
    INJECT("cuDeviceGetUuid_v2");
    const char *u = getenv("ALPHAC_STUB_UUIDS");
    if (!u || !*u) u = "53545542000000000000000000000000";
    for (int i = 0; i < dev; i++) u = strchr(u, ',') + 1;
    for (int i = 0; i < 16; i++) {
        unsigned b = 0;
        sscanf(u + 2 * i, "%2x", &b);
        uuid[i] = (unsigned char)b;
    }
    return 0;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    INJECT("cuDevicePrimaryCtxRetain");
    static int contexts[64];
    *ctx = &contexts[dev & 63];
    log_line("context %d", dev);
    return 0;
}

CUresult cuCtxSetCurrent(void *ctx) {
    (void)ctx;
    INJECT("cuCtxSetCurrent");
    return 0;
}

CUresult cuModuleLoadData(void **module, const void *image) {
    INJECT("cuModuleLoadData");
    int elf = memcmp(image, "\177ELF", 4) == 0;
    if (elf && env_size("ALPHAC_STUB_SM", 86) != 86) {
        log_line("module cubin refused");
        return 209; /* CUDA_ERROR_NO_BINARY_FOR_GPU */
    }
    /* a directory holds EXE.twin.so for each executable EXE */
    const char *dir = getenv("ALPHAC_STUB_TWIN");
    char exe[4096] = "", path[8192];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    snprintf(path, sizeof path, "%s/%s.twin.so", dir ? dir : ".", strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe);
    if (!dir || !(twin = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return 200; /* CUDA_ERROR_INVALID_IMAGE */
    log_line("module %s", elf ? "cubin" : "ptx");
    *module = twin;
    return 0;
}

CUresult cuModuleGetFunction(void **fn, void *module, const char *name) {
    INJECT("cuModuleGetFunction");
    void *f = dlsym(module, name);
    if (!f) return 500; /* CUDA_ERROR_NOT_FOUND */
    /* the stub remembers names by keeping the string beside the pointer */
    void **pair = malloc(2 * sizeof *pair);
    pair[0] = f;
    pair[1] = strdup(name);
    *fn = pair;
    return 0;
}

CUresult cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
    INJECT("cuMemAlloc_v2");
    if (allocated + bytes > env_size("ALPHAC_STUB_MEM_FREE", (size_t)8 << 30)) return 2;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    allocated += bytes;
    *ptr = (unsigned long long)(uintptr_t)p;
    log_line("alloc %zu", bytes);
    return 0;
}

static int listed(const char *var, int64_t n) {
    const char *v = getenv(var);
    for (; v && *v; v = strchr(v, ',') ? strchr(v, ',') + 1 : "")
        if (strtoll(v, NULL, 10) == n) return 1;
    return 0;
}

CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes) {
    INJECT("cuMemcpyHtoD_v2");
    memcpy((void *)(uintptr_t)dst, src, bytes);
    htod_count++;
    log_line("htod %zu", bytes);
    if (listed("ALPHAC_STUB_SCRIBBLE", htod_count)) memset((void *)src, 0xff, bytes);
    return 0;
}

CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
    INJECT("cuMemcpyDtoH_v2");
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    log_line("dtoh %zu", bytes);
    return 0;
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
    INJECT("cuMemGetInfo_v2");
    size_t total = env_size("ALPHAC_STUB_MEM_TOTAL", (size_t)8 << 30);
    size_t free_now = env_size("ALPHAC_STUB_MEM_FREE", total);
    *free_b = free_now > allocated ? free_now - allocated : 0;
    *total_b = total;
    return 0;
}

typedef void (*kernel8)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

static void corrupt_after(const char *name, int64_t call, uint64_t first_arg) {
    const char *spec = getenv("ALPHAC_STUB_CORRUPT");
    size_t n = strlen(name);
    if (spec && strncmp(spec, name, n) == 0 && spec[n] == ':' && strtoll(spec + n + 1, NULL, 10) == call) {
        *(uint64_t *)(uintptr_t)first_arg ^= 1;
        log_line("corrupted %s", name);
    }
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)stream;
    (void)extra;
    INJECT("cuLaunchKernel");
    void **pair = fn;
    const char *name = pair[1];
    if (gy != 1 || gz != 1 || by != 1 || bz != 1 || shared != 0) return 1; /* CUDA_ERROR_INVALID_VALUE */
    uint64_t a[8];
    for (int i = 0; i < 8; i++) a[i] = *(uint64_t *)params[i];
    int *tid = dlsym(twin, "alphac_twin_tid"), *ntid = dlsym(twin, "alphac_twin_ntid");
    int *ctaid = dlsym(twin, "alphac_twin_ctaid"), *nctaid = dlsym(twin, "alphac_twin_nctaid");
    *ntid = (int)bx;
    *nctaid = (int)gx;
    for (unsigned b = 0; b < gx; b++)
        for (unsigned t = 0; t < bx; t++) {
            *ctaid = (int)b;
            *tid = (int)t;
            ((kernel8)pair[0])(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        }
    launches++;
    log_line("launch %s %u", name, gx * bx);
    static struct { char name[64]; int64_t calls; } seen[64];
    for (int i = 0; i < 64; i++)
        if (!seen[i].name[0] || strcmp(seen[i].name, name) == 0) {
            snprintf(seen[i].name, sizeof seen[i].name, "%s", name);
            corrupt_after(name, ++seen[i].calls, a[0]);
            break;
        }
    return 0;
}

CUresult cuCtxSynchronize(void) {
    INJECT("cuCtxSynchronize");
    return 0;
}
