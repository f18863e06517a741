/* test_rgrad - DP low-rank trace regression (rgrad.c, trace_synth.c): the
   generator's rank and scale, the tangent-space projection, clipping, the
   noise scale of the private gradient, accuracy on an easy instance, the
   privacy bookkeeping of batch and streaming mode, bad arguments, and the
   init's FAIL branch. */
#include "check.h"
#include "dpsubspace.h"
#include "linalg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Random U (d1 x r), V (d2 x r) with orthonormal columns and s (r): the top-r
   SVD of a Gaussian d1 x d2 matrix. */
static void s_random_point(dps_rng *rng, size_t d1, size_t d2, size_t r, double *U, double *s, double *V)
{
    double *A = malloc(d1 * d2 * sizeof *A);
    dps_rng_gaussian_fill(rng, 1.0, A, d1 * d2);
    la_svd_top(A, d1, d2, r, U, s, V);
    free(A);
}

static double s_fro_diff(const float *A, const float *B, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += ((double)A[i] - B[i]) * ((double)A[i] - B[i]);
    return sqrt(s);
}

static double s_fro(const double *A, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += A[i] * A[i];
    return sqrt(s);
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 2024);

    /* 1. Generator: rank r, ||M||_F = 1, condition number 2, and
       Var(y) = ||M||_F^2 + noise^2.  The sample variance of n Gaussians has sd
       sigma^2 sqrt(2/(n-1)): 5 sd is the bound. */
    {
        size_t n = 4000, d1 = 12, d2 = 9, r = 3;
        double noise = 0.5;
        float *X = malloc(n * d1 * d2 * sizeof *X), *y = malloc(n * sizeof *y), *M = malloc(d1 * d2 * sizeof *M);
        CHECK(dps_trace_synth(rng, n, d1, d2, r, noise, X, y, M) == DPS_OK, "synth");
        double *Md = malloc(d1 * d2 * sizeof *Md), U[12 * 4], s[4], V[9 * 4];
        for (size_t e = 0; e < d1 * d2; e++)
            Md[e] = M[e];
        la_svd_top(Md, d1, d2, r + 1, U, s, V);
        double f = sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
        CHECK(fabs(f - 1) < 1e-5, "||M||_F = %g", f);
        CHECK(s[3] < 1e-5, "rank r: s_{r+1} = %g", s[3]);
        CHECK(fabs(s[0] / s[2] - 2) < 1e-4, "condition number %g", s[0] / s[2]);
        double m1 = 0, m2 = 0, e2 = 0;
        for (size_t i = 0; i < n; i++) {
            m1 += y[i];
            m2 += (double)y[i] * y[i];
            double v = 0;
            for (size_t e = 0; e < d1 * d2; e++)
                v += (double)X[i * d1 * d2 + e] * M[e];
            e2 += (y[i] - v) * (y[i] - v);
        }
        double var = m2 / n - (m1 / n) * (m1 / n), want = 1 + noise * noise;
        CHECK(fabs(var - want) < 5 * want * sqrt(2.0 / (n - 1)), "Var(y) %g vs %g", var, want);
        CHECK(fabs(e2 / n - noise * noise) < 5 * noise * noise * sqrt(2.0 / n), "noise var %g", e2 / n);
        NOTE("generator: ||M||_F %.6f, s_r+1 %.2g, Var(y) %.4f (want %.4f)", f, s[3], var, want);
        CHECK(dps_trace_synth(rng, n, d1, d2, 0, noise, X, y, M) == DPS_EINVAL, "r = 0");
        CHECK(dps_trace_synth(rng, n, d1, d2, 10, noise, X, y, M) == DPS_EINVAL, "r > min(d1, d2)");
        CHECK(dps_trace_synth(NULL, n, d1, d2, r, noise, X, y, M) == DPS_EINVAL, "no rng");
        CHECK(dps_trace_synth(rng, n, d1, d2, r, -1, X, y, M) == DPS_EINVAL, "negative noise");
        free(X); free(y); free(M); free(Md);
    }

    /* 2. The tangent projection is an orthogonal projection: idempotent,
       G - P(G) orthogonal to P(G), tangent vectors U A + B V^T unchanged. */
    {
        size_t d1 = 12, d2 = 9, r = 2, D = d1 * d2;
        double U[24], s[2], V[18], G[108], P[108], PP[108], T[108], PT[108];
        s_random_point(rng, d1, d2, r, U, s, V);
        dps_rng_gaussian_fill(rng, 1.0, G, D);
        CHECK(dps_rgrad_tangent_project(U, V, d1, d2, r, G, P) == DPS_OK, "project");
        dps_rgrad_tangent_project(U, V, d1, d2, r, P, PP);
        double idem = 0, ip = 0;
        for (size_t e = 0; e < D; e++) {
            idem = fmax(idem, fabs(PP[e] - P[e]));
            ip += (G[e] - P[e]) * P[e];
        }
        CHECK(idem < 1e-12, "idempotent: %g", idem);
        CHECK(fabs(ip) < 1e-12 * D, "orthogonal residual: %g", ip);
        /* ||P(G)||^2 for Gaussian G is chi^2 with r(d1+d2-r) = 38 dof: a sanity
           range (mean 38, sd 8.7; 0.5x..2x is > 2 sd either side). */
        double pn2 = s_fro(P, D) * s_fro(P, D);
        CHECK(pn2 > 19 && pn2 < 76, "||P G||^2 = %g vs dof 38", pn2);
        double Acoef[18], Bcoef[24];
        dps_rng_gaussian_fill(rng, 1.0, Acoef, r * d2);
        dps_rng_gaussian_fill(rng, 1.0, Bcoef, d1 * r);
        for (size_t a = 0; a < d1; a++)
            for (size_t b = 0; b < d2; b++) {
                double v = 0;
                for (size_t k = 0; k < r; k++)
                    v += U[a * r + k] * Acoef[k * d2 + b] + Bcoef[a * r + k] * V[b * r + k];
                T[a * d2 + b] = v;
            }
        dps_rgrad_tangent_project(U, V, d1, d2, r, T, PT);
        double dev = 0;
        for (size_t e = 0; e < D; e++)
            dev = fmax(dev, fabs(PT[e] - T[e]));
        CHECK(dev < 1e-12, "tangent vector unchanged: %g", dev);
        /* In place (out == G) gives the same. */
        memcpy(PP, G, sizeof G);
        dps_rgrad_tangent_project(U, V, d1, d2, r, PP, PP);
        CHECK(memcmp(PP, P, sizeof P) == 0, "aliasing");
        CHECK(dps_rgrad_tangent_project(NULL, V, d1, d2, r, G, P) == DPS_EINVAL, "NULL U");
        CHECK(dps_rgrad_tangent_project(U, V, d1, d2, 0, G, P) == DPS_EINVAL, "r = 0");
    }

    /* 3. Clipping: with sigma = 0 the averaged gradient is a mean of vectors of
       norm <= C, so its norm is <= C; one huge residual is clipped to exactly
       C; a non-finite observation contributes zero. */
    {
        size_t d1 = 10, d2 = 8, r = 2, D = d1 * d2, n = 50;
        double U[20], s[2], V[16], G[80], G1[80];
        s_random_point(rng, d1, d2, r, U, s, V);
        float *X = malloc(n * D * sizeof *X), *y = malloc(n * sizeof *y);
        dps_rng_gaussian_fill_f(rng, 1.0, X, n * D);
        for (size_t i = 0; i < n; i++)
            y[i] = (float)dps_rng_gaussian(rng, 1000.0);
        double C = 2.5;
        uint64_t clipped = 0;
        CHECK(dps_rgrad_gradient(X, y, 1, d1, d2, r, U, s, V, C, 0, rng, G1, &clipped) == DPS_OK, "one obs");
        CHECK(fabs(s_fro(G1, D) - C) < 1e-9 * C && clipped == 1, "one clipped to C: %g, %llu", s_fro(G1, D),
              (unsigned long long)clipped);
        CHECK(dps_rgrad_gradient(X, y, n, d1, d2, r, U, s, V, C, 0, rng, G, &clipped) == DPS_OK, "n obs");
        CHECK(s_fro(G, D) <= C * (1 + 1e-12), "mean norm %g <= C", s_fro(G, D));
        CHECK(clipped == n, "all %zu clipped: %llu", n, (unsigned long long)clipped);
        NOTE("clipping: ||G||_F %.4f <= C %.1f over %zu huge-residual observations", s_fro(G, D), C, n);
        /* obs 1 = NaN: the mean of two is half of obs 0's clipped gradient. */
        X[D] = NAN;
        dps_rgrad_gradient(X, y, 2, d1, d2, r, U, s, V, C, 0, rng, G, NULL);
        double dev = 0;
        for (size_t e = 0; e < D; e++)
            dev = fmax(dev, fabs(G[e] - 0.5 * G1[e]));
        CHECK(dev < 1e-12, "NaN observation contributes zero: %g", dev);
        CHECK(dps_rgrad_gradient(X, y, 0, d1, d2, r, U, s, V, C, 0, rng, G, NULL) == DPS_EINVAL, "n = 0");
        CHECK(dps_rgrad_gradient(X, y, n, d1, d2, r, U, s, V, 0, 0, rng, G, NULL) == DPS_EINVAL, "clip 0");
        CHECK(dps_rgrad_gradient(X, y, n, d1, d2, r, U, s, V, C, -1, rng, G, NULL) == DPS_EINVAL, "sigma < 0");
        CHECK(dps_rgrad_gradient(X, y, n, d1, d2, r, U, s, V, C, 1, NULL, G, NULL) == DPS_EINVAL, "no rng");
        free(X); free(y);
    }

    /* 4. Noise scale: on zero observations (X = 0: every contribution is zero)
       G = P_T(Z) is isotropic N(0, sigma^2) on the r(d1+d2-r)-dim tangent
       space, so sum over R draws of ||G||^2/sigma^2 is chi^2 with R*dimT dof:
       ratio = that / (R dimT) has mean 1 and sd sqrt(2/(R dimT)); bound 5 sd.
       Every draw lies in the tangent space.  And sigma = (2C/n)/sqrt(2 rho). */
    {
        size_t d1 = 10, d2 = 8, r = 2, D = d1 * d2, n = 4, R = 300;
        double dimT = (double)(r * (d1 + d2 - r));
        double U[20], s[2], V[16], G[80], PG[80];
        s_random_point(rng, d1, d2, r, U, s, V);
        float *X = calloc(n * D, sizeof *X), y[4] = {1, -2, 3, 0.5f};
        double sigma = dps_rgrad_sigma(1.5, 1000, 0.5);
        CHECK(fabs(sigma - 3.0 / 1000) < 1e-15, "sigma formula %g", sigma);
        double sum = 0, off = 0;
        for (size_t k = 0; k < R; k++) {
            dps_rgrad_gradient(X, y, n, d1, d2, r, U, s, V, 1.0, sigma, rng, G, NULL);
            sum += s_fro(G, D) * s_fro(G, D) / (sigma * sigma);
            dps_rgrad_tangent_project(U, V, d1, d2, r, G, PG);
            for (size_t e = 0; e < D; e++)
                off = fmax(off, fabs(PG[e] - G[e]));
        }
        double ratio = sum / (R * dimT), sd = sqrt(2.0 / (R * dimT));
        CHECK(fabs(ratio - 1) < 5 * sd, "noise variance ratio %g (sd %g)", ratio, sd);
        CHECK(off < 1e-12 * sigma * 100, "noise inside T: %g", off);
        NOTE("noise: measured/expected variance on the tangent space %.4f (5 sd = %.4f), dim T %.0f", ratio,
             5 * sd, dimT);
        free(X);
    }

    /* 5-7. Fits. */
    {
        size_t d1 = 10, d2 = 10, r = 2, D = d1 * d2, n = 20000;
        double noise = 0.1;
        float *X = malloc(n * D * sizeof *X), *y = malloc(n * sizeof *y), *M = malloc(D * sizeof *M);
        float *L = malloc(D * sizeof *L), *L0 = malloc(D * sizeof *L0);
        dps_trace_synth(rng, n, d1, d2, r, noise, X, y, M);

        /* 5. Accuracy, batch mode, rho = 10.  Init only (iters = 0) first. */
        dps_rgrad_config c;
        dps_rgrad_config_init(&c, d1, d2, r);
        c.iters = 0;
        dps_rgrad_config_budget(&c, 3.0);
        dps_rgrad_stats st0;
        memset(&st0, 0, sizeof st0);
        CHECK(dps_rgrad_fit(X, y, n, &c, rng, L0, &st0) == DPS_OK, "init-only fit");
        double e0 = s_fro_diff(L0, M, D);
        CHECK(!st0.init_failed, "init released");
        CHECK(e0 < 1, "init better than trivial: %g", e0);

        c.iters = 15;
        dps_rgrad_config_budget(&c, 10.0);
        double gn[15];
        dps_rgrad_stats st;
        memset(&st, 0, sizeof st);
        st.grad_norm = gn;
        CHECK(dps_rgrad_fit(X, y, n, &c, rng, L, &st) == DPS_OK, "fit");
        double e = s_fro_diff(L, M, D);
        /* The bound: near M, with n >> dof = r(d1+d2-r), the RGrad map contracts
           the error by about (1 - eta) per step (RIP of the Gaussian design),
           so the error settles at the statistical error noise sqrt(dof/n) plus
           the stationary noise eta s_it sqrt(dimT) / sqrt(1 - (1-eta)^2); 15
           steps shrink the init error by (1-eta)^15 < 3e-5.  3x margin for the
           constants of RIP and the clipping bias. */
        double dof = (double)(r * (d1 + d2 - r));
        double bound = 3 * (noise * sqrt(dof / n) + c.eta * st.sd_iter * sqrt(dof) /
                                                         sqrt(1 - (1 - c.eta) * (1 - c.eta)) +
                            e0 * pow(1 - c.eta, (double)c.iters));
        CHECK(!st.init_failed, "released");
        CHECK(e < bound, "||L - M||_F = %g above the derived bound %g", e, bound);
        CHECK(e < 0.5 * e0, "iterations improve on the init: %g vs %g", e, e0);
        CHECK(gn[14] < gn[0], "gradient norm decreases: %g -> %g", gn[0], gn[14]);
        NOTE("batch rho=10, n=%zu, %zux%zu r=%zu: init error %.4f, final %.4f (bound %.4f), groups %zu, "
             "sd_iter %.2g, clipped %llu/%llu",
             n, d1, d2, r, e0, e, bound, st.groups, st.sd_iter, (unsigned long long)st.nonprivate_clipped_grad,
             (unsigned long long)(n * c.iters));

        /* 5b. Issue 9: one observation with subnormal, huge, NaN or Inf
           entries (in X or y) must not turn the fit into an error or a
           non-finite estimate: contributions are clipped, non-finite ones
           dropped.  Same seed as a clean fit, so only the row differs. */
        {
            const char *what[] = {"X all 1e-41", "X all 3e38, y 3e38", "X NaN", "X Inf", "y NaN", "y -Inf"};
            float saved[101];
            memcpy(saved, X + 7 * D, D * sizeof *X);
            saved[D] = y[7];
            for (int kind = 0; kind < 6; kind++) {
                for (size_t j = 0; j < D; j++)
                    X[7 * D + j] = kind == 0 ? 1e-41f : kind == 1 ? 3e38f : saved[j];
                y[7] = kind == 1 ? 3e38f : kind == 4 ? NAN : kind == 5 ? -INFINITY : saved[D];
                if (kind == 2)
                    X[7 * D + 3] = NAN;
                if (kind == 3)
                    X[7 * D + 3] = INFINITY;
                dps_rng *seeded = NULL;
                dps_rng_new_seeded(&seeded, 99);
                dps_rgrad_stats sh;
                memset(&sh, 0, sizeof sh);
                int rc = dps_rgrad_fit(X, y, n, &c, seeded, L0, &sh);
                int finite = 1;
                for (size_t j = 0; j < D; j++)
                    finite &= isfinite(L0[j]);
                CHECK(rc == DPS_OK && finite, "hostile observation (%s): rc %s, finite %d", what[kind],
                      dps_strerror(rc), finite);
                dps_rng_destroy(&seeded);
            }
            memcpy(X + 7 * D, saved, D * sizeof *X);
            y[7] = saved[D];
        }

        /* 6. Bookkeeping.  Batch: rho_init + iters rho_iter = 10. */
        dps_zcdp cost = dps_rgrad_cost(&c);
        CHECK(fabs(cost.rho - 10.0) < 1e-9 && cost.delta == c.delta, "batch cost %g", cost.rho);
        CHECK(fabs(st.spent.rho - cost.rho) < 1e-12 && st.spent.delta == cost.delta, "spent %g", st.spent.rho);
        CHECK(fabs(st.eps - dps_zcdp_eps_total(cost, 1e-5)) < 1e-12, "eps at 1e-5: %g", st.eps);
        CHECK(st.batch_obs == n && st.init_obs == n, "batch mode reads all n");
        /* Streaming: every part gets rho = 10, the cost is the max (10), not the sum. */
        c.streaming = 1;
        c.iters = 9;
        dps_rgrad_config_budget(&c, 10.0);
        cost = dps_rgrad_cost(&c);
        CHECK(c.rho_init == 10.0 && c.rho_iter == 10.0 && cost.rho == 10.0, "streaming cost %g", cost.rho);
        memset(&st, 0, sizeof st);
        CHECK(dps_rgrad_fit(X, y, n, &c, rng, L, &st) == DPS_OK, "streaming fit");
        CHECK(st.spent.rho == 10.0 && st.spent.delta == c.delta, "streaming spent %g", st.spent.rho);
        CHECK(st.init_obs == n / 10 && st.batch_obs == (n - n / 10) / 9, "streaming batches %zu %zu", st.init_obs,
              st.batch_obs);
        double es = s_fro_diff(L, M, D);
        CHECK(!st.init_failed && es < 1 && es < e0 * 2, "streaming accuracy %g", es);
        NOTE("streaming rho=10 (9 batches of %zu, init %zu): error %.4f", st.batch_obs, st.init_obs, es);
        /* The same per-part rho in batch mode would cost 10 + 9*10. */
        c.streaming = 0;
        CHECK(fabs(dps_rgrad_cost(&c).rho - 100.0) < 1e-9, "batch with the same parts: %g", dps_rgrad_cost(&c).rho);

        /* 7. Bad arguments: refused, no crash, nothing spent. */
        dps_rgrad_config b;
        const char *why = NULL;
        dps_rgrad_config_init(&b, d1, d2, r);
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_OK, "defaults valid: %s", why);
        CHECK(dps_rgrad_fit(NULL, y, n, &b, rng, L, &st) == DPS_EINVAL, "NULL X");
        CHECK(dps_rgrad_fit(X, y, n, &b, NULL, L, &st) == DPS_EINVAL, "NULL rng");
        CHECK(dps_rgrad_fit(X, y, n, NULL, rng, L, &st) == DPS_EINVAL && st.spent.rho == 0, "NULL cfg");
        b.r = 10;
        CHECK(dps_rgrad_fit(X, y, n, &b, rng, L, &st) == DPS_EINVAL, "r = d");
        dps_rgrad_config_init(&b, 5000, 3, 1);
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_ELIMIT, "d1 above the limit");
        dps_rgrad_config_init(&b, d1, d2, r);
        b.eta = 0;
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_EINVAL, "eta 0");
        b.eta = 0.5;
        b.clip_grad = NAN;
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_EINVAL, "clip NaN");
        b.clip_grad = 1;
        b.delta = 0;
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_EINVAL, "delta 0");
        b.delta = 1e-8;
        b.groups = 1;
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_EINVAL, "one group");
        b.groups = 0;
        CHECK(dps_rgrad_config_check(&b, 10, &why) == DPS_EINVAL, "fewer observations than groups: %s", why);
        b.streaming = 1;
        b.init_obs = n;
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_EINVAL, "streaming with nothing left: %s", why);
        b.streaming = 0;
        b.init_obs = 0;
        b.rho_iter = -1;
        CHECK(dps_rgrad_config_check(&b, n, &why) == DPS_EINVAL, "rho_iter < 0");

        /* 8. FAIL of the init: with 2 groups W <= 2 while the release needs
           W^ >= 1 + s_W sqrt(2 ln(2/delta)) with s_W = 3/sqrt(2 rho_count)
           (> 9 at rho_init = 1): success needs a N(0,1) draw above 5.9 sd
           (probability < 2e-9).  The fit returns DPS_OK, says FAIL, L = 0, and
           spent only the first aggregation. */
        dps_rgrad_config_init(&b, d1, d2, r);
        b.groups = 2;
        memset(&st, 0, sizeof st);
        for (size_t e2 = 0; e2 < D; e2++)
            L[e2] = 1;
        CHECK(dps_rgrad_fit(X, y, n, &b, rng, L, &st) == DPS_OK, "failing fit returns OK");
        CHECK(st.init_failed == 1 && st.reason && st.reason[0], "init FAIL reported");
        double z = 0;
        for (size_t e2 = 0; e2 < D; e2++)
            z = fmax(z, fabs(L[e2]));
        CHECK(z == 0, "L zero after FAIL");
        double rho_agg = 0.5 * (1 - b.split_sigma) * b.rho_init;
        CHECK(fabs(st.spent.rho - rho_agg) < 1e-12 && fabs(st.spent.delta - b.delta / 2) < 1e-20,
              "FAIL spends the first aggregation only: %g", st.spent.rho);
        NOTE("FAIL branch: %s (spent rho %.3f of %.3f)", st.reason, st.spent.rho, dps_rgrad_cost(&b).rho);
        free(X); free(y); free(M); free(L); free(L0);
    }

    dps_rng_destroy(&rng);
    return check_summary();
}
