/* rgrad_init.c - the private initialization of DP-RGrad (rgrad.c has the
   whole method, its partition and its accounting; DESIGN 3.7).

   GUARANTEE: delta-approximate rho_init-zCDP under replacing one
   observation, rho_init = rho_U + rho_V + rho_S, for every input (everything
   is clipped).

   ARGUMENT.
   Each group's L^_g = (1/m_g) sum_{i in g} clip_F(y_i X_i, C0) (clip_F(A, C)
   = A min(1, C/||A||_F)); its top-r left basis (r x d1 rows) and right basis
   (r x d2 rows) by SVD (rank deficit completed from public randomness).
   U~ = reference-point aggregation (aggregate.c agg_reference, DESIGN
   3.2/3.3) of the t left bases, V~ the same of the right bases, each with
   rho_U = rho_V = (1 - split_sigma) rho_init / 2 and delta/2.
   Why agg_reference's guarantee applies: replacing one observation changes
   one group's data, hence at most that group's basis - one item of the
   aggregation, which is exactly WFC's replace-one-item setting; so each
   call is (delta/2)-approximate rho_U-zCDP (wfc.c has the proof), and the
   two calls compose (adaptive composition of zCDP).  A FAIL of either call
   is a DP output: the fit stops there (L = 0, st->init_failed), having
   spent only the parts that ran.
   Sigma~ = (1/n0) sum_i clip_F(U~ clip_F(y_i X_i, C0) V~^T, C_S) + E, E an
   r x r matrix of iid N(0, s_S^2) (U~, V~ here are r x d1 and r x d2 rows).
   Given the released U~, V~ (post-processing + adaptive composition), one
   observation changes one term of norm <= C_S' = min(C0, C_S) (projecting
   on orthonormal rows cannot increase the Frobenius norm), so the
   replace-one L2 sensitivity of the mean is 2 C_S'/n0 and
   s_S = (2 C_S'/n0)/sqrt(2 rho_S) makes it rho_S-zCDP (Gaussian mechanism,
   Bun-Steinke 2016 Prop. 1.6).  The fit then starts from L_0 = U~^T Sigma~ V~
   (post-processing).
   DEPARTURE from the paper: the paper privatises the empirical spectral
   projectors with a Gaussian mechanism whose sensitivity holds w.h.p. under
   Gaussian design and an eigengap-free sample-size condition; DESIGN 3.7
   asks for the library's own sample-and-aggregate estimator instead, which
   is private for every input. */
#include "aggregate.h"
#include "internal.h"
#include "linalg.h"
#include "pool.h"
#include "rgrad_internal.h"

#include <math.h>
#include <string.h>

/* Stacked top-r left (t*r x d1) and right (t*r x d2) bases of the groups'
   L^_g; group g = idx[off_g .. off_{g+1}), off_g = g*n0/t. */
static int s_group_bases(const float *X, const float *y, const size_t *idx, size_t n0, size_t t,
                         const dps_rgrad_config *c, float *Bl, float *Br, uint64_t *clipped)
{
    size_t d1 = c->d1, d2 = c->d2, r = c->r, D = d1 * d2;
    double *Lg = malloc(D * sizeof *Lg), *U = malloc(d1 * r * sizeof *U), *V = malloc(d2 * r * sizeof *V);
    double *sv = malloc(r * sizeof *sv);
    int rc = (Lg && U && V && sv) ? DPS_OK : DPS_ENOMEM;
    for (size_t g = 0; !rc && g < t; g++) {
        size_t lo = g * n0 / t, hi = (g + 1) * n0 / t;
        memset(Lg, 0, D * sizeof *Lg);
        for (size_t j = lo; j < hi; j++) {
            const float *x = X + idx[j] * D;
            double yi = y[idx[j]];
            double f = rgrad_clip_factor(fabs(yi) * sqrt(la_dot_self(x, D)), c->clip_init);
            if (f < 1)
                (*clipped)++;
            if (f == 0 || !isfinite(yi))
                continue;
            double w = yi * f / (double)(hi - lo);
            for (size_t e = 0; e < D; e++)
                Lg[e] += w * x[e];
        }
        rc = la_svd_top(Lg, d1, d2, r, U, sv, V);
        if (rc)
            break;
        size_t rank = 0;
        while (rank < r && sv[rank] > 1e-10 * sv[0] && sv[0] > 0)
            rank++;
        float *bl = Bl + g * r * d1, *br = Br + g * r * d2;
        for (size_t s = 0; s < r; s++) {
            for (size_t a = 0; a < d1; a++)
                bl[s * d1 + a] = (float)U[a * r + s];
            for (size_t b = 0; b < d2; b++)
                br[s * d2 + b] = (float)V[b * r + s];
        }
        if (rank < r) { /* a group with too little signal: complete from public randomness */
            dps_rng *pub = NULL;
            rc = dps_rng_new_labelled(&pub, c->public_seed, "rgrad-completion", g);
            if (!rc) {
                la_complete_basis(bl, rank, r, d1, pub);
                la_complete_basis(br, rank, r, d2, pub);
            }
            dps_rng_destroy(&pub);
        }
    }
    free(Lg); free(U); free(V); free(sv);
    return rc;
}

/* One reference-point aggregation of t stacked bases (t*r x d): basis (r x d).
   The public reference points are the estimator's stream, "epoch" 0 for the
   left side and 1 for the right. */
static int s_aggregate(const float *Bs, size_t t, size_t d, uint64_t side, const dps_rgrad_config *c, dps_rng *noise,
                       float *basis, wfc_result *res)
{
    size_t r = c->r, q = c->q;
    agg_refs refs = {0};
    dps_pool *pool = pool_new(1);
    agg_ws *ws = agg_ws_new(t, r, q, d, 1, 1);
    dps_rng *pub = NULL;
    int rc = (pool && ws) ? agg_refs_init(&refs, c->public_seed, t, r, q, d, pool) : DPS_ENOMEM;
    if (!rc)
        rc = dps_rng_new_labelled(&pub, c->public_seed, "rgrad-aggregate", side);
    if (!rc) {
        agg_refs_begin(&refs, side);
        for (size_t g = 0; g < t; g++)
            agg_refs_take(&refs, g, Bs + g * r * d);
        agg_input in = {Bs, refs.A, t, r, d, q, refs.xi_max};
        wfc_params p = rgrad_wfc_params(c, refs.xi_max);
        rc = agg_reference(&in, &p, noise, pub, pool, ws, basis, res);
    }
    dps_rng_destroy(&pub);
    agg_ws_free(&ws);
    pool_free(&pool);
    agg_refs_free(&refs);
    return rc;
}

/* Sigma~ (r x r) from the released bases Ub (r x d1 rows) and Vb (r x d2). */
static int s_sigma(const float *X, const float *y, const size_t *idx, size_t n0, const dps_rgrad_config *c,
                   const float *Ub, const float *Vb, double sd, dps_rng *rng, double *S, uint64_t *clipped)
{
    size_t d1 = c->d1, d2 = c->d2, r = c->r, D = d1 * d2;
    double *U = malloc(d1 * r * sizeof *U), *Vt = malloc(r * d2 * sizeof *Vt), *A = malloc(r * d2 * sizeof *A);
    double *B = malloc(d1 * r * sizeof *B), *C = malloc(r * r * sizeof *C);
    int rc = (U && Vt && A && B && C) ? DPS_OK : DPS_ENOMEM;
    if (!rc) {
        for (size_t s = 0; s < r; s++) {
            for (size_t a = 0; a < d1; a++)
                U[a * r + s] = Ub[s * d1 + a];
            for (size_t b = 0; b < d2; b++)
                Vt[s * d2 + b] = Vb[s * d2 + b];
        }
        memset(S, 0, r * r * sizeof *S);
        for (size_t j = 0; j < n0; j++) {
            const float *x = X + idx[j] * D;
            double yi = y[idx[j]];
            double f0 = rgrad_clip_factor(fabs(yi) * sqrt(la_dot_self(x, D)), c->clip_init);
            if (f0 == 0 || !isfinite(yi))
                continue;
            rgrad_factors(x, d1, d2, r, U, Vt, A, B, C);
            double w = yi * f0;
            double f1 = rgrad_clip_factor(fabs(w) * sqrt(rgrad_norm2(C, r * r)), c->clip_sigma);
            if (f0 < 1 || f1 < 1)
                (*clipped)++;
            if (f1 == 0)
                continue;
            for (size_t e = 0; e < r * r; e++)
                S[e] += w * f1 * C[e];
        }
        for (size_t e = 0; e < r * r; e++)
            S[e] = S[e] / (double)n0 + dps_rng_gaussian(rng, sd);
    }
    free(U); free(Vt); free(A); free(B); free(C);
    return rc;
}

/* One side's aggregation (0: left, U~; 1: right, V~), charged into *init
   once it may have drawn noise; its radius and noisy weight into st, and on
   its FAIL st->init_failed with the reason. */
static int s_side(const float *Bs, size_t t, size_t d, uint64_t side, const dps_rgrad_config *c, dps_rng *rng,
                  float *basis, dps_zcdp *init, dps_rgrad_stats *st)
{
    wfc_result res;
    memset(&res, 0, sizeof res);
    int rc = s_aggregate(Bs, t, d, side, c, rng, basis, &res);
    init->rho += rgrad_rho_agg(c);
    init->delta += 0.5 * c->delta;
    *(side ? &st->radius_v : &st->radius_u) = res.radius;
    *(side ? &st->w_hat_v : &st->w_hat_u) = res.W_hat;
    if (!rc && res.failed) {
        st->init_failed = 1;
        st->reason = side ? "the aggregation of the groups' right subspaces said FAIL (too few groups agree): "
                            "no estimate; the initialization's spent budget stays spent"
                          : "the aggregation of the groups' left subspaces said FAIL (too few groups agree): "
                            "no estimate; the initialization's spent budget stays spent";
    }
    return rc;
}

int rgrad_init(const float *X, const float *y, const size_t *perm, size_t n0, size_t t, const dps_rgrad_config *c,
               dps_rng *rng, const rgrad_init_bufs *b, dps_rgrad_stats *st)
{
    double rho_S = c->split_sigma * c->rho_init;
    dps_zcdp init = {0, 0};
    int rc = s_group_bases(X, y, perm, n0, t, c, b->Bl, b->Br, &st->nonprivate_clipped_init);
    if (!rc)
        rc = s_side(b->Bl, t, c->d1, 0, c, rng, b->Ub, &init, st);
    if (!rc && !st->init_failed)
        rc = s_side(b->Br, t, c->d2, 1, c, rng, b->Vb, &init, st);
    if (!rc && !st->init_failed) {
        st->sd_sigma = dps_rgrad_sigma(fmin(c->clip_init, c->clip_sigma), n0, rho_S);
        rc = s_sigma(X, y, perm, n0, c, b->Ub, b->Vb, st->sd_sigma, rng, b->S, &st->nonprivate_clipped_init);
        init.rho += rho_S;
    }
    st->spent = init;
    return rc;
}
