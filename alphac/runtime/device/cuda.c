/* The CUDA driver side of an SM86 executable (compiled into SM86 host executables only; the
   CPU executables reach none of this: ops.c and main.c call it through weak references).

   It dlopens libcuda.so.1 (no link-time dependency), binds the GPU named by --gpu UUID (else
   the placement's device index), admits the plan's device bytes (alphac_device) against the
   GPU's free memory and, across processes on one GPU, against a flock'd ledger per device
   UUID, loads the embedded cubin (falling back to JIT-loading the embedded PTX, e.g. on an
   sm_90 GPU), uploads the parameters, state and samples once, and then runs every
   contribution, local sum and update on the device in place. The host copies words back
   only when asked to: for the digest, a checkpoint, an offer, the output (rt_dev_capture).
   Combines, the mean and the frames stay on the host. No floating-point arithmetic here:
   words are moved, kernels launched, integer flags decoded. */
#include "../rt.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction;

#define CU_NO_DEVICE 100
#define CU_OUT_OF_MEMORY 2
#define BLOCK 128
#define KERNEL_PARAMS 8 /* alphac.codegen.device.MAX_PARAMS: every launch passes this many */
#define F_CONTRIBUTION 0
#define F_LOCAL 1
#define F_UPDATE 2
#define F_INFO 3
#define NONE UINT64_MAX
#define DEVICE_MAGIC UINT64_C(0x3156454448504C41)
#define DEFAULT_LEDGER "/tmp/alphac-gpu-ledger-" /* and the user's uid: each user's own */

extern const uint64_t alphac_device[], alphac_cubin[], alphac_ptx[];

/* The driver entry points, by their versioned names (cuda.h's macros hide them). */
#define CU_FUNCTIONS(X)                                                                      \
    X(cuInit, (unsigned))                                                                    \
    X(cuDeviceGetCount, (int *))                                                             \
    X(cuDeviceGet, (CUdevice *, int))                                                        \
    X(cuDeviceGetUuid_v2, (unsigned char *, CUdevice))                                       \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                     \
    X(cuCtxSetCurrent, (CUcontext))                                                          \
    X(cuModuleLoadData, (CUmodule *, const void *))                                          \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                           \
    X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                                \
    X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                                  \
    X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                        \
    X(cuMemGetInfo_v2, (size_t *, size_t *))                                                 \
    X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
                       unsigned, void *, void **, void **))                                  \
    X(cuCtxSynchronize, (void))

struct driver {
#define CU_FIELD(name, args) CUresult(*name) args;
    CU_FUNCTIONS(CU_FIELD)
#undef CU_FIELD
    CUresult (*cuGetErrorName)(CUresult, const char **);
};

enum { B_PARAMS, B_STATE, B_SAMPLES, B_CONTRIBS, B_ACC, B_MEAN, B_RATE, B_REPLICA, NBUF };

struct rt_device {
    struct driver cu;
    CUfunction contribution, local, *update;
    int64_t nseg;
    const uint64_t *threads;
    CUdeviceptr buf[NBUF];
    int64_t share, flag_words;
    uint64_t *stage; /* k + flag words: what the local sum's copy brings back */
    char uuid[48];
    char ledger[4096];
    uint64_t bytes;
};

static struct rt_device dev;

/* -- CUresult names ------------------------------------------------------------------- */

static const struct { int code; const char *name; } cu_names[] = {
    {0, "CUDA_SUCCESS"}, {1, "CUDA_ERROR_INVALID_VALUE"}, {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"}, {4, "CUDA_ERROR_DEINITIALIZED"}, {34, "CUDA_ERROR_STUB_LIBRARY"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER"}, {46, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
    {100, "CUDA_ERROR_NO_DEVICE"}, {101, "CUDA_ERROR_INVALID_DEVICE"}, {200, "CUDA_ERROR_INVALID_IMAGE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"}, {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {218, "CUDA_ERROR_INVALID_PTX"}, {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}, {400, "CUDA_ERROR_INVALID_HANDLE"},
    {500, "CUDA_ERROR_NOT_FOUND"}, {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"}, {702, "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"}, {716, "CUDA_ERROR_MISALIGNED_ADDRESS"},
    {719, "CUDA_ERROR_LAUNCH_FAILED"}, {800, "CUDA_ERROR_NOT_PERMITTED"}, {801, "CUDA_ERROR_NOT_SUPPORTED"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"}, {999, "CUDA_ERROR_UNKNOWN"},
};

static const char *cu_name(CUresult r) {
    const char *name = NULL;
    if (dev.cu.cuGetErrorName && dev.cu.cuGetErrorName(r, &name) == 0 && name) return name;
    for (size_t i = 0; i < sizeof cu_names / sizeof cu_names[0]; i++)
        if (cu_names[i].code == r) return cu_names[i].name;
    return "an unnamed CUresult";
}

/* A failed driver call as a refusal: `code` (cuda-error unless the caller knows better). */
static int cu_fail(struct rt *rt, int code, const char *call, CUresult r) {
    return rt_fail(rt, code, "owner %lld: %s returned %s (%d)", (long long)rt->owner, call, cu_name(r), r);
}
#define CU(rt, code, call, args)                                  \
    do {                                                          \
        CUresult r_ = dev.cu.call args;                           \
        if (r_ != 0) return cu_fail(rt, code, #call, r_);         \
    } while (0)

/* -- the driver ----------------------------------------------------------------------- */

static int load_driver(struct rt *rt) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return rt_fail(rt, RT_CUDA_UNAVAILABLE, "owner %lld: %s", (long long)rt->owner, dlerror());
#define CU_BIND(name, args)                                                                     \
    *(void **)&dev.cu.name = dlsym(lib, #name);                                                 \
    if (!dev.cu.name)                                                                           \
        return rt_fail(rt, RT_CUDA_UNAVAILABLE, "owner %lld: libcuda.so.1 has no %s", (long long)rt->owner, #name);
    CU_FUNCTIONS(CU_BIND)
#undef CU_BIND
    *(void **)&dev.cu.cuGetErrorName = dlsym(lib, "cuGetErrorName");
    CUresult r = dev.cu.cuInit(0);
    if (r != 0) return cu_fail(rt, RT_CUDA_UNAVAILABLE, "cuInit", r);
    return RT_OK;
}

static void format_uuid(const unsigned char u[16], char out[48]) {
    static const char hex[] = "0123456789abcdef";
    char *p = out + sprintf(out, "GPU-");
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        *p++ = hex[u[i] >> 4];
        *p++ = hex[u[i] & 15];
    }
    *p = 0;
}

static int same_uuid(const char *want, const char *have) {
    if (strncasecmp(want, "GPU-", 4) != 0) have += 4; /* --gpu may omit the GPU- prefix */
    return strcasecmp(want, have) == 0;
}

/* The device of --gpu UUID, else the placement's index (alphac_device) modulo the count. */
static int bind_device(struct rt *rt, CUdevice *out) {
    int count = 0;
    CU(rt, RT_CUDA_UNAVAILABLE, cuDeviceGetCount, (&count));
    if (count == 0) return cu_fail(rt, RT_CUDA_UNAVAILABLE, "cuDeviceGetCount", CU_NO_DEVICE);
    char seen[1024] = "";
    size_t used = 0;
    const uint64_t *table = alphac_device + 4 + alphac_device[2];
    int64_t want = (int64_t)(table[2 * rt->pos] % (uint64_t)count);
    for (int i = 0; i < count; i++) {
        CUdevice d;
        unsigned char raw[16];
        char uuid[48];
        CU(rt, RT_CUDA_ERROR, cuDeviceGet, (&d, i));
        CU(rt, RT_CUDA_ERROR, cuDeviceGetUuid_v2, (raw, d));
        format_uuid(raw, uuid);
        if (rt->dev.gpu ? same_uuid(rt->dev.gpu, uuid) : i == want) {
            memcpy(dev.uuid, uuid, sizeof uuid);
            *out = d;
            return RT_OK;
        }
        if (used < sizeof seen - 50) used += (size_t)snprintf(seen + used, sizeof seen - used, "%s%s",
                                                                i ? ", " : "", uuid);
    }
    return rt_fail(rt, RT_GPU_NOT_FOUND, "owner %lld: --gpu %s is none of the %d GPUs the driver reports: %s",
                   (long long)rt->owner, rt->dev.gpu, count, seen);
}

/* -- admission ------------------------------------------------------------------------ */

/* The ledger of one GPU: `PID BYTES` lines of the alphac owners holding device memory on it,
   under $ALPHAC_GPU_LEDGER (default DEFAULT_LEDGER), locked with flock while it is read and
   rewritten. */
#define LEDGER_BYTES 8192

/* The lines of the (locked) ledger `fd` other than this process's and those of processes
   that no longer exist, into keep; returns the bytes they hold. */
static uint64_t ledger_others(int fd, char keep[LEDGER_BYTES]) {
    char text[LEDGER_BYTES];
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    text[got > 0 ? got : 0] = 0;
    uint64_t held = 0;
    size_t used = 0;
    keep[0] = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        long long pid = 0;
        unsigned long long bytes = 0;
        if (sscanf(line, "%lld %llu", &pid, &bytes) != 2 || pid == getpid()) continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) continue;
        if (used + 64 >= LEDGER_BYTES) break;
        held = bytes > UINT64_MAX - held ? UINT64_MAX : held + bytes; /* a sum past 2^64 is "all" */
        used += (size_t)snprintf(keep + used, LEDGER_BYTES - used, "%lld %llu\n", pid, bytes);
    }
    return held;
}

static void ledger_write(int fd, const char *text) {
    if (ftruncate(fd, 0) == 0 && pwrite(fd, text, strlen(text), 0) >= 0) fsync(fd);
}

/* Open and lock the ledger of the bound GPU (-1 and a refusal if it cannot be). Its
   directory must be a directory of this user that no one else can write, and the ledger a
   regular file (never a link followed: an owner truncates and rewrites it). */
static int ledger_lock(struct rt *rt, int *fd) {
    char own[64];
    const char *dir = getenv("ALPHAC_GPU_LEDGER");
    if (!dir || !*dir) {
        snprintf(own, sizeof own, DEFAULT_LEDGER "%lu", (unsigned long)geteuid());
        dir = own;
    }
    mkdir(dir, 0700);
    struct stat st;
    *fd = -1;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
        return rt_fail(rt, RT_MEMORY_ADMISSION, "owner %lld: the GPU ledger directory %s is not a directory of "
                       "this user (uid %lu) that no one else can write", (long long)rt->owner, dir,
                       (unsigned long)geteuid());
    snprintf(dev.ledger, sizeof dev.ledger, "%s/%s", dir, dev.uuid);
    *fd = open(dev.ledger, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    const char *why = *fd < 0 ? strerror(errno) : NULL;
    if (!why && (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode))) why = "not a regular file";
    if (!why && flock(*fd, LOCK_EX) != 0) why = strerror(errno);
    if (!why) return RT_OK;
    int rc = rt_fail(rt, RT_MEMORY_ADMISSION, "owner %lld: the GPU ledger %s: %s", (long long)rt->owner,
                     dev.ledger, why);
    if (*fd >= 0) close(*fd);
    dev.ledger[0] = 0;
    return rc;
}

/* At exit: this process's line leaves the ledger. */
static void ledger_leave(void) {
    int fd = open(dev.ledger, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    char keep[LEDGER_BYTES];
    if (flock(fd, LOCK_EX) == 0) {
        ledger_others(fd, keep);
        ledger_write(fd, keep);
    }
    close(fd);
}

static int alloc(struct rt *rt, int b, int64_t words) {
    if (words <= 0) words = 1;
    CUresult r = dev.cu.cuMemAlloc_v2(&dev.buf[b], (size_t)words * 8);
    return r ? cu_fail(rt, r == CU_OUT_OF_MEMORY ? RT_MEMORY_ADMISSION : RT_CUDA_ERROR, "cuMemAlloc_v2", r) : RT_OK;
}

/* Admit the plan's device bytes (both against the free memory the driver reports and, with
   every other alphac owner on this GPU, against its total), then allocate every buffer while
   the ledger is locked, so that owners starting together are admitted one after the other. */
static int admit_and_allocate(struct rt *rt) {
    const uint64_t *table = alphac_device + 4 + alphac_device[2];
    dev.bytes = table[2 * rt->pos + 1];
    int fd;
    char keep[LEDGER_BYTES];
    TRY(ledger_lock(rt, &fd));
    uint64_t held = ledger_others(fd, keep);
    size_t free_b = 0, total_b = 0;
    CUresult r = dev.cu.cuMemGetInfo_v2(&free_b, &total_b);
    int rc = r ? cu_fail(rt, RT_CUDA_ERROR, "cuMemGetInfo_v2", r) : RT_OK;
    if (!rc && (dev.bytes > free_b || dev.bytes > total_b || held > total_b - dev.bytes))
        rc = rt_fail(rt, RT_MEMORY_ADMISSION, "owner %lld: the plan needs %llu device bytes on %s: %zu are free, "
                     "%zu in all, %llu held by other alphac owners (ledger %s)", (long long)rt->owner,
                     (unsigned long long)dev.bytes, dev.uuid, free_b, total_b, (unsigned long long)held, dev.ledger);
    int64_t k = rt->k, share = dev.share;
    int64_t sizes[NBUF] = {rt->store.kp, rt->store.mp, share * rt->s, share * rt->k, k + dev.flag_words, k, 1,
                           img_field(rt, IMG_PART_PARAMETERS) ? k : 0};
    for (int b = 0; b < NBUF && !rc; b++)
        if (b != B_REPLICA || sizes[b]) rc = alloc(rt, b, sizes[b]);
    if (!rc) {
        size_t used = strlen(keep);
        snprintf(keep + used, sizeof keep - used, "%lld %llu\n", (long long)getpid(), (unsigned long long)dev.bytes);
        ledger_write(fd, keep);
        atexit(ledger_leave);
    }
    close(fd); /* releases the lock */
    return rc;
}

/* -- module and copies ------------------------------------------------------------------ */

static int load_module(struct rt *rt) {
    CUmodule mod;
    CUresult r = dev.cu.cuModuleLoadData(&mod, alphac_cubin + 1);
    if (r != 0) { /* e.g. no sm_86 binary for this GPU: JIT-load the PTX */
        CUresult p = dev.cu.cuModuleLoadData(&mod, alphac_ptx + 1);
        if (p != 0)
            return rt_fail(rt, RT_CUDA_MODULE, "owner %lld: the cubin: %s (%d); the PTX: %s (%d)", (long long)rt->owner,
                           cu_name(r), r, cu_name(p), p);
    }
    dev.nseg = (int64_t)alphac_device[2];
    dev.threads = alphac_device + 4;
    dev.update = calloc((size_t)dev.nseg + 1, sizeof *dev.update);
    if (!dev.update) return rt_fail(rt, RT_IO_ERROR, "out of memory");
    CU(rt, RT_CUDA_MODULE, cuModuleGetFunction, (&dev.contribution, mod, "alphac_dev_contribution"));
    CU(rt, RT_CUDA_MODULE, cuModuleGetFunction, (&dev.local, mod, "alphac_dev_local"));
    for (int64_t j = 0; j < dev.nseg; j++) {
        char name[64];
        snprintf(name, sizeof name, "alphac_dev_update_%lld", (long long)j);
        CU(rt, RT_CUDA_MODULE, cuModuleGetFunction, (&dev.update[j], mod, name));
    }
    return RT_OK;
}

static int to_device(struct rt *rt, int b, int64_t at, const void *src, int64_t words) {
    if (words > 0) CU(rt, RT_CUDA_ERROR, cuMemcpyHtoD_v2, (dev.buf[b] + (CUdeviceptr)at * 8, src, (size_t)words * 8));
    return RT_OK;
}

static int to_host(struct rt *rt, void *dst, int b, int64_t at, int64_t words) {
    if (words > 0) CU(rt, RT_CUDA_ERROR, cuMemcpyDtoH_v2, (dst, dev.buf[b] + (CUdeviceptr)at * 8, (size_t)words * 8));
    return RT_OK;
}

/* Launch `f` over `threads` threads with up to KERNEL_PARAMS 8-byte arguments. */
static int launch(struct rt *rt, CUfunction f, int64_t threads, const uint64_t *args, int nargs) {
    uint64_t vals[KERNEL_PARAMS] = {0};
    void *params[KERNEL_PARAMS];
    for (int i = 0; i < KERNEL_PARAMS; i++) {
        if (i < nargs) vals[i] = args[i];
        params[i] = &vals[i];
    }
    int64_t block = threads < BLOCK ? (threads > 0 ? threads : 1) : BLOCK;
    int64_t grid = (threads + block - 1) / block;
    CU(rt, RT_CUDA_ERROR, cuLaunchKernel, (f, (unsigned)(grid > 0 ? grid : 1), 1, 1, (unsigned)block, 1, 1, 0, NULL,
                                           params, NULL));
    return RT_OK;
}

/* -- the hooks ----------------------------------------------------------------------------- */

int rt_dev_open(struct rt *rt) {
    if (alphac_device[0] != DEVICE_MAGIC || (int64_t)alphac_device[3] != (int64_t)img_field(rt, IMG_ROLE_SIZE))
        return rt_fail(rt, RT_CORRUPT_EXECUTABLE, "the embedded device table is not this image's");
    dev.share = img_mine(rt, SEC_SHARE);
    dev.flag_words = F_INFO + 2 * dev.share;
    int rc;
    dev.stage = rt_alloc_words(rt, rt->k + dev.flag_words, &rc);
    TRY(rc);
    TRY(load_driver(rt));
    CUdevice d;
    TRY(bind_device(rt, &d));
    CUcontext ctx;
    CU(rt, RT_CUDA_ERROR, cuDevicePrimaryCtxRetain, (&ctx, d));
    CU(rt, RT_CUDA_ERROR, cuCtxSetCurrent, (ctx));
    TRY(admit_and_allocate(rt));
    TRY(load_module(rt));
    /* the one upload: parameters, state, samples, rate, then the flags (nothing failed) */
    const uint64_t *samples = img_sec(rt, SEC_SAMPLES) + img_mine(rt, SEC_SAMPLE_ROW) * rt->s;
    TRY(to_device(rt, B_PARAMS, 0, rt->store.params, rt->store.kp));
    TRY(to_device(rt, B_STATE, 0, rt->store.state, rt->store.mp));
    TRY(to_device(rt, B_SAMPLES, 0, samples, dev.share * rt->s));
    TRY(to_device(rt, B_RATE, 0, &rt->rate, 1));
    memset(dev.stage, 0xff, (size_t)dev.flag_words * 8);
    return to_device(rt, B_ACC, rt->k, dev.stage, dev.flag_words);
}

/* The contributions of this owner's samples and their local sum into acc (k words); the
   refusals the CPU kernels would give first, in their order. */
int rt_dev_local(struct rt *rt, uint64_t *acc, uint64_t u) {
    int64_t k = rt->k;
    uint64_t params = img_field(rt, IMG_PART_PARAMETERS) ? dev.buf[B_REPLICA] : dev.buf[B_PARAMS];
    CUdeviceptr flags = dev.buf[B_ACC] + (CUdeviceptr)k * 8;
    uint64_t c_args[] = {params, dev.buf[B_SAMPLES], dev.buf[B_CONTRIBS], flags, (uint64_t)dev.share};
    uint64_t l_args[] = {dev.buf[B_CONTRIBS], dev.buf[B_ACC], flags, (uint64_t)dev.share};
    TRY(launch(rt, dev.contribution, dev.share, c_args, 5));
    TRY(launch(rt, dev.local, k, l_args, 4));
    CU(rt, RT_CUDA_ERROR, cuCtxSynchronize, ());
    TRY(to_host(rt, dev.stage, B_ACC, 0, k + F_LOCAL + 1));
    uint64_t first = dev.stage[k + F_CONTRIBUTION], key = dev.stage[k + F_LOCAL];
    if (key != NONE && (first == NONE || (key >> 40) < first))
        return rt_local_refused(rt, (int64_t)(key & ((UINT64_C(1) << 40) - 1)), u, (int64_t)(key >> 40));
    if (first != NONE) {
        uint64_t info[2];
        TRY(to_host(rt, info, B_ACC, k + F_INFO + 2 * (int64_t)first, 2));
        return rt_non_finite_statement(rt, alphac_contribution_labels, (int64_t)info[0], (int64_t)info[1], u,
                                       "contribution", (int64_t)first);
    }
    memcpy(acc, dev.stage, (size_t)k * 8);
    return RT_OK;
}

/* The update on the device: the mean uploaded (an owned update's: its coordinates'), every
   segment launched in order, the flag read. */
int rt_dev_update(struct rt *rt, const uint64_t *mean, uint64_t u) {
    TRY(to_device(rt, B_MEAN, 0, mean, img_field(rt, IMG_OUTPUT_FORMAT) == OUTPUT_OWNED ? rt->store.kc : rt->k));
    uint64_t args[] = {dev.buf[B_PARAMS], dev.buf[B_STATE], dev.buf[B_MEAN], dev.buf[B_RATE],
                       dev.buf[B_ACC] + (CUdeviceptr)rt->k * 8, (uint64_t)rt->owner};
    for (int64_t j = 0; j < dev.nseg; j++) TRY(launch(rt, dev.update[j], (int64_t)dev.threads[j], args, 6));
    CU(rt, RT_CUDA_ERROR, cuCtxSynchronize, ());
    uint64_t key;
    TRY(to_host(rt, &key, B_ACC, rt->k + F_UPDATE, 1));
    if (key == NONE) return RT_OK;
    int64_t ordinal = (int64_t)(key & ((UINT64_C(1) << 20) - 1));
    int64_t coord = (int64_t)((key >> 20) & ((UINT64_C(1) << 36) - 1)) - 1;
    return rt_non_finite_statement(rt, alphac_update_labels, ordinal, coord, u, "update", -1);
}

/* The device's parameters and state into the host's copy (the host never computes on it). */
int rt_dev_capture(struct rt *rt) {
    TRY(to_host(rt, rt->store.params, B_PARAMS, 0, rt->store.kp));
    return to_host(rt, rt->store.state, B_STATE, 0, rt->store.mp);
}

/* After an install wrote host words from the wire: parameters (or the read replica, when
   `params` is it) and state, as `mask` says, to the device. */
int rt_dev_upload(struct rt *rt, uint64_t mask, const uint64_t *params) {
    int replica = params == rt->store.replica;
    if (mask & REGION_PARAMETERS) TRY(to_device(rt, replica ? B_REPLICA : B_PARAMS, 0, params, replica ? rt->k : rt->store.kp));
    if ((mask & REGION_STATE) && !replica) TRY(to_device(rt, B_STATE, 0, rt->store.state, rt->store.mp));
    return RT_OK;
}
