/* aggregate.h - private aggregation of an epoch's bucket bases into one basis
   (DESIGN 3.3): reference points (SS_Agg) and projection (Naive_Agg), both
   through the weighted FriendlyCore average of wfc.h (aggregate.c), and the
   stability histogram over grid cells of the reference items (histogram.c). */
#ifndef DPS_AGGREGATE_H
#define DPS_AGGREGATE_H

#include "pool.h"
#include "wfc.h"

#include <pthread.h>

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

/* Upper bounds of the squared distances between the t items (the computed
   distance plus a bound of its rounding: aggregate.c, "certified distance
   bounds"), from the Gram G of the stacked bases: what WFC's friend test needs. */
/* The reference distances on the pool's workers (NULL: here); DPS_ENOMEM. */
int agg_distances_reference(const agg_input *in, const double *G, double *D2, dps_pool *pool);
/* The projection distances; DPS_ENOMEM. */
int agg_distances_projection(const agg_input *in, const double *G, double *D2);

/* The reference items of an epoch (the reference and histogram aggregators):
   public points P (q x d) drawn at the epoch's begin, each bucket's
   A_j = V_j P^T (k x q, stacked t x k x q) and xi_max = 2 ||P||_F, a
   data-independent bound on the distance of two items.  The owner fills P
   and xi_max with agg_refs_begin (or agg_refs_begin_async, then
   agg_refs_wait before reading them) and A_j with agg_refs_take. */
typedef struct {
    uint64_t public_seed;
    size_t t, k, q, d;
    dps_pool *pool; /* draws P in parallel (the same values for any worker count) */
    float *P, *A;
    double xi_max;
    /* begin_async: jobs on the pool draw P; the last one sums f2 and sets xi_max */
    pthread_mutex_t mu;
    pthread_cond_t drawn;
    size_t pending;  /* points not yet drawn (guarded) */
    double *f2;      /* ||p_i||^2 per point, summed in point order: the same xi_max whoever drew what */
    uint64_t epoch;
} agg_refs;
/* Allocate P and A for t buckets; DPS_ENOMEM.  agg_refs_free frees them. */
int agg_refs_init(agg_refs *r, uint64_t public_seed, size_t t, size_t k, size_t q, size_t d, dps_pool *pool);
void agg_refs_free(agg_refs *r);
/* The bytes of P and A. */
size_t agg_refs_bytes(size_t t, size_t k, size_t q, size_t d);
/* P of this epoch (agg_reference_point) and xi_max, before it returns. */
void agg_refs_begin(agg_refs *r, uint64_t epoch);
/* The same drawn by jobs queued on the pool, so that the caller (the
   thread pushing rows, at an epoch's first row) does not wait for the jobs
   already queued (the last epoch's buckets): agg_refs_wait blocks until
   P and xi_max are there.  Any thread, also a pool job queued after them
   (FIFO: the drawing jobs are taken first). */
void agg_refs_begin_async(agg_refs *r, uint64_t epoch);
void agg_refs_wait(agg_refs *r);
/* A_j = V_j P^T for bucket j's basis V_j (k x d); writes only A_j (waits
   for P). */
void agg_refs_take(agg_refs *r, size_t j, const float *Vj);

/* Run the aggregator.  On success *res says whether WFC failed; when it did not,
   basis (k x d) holds the released basis.  noise: the mechanism's generator;
   pub: public randomness (basis completion).  Spends what wfc_run says. */
int agg_reference(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_rng *pub, dps_pool *pool,
                  agg_ws *ws, float *basis, wfc_result *res);
int agg_projection(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_pool *pool, agg_ws *ws,
                   float *basis, wfc_result *res);

/* ------------------------------------------------- histogram aggregator
   (histogram.c: the mechanism and its (eps, delta)-DP proof).  Items are the
   reference aggregator's y^j = Pi_j P^T (in->A must hold A_j = V_j P^T). */
/* q*d above this is refused (the offset and two coordinate vectors take
   24 q d bytes: 200 MB at the limit, e.g. q = 40, d = 2e5). */
#define DPS_HISTOGRAM_MAX_QD ((size_t)1 << 23)
/* Default cell side = this fraction of sqrt(k/d), the per-coordinate scale
   of an item (chosen by the width sweep in tools/experiments/README.md). */
#define AGG_HIST_WIDTH_FRACTION 0.25

typedef struct {
    int failed;       /* 1: no cell's noisy count passed T (FAIL, a DP output) */
    double width;     /* cell side l used                                    */
    double threshold; /* T = 1 + (2/eps) ln(1/(2 delta))                     */
    double count_hat; /* noisy count of the released cell (released)         */
    size_t count;     /* its exact count (private: tests only, never released) */
    size_t cells;     /* non-empty cells (private: tests only)               */
} agg_hist_result;

/* T = 1 + (2/eps) ln(1/(2 delta)): a cell of true count 1 passes with
   probability exactly delta. */
double agg_hist_threshold(double eps, double delta);
/* 1 if (eps, delta) are in the range of the proof: eps > 0, 0 < delta <= 1/2,
   ln(1/(1 - delta)) <= eps/2. */
int agg_hist_params_ok(double eps, double delta);
/* AGG_HIST_WIDTH_FRACTION * sqrt(k/d). */
double agg_hist_default_width(size_t k, size_t d);
/* floor(T) + 1: fewer buckets can never pass T without noise. */
size_t agg_hist_min_buckets(double eps, double delta);
/* Run the histogram mechanism on in->t items: (eps, delta)-DP under replacing
   one item.  width 0 = default.  On success *res says whether it failed; if
   not, basis (k x d) holds the released basis.  noise: the mechanism's
   generator (offset, Laplace); pub: public randomness (basis completion).
   DPS_EINVAL for bad arguments, DPS_ELIMIT above DPS_HISTOGRAM_MAX_QD. */
int agg_histogram(const agg_input *in, double eps, double delta, double width, dps_rng *noise, dps_rng *pub,
                  float *basis, agg_hist_result *res);

/* Reference point i (of q) of an epoch: d floats N(0, 1) from the public
   stream dps_rng_new_labelled(public_seed, "reference-points", epoch << 24 | i)
   (q < 2^24).  Anyone can recompute them (see dps_reference_points). */
void agg_reference_point(uint64_t public_seed, uint64_t epoch, size_t i, size_t d, float *out);

#endif
