/* second_moment.h - what the row-intake epoch mechanisms (covariance,
   Gaussian) share: the epoch's C = sum x x^T, accumulated as rows arrive
   (d x d double, upper triangle, in blocks of rows through dsyrk), and their
   common hooks.
   Why double (measured by tools/bench/bench_accum.c at
   n = 60 000 unit rows, d = 2 000): float accumulation (ssyrk, 64 rows per
   call) differs from double by at most 3.0e-3 per entry (rows with a
   dominant coordinate; 4e-5 for uniform rows), 0.6% of the noise sd at
   rho = 4: harmless for accuracy.  But the privacy argument needs
   ||C(D) - C(D')||_F <= sqrt 2, and float rounding adds to it up to about
   2 (n / 64 + 64) eps_f n in the worst case (7 at n = 60 000; measured
   3.8e-3), against 1e-8 in double.  Float would need the noise scaled for
   that worst case, so C stays double.
   Float blocks with an exact sum across them are 1.5-1.8x faster (0.67-0.81
   of ssyrk peak; rounding's share of the replace-one sensitivity bounded
   by the block: 0.0078), but their bound does not hold under adding or
   removing a row (the adjacency of DP-SGD's accounting,
   SubspaceEstimator.rho_add_remove): every later row changes block, every
   later block rounds differently, and the bound grows to about
   2 b 2^-24 n (1.8 at n = 60 000 against the sensitivity 1).  In double,
   under either adjacency, the whole sum's own rounding bounds it, in any
   order: 2 n^2 2^-53 (4e-7 at n = 60 000, 2.2e-4 at 10^6; looser than the
   1e-8 above, which counts only the additions a replaced row can change;
   tests/mechanisms/test_second_moment.c checks the looser one).
   On the workers: with a pool of W >= 2 workers each block's update is cut
   into W ranges of columns of equal area (cut w at d sqrt(w / W)), one per
   worker, each entry summed by one call in the order of the rows as
   before, so C is a function of the rows, d and W (reproducible for a given
   number of workers; W = 1 is the single dsyrk); the bound above holds in
   any order, so the argument is the same.
   Who owns what: the accumulator owns C, its row block and its column cuts;
   it borrows the pool, which outlives it. */
#ifndef DPS_SECOND_MOMENT_H
#define DPS_SECOND_MOMENT_H

#include "dpsubspace.h"
#include "pool.h"

#include <stddef.h>

typedef struct {
    size_t d;
    double *C;     /* sum x x^T: upper triangle until second_moment_finish */
    double *block; /* pending rows */
    size_t pending;
    dps_pool *pool; /* NULL, or the workers each block's update is cut among */
    size_t parts;   /* column ranges a block's update is cut into (1: one dsyrk) */
    size_t *cut;    /* parts + 1 column indices, 0 .. d */
} second_moment;

/* pool: NULL (the calling thread does the work), or the workers that share
   it (second_moment_parts of them).  DPS_OK or DPS_ENOMEM (then nothing is
   held). */
int second_moment_init(second_moment *s, size_t d, dps_pool *pool);
/* How many column ranges a block's update is cut into for dimension d and
   a pool of `workers` (1: one dsyrk on the calling thread). */
size_t second_moment_parts(size_t d, int workers);
void second_moment_free(second_moment *s);
/* An empty sum (each epoch's rows are used once). */
void second_moment_reset(second_moment *s);
/* Add one row of d floats. */
void second_moment_add(second_moment *s, const float *row);
/* Rows per dsyrk block. */
size_t second_moment_block_rows(void);
/* Add the pending rows and mirror the upper triangle: C is full and
   symmetric (until the next add). */
void second_moment_finish(second_moment *s);
/* Add the pending rows only: C's upper triangle is the whole sum (for a
   reader of the upper triangle, which need not pay for the mirror). */
void second_moment_flush(second_moment *s);
/* The bytes it holds for dimension d. */
size_t second_moment_bytes(size_t d);

/* The hooks every row-intake epoch mechanism (EPOCH_ROWS: covariance,
   Gaussian) shares: no buckets (any epoch with a row can run), pure zCDP
   charged (rho_epoch, 0), no radius. */
size_t epoch_rows_min_buckets(const dps_config *c);
dps_zcdp epoch_rows_cost(const dps_config *c);
double epoch_rows_radius_unrelated(const dps_config *c);

#endif
