/* second_moment.h - what the row-intake epoch mechanisms (covariance,
   Gaussian) share: the epoch's C = sum x x^T, accumulated as rows arrive
   (d x d double, upper triangle), and their common hooks.

   Float blocks, double sum (issue 13 item 4).  Each block of up to
   second_moment_block_rows() rows is multiplied out in float (sgemm) and
   added into the double C.  Why not all double: dsyrk runs at half of
   ssyrk's peak (tools/bench/bench-gradmech).  Why not all float: summed in
   float across blocks, rounding would grow with n and enter the
   sensitivity (up to 2 (n / 64 + 64) eps_f n, 7 at n = 60 000: measured
   by tools/bench/bench_accum.c, issue 11 item 3).  With float only inside
   a block and an exact (integer) sum across blocks, what rounding can add
   to ||C(D) - C(D')||_F is bounded by the block size alone:
   second_moment_excess(d), about 2 b^2 2^-24 = 0.0078 at b = 256, against
   the sensitivity sqrt 2.  Every mechanism that reads
   C adds it to its sensitivity (moment_noise_sd, epoch_covariance.c), so
   the bound is part of the guarantee, not a caveat.
   Who owns what: the accumulator owns C, its row block and its tile. */
#ifndef DPS_SECOND_MOMENT_H
#define DPS_SECOND_MOMENT_H

#include "dpsubspace.h"

#include <stddef.h>
#include <stdint.h>

/* The most rows one sum takes (C's sums are exact below it); more are not added. */
#define SECOND_MOMENT_MAX_ROWS ((uint64_t)1 << 28)

typedef struct {
    size_t d;
    double *C;    /* sum x x^T, upper triangle: in quanta of 2^-24 until second_moment_finish */
    uint64_t rows;
    float *block; /* pending rows */
    float *tile;  /* one block's products for SM_TILE columns */
    size_t pending;
} second_moment;

/* DPS_OK or DPS_ENOMEM (then nothing is held). */
int second_moment_init(second_moment *s, size_t d);
void second_moment_free(second_moment *s);
/* An empty sum (each epoch's rows are used once). */
void second_moment_reset(second_moment *s);
/* Add one row of d floats. */
void second_moment_add(second_moment *s, const float *row);
/* Add the pending rows, turn C into doubles and mirror the upper triangle:
   C is full and symmetric.  Then only reset (C is no longer integers). */
void second_moment_finish(second_moment *s);
/* Rows per float block. */
size_t second_moment_block_rows(void);
/* An upper bound on ||R||_F, R the rounding's part of the computed
   C(D) - C(D') (what is left after subtracting the exact y y^T - x x^T),
   for neighbours D, D' (one row x -> y, norms <= 1) of dimension d and at
   most SECOND_MOMENT_MAX_ROWS rows,
   as the full symmetric matrix after second_moment_finish and so also for
   its upper triangle as a vector and for its spectral norm (the argument is
   in second_moment.c).  Add it to the sensitivity sqrt 2 (and to 1 for a
   score u^T C u, |u^T R u| <= ||R||_2). */
double second_moment_excess(size_t d);
/* The bytes it holds for dimension d. */
size_t second_moment_bytes(size_t d);

/* The hooks every row-intake epoch mechanism (EPOCH_ROWS: covariance,
   Gaussian) shares: no buckets (any epoch with a row can run), pure zCDP
   charged (rho_epoch, 0), no radius. */
size_t epoch_rows_min_buckets(const dps_config *c);
dps_zcdp epoch_rows_cost(const dps_config *c);
double epoch_rows_radius_unrelated(const dps_config *c);

#endif
