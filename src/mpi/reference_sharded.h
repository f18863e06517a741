/* reference_sharded.h - the reference aggregator (DPS_AGG_REFERENCE, SS_Agg,
   Tsfadia sec. 4.1; src/mechanisms/epoch_reference.c and aggregate.c)
   sharded by coordinate over the ranks of an MPI communicator:
   rank r of R holds columns [c0, c1) of every row, of every bucket's basis
   V_j, of the reference points P and of the noisy mean Z, so each holds
   (t k + q) (c1 - c0) floats of them and W m (c1 - c0) of open buckets' rows;
   only m x m, n x n (n = t k), n x q and q x q matrices cross the network.
   The products the close needs (V V^T and V P^T) are summed in groups of 16
   buckets as they complete, so the close reduces them and runs WFC and the
   noisy mean (n q d / R multiply-adds), not (t k)^2 d / R.

   THE SAME MECHANISM.  epoch_reference.c's argument uses: (1) a partition of
   the epoch's rows into buckets that does not look at the rows, so that
   replacing one row changes one bucket and so one item; (2) item j is
   y^j = A_j^T V_j with V_j bucket j's top-k basis and A_j = V_j P^T for
   public P, and WFC (wfc.c) is run on upper bounds of the items' distances
   that are functions of items j and l alone; (3) the mean sum_j (w_j/W) y^j
   gets N(0, s_mu^2) on each of its q d entries, s_mu WFC's; (4) xi_max
   = 2 ||P||_F is data-independent.  Here:
   (1) each row goes to a uniformly random free slot of the W open buckets
       (buckets.c's rule) drawn from a PUBLIC stream named by (public_seed,
       epoch), the same draws on every rank, so every rank puts every row in
       the same bucket without talking; the argument needs only that the
       partition not depend on the rows (it holds for every fixed partition),
       not that it be secret.
   (2) a full bucket's rows are normalised as row_unit normalises the whole
       row (rows.h: row_sum_squares of each slice, summed over the ranks,
       row_unit_part), its m x m Gram is the sum over ranks of the slices'
       Grams, rank 0 solves it and every rank maps its slice: V_j's slice.
       A rank below k is completed from public randomness (named streams),
       orthogonal to the rest (collective Gram-Schmidt), as buckets.c does.
       At the close, the n x n Gram of the stacked bases and A = V P^T are
       sums over ranks of the slices' products (one reduce to rank 0, in
       double; A then rounded to float: that float A_j defines item j, as
       the single-process stored A_j does), and rank 0 computes the distance
       bounds with aggregate.c's agg_distances_reference: its rounding bound
       (gamma_(2d+8) for an entry of G) holds for any order of the d
       products' additions, MPI's included.  Entry (j, l) of G and of A A^T
       is formed from items j and l alone, whatever the others hold.
   (3) rank 0 runs WFC (its noise: rank 0's generator) and sends every rank
       B = stacked (w_j/W) A_j; each rank forms its slice of B^T V and adds
       N(0, s_mu^2) to each of its q (c1 - c0) entries from its own secure
       generator (independent across ranks), or, seeded, from streams named
       by (epoch, row of Z, block of coordinates), so that 1 and R ranks draw
       the same numbers.  Every entry of the q x d mean gets one draw.
   (4) P's entries are N(0, 1) from public streams named by (epoch, point,
       block of coordinates); ||P||_F^2 is the sum of the slices'.
   The release, the top-k right singular subspace of the noisy q x d mean Z,
   is post-processing: Z Z^T (q x q) summed over ranks, solved on rank 0,
   each rank maps its slice.  So this is epoch_reference.c's mechanism with
   the same guarantee: delta_epoch-approximate rho_epoch-zCDP per epoch under
   replacing one row.  It differs from the single-process code only in
   public randomness (P, the partition and the completions are drawn from
   other public streams) and in floating-point rounding (the bucket Gram is
   formed in double, not float first).

   Who owns what: the state owns every buffer (ref_sharded_init allocates,
   ref_sharded_free frees); the communicator is the caller's.  Calls marked
   collective are made by every rank, in the same order; ref_sharded_add is
   collective only at a bucket's last row, which is the same row on every
   rank (the same draws), so every rank must add the same rows in the same
   order. */
#ifndef DPS_REFERENCE_SHARDED_H
#define DPS_REFERENCE_SHARDED_H

#include "dpsubspace.h"
#include "shard_comm.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    MPI_Comm comm;
    int rank, size;
    const dps_config *cfg;   /* t, m, k, q, window, public_seed, WFC's parameters */
    size_t d, k, t, m, q, win;
    size_t c0, c1, w;        /* this rank's coordinates [c0, c1), w = c1 - c0   */
    int seeded;
    uint64_t seed;
    uint64_t epoch;
    dps_rng *noise;          /* secure mode: this rank's own generator (rank 0: WFC's too) */
    dps_rng *part;           /* the epoch's public partition stream               */
    float *V;                /* t x k x w: the completed buckets' basis slices   */
    unsigned char *done;     /* t flags: bucket j completed this epoch            */
    size_t completed;        /* buckets completed this epoch (public)             */
    float *rows;             /* win x m x w: the open buckets' rows               */
    size_t *open_id, *filled;/* per window entry: its bucket, its rows so far     */
    size_t *slots, nfree, next_bucket, n_open;
    float *P;                /* q x w: this epoch's reference points' slices      */
    double *acc;             /* the close's message, summed as buckets complete:
                                V V^T's upper triangle (t k x t k, packed by
                                rows, by bucket id), V P^T (t k x q), ||P||_F^2 */
    double *stack;           /* (t k + q + 16 k) x 1024: tiles of rows in double  */
    double *blk;             /* 16 k x (t k + q): pending buckets' products of a tile */
    size_t *pending, npending; /* completed buckets whose products wait (a group of 16) */
    size_t *ids;             /* t: the completed buckets' ids, or each bucket's place among them */
    unsigned char *flags;    /* t: which buckets are pending                     */
    double *ss;              /* m: a full bucket's rows' sums of squares          */
    double *B;               /* 4 + t k x q: WFC's outcome and the stacked (w_j/W) A_j
                                of the last release (rank 0's, on every rank)    */
    float *Z;                /* q x w: this rank's slice of the last noisy mean   */
    double f2;               /* ||this rank's P slice||_F^2                       */
    double *Pd;              /* w: one point's slice as drawn                     */
    double *block;           /* one block of named draws                          */
    uint64_t rows_nan, rows_inf, rows_zero, rows_discarded;
    shard_traffic traffic;   /* this rank's MPI bytes and calls (shard_comm.h)   */
} ref_sharded;

/* What a release did (on every rank). */
typedef struct {
    int failed;          /* WFC said FAIL: no basis (the budget is spent)        */
    double radius, w_hat;/* WFC's released radius and noisy weight               */
    double s_mu;         /* the sd of the noise on each entry of the mean (WFC's) */
    double noise_level;  /* epoch_reference.c's (noise_level_rect of s_mu)       */
    size_t buckets;      /* items aggregated                                     */
} ref_sharded_outcome;

/* The bytes a rank holding w coordinates takes at most for cfg: (t k + 2 q)
   w floats (bases, points, the noisy mean) + win m w floats (the open
   buckets' rows) + O(n^2 + n q) doubles of the close's scratch (n = t k),
   which do not shrink with R. */
size_t ref_sharded_bytes(const dps_config *cfg, size_t w);

/* Collective.  Set up rank's shard over comm for cfg (reference aggregator:
   t, m, k, q, window, public_seed, split, alpha, tau, xi_min, rho_epoch,
   delta_epoch).  seeded: noise from streams named by seed (tests only).
   Needs m <= d (a bucket's Gram is m x m) and d >= the ranks.  DPS_OK on
   every rank or an error on every rank (DPS_EINVAL, DPS_ENOMEM,
   DPS_ERANDOM).  DPS_EINVAL also when the close's message, (t k)(t k + 1)/2
   + t k q doubles, would not fit one MPI count (t k above about 46 000). */
int ref_sharded_init(ref_sharded *s, MPI_Comm comm, const dps_config *cfg, int seeded, uint64_t seed);
void ref_sharded_free(ref_sharded *s);

/* Local.  Start epoch `epoch`: its partition stream and reference points;
   no bucket done, the first window of buckets open.  DPS_ERANDOM or
   DPS_OK (the same on every rank: public draws). */
int ref_sharded_begin(ref_sharded *s, uint64_t epoch);
/* One row's slice (w floats) into its slot; collective when the row fills
   its bucket (the bucket's basis).  An error (DPS_ENUMERIC from the
   eigensolver, the same on every rank) leaves the bucket out. */
int ref_sharded_add(ref_sharded *s, const float *row_slice);
/* Local.  The end of the epoch's input: the rows of buckets still open are
   dropped (counted in rows_discarded).  Returns the completed buckets. */
size_t ref_sharded_seal(ref_sharded *s);
/* Collective, after seal and the charge.  Writes this rank's slice of the
   k x d basis (k x w floats) unless out->failed.  DPS_OK or the same error
   on every rank. */
int ref_sharded_release(ref_sharded *s, float *basis_slice, ref_sharded_outcome *out);

#endif
