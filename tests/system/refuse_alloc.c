/* refuse_alloc.c - what makes dps-collector-faults (tests/CMakeLists.txt):
   the collector's own sources linked with -Wl,--wrap=dps_aligned_alloc and
   this wrapper, which refuses every buffer of exactly N floats the library
   asks for when DPS_TEST_REFUSE_FLOATS=N (the buckets' buffers are m x d),
   as a machine out of memory would.  For tests/system only; not installed. */
#include <stdlib.h>

void *__real_dps_aligned_alloc(size_t n, size_t size);
void *__wrap_dps_aligned_alloc(size_t n, size_t size);

void *__wrap_dps_aligned_alloc(size_t n, size_t size)
{
    const char *v = getenv("DPS_TEST_REFUSE_FLOATS");
    if (v && size == sizeof(float) && n == (size_t)strtoull(v, NULL, 10))
        return NULL;
    return __real_dps_aligned_alloc(n, size);
}
