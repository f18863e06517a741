/* internal.h - helpers shared by the library's modules; not installed. */
#ifndef DPS_INTERNAL_H
#define DPS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define DPS_STR_(x) #x
#define DPS_STR(x) DPS_STR_(x)
/* What dps_last_error returns on this thread from now on: a static or
   thread-local sentence (error.c). */
void dps_set_last_error(const char *why);

#define DPS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DPS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Set OpenBLAS to one thread the first time the library computes, unless the
   program chose a count with dps_blas_set_threads(). */
void dps_blas_init_once(void);

/* Key child from parent's stream, as dps_rng_fork does, without an
   allocation (child made earlier, by any constructor): child's stream is
   then parent's fork, its mode (seeded or secure) parent's. */
struct dps_rng;
void rng_rekey(struct dps_rng *child, struct dps_rng *parent);
/* The bytes one generator holds (for the memory bounds). */
size_t rng_bytes(void);

/* calloc of n*size with overflow check; NULL on failure. */
static inline void *dps_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

/* 64-byte aligned allocation of n*size bytes (zeroed); free with free(). */
void *dps_aligned_calloc(size_t n, size_t size);
/* The same without zeroing, for buffers that are written before read. */
void *dps_aligned_alloc(size_t n, size_t size);

#endif
