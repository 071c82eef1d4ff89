/* The CPU check: kernels built for a level above the target's baseline (`alphac build
   --cpu`) need features a CPU may lack. Before any kernel runs, an executable whose image
   requires features (bit i of cpu_required: the i-th of alphac_cpu.h's CPU_CHECKS) tests
   each with the compiler's __builtin_cpu_supports and refuses, naming those missing. */
#include "rt.h"


#include "alphac_cpu.h"

/* Whether this CPU has the `bit`-th feature of CPU_CHECKS. */
static int supports(int bit) {
    switch (bit) {
#define CPU_CASE(b, name) case b: return __builtin_cpu_supports(name) != 0;
        CPU_CHECKS(CPU_CASE)
#undef CPU_CASE
    default: return 0;
    }
}

static const char *feature_name(int bit) {
    static const char *const names[] = {
#define CPU_NAME(b, name) name,
        CPU_CHECKS(CPU_NAME)
#undef CPU_NAME
        NULL};
    return names[bit];
}

int rt_check_cpu(struct rt *rt) {
    uint64_t need = img_field(rt, IMG_CPU_REQUIRED);
    if (!need) return RT_OK;
    if (CPU_CHECK_COUNT < 64 && need >> CPU_CHECK_COUNT)
        return rt_fail(rt, RT_CORRUPT_EXECUTABLE, "the image requires CPU features 0x%016llx, "
                       "beyond the %d this runtime can test", (unsigned long long)need, CPU_CHECK_COUNT);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#endif
    char missing[512] = "";
    size_t used = 0;
    for (int bit = 0; bit < CPU_CHECK_COUNT; bit++)
        if ((need >> bit & 1) && !supports(bit) && used < sizeof missing)
            used += (size_t)snprintf(missing + used, sizeof missing - used, " %s", feature_name(bit));
    if (used)
        return rt_fail(rt, RT_CPU_UNSUPPORTED, "the kernels of this executable are built for %s; "
                       "this CPU lacks%s", img_text(rt, IMG_STR_CPU), missing);
    return RT_OK;
}
