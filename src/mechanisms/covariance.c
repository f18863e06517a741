/* covariance.c - private covariance and subspace from C = sum x x^T (Amin,
   Dick, Kulesza, Munoz Medina, Vassilvitskii 2019): iterative eigenvector
   sampling (pure eps-DP) and the Laplace / Gaussian baselines.

   Setting for every proof below: rows have L2 norm <= 1 (dps_cov_accumulate
   clips them), n is public, and neighbouring data sets differ by REPLACING
   one row x by y, so C' = C - x x^T + y y^T and D = C' - C = y y^T - x x^T. */
#include "cov_internal.h"
#include "internal.h"
#include "linalg.h"
#include "rows.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ accumulation */
int dps_cov_accumulate(const float *X, size_t n, size_t d, double *C, uint64_t *nonfinite)
{
    if (nonfinite)
        *nonfinite = 0;
    if ((!X && n) || !C || d == 0)
        return DPS_EINVAL;
    if (d > DPS_COV_MAX_D)
        return DPS_ELIMIT;
    return rows_gram_clipped(X, n, d, C, nonfinite);
}

/* -------------------------------------------------- spectrum post-processing */
/* All eigenpairs of a copy of S: w descending, Z (eigenvector i at Z + i*d). */
static int s_eig(const double *S, size_t d, size_t kk, double *w, double *Z)
{
    double *A = malloc(d * d * sizeof *A);
    if (!A)
        return DPS_ENOMEM;
    memcpy(A, S, d * d * sizeof *A);
    int rc = la_syevr_top(A, d, kk, w, Z);
    free(A);
    return rc;
}

static int s_check_matrix(const double *S, size_t d)
{
    if (!S || d == 0)
        return DPS_EINVAL;
    if (d > DPS_COV_MAX_D)
        return DPS_ELIMIT;
    return DPS_OK;
}

int dps_cov_clip_spectrum(double *S, size_t d, double lo, double hi)
{
    int rc = s_check_matrix(S, d);
    if (rc)
        return rc;
    if (!(lo >= 0 && lo <= hi))
        return DPS_EINVAL;
    for (size_t i = 0; i < d * d; i++)
        if (!isfinite(S[i]))
            return DPS_EINVAL;
    double *w = malloc(d * sizeof *w), *Z = malloc(d * d * sizeof *Z);
    rc = (w && Z) ? s_eig(S, d, d, w, Z) : DPS_ENOMEM;
    if (!rc) {
        /* S = sum_i c_i z_i z_i^T = B^T B for the rows sqrt(c_i) z_i, c_i =
           clip(w_i, lo, hi) >= 0. */
        for (size_t i = 0; i < d; i++) {
            double f = sqrt(fmin(hi, fmax(lo, w[i])));
            for (size_t j = 0; j < d; j++)
                Z[i * d + j] *= f;
        }
        la_syrk_rows_double(Z, d, d, S);
        for (size_t i = 0; i < d; i++)
            for (size_t j = i + 1; j < d; j++)
                S[j * d + i] = S[i * d + j];
    }
    free(w);
    free(Z);
    return rc;
}

int dps_cov_topk(const double *S, size_t d, size_t k, float *V, double *w)
{
    int rc = s_check_matrix(S, d);
    if (rc)
        return rc;
    if (!V || k == 0 || k > d)
        return DPS_EINVAL;
    for (size_t i = 0; i < d * d; i++)
        if (!isfinite(S[i]))
            return DPS_EINVAL;
    double *wl = malloc(k * sizeof *wl), *Z = malloc(k * d * sizeof *Z);
    rc = (wl && Z) ? s_eig(S, d, k, wl, Z) : DPS_ENOMEM;
    if (!rc) {
        for (size_t i = 0; i < k * d; i++)
            V[i] = (float)Z[i];
        if (w)
            memcpy(w, wl, k * sizeof *w);
    }
    free(wl);
    free(Z);
    return rc;
}

/* ------------------------------------------------- analytic Gaussian sigma */
/* Phi(x), standard normal CDF, accurate in both tails. */
static double s_phi(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

/* Balle-Wang 2018, Theorem 8: N(0, s^2 I) on a query of l2 sensitivity D is
   (eps, delta)-DP iff delta(s) = Phi(D/(2s) - eps s/D)
   - e^eps Phi(-D/(2s) - eps s/D) <= delta; delta(s) decreases in s. */
static double s_agm_delta(double s, double sens, double eps)
{
    double a = sens / (2 * s), c = eps * s / sens;
    double t2 = s_phi(-a - c);
    return s_phi(a - c) - (t2 > 0 ? exp(eps + log(t2)) : 0.0);
}

double dps_analytic_gaussian_sigma(double sens, double eps, double delta)
{
    if (!(sens > 0) || !(eps > 0) || !(delta > 0 && delta < 1) || !isfinite(sens) || !isfinite(eps))
        return NAN;
    double lo = sens * 1e-6, hi = sens;
    while (s_agm_delta(hi, sens, eps) > delta) {
        lo = hi;
        hi *= 2;
        if (!isfinite(hi))
            return NAN;
    }
    while (s_agm_delta(lo, sens, eps) <= delta && lo > 1e-300)
        lo /= 2; /* keep the invariant delta(lo) > delta */
    for (int it = 0; it < 200 && hi - lo > 1e-13 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (s_agm_delta(mid, sens, eps) <= delta)
            hi = mid;
        else
            lo = mid;
    }
    /* delta(hi) <= delta as evaluated; the two Phi terms nearly cancel at
       small eps (relative rounding ~1e-11 in delta), so step up by 1e-9
       relative, which lowers delta(s) by far more than that rounding. */
    return hi * (1 + 1e-9);
}

double dps_cov_gaussian_sigma(double eps, double delta)
{
    return dps_analytic_gaussian_sigma(1.0, eps, delta);
}

double dps_cov_laplace_scale(size_t d, double eps)
{
    return ((double)d + 1.0) / eps;
}

/* ---------------------------------------------------- the two baselines */
static int s_baseline_args(const double *C, size_t n, size_t d, double eps, dps_rng *rng, const double *C_hat)
{
    if (!C || !C_hat || !rng || n == 0 || d == 0 || !(eps > 0) || !isfinite(eps))
        return DPS_EINVAL;
    if (d > DPS_COV_MAX_D)
        return DPS_ELIMIT;
    for (size_t i = 0; i < d * d; i++)
        if (!isfinite(C[i]))
            return DPS_EINVAL;
    return DPS_OK;
}

/* LAPLACE.  The released upper triangle (diagonal included) of C changes by
   the upper triangle of D, whose l1 norm is
     sum_i |y_i^2 - x_i^2| + sum_{i<j} |y_i y_j - x_i x_j|
       <= sum_{i<=j} |x_i x_j| + sum_{i<=j} |y_i y_j|,
   and sum_{i<=j} |x_i x_j| = ((sum_i |x_i|)^2 + sum_i x_i^2) / 2
       <= (d ||x||^2 + ||x||^2) / 2 <= (d + 1)/2 (Cauchy-Schwarz).
   So the l1 sensitivity is <= d + 1 and iid Laplace((d + 1)/eps) on the
   upper triangle is eps-DP; mirroring it and clipping the spectrum to
   [0, n] are post-processing.  (Amin et al. sec. 4 add Lap(2d/eps) to every
   entry; the d + 1 here is the tighter bound for the symmetric release.) */
int dps_cov_laplace(const double *C, size_t n, size_t d, double eps, dps_rng *rng, double *C_hat)
{
    int rc = s_baseline_args(C, n, d, eps, rng, C_hat);
    if (rc)
        return rc;
    double b = dps_cov_laplace_scale(d, eps);
    if (C_hat != C)
        memcpy(C_hat, C, d * d * sizeof *C_hat);
    for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++) {
            C_hat[i * d + j] = 0.5 * (C_hat[i * d + j] + C_hat[j * d + i]) + dps_rng_laplace(rng, b);
            C_hat[j * d + i] = C_hat[i * d + j];
        }
    return dps_cov_clip_spectrum(C_hat, d, 0.0, (double)n);
}

/* GAUSSIAN.  The release is the vector r = (C_ii + N(0, 2 s^2), C_ij +
   N(0, s^2) for i < j); dividing coordinates by (sqrt 2 s, s) it is the query
   f = (C_ii / sqrt 2, C_ij) plus N(0, s^2 I).  Its l2 sensitivity:
     ||f(C') - f(C)||^2 = sum_i D_ii^2 / 2 + sum_{i<j} D_ij^2 = ||D||_F^2 / 2,
     ||D||_F^2 = ||x||^4 + ||y||^4 - 2 (x.y)^2 <= 2,
   so it is <= 1 and s = dps_analytic_gaussian_sigma(1, eps, delta) gives
   (eps, delta)-DP for every eps (the analytic mechanism is exact, unlike the
   classical sqrt(2 ln(1.25/delta))/eps which needs eps < 1).  Mirroring and
   the spectral clipping are post-processing.  Iid N(0, s^2) on the whole
   upper triangle would count the diagonal once: its sensitivity is then
   sqrt(sum D_ii^2 + sum_{i<j} D_ij^2), up to sqrt 2 (x = e1, y = e2), and
   would need s(sqrt 2) instead (the same point as Analyze Gauss in
   analyze_gauss.c). */
int dps_cov_gaussian(const double *C, size_t n, size_t d, double eps, double delta, dps_rng *rng, double *C_hat)
{
    int rc = s_baseline_args(C, n, d, eps, rng, C_hat);
    if (rc)
        return rc;
    double s = dps_cov_gaussian_sigma(eps, delta);
    if (!isfinite(s))
        return DPS_EINVAL;
    if (C_hat != C)
        memcpy(C_hat, C, d * d * sizeof *C_hat);
    for (size_t i = 0; i < d; i++) {
        C_hat[i * d + i] += dps_rng_gaussian(rng, sqrt(2.0) * s);
        for (size_t j = i + 1; j < d; j++) {
            C_hat[i * d + j] = 0.5 * (C_hat[i * d + j] + C_hat[j * d + i]) + dps_rng_gaussian(rng, s);
            C_hat[j * d + i] = C_hat[i * d + j];
        }
    }
    return dps_cov_clip_spectrum(C_hat, d, 0.0, (double)n);
}

/* ------------------------------------------- iterative eigenvector sampling */
/* ITERATIVE EIGENVECTOR SAMPLING (Amin et al. Algorithm 1, DESIGN 3.6).
   1. lambda^_i = lambda_i(C) + Lap(2/eps_values), i = 1..k, clipped to [0, n].
   2. For i = 1..k, with P_i (q x d, q = d - i + 1, orthonormal rows spanning
      the complement of theta_1..theta_{i-1}) and C_i = P_i C P_i^T: draw u on
      S^{q-1} with density proportional to exp(eps_i/2 u^T C_i u), i.e. the
      Bingham density exp(-u^T A u) with A = (eps_i/2)(mu_max I - C_i), and
      output theta_i = P_i^T u.  P_{i+1} is rows 2..q of H P_i for the
      Householder reflection H with H u = -+e_1 (its other rows are orthogonal
      to u), so C_{i+1} = (H C_i H) without its first row and column.
   3. C_hat = sum_i lambda^_i theta_i theta_i^T.

   Privacy (replace-one, ||x||, ||y|| <= 1): eps_values + sum_i eps_i = eps.
   (a) Eigenvalues.  C - x x^T is a rank-one downdate: by interlacing every
       eigenvalue moves down and the moves add up to tr(x x^T) = ||x||^2 <= 1;
       adding y y^T moves every eigenvalue up by a total <= 1.  So the vector
       of eigenvalues (and any k of them) has l1 sensitivity <= 2 (also
       Lidskii), and Lap(2/eps_values) per value is eps_values-DP.  Clipping
       to [0, n] (n public) is post-processing.
   (b) Eigenvector i.  P_i is a function of the earlier outputs only.  The
       score u^T C_i u = v^T C v with v = P_i^T u a unit vector changes by
       (v.y)^2 - (v.x)^2, in [-1, 1]: sensitivity 1.  The density ratio at any
       u is <= e^{eps_i/2} and the normalising constants' ratio is
       E[exp(eps_i/2 (u^T C'_i u - u^T C_i u))] <= e^{eps_i/2}: eps_i-DP.
       DESIGN 3.6 and the paper write exp(eps_i/4 u^T C u); that is the
       exponential mechanism exp(eps g / (2 Delta)) with Delta = 2, also
       private but it spends only eps_i/2 of the stated eps_i.  The exponent
       here is eps_i/2 (Delta = 1 under replace-one, as derived), so the run
       gives exactly the eps it is charged.  The Bingham sampler is exact
       (bingham.c), so the output has exactly this density.
   (c) The adaptive split chooses eps_i from lambda^ (already released) and
       always sums to eps - eps_values: adaptive composition of pure DP, eps.
   (d) When k = d the last draw is on S^0 = {+-1}, where the density is
       uniform whatever the data: it costs nothing, so the budget is split over
       d - 1 draws (Algorithm 1 charges eps_d for it).
   Total: eps-DP. */
static int s_iterative_args(const double *C, size_t n, size_t d, const dps_iterative_params *p, dps_rng *rng,
                            const float *V, const double *lambda, const double *C_hat)
{
    if (!C || !p || !rng || !V || n == 0 || d == 0)
        return DPS_EINVAL;
    if (d > DPS_COV_MAX_D)
        return DPS_ELIMIT;
    if (p->k == 0 || p->k > d || !(p->eps > 0) || !isfinite(p->eps))
        return DPS_EINVAL;
    if (!(p->eps_values >= 0 && p->eps_values < p->eps))
        return DPS_EINVAL;
    if (p->split != DPS_SPLIT_UNIFORM && p->split != DPS_SPLIT_ADAPTIVE)
        return DPS_EINVAL;
    if (p->eps_values == 0 && (p->split == DPS_SPLIT_ADAPTIVE || lambda || C_hat))
        return DPS_EINVAL;
    for (size_t i = 0; i < d * d; i++)
        if (!isfinite(C[i]))
            return DPS_EINVAL;
    return DPS_OK;
}

/* S (q x q) <- (H S H) minus its first row and column, H = I - 2 v v^T; out
   is (q-1) x (q-1).  w: q doubles. */
static void s_deflate(const double *S, size_t q, const double *v, double *out, double *w)
{
    double c = 0;
    for (size_t r = 0; r < q; r++) {
        double s = 0;
        for (size_t j = 0; j < q; j++)
            s += S[r * q + j] * v[j];
        w[r] = s;
        c += v[r] * s;
    }
    for (size_t r = 1; r < q; r++)
        for (size_t j = 1; j < q; j++)
            out[(r - 1) * (q - 1) + (j - 1)] =
                S[r * q + j] - 2 * v[r] * w[j] - 2 * w[r] * v[j] + 4 * c * v[r] * v[j];
}

int dps_cov_iterative(const double *C, size_t n, size_t d, const dps_iterative_params *p, dps_rng *rng,
                      float *V, double *lambda, double *C_hat, dps_iterative_stats *st)
{
    int rc = s_iterative_args(C, n, d, p, rng, V, lambda, C_hat);
    if (rc)
        return rc;
    size_t k = p->k;
    size_t draws = k == d ? d - 1 : k;
    double eps_vec = p->eps - p->eps_values;
    double *S = malloc(d * d * sizeof *S), *S2 = malloc(d * d * sizeof *S2), *P = malloc(d * d * sizeof *P);
    double *Z = malloc(d * d * sizeof *Z), *mu = malloc(d * sizeof *mu), *a = malloc(d * sizeof *a);
    double *u = malloc(d * sizeof *u), *work = malloc(d * sizeof *work), *pv = malloc(d * sizeof *pv);
    double *theta = malloc(k * d * sizeof *theta), *lam = calloc(k, sizeof *lam), *eps_i = calloc(k, sizeof *eps_i);
    if (!S || !S2 || !P || !Z || !mu || !a || !u || !work || !pv || !theta || !lam || !eps_i) {
        rc = DPS_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            S[i * d + j] = 0.5 * (C[i * d + j] + C[j * d + i]);

    /* (a) the eigenvalues */
    if (p->eps_values > 0) {
        rc = s_eig(S, d, k, lam, Z);
        if (rc)
            goto out;
        for (size_t i = 0; i < k; i++)
            lam[i] = fmin((double)n, fmax(0.0, lam[i] + dps_rng_laplace(rng, 2.0 / p->eps_values)));
    }
    /* (c) the split */
    if (p->split == DPS_SPLIT_ADAPTIVE) {
        double tau = (2.0 / p->eps_values) * log(2.0 * (double)d / DPS_COV_ADAPTIVE_BETA), tot = 0;
        for (size_t i = 0; i < draws; i++)
            tot += sqrt(lam[i] + tau);
        for (size_t i = 0; i < draws; i++)
            eps_i[i] = eps_vec * sqrt(lam[i] + tau) / tot;
    } else {
        for (size_t i = 0; i < draws; i++)
            eps_i[i] = eps_vec / (double)draws;
    }

    /* (b) the eigenvectors */
    for (size_t r = 0; r < d; r++)
        for (size_t c = 0; c < d; c++)
            P[r * d + c] = r == c;
    uint64_t props = 0, props_max = 0;
    for (size_t i = 0; i < k; i++) {
        size_t q = d - i;
        uint64_t np = 1;
        if (q == 1) {
            u[0] = (dps_rng_u64(rng) & 1) ? 1.0 : -1.0; /* (d): data-independent */
        } else {
            rc = s_eig(S, q, q, mu, Z);
            if (rc)
                goto out;
            for (size_t j = 0; j < q; j++)
                a[j] = 0.5 * eps_i[i] * (mu[0] - mu[j]); /* >= 0, a[0] = 0 */
            rc = bingham_draw_eig(a, Z, q, rng, BINGHAM_CORRECT, u, work, &np);
            if (rc)
                goto out;
        }
        props += np;
        props_max = DPS_MAX(props_max, np);
        /* theta_i = P_i^T u */
        double *th = theta + i * d;
        memset(th, 0, d * sizeof *th);
        for (size_t r = 0; r < q; r++)
            for (size_t c = 0; c < d; c++)
                th[c] += u[r] * P[r * d + c];
        double nrm = 0;
        for (size_t c = 0; c < d; c++)
            nrm += th[c] * th[c];
        nrm = sqrt(nrm);
        for (size_t c = 0; c < d; c++) {
            th[c] /= nrm;
            V[i * d + c] = (float)th[c];
        }
        if (q == 1)
            break;
        /* Householder v with H u = -sign(u_0) e_1 */
        double sg = u[0] >= 0 ? 1.0 : -1.0, vn = 0;
        for (size_t j = 0; j < q; j++)
            a[j] = u[j];
        a[0] += sg;
        for (size_t j = 0; j < q; j++)
            vn += a[j] * a[j];
        vn = sqrt(vn);
        for (size_t j = 0; j < q; j++)
            a[j] /= vn;
        /* P <- rows 2..q of H P */
        memset(pv, 0, d * sizeof *pv);
        for (size_t r = 0; r < q; r++)
            for (size_t c = 0; c < d; c++)
                pv[c] += a[r] * P[r * d + c];
        for (size_t r = 1; r < q; r++)
            for (size_t c = 0; c < d; c++)
                P[(r - 1) * d + c] = P[r * d + c] - 2 * a[r] * pv[c];
        s_deflate(S, q, a, S2, work);
        memcpy(S, S2, (q - 1) * (q - 1) * sizeof *S);
    }

    if (lambda)
        memcpy(lambda, lam, k * sizeof *lambda);
    if (C_hat) {
        for (size_t i = 0; i < k; i++) {
            double f = sqrt(lam[i]);
            for (size_t c = 0; c < d; c++)
                theta[i * d + c] *= f;
        }
        la_syrk_rows_double(theta, k, d, C_hat);
        for (size_t i = 0; i < d; i++)
            for (size_t j = i + 1; j < d; j++)
                C_hat[j * d + i] = C_hat[i * d + j];
    }
    if (st) {
        double sum = 0;
        for (size_t i = 0; i < k; i++)
            sum += eps_i[i];
        if (st->eps_step)
            memcpy(st->eps_step, eps_i, k * sizeof *eps_i);
        st->eps_values = p->eps_values;
        st->eps_spent = p->eps_values + sum;
        st->proposals = props;
        st->proposals_max = props_max;
        st->draws = draws;
    }
out:
    free(S); free(S2); free(P); free(Z); free(mu); free(a);
    free(u); free(work); free(pv); free(theta); free(lam); free(eps_i);
    return rc;
}
