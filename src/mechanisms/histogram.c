/* histogram.c - the histogram aggregator (DESIGN 3.3, third bullet;
   Singhal-Steinke 2021, Algorithm 2 "DPASE", lines 10-23).

   THE MECHANISM.  Bucket j's item is y^j = Pi_j P^T (q x d, row i = Pi_j p_i
   = A_j^T V_j with A_j = V_j P^T, the reference aggregator's projections; P
   public).  A grid of cubic cells of side l with a uniformly random offset
   o in [0, l)^{qd} (drawn from the mechanism's noise generator: it is not
   public) puts y^j in the cell with integer coordinates
   c_r = floor((y_r - o_r) / l), r = 1..qd.  Cells are found by a 64-bit hash
   of the coordinates, and equal hashes are confirmed by an exact comparison of
   the coordinates (recomputed from V_j, A_j, so nothing of size t*q*d is
   stored).  For every NON-EMPTY cell x: noisy count n_x = c_x + Lap(2/eps).
   The cells with n_x > T = 1 + (2/eps) ln(1/(2 delta)) are the thresholded
   histogram; the mechanism releases the one with the largest noisy count (and
   that count), or FAIL if there is none.  The released point is the CENTRE of
   that cell, o + (c + 1/2) l (the paper takes a uniformly random point of the
   cell; both are functions of the released cell and the data-independent
   offset only, so both are post-processing with the same guarantee; with a
   uniform offset, centre - y is uniform on the cell for a fixed item y, the
   same error law as the paper's random point for a cell holding one item).
   Reshaped to P^ (q x d), its top-k right singular subspace (k x d) is the
   snapshot (post-processing).

   WHY IT IS (eps, delta)-DP under replace-one (rows -> buckets: one changed row
   changes one bucket, so one item y^j; the partition is data-independent).
   Fix the offset (it is independent of the data; a mixture over offsets of
   (eps, delta)-DP mechanisms is (eps, delta)-DP).  Neighbours D, D': the item
   moves from cell A to cell B (if A = B nothing changes).  Counts change only
   at A (-1) and B (+1).  Let S = cells non-empty under both.  The release is
   a function of the thresholded noisy counts, f(D) = {(x, n_x) : n_x > T}.
   Lap(b), b = 2/eps: P[Lap(b) > b ln(1/(2 delta))] = delta, so a cell of true
   count 1 passes T with probability exactly delta.  Let f_S be f restricted
   to S.  Four cases:
   (1) A, B in S: f = f_S for both; the count vector on S moves by 1 in two
       entries (L1 distance 2), the Laplace mechanism with b = 2/eps: eps-DP.
   (2) A is non-empty only under D (count 1 there), B in S: f(D) = f_S(D)
       unless A passes T (probability delta); on S one entry moves (L1 1):
       P[f(D) in E] <= e^{eps/2} P[f(D') in E] + delta; and the other
       direction P[f(D') in E] = P[f_S(D') in E] <= e^{eps/2} P[f_S(D) in E]
       <= e^{eps/2} P[f(D) in E] / (1 - delta), since f(D) = f_S(D) on the
       independent event "A does not pass" of probability 1 - delta.
   (3) B is non-empty only under D': (2) with D and D' swapped.
   (4) both: P[f(D) in E] <= delta + P[f_S in E] <= delta + P[f(D') in E] / (1 - delta).
   So M is (eps, delta)-DP whenever ln(1/(1 - delta)) <= eps/2, which
   agg_hist_params_ok checks (it holds for any eps >= 4 delta, delta <= 1/2).
   Releasing the arg-max cell and its noisy count is post-processing of f.
   About DESIGN 3.3's threshold T = 1 + (2/eps) ln(1/delta): it is private too
   (a count-1 cell then passes with probability delta/2, so it is
   (eps, delta/2)-DP), but it spends twice the delta it is charged for; we use
   ln(1/(2 delta)), the exact threshold for the delta charged.  Only cells of
   true count 1 can exist under one neighbour and not the other (a count moves
   by at most 1 under replace-one), so "count <= 1" is the bad event, not
   "<= 2".  The Laplace noise is floating-point (difference of two -log U with
   53-bit U), like the library's other mechanisms.

   COST.  (eps, delta)-DP enters the accountant as dps_zcdp_from_dp(eps,
   delta) = (eps^2/2, delta); the estimator sets eps = sqrt(2 rho_epoch),
   delta = delta_epoch, so the histogram epoch costs (rho_epoch, delta_epoch)
   like the other aggregators.

   MEMORY: per call, the offset (q*d doubles), two coordinate vectors (q*d
   int64) and the q x d centre (floats): 28 q d bytes; q*d is limited to
   DPS_HISTOGRAM_MAX_QD.  Time O(t q d k). */
#include "aggregate.h"
#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

double agg_hist_threshold(double eps, double delta)
{
    return 1.0 + (2.0 / eps) * log(1.0 / (2.0 * delta));
}

int agg_hist_params_ok(double eps, double delta)
{
    return isfinite(eps) && eps > 0 && delta > 0 && delta <= 0.5 && log(1.0 / (1.0 - delta)) <= eps / 2;
}

/* Per coordinate, an item y = Pi p of a k-dim subspace in general position
   has entries of size about sqrt(k/d) (||Pi p||^2 ~ k spread over d
   coordinates); the default cell side is a fixed fraction of that scale
   (data-independent).  The fraction was chosen in tools/experiments
   (hist-vs-ref: the width sweep). */
double agg_hist_default_width(size_t k, size_t d)
{
    return AGG_HIST_WIDTH_FRACTION * sqrt((double)k / (double)d);
}

size_t agg_hist_min_buckets(double eps, double delta)
{
    /* The count must exceed T even when every bucket agrees. */
    double T = agg_hist_threshold(eps, delta);
    size_t need = (size_t)floor(T) + 1;
    return need < 2 ? 2 : need;
}

/* Item j, row block by row block: y_i = sum_a A_j[a][i] V_j[a]; cell
   coordinates into cell (q*d int64).  Deterministic: the same bits every time
   it is called for the same bucket. */
static void s_cell(const agg_input *in, size_t j, const double *off, double l, int64_t *cell)
{
    size_t k = in->k, q = in->q, d = in->d;
    const float *V = in->V + j * k * d, *A = in->A + j * k * q;
    for (size_t i = 0; i < q; i++) {
        int64_t *ci = cell + i * d;
        const double *oi = off + i * d;
        for (size_t c = 0; c < d; c++) {
            double y = 0;
            for (size_t a = 0; a < k; a++)
                y += (double)A[a * q + i] * (double)V[a * d + c];
            double z = floor((y - oi[c]) / l);
            ci[c] = z > 4e18 ? (int64_t)4e18 : (z < -4e18 ? (int64_t)-4e18 : (int64_t)z);
        }
    }
}

static uint64_t s_hash(const int64_t *cell, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (size_t r = 0; r < n; r++) {
        uint64_t x = (uint64_t)cell[r] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        x ^= x >> 31;
        h ^= x;
    }
    return h;
}

typedef struct {
    uint64_t h;
    size_t j;
} hj;

static int s_cmp_hj(const void *a, const void *b)
{
    const hj *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return x->j < y->j ? -1 : (x->j > y->j);
}

int agg_histogram(const agg_input *in, double eps, double delta, double width, dps_rng *noise, dps_rng *pub,
                  float *basis, agg_hist_result *res)
{
    memset(res, 0, sizeof *res);
    if (!in || !in->V || !in->A || !noise || !basis || in->t < 1 || in->k < 1 || in->q < in->k ||
        in->k >= in->d || !agg_hist_params_ok(eps, delta) || !(width >= 0) || !isfinite(width))
        return DPS_EINVAL;
    size_t t = in->t, k = in->k, q = in->q, d = in->d, n = q * d;
    if (q > DPS_HISTOGRAM_MAX_QD / d)
        return DPS_ELIMIT;
    double l = width > 0 ? width : agg_hist_default_width(k, d);
    res->width = l;
    res->threshold = agg_hist_threshold(eps, delta);
    double *off = dps_aligned_alloc(n, sizeof(double));
    int64_t *c0 = dps_aligned_alloc(n, sizeof(int64_t)), *c1 = dps_aligned_alloc(n, sizeof(int64_t));
    hj *order = calloc(t, sizeof *order);
    size_t *rep = calloc(t, sizeof *rep), *cnt = calloc(t, sizeof *cnt);
    float *Z = NULL;
    la_ws *ws = NULL;
    int rc = (off && c0 && c1 && order && rep && cnt) ? DPS_OK : DPS_ENOMEM;
    if (rc)
        goto out;
    /* The random offset: uniform on [0, l) per coordinate, from the noise. */
    for (size_t r = 0; r < n; r++)
        off[r] = l * dps_rng_uniform(noise);
    for (size_t j = 0; j < t; j++) {
        s_cell(in, j, off, l, c0);
        order[j] = (hj){s_hash(c0, n), j};
    }
    qsort(order, t, sizeof *order, s_cmp_hj);
    /* Exact classes: within a run of equal hashes, compare coordinates with
       each class representative found so far in the run. */
    size_t ncells = 0;
    for (size_t a = 0; a < t;) {
        size_t b = a;
        while (b < t && order[b].h == order[a].h)
            b++;
        size_t first = ncells;
        for (size_t u = a; u < b; u++) {
            size_t hit = SIZE_MAX;
            if (b - a > 1) {
                s_cell(in, order[u].j, off, l, c1);
                for (size_t x = first; x < ncells && hit == SIZE_MAX; x++) {
                    s_cell(in, rep[x], off, l, c0);
                    if (memcmp(c0, c1, n * sizeof *c0) == 0)
                        hit = x;
                }
            }
            if (hit == SIZE_MAX) {
                rep[ncells] = order[u].j;
                cnt[ncells++] = 1;
            } else {
                cnt[hit]++;
            }
        }
        a = b;
    }
    res->cells = ncells;
    /* Noisy counts of the non-empty cells, in a data-independent order of
       draws (one draw per cell); keep the largest above T. */
    size_t best = SIZE_MAX;
    double best_n = -INFINITY;
    for (size_t x = 0; x < ncells; x++) {
        double nx = (double)cnt[x] + dps_rng_laplace(noise, 2.0 / eps);
        if (nx > res->threshold && nx > best_n) {
            best_n = nx;
            best = x;
        }
    }
    if (best == SIZE_MAX) {
        res->failed = 1;
        goto out;
    }
    res->count_hat = best_n;
    res->count = cnt[best];
    /* The centre of the released cell, reshaped q x d, and its top-k. */
    Z = dps_aligned_alloc(n, sizeof(float));
    ws = la_ws_new(q, d, k);
    if (!Z || !ws) {
        rc = DPS_ENOMEM;
        goto out;
    }
    s_cell(in, rep[best], off, l, c0);
    for (size_t r = 0; r < n; r++)
        Z[r] = (float)(off[r] + ((double)c0[r] + 0.5) * l);
    size_t rank = 0;
    rc = la_topk_rows(ws, Z, q, d, k, basis, NULL, &rank, NULL);
    if (!rc && rank < k)
        la_complete_basis(basis, rank, k, d, pub);
out:
    free(off); free(c0); free(c1); free(order); free(rep); free(cnt); free(Z);
    la_ws_free(&ws);
    return rc;
}
