/* aggregate.h - private aggregation of an epoch's bucket bases into one basis
   (DESIGN 3.3): reference points (SS_Agg) and projection (Naive_Agg), both
   through the weighted FriendlyCore average of wfc.h. */
#ifndef DPS_AGGREGATE_H
#define DPS_AGGREGATE_H

#include "pool.h"
#include "wfc.h"

/* Naive_Agg keeps d x d matrices (double mean + float noisy copy: 12 d^2
   bytes): refuse d above this (1.2 GB at the limit). */
#define DPS_PROJECTION_MAX_D 10000
/* Fixed number of partial sums for the parallel Gram, so seeded runs give the
   same bits whatever the worker count. */
#define AGG_LANES 4

typedef struct {
    const float *V;  /* t*k x d: bucket j's basis in rows j*k .. j*k+k-1    */
    const float *A;  /* t x (k x q): A_j = V_j P^T (reference only)           */
    size_t t, k, d, q;
    double xi_max;   /* data-independent: 2 ||P||_F or sqrt(2k)               */
} agg_input;

/* Scratch for the aggregation of epochs of at most t buckets (k, q, d and the
   pool's worker count fixed): allocated once, so closing an epoch does not
   allocate and zero-fill it again.  NULL on failure. */
typedef struct agg_ws agg_ws;
agg_ws *agg_ws_new(size_t t, size_t k, size_t q, size_t d, int workers, int reference);
void agg_ws_free(agg_ws **ws);
size_t agg_ws_bytes(size_t t, size_t k, size_t q, size_t d, int workers, int reference);

/* G (n x n, full, row-major, double) = A A^T for the n rows of A (n x d float),
   in parallel on pool, deterministic for a given input (whatever the worker
   count).  n <= the workspace's t*k. */
int agg_gram(dps_pool *pool, agg_ws *ws, const float *A, size_t n, size_t d, double *G);

/* Squared distances between the t items from the Gram G of the stacked bases. */
void agg_distances_reference(const agg_input *in, const double *G, double *D2);
void agg_distances_projection(const agg_input *in, const double *G, double *D2);

/* Run the aggregator.  On success *res says whether WFC failed; when it did not,
   basis (k x d) holds the released basis.  noise: the mechanism's generator;
   pub: public randomness (basis completion).  Spends what wfc_run says. */
int agg_reference(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_rng *pub, dps_pool *pool,
                  agg_ws *ws, float *basis, wfc_result *res);
int agg_projection(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_pool *pool, agg_ws *ws,
                   float *basis, wfc_result *res);

/* Reference point i (of q) of an epoch: d floats N(0, 1) from the public
   stream dps_rng_new_labelled(public_seed, "reference-points", epoch << 24 | i)
   (q < 2^24).  Anyone can recompute them (see dps_reference_points). */
void agg_reference_point(uint64_t public_seed, uint64_t epoch, size_t i, size_t d, float *out);

#endif
