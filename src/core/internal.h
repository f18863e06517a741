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
/* n forks of a stream for draws cut into ranges (range c from fork c, on
   any worker): made once, before any charge (placeholders, DPS_OK or
   DPS_ENOMEM: then none is held), keyed from the stream in order at each
   use, before any draw, so the draws depend on the stream only, not on
   the number of workers. */
int rng_forks_new(struct dps_rng **forks, size_t n);
void rng_forks_key(struct dps_rng **forks, size_t n, struct dps_rng *parent);
void rng_forks_destroy(struct dps_rng **forks, size_t n);

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
