/* power_sharded.h - the noisy power iteration of power_iteration.h (DESIGN
   7.3) sharded by coordinate over the ranks of an MPI communicator: rank r
   of R holds columns [c0, c1) of every row, of the iterate X and
   of the noisy Y, so each holds b (c1 - c0) doubles of them and only b x b
   and nb x b matrices cross the network.

   One step, as power_iteration.c's, split by coordinate:
     flush of nb rows B:  P = B X = sum over ranks of B_r X_r  (MPI_Allreduce, nb x b)
                          Y_r += B_r^T P                        (local: rank r's rows of B^T B X)
     step:                Y_r += N(0, s^2) for each of its entries
                          G = Y^T Y = sum over ranks of Y_r^T Y_r   (MPI_Allreduce, b x b)
                          rank 0: G = V diag(l) V^T, l descending; V, l to every rank (MPI_Bcast)
                          X_r = Y_r V diag(1/sqrt(l)): the left singular vectors of Y, largest first
                          the norm guard (below) on X
   THE SAME MECHANISM.  What the privacy argument of epoch_power.c uses is
   (1) Y = sum over the step's rows of x (x^T X) plus iid N(0, s^2) in every
   entry, whatever the rows, and (2) ||X||_2 <= 1 for the X the rows are
   multiplied by.  (1): the sum over ranks of B_r X_r is B X, and rank r adds
   rows [c0, c1) of B^T (B X): together exactly Y's update (in double, with
   the rounding bound of power_iteration.c's THE SUM IN DOUBLE: Higham's
   bound holds for any order of the sums, so also for MPI's); every entry of
   Y gets one draw of N(0, s^2), from its rank's generator (independent
   across ranks in secure mode) or, seeded, from a stream named by (epoch,
   step, column, block of coordinates), so that 1 rank and R ranks draw the
   same numbers and no two steps of a run the same ones
   (tests/mpi/test_power_sharded.c).  (2): the norm guard below.
   Everything after the noise (the Gram, its eigenvectors, X) is
   post-processing of the noisy Y.  The single-process code orthonormalises
   by Householder QR, this one by the Gram's eigenvectors (in double; Y's
   noise keeps its singular values away from 0); both give an orthonormal
   basis of span(Y), the top-k of which is released.

   THE NORM GUARD.  After every orthonormalisation X is scaled by
   (1 - mu) / sqrt(G + e): g the computed Gershgorin bound (largest absolute
   row sum) of the computed Gram X^T X, G = g (1 + (b + 2) 2^-52) >= the
   exact row sums of the computed Gram (b terms), e = b gamma_d G / (1 -
   gamma_d) a bound on that Gram's own rounding (entry-wise gamma_d
   |X_i|^T |X_j| <= gamma_d (exact Gram's row sum) <= gamma_d G / (1 -
   gamma_d); spectral <= b times that; gamma_d = d 2^-53 / (1 - d 2^-53)):
   ||X||_2^2 <= G + e.  mu = (4 sqrt(b) + 8) 2^-52 covers f's own roundings
   (a few u) and the scaled entries' (relative u each: sqrt(b) u in
   spectral norm), so ||X||_2 <= 1 after the scaling.  Every rank scales by
   the same factor (rank 0's, broadcast with V).

   Seeded draws are the same for any R only if the ranks' sums agree to the
   last bit, which MPI does not promise (the order of an allreduce's sums
   depends on R): 1-rank and R-rank runs agree up to floating-point rounding,
   amplified by the steps.  A sign of V is fixed (each eigenvector's largest
   entry positive) so that rounding cannot flip an iterate's column.

   Who owns what: the state owns every buffer (power_sharded_init allocates,
   power_sharded_free frees); the communicator is the caller's.  Every call
   but init's checks and free is collective: every rank calls it, in the
   same order. */
#ifndef DPS_POWER_SHARDED_H
#define DPS_POWER_SHARDED_H

#include "dpsubspace.h"
#include "shard_comm.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#define POWER_SHARDED_MAX_B 4095     /* columns iterated (b x b counts fit an int)      */
#define POWER_SHARDED_MAX_STEPS 1024 /* steps of one epoch (POWER_MAX_BLOCKS)           */

typedef struct {
    MPI_Comm comm;
    int rank, size;
    size_t d, k, b;      /* dimension, rank released, columns iterated        */
    size_t c0, c1, w;    /* this rank's coordinates [c0, c1), w = c1 - c0     */
    size_t nb, pending;  /* rows per flush, rows waiting in B                 */
    uint64_t steps;      /* power_sharded_step calls since the start          */
    uint64_t epoch;      /* the start's epoch: names the seeded draws          */
    uint64_t rows_nan, rows_inf, rows_zero; /* rows added as the zero vector    */
    shard_traffic traffic; /* this rank's MPI bytes and calls (shard_comm.h)   */
    int seeded;          /* noise from named streams of seed (NOT secure)     */
    uint64_t seed;
    dps_rng *noise;      /* secure mode: this rank's own generator            */
    double *X, *Y;       /* b x w each: column j's slice at j * w             */
    float *B;            /* nb x w: the pending rows' slices                  */
    double *Bd, *P;      /* a tile of B in double (nb x 1024); nb x b, (B X) then summed */
    double *ss;          /* nb: the pending rows' sums of squares (rows.h)    */
    double *G, *V, *l;   /* b x b Gram, its eigenvectors (column-major), values */
    double *block;       /* one block of draws (POWER_SHARDED_BLOCK)          */
} power_sharded;

/* Collective: rc of every rank -> the error of any rank (DPS_OK is 0, the
   errors positive: the largest code), on every rank. */
int power_sharded_agree(power_sharded *p, int rc);

/* Add to out (c1 - c0 doubles) coordinates [c0, c1) of the Gaussian vector
   of length d and sd sd named (seed, label, index): drawn a block of 1024
   coordinates at a time, block b from the stream (seed, label, index | b),
   so any split of the coordinates gets the same numbers.  index's low 21
   bits must be 0 (they name the block); block: 1024 doubles of scratch.
   DPS_OK or DPS_ERANDOM. */
int power_sharded_named_add(size_t d, size_t c0, size_t c1, uint64_t seed, const char *label, uint64_t index,
                            double sd, double *block, double *out);

/* Collective.  Set up rank's shard of a (d, k, b) iteration over comm:
   1 <= k <= b <= min(d, POWER_SHARDED_MAX_B), d <= INT32_MAX, d >= the
   number of ranks.  seeded: the noise comes from
   streams named by seed (tests only); otherwise from a secure generator of
   this rank's own.  DPS_OK on every rank or an error on every rank
   (DPS_EINVAL, DPS_ENOMEM, DPS_ERANDOM). */
int power_sharded_init(power_sharded *p, MPI_Comm comm, size_t d, size_t k, size_t b, int seeded, uint64_t seed);
void power_sharded_free(power_sharded *p);
/* Collective.  X_0: b public Gaussian directions drawn from streams of
   public_seed named by (epoch, column, block of coordinates), their first k
   replaced by warm's rows when warm (k x w: this rank's slice of k public
   orthonormal rows) is given, then orthonormalised.  Y and the pending rows
   are emptied. */
int power_sharded_start(power_sharded *p, const float *warm_slice, uint64_t public_seed, uint64_t epoch);
/* Collective (a flush every nb rows).  Add one row's slice (w floats, as it
   arrived).  Every rank adds the same rows in the same order.  At the flush
   each row is normalised to unit norm as row_unit (src/core/rows.h) would
   normalise the whole row: its sum of squares is the sum of the ranks'
   (one allreduce of nb doubles), each rank scales its part by the same
   factor; a row with NaN, Inf or zero norm is the zero vector on every rank
   (counted).  So every row added has norm <= 1 exactly. */
int power_sharded_add(power_sharded *p, const float *row_slice);
/* Collective: one noisy step with noise sd s (the caller's privacy argument
   sets it).  DPS_ENUMERIC if the eigensolver fails (on every rank). */
int power_sharded_step(power_sharded *p, double s);
/* Collective.  This rank's slice of the top-k basis (k x w floats, rows of
   unit norm over all ranks) and, on every rank, the k singular values of
   the last noisy Y (sv may be NULL).  DPS_EINVAL before the first step. */
int power_sharded_basis(power_sharded *p, float *basis_slice, double *sv);
/* Collective.  The whole k x d basis on rank 0 (basis there; NULL on the
   others): the ranks' slices gathered.  DPS_EINVAL before the first step. */
int power_sharded_gather(power_sharded *p, float *basis);

#endif
