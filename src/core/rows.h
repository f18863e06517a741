/* rows.h - the one place a row is brought into the unit ball.  Every
   mechanism's sensitivity argument assumes ||x||_2 <= 1 for each row; this
   module makes that hold exactly in floating point, for every float input
   (NaN, Inf, zero, subnormal, near FLT_MAX), and says what it did. */
#ifndef DPS_ROWS_H
#define DPS_ROWS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ROW_NORMALISE, /* every finite non-zero row to norm 1 (the streaming estimator, DESIGN 2) */
    ROW_CLIP,      /* x / max(1, ||x||) (the central methods) */
} row_mode;

typedef enum {
    ROW_OK,   /* dst holds the scaled row */
    ROW_ZERO, /* every entry zero: dst is the zero vector */
    ROW_NAN,  /* some entry NaN: dst is the zero vector */
    ROW_INF,  /* some entry infinite (and none NaN): dst is the zero vector */
} row_kind;

/* Write x (d floats) scaled by `mode` to dst (d floats; dst == x is allowed).
   Guarantee: ||dst||_2 <= 1 in exact arithmetic on the stored floats, for
   every d <= 2^40 (the argument is in rows.c).  A normalised row has norm at
   least 1 - 2^-21.  Returns what kind of row x was. */
row_kind row_unit(const float *x, size_t d, row_mode mode, float *dst);

/* row_unit of a row as the wire carries it: d little-endian float32 at x,
   which may have any alignment (a row read in place inside a received
   message).  The same floats, kind and guarantee as row_unit of those
   values; on a little-endian host no copy of x is made. */
row_kind row_unit_le(const unsigned char *x, size_t d, row_mode mode, float *dst);

/* The pieces of row_unit, for a row split into parts (the MPI-sharded
   mechanisms, src/mpi): row_sum_squares of each part (in double, as
   row_unit's), ss = their sum in any order (2. of rows.c's argument holds
   for any order of the d additions), then row_unit_part scales each part
   of n floats as row_unit scales the whole row of d: the same margin, the
   same factor, so the parts together are row_unit's result and its bound
   holds.  NaN or Inf in any part makes ss NaN or Inf: every part is zeroed
   and the kind is the same on every part. */
double row_sum_squares(const float *x, size_t d);
row_kind row_unit_part(const float *x, size_t n, double ss, size_t d, row_mode mode, float *dst);

/* 1 if x is finite and row_unit(x, ROW_CLIP) would copy it unchanged
   (its norm is safely below 1), else 0. */
int row_fits_unit_ball(const float *x, size_t d);

/* The n x d rows of X clipped (ROW_CLIP): X itself if every row fits the
   unit ball, else a copy with every row clipped (NaN/Inf rows zero), which
   *owned then holds for the caller to free (else *owned = NULL).  NULL if
   the copy cannot be allocated. */
const float *rows_clipped(const float *X, size_t n, size_t d, float **owned);

/* C (d x d, double, full storage) += sum of the clipped (ROW_CLIP) x x^T of
   the n rows of X, 64 rows per dsyrk: no copy of X.  *nonfinite (may be
   NULL) = rows with NaN/Inf (added as zero).  DPS_OK or DPS_ENOMEM. */
int rows_gram_clipped(const float *X, size_t n, size_t d, double *C, uint64_t *nonfinite);

/* Tests only, process-wide: 1 scales every row with the portable loop even
   where the CPU has AVX-512, so that a test can compare the two. */
void rows_force_portable(int on);

#endif
