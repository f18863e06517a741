/* epoch_power_sharded.h - one epoch of the power mechanism (DPS_AGG_POWER,
   src/mechanisms/epoch_power.c; DESIGN 7.3) on rows sharded by coordinate
   over MPI ranks (power_sharded.h).

   GUARANTEE.  rho-zCDP for the epoch under replacing one row, charged
   (rho, 0): the argument is epoch_power.c's, whose premises hold here --
   the n rows are split into T disjoint blocks by index (power_block_start),
   each row in one block; each block is one step Y = C_i X + N(0, s^2),
   s = power_noise_sd(rho) = 1 / sqrt(rho), with every row of unit norm or
   zero (power_sharded_add normalises it as row_unit does) and ||X||_2 <= 1
   (power_sharded.h's norm guard); the start X_0 is public (public_seed and
   the epoch name its draws; warm: a released basis).  The release is the
   top-k of the last noisy Y: post-processing.

   Who owns what: the caller owns the rows (read through next), the warm
   basis and the outputs; the iteration state p is the caller's, set up by
   power_sharded_init.  Collective: every rank calls it with the same
   arguments but its own slices. */
#ifndef DPS_EPOCH_POWER_SHARDED_H
#define DPS_EPOCH_POWER_SHARDED_H

#include "power_sharded.h"

/* The next row's slice (p->w floats) into slice; DPS_OK, or an error that
   stops the epoch on every rank. */
typedef int (*sharded_next_row)(void *ctx, float *slice);

typedef struct {
    uint64_t n;              /* the epoch's rows (public)                          */
    uint64_t blocks;         /* T (0: 3 from a cold start, 1 from a warm one)      */
    double rho;              /* the epoch's zCDP rho                               */
    uint64_t epoch;          /* names the public start's draws                     */
    uint64_t public_seed;
    const float *warm_slice; /* k x w: this rank's slice of the last released
                                basis (public), or NULL for a cold start          */
} sharded_epoch;

/* Run the epoch: reads the n rows through next, T steps; writes this rank's
   slice of the k x d basis (k x w floats) and the k singular values (sv,
   may be NULL).  DPS_OK on every rank, or the same error on every rank. */
int epoch_power_sharded(power_sharded *p, const sharded_epoch *e, sharded_next_row next, void *ctx,
                        float *basis_slice, double *sv);

#endif
