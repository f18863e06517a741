/* test_covariance - src/mechanisms/covariance.c: accumulation with clipping, iterative
   eigenvector sampling (orthonormal output, the exact law of the first draw
   on a rank-one C, budget split, clipped eigenvalues), the Laplace and
   Gaussian baselines' noise scales and spectral clipping, the analytic
   Gaussian sigma, and bad arguments. */
#include "check.h"
#include "dpsubspace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double s_orth_err(const float *V, size_t k, size_t d)
{
    double worst = 0;
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double s = 0;
            for (size_t j = 0; j < d; j++)
                s += (double)V[a * d + j] * V[b * d + j];
            worst = fmax(worst, fabs(s - (a == b)));
        }
    return worst;
}

/* Exact law of r = sin^2(angle to e) for u on S^{d-1} with density
   proportional to exp(kappa (u.e)^2): (u.e)^2 ~ Beta(1/2, (d-1)/2) under the
   uniform law, so r has density proportional to
   exp(-kappa r) r^((d-3)/2) (1 - r)^(-1/2) on (0, 1).  Midpoint rule on
   N cells of [0, 1] (the factor exp(-kappa r) makes the endpoint singularity
   at r = 1 negligible for kappa >= 100); returns E[r], Var[r] and the upper
   tail point t with P(r > t) = tail. */
static void s_sin2_law(double kappa, size_t d, double tail, double *mean, double *var, double *t_tail)
{
    const int N = 2000000;
    double z = 0, m1 = 0, m2 = 0;
    double *cum = malloc((N + 1) * sizeof *cum);
    cum[0] = 0;
    for (int i = 0; i < N; i++) {
        double r = (i + 0.5) / N;
        double f = exp(-kappa * r + 0.5 * ((double)d - 3) * log(r) - 0.5 * log1p(-r));
        z += f;
        m1 += f * r;
        m2 += f * r * r;
        cum[i + 1] = z;
    }
    *mean = m1 / z;
    *var = m2 / z - *mean * *mean;
    int i = N;
    while (i > 0 && (z - cum[i - 1]) / z < tail)
        i--;
    *t_tail = (double)i / N;
    free(cum);
}

static void s_random_unit(dps_rng *rng, double *e, size_t d)
{
    double s = 0;
    for (size_t j = 0; j < d; j++) {
        e[j] = dps_rng_gaussian(rng, 1);
        s += e[j] * e[j];
    }
    for (size_t j = 0; j < d; j++)
        e[j] /= sqrt(s);
}

/* Reference sigma of the analytic Gaussian mechanism's condition (test's own
   evaluation of Balle-Wang Thm 8 for sensitivity 1). */
static double s_agm_delta(double s, double eps)
{
    double a = 1 / (2 * s), c = eps * s;
    return 0.5 * erfc((c - a) / sqrt(2)) - exp(eps) * 0.5 * erfc((a + c) / sqrt(2));
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 4242);

    /* 1. Accumulation: clipping, NaN and zero rows. */
    {
        float X[4 * 2] = {3, 4, 0.6f, 0, NAN, 1, 0, 0};
        double C[4] = {1, 0, 0, 0};
        uint64_t bad = 9;
        CHECK(dps_cov_accumulate(X, 4, 2, C, &bad) == DPS_OK, "accumulate");
        /* 1 + 0.36 + 0.36, 0.48, 0.64 */
        CHECK(fabs(C[0] - 1.72) < 1e-6 && fabs(C[1] - 0.48) < 1e-6 && C[1] == C[2] && fabs(C[3] - 0.64) < 1e-6,
              "C = %g %g %g %g", C[0], C[1], C[2], C[3]);
        CHECK(bad == 1, "one non-finite row, got %llu", (unsigned long long)bad);
        CHECK(dps_cov_accumulate(NULL, 1, 2, C, NULL) == DPS_EINVAL, "NULL X");
        CHECK(dps_cov_accumulate(X, 1, 0, C, NULL) == DPS_EINVAL, "d = 0");
        CHECK(dps_cov_accumulate(X, 1, DPS_COV_MAX_D + 1, C, NULL) == DPS_ELIMIT, "d above limit");
    }

    /* 2. Analytic Gaussian sigma: delta(sigma) <= delta, and just below it
       the condition fails (bisection to a relative 1e-13, rounded up by 1e-9;
       1e-7 below it delta(sigma) > delta); it is below the
       classical sqrt(2 ln(1.25/delta))/eps where that applies (eps < 1); it
       is finite for the experiment's eps = 4, delta = 1e-16. */
    {
        double epss[] = {0.01, 0.5, 1, 4}, deltas[] = {1e-16, 1e-10, 1e-3};
        int ok = 1;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) {
                double s = dps_cov_gaussian_sigma(epss[i], deltas[j]);
                int good = isfinite(s) && s_agm_delta(s, epss[i]) <= deltas[j] &&
                           s_agm_delta(s * (1 - 1e-7), epss[i]) > deltas[j];
                if (epss[i] < 1)
                    good &= s <= sqrt(2 * log(1.25 / deltas[j])) / epss[i];
                if (!good)
                    NOTE("AGM sigma eps %g delta %g: %g", epss[i], deltas[j], s);
                ok &= good;
            }
        CHECK(ok, "analytic Gaussian sigma");
        NOTE("AGM sigma(eps=1, delta=1e-10) = %.4f, classical formula %.4f", dps_cov_gaussian_sigma(1, 1e-10),
             sqrt(2 * log(1.25e10)));
        CHECK(isnan(dps_cov_gaussian_sigma(0, 1e-5)) && isnan(dps_cov_gaussian_sigma(1, 0)) &&
                  isnan(dps_cov_gaussian_sigma(1, 1)) && isnan(dps_analytic_gaussian_sigma(-1, 1, 1e-5)),
              "AGM bad arguments");
    }

    /* 3. The first draw on C = n e e^T (e random): theta's sin^2 to e has the
       exact law of s_sin2_law with kappa = eps_1 n / 2 (the exponent
       eps_1/2 u^T C u).  R = 400 runs: the mean of sin^2 must be within 5
       standard errors of the exact mean, and every run below the 1e-5 upper
       tail point.  The paper's exponent eps_1/4 would give kappa/2, whose
       exact mean is checked to be > 10 standard errors away, so this test
       tells the constants apart. */
    {
        const size_t d = 20, n = 1000, R = 400;
        double e[20], *C = calloc(d * d, sizeof *C);
        float V[20 * 20];
        s_random_unit(rng, e, d);
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                C[i * d + j] = (double)n * e[i] * e[j];
        dps_iterative_params p = {.k = 1, .eps = 1.0, .eps_values = 0, .split = DPS_SPLIT_UNIFORM};
        double kappa = p.eps * n / 2, mean, var, t5, mean_half, var_half, t_half;
        s_sin2_law(kappa, d, 1e-5, &mean, &var, &t5);
        s_sin2_law(kappa / 2, d, 1e-5, &mean_half, &var_half, &t_half);
        double sum = 0, worst = 0;
        int ok = 1;
        for (size_t r = 0; r < R; r++) {
            ok &= dps_cov_iterative(C, n, d, &p, rng, V, NULL, NULL, NULL) == DPS_OK;
            double dt = 0;
            for (size_t j = 0; j < d; j++)
                dt += V[j] * e[j];
            double s2 = fmax(0.0, 1 - dt * dt);
            sum += s2;
            worst = fmax(worst, s2);
        }
        double se = sqrt(var / R), m = sum / R;
        NOTE("rank-one C, d=%zu n=%zu eps=1: mean sin^2 %.5f, exact %.5f (se %.5f; eps/4 would give %.5f); worst "
             "%.4f, 1e-5 tail point %.4f",
             d, n, m, mean, se, mean_half, worst, t5);
        CHECK(ok, "iterative runs");
        CHECK(fabs(m - mean) < 5 * se, "mean sin^2 %g vs exact %g (se %g)", m, mean, se);
        CHECK(fabs(mean_half - mean) > 10 * se, "test cannot tell eps/2 from eps/4");
        CHECK(worst <= t5, "a run's sin^2 %g beyond the 1e-5 tail point %g", worst, t5);
        free(C);
    }

    /* 4. Full covariance (k = d) and subspace runs: orthonormal rows, the
       budget split sums to eps (uniform: equal shares over d - 1 draws, the
       last free; adaptive: shares increasing with lambda^), eigenvalues
       clipped to [0, n], C_hat = sum lambda^_i theta_i theta_i^T. */
    {
        const size_t d = 8, n = 500;
        float *X = malloc(n * d * sizeof *X), B[2 * 8];
        dps_synth_paper(rng, n, d, 2, 10.0 * d, X, B);
        double *C = calloc(d * d, sizeof *C), *Ch = malloc(d * d * sizeof *Ch), lam[8], eps_step[8], w[8];
        float V[8 * 8];
        dps_cov_accumulate(X, n, d, C, NULL);
        for (int split = 0; split < 2; split++) {
            dps_iterative_stats st = {.eps_step = eps_step};
            dps_iterative_params p = {.k = d, .eps = 2.0, .eps_values = 1.0, .split = (dps_eps_split)split};
            CHECK(dps_cov_iterative(C, n, d, &p, rng, V, lam, Ch, &st) == DPS_OK, "k = d run");
            CHECK(s_orth_err(V, d, d) < 1e-5, "orthonormal (k = d): %g", s_orth_err(V, d, d));
            double sum = st.eps_values;
            for (size_t i = 0; i < d; i++)
                sum += eps_step[i];
            CHECK(fabs(sum - 2.0) < 1e-12 && fabs(st.eps_spent - 2.0) < 1e-12, "split sums to %g", sum);
            CHECK(eps_step[d - 1] == 0 && st.draws == d - 1, "last draw free");
            int shape = 1;
            for (size_t i = 0; i + 1 < d - 1; i++) {
                if (split == 0)
                    shape &= fabs(eps_step[i] - 1.0 / (d - 1)) < 1e-12;
                else
                    shape &= (lam[i] >= lam[i + 1]) == (eps_step[i] >= eps_step[i + 1]);
            }
            CHECK(shape, "split %d shape", split);
            int clipped = 1;
            for (size_t i = 0; i < d; i++)
                clipped &= lam[i] >= 0 && lam[i] <= n;
            CHECK(clipped, "eigenvalues in [0, n]");
            /* C_hat's eigenvalues are the lambda^ (sorted) */
            CHECK(dps_cov_topk(Ch, d, d, V, w) == DPS_OK, "topk of C_hat");
            double sl[8];
            memcpy(sl, lam, sizeof sl);
            for (size_t i = 0; i < d; i++)
                for (size_t j = i + 1; j < d; j++)
                    if (sl[j] > sl[i]) {
                        double t = sl[i];
                        sl[i] = sl[j];
                        sl[j] = t;
                    }
            double err = 0;
            for (size_t i = 0; i < d; i++)
                err = fmax(err, fabs(w[i] - sl[i]));
            CHECK(err < 1e-8 * n, "C_hat spectrum = lambda^: %g", err);
            NOTE("split %s: eps_step[0] %.4f eps_step[%zu] %.4f, proposals %llu for %zu draws (max %llu)",
                 split ? "adaptive" : "uniform", eps_step[0], d - 2, eps_step[d - 2],
                 (unsigned long long)st.proposals, st.draws, (unsigned long long)st.proposals_max);
        }
        /* Subspace only: k = 2 < d; with eps = 50, n = 500 the basis is near
           the truth (sin^2 per draw ~ (d-1)/(eps_i n) = 7/12500 in the rank-one
           law; 0.2 leaves room for the second direction's smaller gap). */
        dps_iterative_params p = {.k = 2, .eps = 50, .eps_values = 0, .split = DPS_SPLIT_UNIFORM};
        CHECK(dps_cov_iterative(C, n, d, &p, rng, V, NULL, NULL, NULL) == DPS_OK, "k = 2 run");
        CHECK(s_orth_err(V, 2, d) < 1e-5, "orthonormal (k = 2)");
        double sn = dps_subspace_sin(V, B, 2, d, NULL);
        NOTE("synthetic k=2 d=8 n=500 eps=50: sin to truth %.3f", sn);
        CHECK(sn < 0.2, "subspace near the truth: %g", sn);

        /* Clipping is visible: n = 500 and Lap(2/0.001) noise. */
        dps_iterative_params pc = {.k = d, .eps = 0.002, .eps_values = 0.001, .split = DPS_SPLIT_UNIFORM};
        CHECK(dps_cov_iterative(C, n, d, &pc, rng, V, lam, NULL, NULL) == DPS_OK, "noisy run");
        int at_edge = 0, inside = 1;
        for (size_t i = 0; i < d; i++) {
            at_edge += lam[i] == 0 || lam[i] == (double)n;
            inside &= lam[i] >= 0 && lam[i] <= n;
        }
        CHECK(inside && at_edge >= 4, "clipping: %d of 8 at an edge", at_edge);

        /* Bad arguments. */
        dps_iterative_params bad = p;
        CHECK(dps_cov_iterative(NULL, n, d, &p, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "NULL C");
        CHECK(dps_cov_iterative(C, 0, d, &p, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "n = 0");
        CHECK(dps_cov_iterative(C, n, d, &p, NULL, V, NULL, NULL, NULL) == DPS_EINVAL, "NULL rng");
        CHECK(dps_cov_iterative(C, n, d, &p, rng, NULL, NULL, NULL, NULL) == DPS_EINVAL, "NULL V");
        bad.k = 0;
        CHECK(dps_cov_iterative(C, n, d, &bad, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "k = 0");
        bad.k = d + 1;
        CHECK(dps_cov_iterative(C, n, d, &bad, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "k > d");
        bad = p;
        bad.eps = 0;
        CHECK(dps_cov_iterative(C, n, d, &bad, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "eps = 0");
        bad = p;
        bad.eps_values = p.eps;
        CHECK(dps_cov_iterative(C, n, d, &bad, rng, V, lam, NULL, NULL) == DPS_EINVAL, "eps_values = eps");
        bad = p;
        bad.split = DPS_SPLIT_ADAPTIVE;
        CHECK(dps_cov_iterative(C, n, d, &bad, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "adaptive w/o values");
        CHECK(dps_cov_iterative(C, n, d, &p, rng, V, lam, NULL, NULL) == DPS_EINVAL, "lambda w/o values");
        CHECK(dps_cov_iterative(C, n, d, &p, rng, V, NULL, Ch, NULL) == DPS_EINVAL, "C_hat w/o values");
        bad = p;
        bad.split = (dps_eps_split)7;
        CHECK(dps_cov_iterative(C, n, d, &bad, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "bad split");
        C[3] = NAN;
        CHECK(dps_cov_iterative(C, n, d, &p, rng, V, NULL, NULL, NULL) == DPS_EINVAL, "NaN in C");
        CHECK(dps_cov_iterative(C, n, DPS_COV_MAX_D + 1, &p, rng, V, NULL, NULL, NULL) == DPS_ELIMIT, "limit");
        free(X);
        free(C);
        free(Ch);
    }

    /* 5. Baselines' noise scales.  C = (n/2) I with n = 1e9: the noise (sd <~
       100) never reaches the clipping edges 0 and n, so C_hat - C is the
       noise itself.  3000 runs at d = 6: 18000 off-diagonal and 6000
       diagonal values per mechanism.  Laplace(b): variance 2 b^2, kurtosis 6,
       so the sample variance's relative sd is sqrt(5/N); Gaussian: sqrt(2/N).
       Each must be within 5 relative sds of the stated variance. */
    {
        const size_t d = 6, R = 3000;
        const size_t n = 1000000000;
        double C[36] = {0}, Ch[36];
        for (size_t i = 0; i < d; i++)
            C[i * d + i] = n / 2.0;
        double eps = 1.0, delta = 1e-6;
        double b = dps_cov_laplace_scale(d, eps), s = dps_cov_gaussian_sigma(eps, delta);
        CHECK(fabs(b - 7.0) < 1e-12, "Laplace scale (d+1)/eps = %g", b);
        for (int mech = 0; mech < 2; mech++) {
            double off = 0, diag = 0;
            int ok = 1;
            for (size_t r = 0; r < R; r++) {
                ok &= (mech == 0 ? dps_cov_laplace(C, n, d, eps, rng, Ch)
                                 : dps_cov_gaussian(C, n, d, eps, delta, rng, Ch)) == DPS_OK;
                for (size_t i = 0; i < d; i++)
                    for (size_t j = i; j < d; j++) {
                        double e = Ch[i * d + j] - C[i * d + j];
                        if (i == j)
                            diag += e * e;
                        else
                            off += e * e;
                    }
            }
            CHECK(ok, "baseline runs");
            double noff = R * d * (d - 1) / 2.0, ndiag = (double)R * d;
            double v_off = off / noff, v_diag = diag / ndiag;
            double want_off = mech == 0 ? 2 * b * b : s * s, want_diag = mech == 0 ? 2 * b * b : 2 * s * s;
            double k_rel = mech == 0 ? 5.0 : 2.0;
            NOTE("%s: off-diagonal variance %.3f (stated %.3f), diagonal %.3f (stated %.3f)",
                 mech ? "Gaussian" : "Laplace", v_off, want_off, v_diag, want_diag);
            CHECK(fabs(v_off / want_off - 1) < 5 * sqrt(k_rel / noff), "off-diagonal variance %g vs %g", v_off,
                  want_off);
            CHECK(fabs(v_diag / want_diag - 1) < 5 * sqrt(k_rel / ndiag), "diagonal variance %g vs %g", v_diag,
                  want_diag);
        }
        /* PSD and clipped: C = 0 with n = 3 and heavy noise; the output's
           eigenvalues are in [0, n] (to rounding). */
        double Z0[36] = {0}, w[6];
        float V[36];
        for (int mech = 0; mech < 2; mech++) {
            CHECK((mech == 0 ? dps_cov_laplace(Z0, 3, d, 0.1, rng, Ch) : dps_cov_gaussian(Z0, 3, d, 0.1, 1e-5, rng, Ch)) ==
                      DPS_OK,
                  "baseline on C = 0");
            CHECK(dps_cov_topk(Ch, d, d, V, w) == DPS_OK, "spectrum");
            CHECK(w[0] <= 3 + 1e-9 && w[d - 1] >= -1e-9 && w[0] > 0, "eigenvalues %g .. %g outside [0, 3]", w[d - 1],
                  w[0]);
        }
        CHECK(dps_cov_laplace(C, n, d, 0, rng, Ch) == DPS_EINVAL, "Laplace eps = 0");
        CHECK(dps_cov_laplace(C, 0, d, 1, rng, Ch) == DPS_EINVAL, "Laplace n = 0");
        CHECK(dps_cov_laplace(C, n, d, 1, NULL, Ch) == DPS_EINVAL, "Laplace NULL rng");
        CHECK(dps_cov_gaussian(C, n, d, 1, 0, rng, Ch) == DPS_EINVAL, "Gaussian delta = 0");
        CHECK(dps_cov_gaussian(C, n, d, 1, 1, rng, Ch) == DPS_EINVAL, "Gaussian delta = 1");
        CHECK(dps_cov_gaussian(C, n, DPS_COV_MAX_D + 1, 1, 1e-5, rng, Ch) == DPS_ELIMIT, "Gaussian limit");
        CHECK(dps_cov_clip_spectrum(Ch, d, -1, 1) == DPS_EINVAL, "clip with lo < 0");
        CHECK(dps_cov_topk(Ch, d, 0, V, NULL) == DPS_EINVAL, "topk k = 0");
    }

    dps_rng_destroy(&rng);
    return check_summary();
}
