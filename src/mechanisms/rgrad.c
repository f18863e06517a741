/* rgrad.c - DP low-rank trace regression: private spectral initialization and
   DP Riemannian gradient descent (DESIGN 3.7; the paper
   dp-low-rank-trace-regression-dp-rgrad, Algorithms 1 and 2).

   Unit of privacy: one observation (X_i, y_i); neighbours replace one
   observation; n, d1, d2, r and the configuration are public.  The paper's
   sensitivities hold only with high probability under Gaussian design; here
   every per-observation quantity is clipped, so the guarantee below holds for
   EVERY input (a non-finite observation contributes zero, like a NaN row of
   the estimator).

   Partition.  One uniformly random permutation pi of 0..n-1 is drawn from the
   noise generator (it does not look at the data).  The init's groups and, in
   streaming mode, the batches are consecutive blocks of pi: groups g = 0..t-1
   of the init batch (sizes differ by at most one), then batch l of nb =
   floor((n - n0)/iters) observations for iteration l (the remainder is not
   used).  The permutation makes the groups exchangeable whatever the order of
   the input; privacy needs only that the partition is data-independent.

   1. Initialization (rho_init = rho_U + rho_V + rho_S, delta): two
      reference-point aggregations of the groups' top-r subspaces and a
      clipped Gaussian Sigma~ (rgrad_init.c has the mechanism and its
      argument).

   2. Iterations.  At L_l = U diag(s) V^T, per observation
      g_i = clip_F(P_T((<X_i, L_l> - y_i) X_i), C), P_T(G) = U U^T G + G V V^T -
      U U^T G V V^T (the tangent space of the rank-r manifold at L_l, of
      dimension r(d1 + d2 - r)); G_l = (1/nb) sum g_i + P_T(Z), Z iid
      N(0, sigma^2) on d1 x d2, which is isotropic N(0, sigma^2) noise on the
      tangent space (P_T is an orthogonal projection, and an isotropic Gaussian
      projected on a subspace is isotropic there).  Given L_l (a function of
      earlier releases), the tangent space is fixed and public, the mean lies
      in it, and one replaced observation moves it by at most 2C/nb in
      Frobenius norm; in orthonormal coordinates of T_l the release is the
      Gaussian mechanism with sensitivity 2C/nb and sd sigma =
      (2C/nb)/sqrt(2 rho_iter): rho_iter-zCDP.  Then L_{l+1} = SVD_r(L_l -
      eta G_l) (post-processing).

   3. Accounting.  Batch mode (every part reads all n): adaptive composition,
      rho = rho_init + iters rho_iter, delta (the two aggregations' delta/2).
      Streaming mode (init batch + one disjoint batch per iteration): replacing
      observation i changes exactly one block of the public partition, read by
      exactly one part (the init, or iteration l).  Every other part, given the
      earlier outputs, has the same output distribution on both neighbours
      because it does not read observation i; by the chain rule of the Renyi
      divergence the divergence of the whole transcript is that of the one
      part that reads i (conditioned on the same history).  So the fit is
      delta-approximate max(rho_init, rho_iter)-zCDP (the delta only when i is
      in the init batch, and delta is the worst case).  This is parallel
      composition under replace-one neighbours; it needs the partition to be
      data-independent (it is: a permutation from the noise generator and
      block sizes from public n, iters, init_obs).  */
#include "internal.h"
#include "linalg.h"
#include "rgrad_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ configuration */
void dps_rgrad_config_init(dps_rgrad_config *cfg, size_t d1, size_t d2, size_t r)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->d1 = d1;
    cfg->d2 = d2;
    cfg->r = r;
    cfg->iters = 10;
    cfg->eta = 0.5;
    cfg->clip_init = 3.0 * sqrt((double)d1 * (double)d2);
    cfg->clip_sigma = 3.0 * (double)r;
    double dimT = (double)r * ((double)d1 + (double)d2 - (double)r);
    cfg->clip_grad = 3.0 * sqrt(dimT > 0 ? dimT : 1.0);
    cfg->split_sigma = 0.2;
    cfg->delta = 1e-8;
    cfg->q = 10 * r;
    cfg->alpha = 0.5;
    cfg->tau = 0.5;
    cfg->split_search = 0.2;
    cfg->split_count = 0.1;
    cfg->split_mean = 0.7;
    cfg->xi_min = 1e-6;
    dps_rgrad_config_budget(cfg, 1.0);
}

void dps_rgrad_config_budget(dps_rgrad_config *cfg, double rho_total)
{
    if (cfg->streaming) {
        cfg->rho_init = rho_total;
        cfg->rho_iter = rho_total;
    } else if (cfg->iters == 0) {
        cfg->rho_init = rho_total;
        cfg->rho_iter = rho_total; /* unused */
    } else {
        cfg->rho_init = 0.3 * rho_total;
        cfg->rho_iter = 0.7 * rho_total / (double)cfg->iters;
    }
}

dps_zcdp dps_rgrad_cost(const dps_rgrad_config *cfg)
{
    dps_zcdp c = {cfg->rho_init, cfg->delta};
    if (cfg->iters > 0) {
        if (cfg->streaming)
            c.rho = fmax(cfg->rho_init, cfg->rho_iter);
        else
            c.rho += (double)cfg->iters * cfg->rho_iter;
    }
    return c;
}

double rgrad_rho_agg(const dps_rgrad_config *c) { return 0.5 * (1.0 - c->split_sigma) * c->rho_init; }

wfc_params rgrad_wfc_params(const dps_rgrad_config *c, double xi_max)
{
    double split = c->split_search + c->split_count + c->split_mean, rho = rgrad_rho_agg(c);
    wfc_params p = {
        .alpha = c->alpha, .tau = c->tau,
        .rho_search = rho * c->split_search / split,
        .rho_count = rho * c->split_count / split,
        .rho_mean = rho * c->split_mean / split,
        .delta1 = 0.5 * c->delta, .xi_min = c->xi_min, .xi_max = xi_max,
    };
    return p;
}

/* The fewest groups with which the noisy count can succeed even if all agree:
   L = W^ - s_W sqrt(2 ln(1/delta1)) >= 1 needs t >~ 1 + s_W (sqrt(2 ln(1/delta1)) + 2)
   (the estimator's dps_config_min_buckets rule, two sd of margin). */
static size_t s_min_groups(const dps_rgrad_config *c)
{
    wfc_params p = rgrad_wfc_params(c, 1.0);
    if (!(p.rho_count > 0) || !(p.delta1 > 0 && p.delta1 < 1) || !(c->alpha > 0))
        return 2;
    double s_W = wfc_weight_sensitivity(c->alpha) / sqrt(2.0 * p.rho_count);
    double t = 1.0 + s_W * (sqrt(2.0 * log(1.0 / p.delta1)) + 2.0);
    return t < 2 ? 2 : (size_t)ceil(t);
}

size_t dps_rgrad_min_groups(const dps_rgrad_config *cfg) { return s_min_groups(cfg); }

/* Auto groups: the radius search stops at the first grid radius whose noisy W
   reaches tau t, so the true W there can be near tau t (less the search's
   noise); the release needs W^ - s_W sqrt(2 ln(1/delta1)) >= 1.  Asking
   tau t >= 1 + s_W (sqrt(2 ln(1/delta1)) + 6) leaves 6 sd of W^ (and of the
   search's noise, whose sd is about 1.6 s_W at the default split) for both:
   FAIL becomes rare.  (2 x the minimum, tried first, left 2 sd: the
   evaluation saw 2 FAILs in 105 fits, as Phi(-2) per aggregation predicts.) */
size_t dps_rgrad_groups(const dps_rgrad_config *cfg)
{
    if (cfg->groups)
        return cfg->groups;
    wfc_params p = rgrad_wfc_params(cfg, 1.0);
    if (!(p.rho_count > 0) || !(p.delta1 > 0 && p.delta1 < 1) || !(cfg->alpha > 0) || !(cfg->tau > 0))
        return 2 * s_min_groups(cfg);
    double s_W = wfc_weight_sensitivity(cfg->alpha) / sqrt(2.0 * p.rho_count);
    double t = (1.0 + s_W * (sqrt(2.0 * log(1.0 / p.delta1)) + 6.0)) / cfg->tau;
    return t < 2 ? 2 : (size_t)ceil(t);
}

/* Observations in the init batch and in each iteration's batch. */
static void s_batches(const dps_rgrad_config *c, size_t n, size_t *n0, size_t *nb)
{
    if (!c->streaming || c->iters == 0) {
        *n0 = n;
        *nb = n;
        return;
    }
    *n0 = c->init_obs ? c->init_obs : n / (c->iters + 1);
    *nb = *n0 <= n ? (n - *n0) / c->iters : 0;
}

static int s_pos(double x) { return isfinite(x) && x > 0; }

#define WHY(msg)          \
    do {                  \
        if (why)          \
            *why = (msg); \
        return DPS_EINVAL;\
    } while (0)

int dps_rgrad_config_check(const dps_rgrad_config *c, size_t n, const char **why)
{
    if (why)
        *why = "";
    if (!c)
        WHY("no configuration");
    if (c->d1 == 0 || c->d2 == 0 || c->r == 0 || c->r >= c->d1 || c->r >= c->d2)
        WHY("need 1 <= r < min(d1, d2)");
    if (c->d1 > DPS_RGRAD_MAX_DIM || c->d2 > DPS_RGRAD_MAX_DIM ||
        (double)c->d1 * (double)c->d2 > (double)DPS_RGRAD_MAX_ENTRIES || c->iters > DPS_RGRAD_MAX_ITERS) {
        if (why)
            *why = "d1, d2 (each <= " DPS_STR(DPS_RGRAD_MAX_DIM) ", d1*d2 <= 2^20) or iters (<= "
                   DPS_STR(DPS_RGRAD_MAX_ITERS) ") above the documented limit";
        return DPS_ELIMIT;
    }
    if (!s_pos(c->eta))
        WHY("eta must be a positive number");
    if (!s_pos(c->clip_init) || !s_pos(c->clip_sigma) || !s_pos(c->clip_grad))
        WHY("the clipping thresholds must be positive numbers");
    if (!s_pos(c->rho_init) || (c->iters > 0 && !s_pos(c->rho_iter)))
        WHY("rho_init and rho_iter must be positive numbers");
    if (!(c->split_sigma > 0 && c->split_sigma < 1))
        WHY("split_sigma must be in (0, 1)");
    if (!(c->delta > 0 && c->delta < 1))
        WHY("delta must be in (0, 1)");
    if (!(c->alpha > 0 && c->alpha <= 1) || !(c->tau > 0 && c->tau <= 1))
        WHY("alpha and tau must be in (0, 1]");
    if (!s_pos(c->split_search) || !s_pos(c->split_count) || !s_pos(c->split_mean))
        WHY("the aggregation's rho split parts must all be positive");
    if (!s_pos(c->xi_min))
        WHY("xi_min must be positive");
    if (c->q == 0 || c->q >= ((size_t)1 << 24))
        WHY("q must be in [1, 2^24)");
    size_t t = dps_rgrad_groups(c), n0, nb;
    /* Fewer groups than dps_rgrad_min_groups are allowed (a FAIL is a DP
       output, so privacy does not depend on t) but the init then fails with
       high probability: the documented behaviour that lets FAIL be tested. */
    if (t < 2)
        WHY("need at least 2 groups (leave groups at 0 for the automatic choice)");
    if (n == 0)
        WHY("no observations");
    s_batches(c, n, &n0, &nb);
    if (n0 > n || n0 < t)
        WHY("too few observations for the initialization: every group needs at least one");
    if (c->streaming && c->iters > 0 && nb == 0)
        WHY("too few observations for streaming: an iteration's batch would be empty");
    return DPS_OK;
}

double dps_rgrad_sigma(double clip, size_t n, double rho)
{
    return (2.0 * clip / (double)n) / sqrt(2.0 * rho);
}

/* ------------------------------------------------------------ small algebra */
/* min(1, C/norm), or 0 for a non-finite norm (the contribution is dropped). */
double rgrad_clip_factor(double norm, double C)
{
    if (!isfinite(norm))
        return 0.0;
    return norm > C ? C / norm : 1.0;
}

/* For one observation x (d1 x d2 float): A = U^T x (r x d2), B = x V (d1 x r),
   C = U^T B (r x r); U (d1 x r), Vt = V^T (r x d2), both double. */
void rgrad_factors(const float *x, size_t d1, size_t d2, size_t r, const double *U, const double *Vt, double *A,
                      double *B, double *C)
{
    memset(A, 0, r * d2 * sizeof *A);
    for (size_t a = 0; a < d1; a++) {
        const float *row = x + a * d2;
        for (size_t s = 0; s < r; s++) {
            double u = U[a * r + s], dot = 0;
            double *As = A + s * d2;
            const double *vs = Vt + s * d2;
            for (size_t b = 0; b < d2; b++) {
                As[b] += u * row[b];
                dot += row[b] * vs[b];
            }
            B[a * r + s] = dot;
        }
    }
    for (size_t s = 0; s < r; s++)
        for (size_t t = 0; t < r; t++) {
            double v = 0;
            for (size_t a = 0; a < d1; a++)
                v += U[a * r + s] * B[a * r + t];
            C[s * r + t] = v;
        }
}

double rgrad_norm2(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}

/* out = U SA + (SB - U SC) V^T  (d1 x d2), the tangent vector with factors
   SA = U^T G (r x d2), SB = G V (d1 x r), SC = U^T G V (r x r).  W: d1 x r. */
static void s_tangent_from_factors(const double *U, const double *V, size_t d1, size_t d2, size_t r, const double *SA,
                                   const double *SB, const double *SC, double *W, double *out)
{
    for (size_t a = 0; a < d1; a++)
        for (size_t s = 0; s < r; s++) {
            double v = SB[a * r + s];
            for (size_t t = 0; t < r; t++)
                v -= U[a * r + t] * SC[t * r + s];
            W[a * r + s] = v;
        }
    for (size_t a = 0; a < d1; a++)
        for (size_t b = 0; b < d2; b++) {
            double v = 0;
            for (size_t s = 0; s < r; s++)
                v += U[a * r + s] * SA[s * d2 + b] + W[a * r + s] * V[b * r + s];
            out[a * d2 + b] = v;
        }
}

int dps_rgrad_tangent_project(const double *U, const double *V, size_t d1, size_t d2, size_t r, const double *G,
                              double *out)
{
    if (!U || !V || !G || !out || r == 0 || d1 == 0 || d2 == 0)
        return DPS_EINVAL;
    double *SA = calloc(r * d2, sizeof *SA), *SB = calloc(d1 * r, sizeof *SB), *SC = calloc(r * r, sizeof *SC);
    double *W = calloc(d1 * r, sizeof *W);
    if (!SA || !SB || !SC || !W) {
        free(SA); free(SB); free(SC); free(W);
        return DPS_ENOMEM;
    }
    for (size_t a = 0; a < d1; a++)
        for (size_t b = 0; b < d2; b++) {
            double g = G[a * d2 + b];
            for (size_t s = 0; s < r; s++) {
                SA[s * d2 + b] += U[a * r + s] * g;
                SB[a * r + s] += g * V[b * r + s];
            }
        }
    for (size_t s = 0; s < r; s++)
        for (size_t t = 0; t < r; t++)
            for (size_t a = 0; a < d1; a++)
                SC[s * r + t] += U[a * r + s] * SB[a * r + t];
    s_tangent_from_factors(U, V, d1, d2, r, SA, SB, SC, W, out); /* reads G only above: aliasing is fine */
    free(SA); free(SB); free(SC); free(W);
    return DPS_OK;
}

/* The private gradient over the observations idx[0..n) (idx NULL: 0..n-1). */
static int s_gradient(const float *X, const float *y, const size_t *idx, size_t n, size_t d1, size_t d2, size_t r,
                      const double *U, const double *sv, const double *V, double clip, double sigma, dps_rng *rng,
                      double *G, uint64_t *n_clipped)
{
    size_t D = d1 * d2;
    double *Vt = malloc(r * d2 * sizeof *Vt), *A = malloc(r * d2 * sizeof *A), *B = malloc(d1 * r * sizeof *B);
    double *C = malloc(r * r * sizeof *C), *SA = calloc(r * d2, sizeof *SA), *SB = calloc(d1 * r, sizeof *SB);
    double *SC = calloc(r * r, sizeof *SC), *W = malloc(d1 * r * sizeof *W), *Z = malloc(D * sizeof *Z);
    int rc = (Vt && A && B && C && SA && SB && SC && W && Z) ? DPS_OK : DPS_ENOMEM;
    uint64_t clipped = 0;
    if (!rc) {
        for (size_t b = 0; b < d2; b++)
            for (size_t s = 0; s < r; s++)
                Vt[s * d2 + b] = V[b * r + s];
        for (size_t j = 0; j < n; j++) {
            size_t i = idx ? idx[j] : j;
            rgrad_factors(X + i * D, d1, d2, r, U, Vt, A, B, C);
            double pred = 0;
            for (size_t s = 0; s < r; s++)
                pred += sv[s] * C[s * r + s]; /* <X, U diag(s) V^T> = sum_s s_s (U^T X V)_ss */
            double res = pred - (double)y[i];
            /* ||P_T(X)||_F^2 = ||U^T X||^2 + ||X V||^2 - ||U^T X V||^2 */
            double t2 = rgrad_norm2(A, r * d2) + rgrad_norm2(B, d1 * r) - rgrad_norm2(C, r * r);
            double norm = fabs(res) * sqrt(t2 > 0 ? t2 : 0);
            double f = rgrad_clip_factor(norm, clip);
            if (f < 1)
                clipped++;
            if (f == 0 || !isfinite(res))
                continue;
            double w = res * f;
            for (size_t c = 0; c < r * d2; c++)
                SA[c] += w * A[c];
            for (size_t c = 0; c < d1 * r; c++)
                SB[c] += w * B[c];
            for (size_t c = 0; c < r * r; c++)
                SC[c] += w * C[c];
        }
        double inv = 1.0 / (double)n;
        for (size_t c = 0; c < r * d2; c++)
            SA[c] *= inv;
        for (size_t c = 0; c < d1 * r; c++)
            SB[c] *= inv;
        for (size_t c = 0; c < r * r; c++)
            SC[c] *= inv;
        s_tangent_from_factors(U, V, d1, d2, r, SA, SB, SC, W, G);
        if (sigma > 0) {
            dps_rng_gaussian_fill(rng, sigma, Z, D);
            rc = dps_rgrad_tangent_project(U, V, d1, d2, r, Z, Z);
            for (size_t c = 0; !rc && c < D; c++)
                G[c] += Z[c];
        }
    }
    if (n_clipped)
        *n_clipped = clipped;
    free(Vt); free(A); free(B); free(C); free(SA); free(SB); free(SC); free(W); free(Z);
    return rc;
}

int dps_rgrad_gradient(const float *X, const float *y, size_t n, size_t d1, size_t d2, size_t r, const double *U,
                       const double *s, const double *V, double clip, double sigma, dps_rng *rng, double *G,
                       uint64_t *n_clipped)
{
    if (!X || !y || !U || !s || !V || !G || n == 0 || r == 0 || r > d1 || r > d2 || !s_pos(clip) ||
        !(sigma >= 0) || !isfinite(sigma) || (sigma > 0 && !rng))
        return DPS_EINVAL;
    return s_gradient(X, y, NULL, n, d1, d2, r, U, s, V, clip, sigma, rng, G, n_clipped);
}

/* ------------------------------------------------------------------- fit */
int dps_rgrad_fit(const float *X, const float *y, size_t n, const dps_rgrad_config *cfg, dps_rng *rng, float *L,
                  dps_rgrad_stats *st)
{
    dps_rgrad_stats dummy;
    if (!st) {
        memset(&dummy, 0, sizeof dummy);
        st = &dummy;
    }
    double delta_target = st->delta_target > 0 ? st->delta_target : 1e-5;
    double *grad_norm = st->grad_norm;
    memset(st, 0, sizeof *st);
    st->delta_target = delta_target;
    st->grad_norm = grad_norm;
    st->reason = "";
    if (!X || !y || !cfg || !rng || !L)
        return DPS_EINVAL;
    int rc = dps_rgrad_config_check(cfg, n, NULL);
    if (rc)
        return rc;
    dps_blas_init_once();
    const dps_rgrad_config *c = cfg;
    size_t d1 = c->d1, d2 = c->d2, r = c->r, D = d1 * d2, t = dps_rgrad_groups(c), n0, nb;
    s_batches(c, n, &n0, &nb);
    st->groups = t;
    st->init_obs = n0;
    st->batch_obs = c->iters ? nb : 0;
    memset(L, 0, D * sizeof *L);

    size_t *perm = malloc(n * sizeof *perm);
    float *Bl = dps_aligned_alloc(t * r * d1, sizeof(float)), *Br = dps_aligned_alloc(t * r * d2, sizeof(float));
    float *Ub = dps_aligned_alloc(r * d1, sizeof(float)), *Vb = dps_aligned_alloc(r * d2, sizeof(float));
    double *S = malloc(r * r * sizeof *S), *Ld = malloc(D * sizeof *Ld), *G = malloc(D * sizeof *G);
    double *U = malloc(d1 * r * sizeof *U), *V = malloc(d2 * r * sizeof *V), *sv = malloc(r * sizeof *sv);
    rc = (perm && Bl && Br && Ub && Vb && S && Ld && G && U && V && sv) ? DPS_OK : DPS_ENOMEM;
    if (rc)
        goto done;

    /* The data-independent partition: a uniform permutation (Fisher-Yates). */
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)dps_rng_below(rng, i);
        size_t tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }

    /* 1. Initialization. */
    rgrad_init_bufs bufs = {Bl, Br, Ub, Vb, S};
    rc = rgrad_init(X, y, perm, n0, t, c, rng, &bufs, st);
    if (rc || st->init_failed)
        goto done;
    /* L_0 = Ub^T S Vb, then its rank-r factors. */
    for (size_t a = 0; a < d1; a++)
        for (size_t b = 0; b < d2; b++) {
            double v = 0;
            for (size_t s = 0; s < r; s++)
                for (size_t u = 0; u < r; u++)
                    v += (double)Ub[s * d1 + a] * S[s * r + u] * (double)Vb[u * d2 + b];
            Ld[a * d2 + b] = v;
        }
    rc = la_svd_top(Ld, d1, d2, r, U, sv, V);

    /* 2. Iterations. */
    st->sd_iter = c->iters ? dps_rgrad_sigma(c->clip_grad, nb, c->rho_iter) : 0;
    for (size_t l = 0; !rc && l < c->iters; l++) {
        const size_t *idx = c->streaming ? perm + n0 + l * nb : NULL;
        uint64_t clipped = 0;
        rc = s_gradient(X, y, idx, nb, d1, d2, r, U, sv, V, c->clip_grad, st->sd_iter, rng, G, &clipped);
        if (rc)
            break;
        st->nonprivate_clipped_grad += clipped;
        if (c->streaming)
            st->spent.rho = fmax(st->spent.rho, c->rho_iter);
        else
            st->spent.rho += c->rho_iter;
        if (st->grad_norm)
            st->grad_norm[l] = sqrt(rgrad_norm2(G, D));
        for (size_t a = 0; a < d1; a++)
            for (size_t b = 0; b < d2; b++) {
                double v = 0;
                for (size_t s = 0; s < r; s++)
                    v += U[a * r + s] * sv[s] * V[b * r + s];
                Ld[a * d2 + b] = v - c->eta * G[a * d2 + b];
            }
        rc = la_svd_top(Ld, d1, d2, r, U, sv, V);
    }
    if (!rc)
        for (size_t a = 0; a < d1; a++)
            for (size_t b = 0; b < d2; b++) {
                double v = 0;
                for (size_t s = 0; s < r; s++)
                    v += U[a * r + s] * sv[s] * V[b * r + s];
                L[a * d2 + b] = (float)v;
            }

done:
    st->eps = dps_zcdp_eps_total(st->spent, st->delta_target);
    free(perm); free(Bl); free(Br); free(Ub); free(Vb); free(S); free(Ld); free(G); free(U); free(V); free(sv);
    if (rc)
        memset(L, 0, D * sizeof *L);
    return rc;
}
