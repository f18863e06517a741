/* power_iteration.h - one noisy power iteration on a stream of rows in
   O(b d) memory (DESIGN 7.3): Y = sum x (x^T X) over the rows added since the
   last step, plus N(0, s^2) per entry, then X = orth(Y), with X d x b
   (b = k + oversampling) and never a d x d matrix.

   No privacy argument here: whoever calls power_step chooses s and owns the
   argument (epoch_power.c for the epoch mechanism).  What this module
   guarantees for that argument: every X that power_add multiplies by has
   ||X||_2 <= 1 (orthonormal columns, scaled down by the rounding excess, see
   power_iteration.c), so one row x with ||x|| <= 1 moves Y by
   ||x x^T X||_F = ||x|| ||X^T x|| <= 1 in Frobenius norm.

   One state per (d, k, b), no global state: the parameter groups reuse it,
   one state per group, adding the slice row + offset of d_g floats.
   Who owns what: the state owns every buffer; power_init allocates them all,
   the other calls allocate nothing.  The iterates X and the noisy Y are
   private intermediate values: only power_basis's output may leave, and only
   when the caller's argument says it may. */
#ifndef DPS_POWER_ITERATION_H
#define DPS_POWER_ITERATION_H

#include "dpsubspace.h"
#include "pool.h"

#include <stddef.h>

/* One of the two running sums of a step (power_iteration.c, THE SUM IN
   DOUBLE): full block j of a step goes to lane j mod 2, each lane's blocks
   in order, and the lanes are added, lane 0 + lane 1, when the sum is read.
   So two blocks are flushed at once on two workers, and the sum is the same
   bit for bit whatever the number of workers. */
typedef struct {
    double *Yd;         /* b x d: this lane's sum since the last step          */
    double *P;          /* b x nb: (B X)^T of the block being flushed           */
    double *Bt, *Xt;    /* a tile of that block and of X in double              */
    float *full;        /* nb x d: its block under way on a worker (NULL: none) */
    pool_task task;     /* that flush                                           */
    void *owner;        /* the power_iteration, for the worker                  */
} power_lane;

enum { POWER_LANES = 2 };

/* A step's noise, b d draws, in POWER_NOISE_CHUNKS equal ranges of Yd, range
   c drawn from the c-th fork of the step's stream (forked in order, before
   any draw), on the workers: the draws depend on the stream only, not on
   the number of workers (as the Gaussian release's, gaussian_cov.h). */
enum { POWER_NOISE_CHUNKS = 64 };

typedef struct {
    size_t d, k, b;   /* dimension, rank released, columns iterated (k <= b <= d) */
    size_t nb;        /* rows per flush                                         */
    size_t pending;   /* rows waiting in B                                      */
    size_t steps;     /* power_step calls since power_start                     */
    size_t blocks;    /* full blocks flushed since the last step (lane: mod 2)  */
    float *X;         /* b x d: the columns of X, each contiguous (X^T)         */
    float *Y;         /* b x d: Y^T + noise, then Q, in a step                  */
    double *Yd;       /* b x d: the sum since the last step, in double (lane 0's) */
    float *B;         /* nb x d: pending rows                                   */
    power_lane lane[POWER_LANES];
    float *tau, *work, *Uf; /* QR reflectors, LAPACK workspace, U_r in float   */
    size_t lwork;
    double *R, *U, *sv, *dwork, *G, *gbuf; /* b x b R, its SVD, X^T X, scratch   */
    size_t ldwork;
    dps_pool *pool;   /* power_use_pool's (NULL: flushes run on the caller)     */
    dps_rng *noise_fork[POWER_NOISE_CHUNKS]; /* range c's fork, keyed at each step */
    double noise_s;   /* the step's noise sd, for the ranges                      */
} power_iteration;

/* Allocate everything for dimension d, rank k, b columns (1 <= k <= b <= d):
   DPS_OK, DPS_EINVAL for other sizes, DPS_ENOMEM (then nothing is held). */
int power_init(power_iteration *p, size_t d, size_t k, size_t b);
/* Free the buffers (twice is harmless). */
void power_free(power_iteration *p);
/* Flush each full block on one of pool's workers while the next block's
   rows arrive, one block per lane at a time (two more blocks of rows, nb x
   d floats each: power_pool_bytes).  The flushes are the same sums in the
   same order as on the calling thread; every call below that reads or
   resets the sum waits for those under way.  DPS_OK, or DPS_ENOMEM (then
   the flushes stay on the calling thread). */
int power_use_pool(power_iteration *p, dps_pool *pool);
size_t power_pool_bytes(size_t d, size_t b);
/* X_0: the k rows of warm (k x d, orthonormal, public) or, when warm is NULL,
   nothing, completed with b (or b - k) public Gaussian directions drawn from
   pub, then orthonormalised (so X_0's first k columns span warm).  Y and the
   pending rows are emptied.  DPS_ENUMERIC only if LAPACK refuses. */
int power_start(power_iteration *p, const float *warm, dps_rng *pub);
/* Y += x (x^T X) for one row of d floats (copied; added in flushes of nb
   rows, every product in double: B X, then B^T (B X)). */
void power_add(power_iteration *p, const float *row);
/* Where the next power_add's row goes (d floats in the block being filled):
   a row written there is passed to power_add as is, with no copy. */
float *power_slot(power_iteration *p);
/* Add the pending rows to the sum now and the lanes into Yd (lane 1 is then
   empty): power_step does; the tests read Yd. */
void power_flush(power_iteration *p);
/* R(n): the computed sum of n rows of norm <= 1 (in any flushes) is within
   R(n) of the exact sum x (x^T X) in Frobenius norm, for any X with
   ||X||_2 <= 1 (power_iteration.c, THE SUM IN DOUBLE). */
double power_rounding_bound(size_t n, size_t d, size_t b);
/* Y += G, G iid N(0, s^2) d x b drawn from noise (all d b entries, whatever
   the rows; POWER_NOISE_CHUNKS forks of it, on the workers); then X = the left singular vectors of the noisy Y, largest
   first (Householder QR of Y, SVD of its b x b R); the singular values are
   kept for power_basis; Y = 0.  DPS_ENUMERIC if the SVD does not converge. */
int power_step(power_iteration *p, double s, dps_rng *noise);
/* The top-k left singular vectors of the last step's noisy Y as k x d
   orthonormal rows, and (sv, may be NULL) their k singular values.
   DPS_EINVAL before the first step. */
int power_basis(const power_iteration *p, float *basis, double *sv);
/* The bytes power_init allocates for (d, k, b). */
size_t power_bytes(size_t d, size_t k, size_t b);

#endif
