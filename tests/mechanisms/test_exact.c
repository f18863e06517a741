/* test_exact - the exact-case estimator (src/mechanisms/exact.c, DPESE with sampled
   candidates): the truncated Laplace noise (support, the delta mass of its top
   interval), exact low-rank data recovered to float precision (and invariance
   under power-of-two row scaling), data with no k-dim majority gives NULL,
   the sampling lemma (one draw spans s* with probability > 2^-k), the privacy
   bookkeeping, bad arguments and limits. */
#include "check.h"
#include "dpsubspace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* n rows: the first n_in are integer combinations (coefficients in [-5, 5])
   of the k integer rows of B (entries in [-3, 3]); the rest are random
   integer rows (entries in [-9, 9]): outliers. */
static void s_integer_data(dps_rng *r, size_t n, size_t n_in, size_t d, size_t k, float *B, float *X)
{
    for (size_t i = 0; i < k * d; i++)
        B[i] = (float)((int)dps_rng_below(r, 7) - 3);
    for (size_t i = 0; i < n; i++) {
        float *x = X + i * d;
        if (i < n_in) {
            memset(x, 0, d * sizeof *x);
            for (size_t a = 0; a < k; a++) {
                float c = (float)((int)dps_rng_below(r, 11) - 5);
                for (size_t j = 0; j < d; j++)
                    x[j] += c * B[a * d + j];
            }
        } else {
            for (size_t j = 0; j < d; j++)
                x[j] = (float)((int)dps_rng_below(r, 19) - 9);
        }
    }
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 99);

    /* 1. Truncated Laplace: B formula, support, and P[xi > B - 2] = delta
       (the fact the proof rests on).  eps = 1, delta = 0.05, N = 40000:
       binomial sd sqrt(0.05 * 0.95 / N) = 0.0011; accept within 5 sd.  The
       mean of a symmetric law: sd of xi < B, so |mean| < 5 B / sqrt(N). */
    {
        double eps = 1, delta = 0.05, B = dps_tlap_bound(eps, delta);
        CHECK(fabs(B - 2.0 * log(1 + (exp(1.0) - 1) / 0.1)) < 1e-12, "B formula %g", B);
        size_t N = 40000, top = 0, out = 0;
        double sum = 0;
        for (size_t i = 0; i < N; i++) {
            double x = dps_tlap_sample(rng, eps, delta);
            out += x < -B || x > B;
            top += x > B - 2;
            sum += x;
        }
        double f = (double)top / N, sd = sqrt(delta * (1 - delta) / N);
        NOTE("TLap(2, 1, 0.05): B = %.3f, P[xi > B - 2] = %.4f (expect 0.05 +- %.4f)", B, f, 5 * sd);
        CHECK(out == 0, "samples outside [-B, B]: %zu", out);
        CHECK(fabs(f - delta) < 5 * sd, "top-interval mass %g", f);
        CHECK(fabs(sum / N) < 5 * B / sqrt((double)N), "symmetric: mean %g", sum / N);
    }

    /* 2. Exact low-rank data: 117 rows in a 3-dim subspace of R^20 and 3
       outliers.  h(s*) >= 2*117 - 120 - (rows of s* in one plane); every plane
       of s* holds few of 117 random integer combinations, so h >> 2B = 55 and
       s* is released whenever a draw finds it (beta = (7/8)^R tiny).  The
       basis is the float QR of 3 exact rows: sin to the truth ~ 1e-7. */
    size_t n = 120, d = 20, k = 3;
    float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B), *V = malloc(k * d * sizeof *V);
    float *T = malloc(k * d * sizeof *T);
    s_integer_data(rng, n, 117, d, k, B, X);
    memcpy(T, B, k * d * sizeof *T);
    {
        /* the truth as an orthonormal basis (top-k of B itself) */
        CHECK(dps_topk_basis(B, k, d, k, T, NULL) == DPS_OK, "truth basis");
        int rel = 0;
        dps_exact_stats st;
        double eps = 1, delta = 1e-6;
        CHECK(dps_exact_subspace(X, n, d, k, eps, delta, 0, rng, V, &rel, &st) == DPS_OK, "run");
        double s = rel ? dps_subspace_sin(V, T, k, d, NULL) : 1;
        NOTE("exact data: released %d, sin %.2e, score %.0f (2B = %.1f), members %zu, R = %zu, primes %zu", rel, s,
             st.score, 2 * st.bound, st.members, st.candidates, st.primes);
        CHECK(rel && s < 1e-5, "recovered: released %d sin %g", rel, s);
        CHECK(st.members == 117, "members %zu", st.members);
        CHECK(st.score > 2 * st.bound && st.score <= 2 * 117 - 120 - (k - 1), "score %g", st.score);
        /* 3. Bookkeeping: default R gives (1 + e^eps) beta <= delta / 100; cost. */
        double beta = pow(1 - 1.0 / 8, (double)st.candidates);
        CHECK(fabs(st.delta_sampling - (1 + exp(eps)) * beta) < 1e-12 * st.delta_sampling + 1e-300 &&
                  st.delta_sampling <= delta / 100 && st.delta_total == delta + st.delta_sampling,
              "delta_sampling %g", st.delta_sampling);
        CHECK(fabs(st.cost.rho - eps * eps / 2) < 1e-15 && st.cost.delta == st.delta_total, "cost");
        dps_exact_stats st2;
        dps_exact_subspace(X, n, d, k, eps, delta, 10, rng, V, &rel, &st2);
        CHECK(st2.candidates == 10 && fabs(st2.delta_sampling - (1 + exp(1.0)) * pow(7.0 / 8, 10)) < 1e-12,
              "custom R bookkeeping %g", st2.delta_sampling);
        /* (a) of the proof: replacing one row moves the score by at most 2
           (an inlier replaced by an outlier, and an outlier by an inlier). */
        float *Y1 = malloc(n * d * sizeof *Y1);
        memcpy(Y1, X, n * d * sizeof *Y1);
        for (size_t j = 0; j < d; j++)
            Y1[j] = (float)((int)dps_rng_below(rng, 19) - 9);
        dps_exact_stats sa, sb;
        dps_exact_subspace(X, n, d, k, eps, delta, 0, rng, V, &rel, &sa);
        dps_exact_subspace(Y1, n, d, k, eps, delta, 0, rng, V, &rel, &sb);
        NOTE("neighbours: score %.0f -> %.0f", sa.score, sb.score);
        CHECK(fabs(sa.score - sb.score) <= 2 && sa.score != sb.score, "sensitivity: %g vs %g", sa.score, sb.score);
        memcpy(Y1, X, n * d * sizeof *Y1);
        memcpy(Y1 + 119 * d, X + 5 * d, d * sizeof *Y1); /* outlier -> a copy of an inlier */
        dps_exact_subspace(Y1, n, d, k, eps, delta, 0, rng, V, &rel, &sb);
        NOTE("neighbours: score %.0f -> %.0f", sa.score, sb.score);
        CHECK(fabs(sa.score - sb.score) <= 2, "sensitivity: %g vs %g", sa.score, sb.score);
        free(Y1);
        /* scaling rows by powers of two changes no membership: same subspace */
        float *Y = malloc(n * d * sizeof *Y);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                Y[i * d + j] = ldexpf(X[i * d + j], (int)(i % 50) - 25);
        CHECK(dps_exact_subspace(Y, n, d, k, eps, delta, 0, rng, V, &rel, &st) == DPS_OK && rel &&
                  dps_subspace_sin(V, T, k, d, NULL) < 1e-5 && st.members == 117,
              "power-of-two scaled rows: released %d members %zu", rel, st.members);
        /* a row scaled by 3 (still exact) stays a member; NaN rows count as zero rows (members) */
        for (size_t j = 0; j < d; j++)
            Y[j] = 3 * X[j];
        Y[d] = NAN;
        CHECK(dps_exact_subspace(Y, n, d, k, eps, delta, 0, rng, V, &rel, &st) == DPS_OK && rel && st.members == 117,
              "NaN row as zero row: members %zu", st.members);
        free(Y);
    }

    /* 4. No k-dim structure: Gaussian rows (general position in float: any 3
       span a subspace holding just them) -> no majority, NULL, score 0. */
    {
        float *G = malloc(n * d * sizeof *G);
        dps_rng_gaussian_fill_f(rng, 1.0, G, n * d);
        int rel = 1;
        dps_exact_stats st;
        CHECK(dps_exact_subspace(G, n, d, k, 1.0, 1e-6, 0, rng, V, &rel, &st) == DPS_OK && !rel && st.score == 0 &&
                  st.scored == 0,
              "no structure: released %d score %g", rel, st.score);
        /* a minority subspace (50 of 120 rows) is no majority: NULL */
        float *Z = malloc(n * d * sizeof *Z);
        s_integer_data(rng, n, 50, d, k, B, Z);
        CHECK(dps_exact_subspace(Z, n, d, k, 1.0, 1e-6, 0, rng, V, &rel, &st) == DPS_OK && !rel && st.score == 0,
              "minority: released %d", rel);
        free(G); free(Z);
    }

    /* 5. The sampling lemma on a hard input: k = 2, s* a plane holding 30
       rows, 20 of them on one line L, plus 8 outliers: u(s*) = 10 > 8 =
       n - |X n s*|, h(s*) = 2.  One draw (R = 1) must find s* with
       probability >= 1/4 (each step > 1/2); exactly here
       30/38 * 10/18 + 8/38 * ... ; check the frequency over N = 2000 runs
       against 1/4 - 5 sd (sd <= sqrt(1/4 * 3/4 / N) = 0.0097).  And h = 2:
       released with probability <= delta (here 1e-6): never in 2000 runs
       except with probability 2e-3. */
    {
        size_t n5 = 38, d5 = 6;
        float *W = calloc(n5 * d5, sizeof *W);
        for (size_t i = 0; i < 20; i++) { /* the line L = span(e1 + e2) */
            W[i * d5 + 0] = (float)(i + 1);
            W[i * d5 + 1] = (float)(i + 1);
        }
        for (size_t i = 20; i < 30; i++) { /* the plane span(e1, e2), off L */
            W[i * d5 + 0] = (float)(i - 18);
            W[i * d5 + 1] = (float)(2 * (i - 18) + 1);
        }
        for (size_t i = 30; i < n5; i++)
            for (size_t j = 0; j < d5; j++)
                W[i * d5 + j] = (float)((int)dps_rng_below(rng, 19) - 9);
        size_t N = 2000, found = 0, rel_total = 0;
        for (size_t r = 0; r < N; r++) {
            int rel = 0;
            dps_exact_stats st;
            dps_exact_subspace(W, n5, d5, 2, 1.0, 1e-6, 1, rng, V, &rel, &st);
            found += st.members == 30 && st.score == 2;
            rel_total += rel;
        }
        double f = (double)found / N;
        NOTE("hard input, one draw: s* found in %.3f of runs (lemma: >= 0.25), released %zu times", f, rel_total);
        CHECK(f >= 0.25 - 5 * sqrt(0.25 * 0.75 / N), "sampling lemma %g", f);
        CHECK(rel_total == 0, "h = 2 released %zu times", rel_total);
        free(W);
    }

    /* 6. Bad arguments and limits. */
    {
        int rel;
        CHECK(dps_exact_subspace(NULL, n, d, k, 1, 1e-6, 0, rng, V, &rel, NULL) == DPS_EINVAL, "NULL X");
        CHECK(dps_exact_subspace(X, n, d, 0, 1, 1e-6, 0, rng, V, &rel, NULL) == DPS_EINVAL, "k 0");
        CHECK(dps_exact_subspace(X, n, d, d, 1, 1e-6, 0, rng, V, &rel, NULL) == DPS_EINVAL, "k >= d");
        CHECK(dps_exact_subspace(X, n, d, k, 0, 1e-6, 0, rng, V, &rel, NULL) == DPS_EINVAL, "eps 0");
        CHECK(dps_exact_subspace(X, n, d, k, INFINITY, 1e-6, 0, rng, V, &rel, NULL) == DPS_EINVAL, "eps inf");
        CHECK(dps_exact_subspace(X, n, d, k, 1, 0, 0, rng, V, &rel, NULL) == DPS_EINVAL, "delta 0");
        CHECK(dps_exact_subspace(X, n, d, k, 1, 0.6, 0, rng, V, &rel, NULL) == DPS_EINVAL, "delta > 1/2");
        CHECK(dps_exact_subspace(X, 0, d, k, 1, 1e-6, 0, rng, V, &rel, NULL) == DPS_EINVAL, "n 0");
        CHECK(dps_exact_subspace(X, n, d, k, 1, 1e-6, 0, NULL, V, &rel, NULL) == DPS_EINVAL, "no rng");
        CHECK(dps_exact_subspace(X, n, d, k, 1, 1e-6, 0, rng, V, NULL, NULL) == DPS_EINVAL, "no released");
        CHECK(dps_exact_subspace(X, 10, 20, 9, 1, 1e-6, 0, rng, V, &rel, NULL) == DPS_ELIMIT, "k > 8");
        /* C(400, 3) * 400 = 4.2e9 > 2e9: refused before reading X */
        CHECK(dps_exact_subspace(X, 400, 20, 4, 1, 1e-6, 0, rng, V, &rel, NULL) == DPS_ELIMIT, "work limit");
    }
    free(X); free(B); free(V); free(T);
    dps_rng_destroy(&rng);
    return check_summary();
}
