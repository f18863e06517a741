/* test_baselines - central methods: top-k, Analyze Gauss (release, noise
   scale, FAIL, limit), the Gaussian mean's noise scale and clipping, the
   projection, the generator and the subspace distance; the private choice
   of k (sensitivity of the squared singular values, noise, the rule). */
#include "check.h"
#include "dpsubspace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Squared singular values (all min(n, d) of them) of X, from dps_topk_basis. */
static void s_sq_singular(const float *X, size_t n, size_t d, double *sq)
{
    float *V = malloc((d - 1) * d * sizeof *V);
    double sv[64];
    dps_topk_basis(X, n, d, d - 1, V, sv);
    for (size_t i = 0; i < (n < d ? n : d); i++)
        sq[i] = sv[i] * sv[i];
    free(V);
}

static void s_test_choose_k(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 23);

    /* (a) The lemma the privacy rests on: replacing one unit row moves the
       vector of squared singular values by at most 2 in l1 (Lidskii).  Random
       neighbours, and the worst kind: a row replaced by the top direction. */
    size_t n = 40, d = 12;
    float *X = malloc(n * d * sizeof *X), *Y = malloc(n * d * sizeof *Y);
    double a[16], b[16], worst = 0;
    for (int trial = 0; trial < 300; trial++) {
        dps_synth_paper(rng, n, d, 1 + trial % 4, trial % 2 ? 3.0 : 100.0, X, NULL);
        memcpy(Y, X, n * d * sizeof *X);
        size_t r = dps_rng_below(rng, n);
        dps_synth_paper(rng, 1, d, 1, 1.0 + trial % 7, Y + r * d, NULL);
        if (trial % 3 == 0)
            memcpy(Y + r * d, X + ((r + 1) % n) * d, d * sizeof *X);
        s_sq_singular(X, n, d, a);
        s_sq_singular(Y, n, d, b);
        double l1 = 0;
        for (size_t i = 0; i < d; i++)
            l1 += fabs(a[i] - b[i]);
        worst = fmax(worst, l1);
    }
    NOTE("choose-k: worst l1 change of the squared singular values over 300 neighbours %.3f (bound 2)", worst);
    CHECK(worst <= 2 + 1e-4, "l1 sensitivity %g > 2", worst);

    /* (b) The released values are sigma_i^2 + Lap(2/eps): rows e_1 (30 times)
       and e_2 (10 times) have sigma^2 = (30, 10, 0, ...).  Over R = 4000 draws
       of s_2 - 10 the mean is 0 and the mean |.| is b = 2/eps, each within
       5 sd/sqrt(R) (sd sqrt(2) b and b), a false alarm below 1e-6. */
    memset(X, 0, n * d * sizeof *X);
    for (size_t i = 0; i < n; i++)
        X[i * d + (i < 30 ? 0 : 1)] = 1.0f;
    double eps = 0.5, bl = 2 / eps, mean = 0, mabs = 0, s2[4];
    size_t R = 4000, kout = 0;
    for (size_t r = 0; r < R; r++) {
        dps_choose_k(X, n, d, 3, eps, 0.05, rng, &kout, s2);
        mean += (s2[1] - 10) / R;
        mabs += fabs(s2[1] - 10) / R;
    }
    NOTE("choose-k: noise mean %.4f (0), mean |noise| %.4f (b = %.4f)", mean, mabs, bl);
    CHECK(fabs(mean) < 5 * sqrt(2.0) * bl / sqrt((double)R), "noise mean %g", mean);
    CHECK(fabs(mabs - bl) < 5 * bl / sqrt((double)R), "noise scale %g vs %g", mabs, bl);

    /* (c) The rule.  The paper's generator, n = 1200, d = 60, k = 3: sigma_i^2
       is about n/k = 400 for i <= 3 and below n d/tau^2 = 0.03 beyond.  At
       eps = 1, beta = 0.05, k_max = 8: T = 4 ln(9/0.05) = 20.8, so 400 >= 1.5 T
       and 0.03 < T/2: the guarantee says k = 3 with probability >= 0.95.  Over
       200 runs at most 20 may miss (P[Bin(200, 0.05) > 20] < 0.01); in fact
       the margins are ~40 noise scales, so none should. */
    size_t n2 = 1200, d2 = 60;
    float *Z = malloc(n2 * d2 * sizeof *Z);
    dps_synth_paper(rng, n2, d2, 3, 10.0 * d2, Z, NULL);
    int right = 0;
    for (int r = 0; r < 200; r++) {
        dps_choose_k(Z, n2, d2, 8, 1.0, 0.05, rng, &kout, NULL);
        right += kout == 3;
    }
    NOTE("choose-k: k = 3 found in %d of 200 runs (T = %.1f)", right, dps_choose_k_threshold(8, 1.0, 0.05));
    CHECK(right >= 180, "k found %d / 200", right);
    /* Isotropic rows: n = 60 unit rows in d = 60 have sigma^2 summing to 60, all
       far below T/2 = 10.4 except by chance (sigma_1^2 <= (1 + sqrt(60/60))^2 = 4
       in the Gaussian limit): k = 0. */
    dps_synth_paper(rng, 60, d2, 1, 1e-3, Z, NULL);
    dps_choose_k(Z, 60, d2, 8, 1.0, 0.05, rng, &kout, NULL);
    CHECK(kout == 0, "isotropic data: k = %zu", kout);
    /* k_max too small: every s_i passes, k = k_max. */
    dps_synth_paper(rng, n2, d2, 6, 10.0 * d2, Z, NULL);
    dps_choose_k(Z, n2, d2, 4, 1.0, 0.05, rng, &kout, NULL);
    CHECK(kout == 4, "k_max reached: %zu", kout);

    /* (d) Bad arguments and the size limit (checked before X is read). */
    CHECK(dps_choose_k(Z, n2, d2, 8, 0.0, 0.05, rng, &kout, NULL) == DPS_EINVAL, "eps 0");
    CHECK(dps_choose_k(Z, n2, d2, 8, 1.0, 1.0, rng, &kout, NULL) == DPS_EINVAL, "beta 1");
    CHECK(dps_choose_k(Z, n2, d2, d2, 1.0, 0.05, rng, &kout, NULL) == DPS_EINVAL, "k_max >= d");
    CHECK(dps_choose_k(Z, n2, d2, 0, 1.0, 0.05, rng, &kout, NULL) == DPS_EINVAL, "k_max 0");
    CHECK(dps_choose_k(NULL, n2, d2, 8, 1.0, 0.05, rng, &kout, NULL) == DPS_EINVAL, "X NULL");
    CHECK(dps_choose_k(Z, 30000, 30000, 8, 1.0, 0.05, rng, &kout, NULL) == DPS_ELIMIT, "limit");
    free(X); free(Y); free(Z);
    dps_rng_destroy(&rng);
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 17);

    /* 1. The generator: unit rows near span(b), orthonormal basis.  ||nu|| =
       sqrt(d)/tau, so the distance of a row to span(b) is <= sqrt(d)/tau / (1 - sqrt(d)/tau). */
    size_t n = 1000, d = 300, k = 4;
    double tau = 10.0 * d;
    float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B), *V = malloc(k * d * sizeof *V);
    CHECK(dps_synth_paper(rng, n, d, k, tau, X, B) == DPS_OK, "synth");
    double worst_norm = 0, worst_off = 0, bound = sqrt((double)d) / tau / (1 - sqrt((double)d) / tau);
    double *x = malloc(d * sizeof *x), *px = malloc(d * sizeof *px);
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t c = 0; c < d; c++) {
            x[c] = X[i * d + c];
            s += x[c] * x[c];
        }
        worst_norm = fmax(worst_norm, fabs(sqrt(s) - 1));
        dps_project(B, k, d, x, px);
        double off = 0;
        for (size_t c = 0; c < d; c++)
            off += (x[c] - px[c]) * (x[c] - px[c]);
        worst_off = fmax(worst_off, sqrt(off));
    }
    CHECK(worst_norm < 1e-6, "rows unit norm %g", worst_norm);
    CHECK(worst_off <= bound * 1.001, "rows near span: %g > %g", worst_off, bound);
    CHECK(dps_subspace_sin(B, B, k, d, NULL) < 1e-6, "basis orthonormal / distance to itself");

    /* 2. Subspace distance on a known rotation: e1 vs cos(0.3) e1 + sin(0.3) e2. */
    {
        float a[6] = {1, 0, 0}, b[6] = {0};
        b[0] = (float)cos(0.3);
        b[1] = (float)sin(0.3);
        double fro;
        double s = dps_subspace_sin(a, b, 1, 3, &fro);
        CHECK(fabs(s - sin(0.3)) < 1e-6 && fabs(fro - sqrt(2) * sin(0.3)) < 1e-6, "known angle %g %g", s, fro);
    }

    /* 3. Non-private top-k recovers the span (sin <~ ||nu||). */
    double sv[5];
    CHECK(dps_topk_basis(X, n, d, k, V, sv) == DPS_OK, "topk");
    double sn = dps_subspace_sin(V, B, k, d, NULL);
    NOTE("non-private top-k: sin to truth %.2e, s_k^2 - s_{k+1}^2 = %.1f", sn, sv[3] * sv[3] - sv[4] * sv[4]);
    CHECK(sn < 2 * bound, "topk accuracy %g", sn);

    /* 4. Analyze Gauss noise scale.  With the gap G = s_k^2 - s_{k+1}^2 ~ 250 the
       noisy gap moves by sd sqrt(2/rho) = 1.4, so s = 1/((a - 2) sqrt(2 rho)),
       a = g - 2 sqrt(ln(1/delta)/rho), is known to 1%.  E = (G + G^T)/sqrt 2 is
       rotation invariant, so to first order the (d-k) x k block U_perp^T E U that
       tilts the subspace has iid N(0, s^2) entries and
       E ||sin Theta||_F^2 = (d - k) k s^2.  20 repetitions: each ratio is a
       chi^2_{1184}/1184 (sd 0.04), second-order terms are O(||E||^2) ~ 2%:
       accept the mean ratio in [0.85, 1.15].  A noise sd off by sqrt 2 moves
       the ratio to 2 or 0.5 and fails.  (The diagonal variance, 2 s^2 here vs
       DESIGN's s^2, changes this ratio by O(1/d) only; its argument is in
       analyze_gauss.c, not in a statistical test.) */
    {
        double rho = 1.0, delta = 1e-5;
        double G = sv[3] * sv[3] - sv[4] * sv[4];
        double a = G - 2 * sqrt(log(1 / delta) / rho);
        double s = 1.0 / ((a - 2) * sqrt(2 * rho));
        double sum = 0;
        int reps = 20, released_all = 1;
        float *Vp = malloc(k * d * sizeof *Vp);
        for (int r = 0; r < reps; r++) {
            int rel = 0;
            CHECK(dps_analyze_gauss(X, n, d, k, rho, delta, rng, Vp, &rel) == DPS_OK, "analyze gauss");
            released_all &= rel;
            double fro;
            dps_subspace_sin(Vp, V, k, d, &fro);
            sum += (fro * fro / 2) / ((double)(d - k) * k * s * s);
        }
        NOTE("Analyze Gauss: mean ||sin Theta||_F^2 / ((d-k) k s^2) = %.3f over %d runs (s = %.2e)", sum / reps, reps, s);
        CHECK(released_all, "large gap: always released");
        CHECK(fabs(sum / reps - 1) < 0.15, "noise scale ratio %g", sum / reps);
        free(Vp);
    }

    /* 5. Analyze Gauss FAIL: isotropic rows (no gap) in d = 40, n = 60. */
    {
        size_t n2 = 60, d2 = 40;
        float *Y = malloc(n2 * d2 * sizeof *Y), *Vy = malloc(2 * d2 * sizeof *Vy);
        dps_rng_gaussian_fill_f(rng, 1.0 / sqrt(d2), Y, n2 * d2);
        int fails = 0;
        for (int r = 0; r < 20; r++) {
            int rel = 1;
            dps_analyze_gauss(Y, n2, d2, 2, 0.5, 1e-5, rng, Vy, &rel);
            fails += !rel;
        }
        /* gap of a 60 x 40 isotropic matrix ~ 0.5; the test subtracts 2 sqrt(ln 1e5/0.5)+2 = 11.6 > gap + 5 sd */
        CHECK(fails == 20, "no gap: FAIL every time (%d/20)", fails);
        int rel = 1;
        CHECK(dps_analyze_gauss(Y, n2, DPS_ANALYZE_GAUSS_MAX_D + 1, 2, 0.5, 1e-5, rng, Vy, &rel) == DPS_ELIMIT,
              "d above the limit refused");
        free(Y); free(Vy);
    }

    /* 6. Gaussian mean: noise sd (2/n)/sqrt(2 rho) per coordinate.  2000 runs
       x 300 coordinates = 6e5 samples of the noise: the variance ratio has sd
       sqrt(2/6e5) = 0.0018, accept +-0.01. */
    {
        double rho = 0.5, sigma = (2.0 / n) / sqrt(2 * rho);
        double *m0 = calloc(d, sizeof *m0), *m = malloc(d * sizeof *m);
        for (size_t i = 0; i < n; i++)
            for (size_t c = 0; c < d; c++)
                m0[c] += X[i * d + c] / (double)n;
        double ss = 0;
        int runs = 2000;
        for (int r = 0; r < runs; r++) {
            dps_gaussian_mean(X, n, d, rho, rng, m);
            for (size_t c = 0; c < d; c++)
                ss += (m[c] - m0[c]) * (m[c] - m0[c]);
        }
        double ratio = ss / ((double)runs * d) / (sigma * sigma);
        NOTE("Gaussian mean: variance / stated = %.4f", ratio);
        CHECK(fabs(ratio - 1) < 0.01, "gaussian mean noise %g", ratio);
        /* Clipping: one row scaled by 1000 counts as its unit version. */
        float *Y = malloc(n * d * sizeof *Y);
        memcpy(Y, X, n * d * sizeof *Y);
        for (size_t c = 0; c < d; c++)
            Y[c] *= 1000;
        dps_rng *r1 = NULL, *r2 = NULL;
        dps_rng_new_seeded(&r1, 5);
        dps_rng_new_seeded(&r2, 5);
        double *ma = malloc(d * sizeof *ma);
        dps_gaussian_mean(X, n, d, rho, r1, m);
        dps_gaussian_mean(Y, n, d, rho, r2, ma);
        double diff = 0;
        for (size_t c = 0; c < d; c++)
            diff = fmax(diff, fabs(m[c] - ma[c]));
        CHECK(diff < 1e-9, "rows clipped to unit norm: %g", diff);
        dps_rng_destroy(&r1); dps_rng_destroy(&r2);
        free(m0); free(m); free(Y); free(ma);
    }
    free(X); free(B); free(V); free(x); free(px);
    dps_rng_destroy(&rng);
    s_test_choose_k();
    return check_summary();
}
