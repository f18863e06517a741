/* test_epoch_gaussian - the Gaussian covariance epoch mechanism
   (DPS_AGG_GAUSSIAN, src/mechanisms/epoch_gaussian.c): the noise has the
   stated law, an epoch is charged (rho, 0), and the release is accurate on
   rows near a subspace within the Davis-Kahan bound. */
#include "config_internal.h"
#include "check.h"
#include "dpsubspace.h"
#include "gaussian_cov.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The law of 1.: the diagonal's and the off-diagonal's variance (of nd and
   no draws) against s2, the off-diagonal's mean against 0, each within 5 sd
   of its estimate (the bounds are derived at 1.). */
static void s_check_law(double vd, size_t nd, double vo, size_t no, double mo, double s2)
{
    CHECK(fabs(vd / s2 - 1) < 5 * sqrt(2.0 / (double)nd), "diagonal variance %g, want %g", vd, s2);
    CHECK(fabs(vo / s2 - 1) < 5 * sqrt(2.0 / (double)no), "off-diagonal variance %g, want %g", vo, s2);
    CHECK(fabs(mo) < 5 * sqrt(s2 / (double)no), "off-diagonal mean %g", mo);
}

/* 1. The noise: A = 0 plus E, 20 draws at d = 300, rho = 0.25 (s^2 = 4).
   The variance estimate of N iid normal draws has relative sd sqrt(2/N):
   the diagonal (N = 6 000) 0.018, the off-diagonal (N = 897 000) 0.0015;
   accept within 5 sd.  A mechanism calibrated for 2 rho (s^2 = 2) or for
   a sensitivity of 1 instead of sqrt 2 (s^2 = 2) is 50% off: far outside.
   The mean of the off-diagonal entries: sd s / sqrt(N) = 0.0021, accept
   |mean| < 5 sd.  Symmetry is exact. */
static void s_test_noise(void)
{
    size_t d = 300, reps = 20;
    double rho = 0.25, s2 = 1.0 / rho;
    double *A = malloc(d * d * sizeof *A);
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 1);
    double sd2 = 0, so2 = 0, so = 0;
    size_t nd = 0, no = 0;
    int symmetric = 1;
    for (size_t r = 0; r < reps; r++) {
        memset(A, 0, d * d * sizeof *A);
        gauss_cov_add_noise(A, d, 1.0 / sqrt(rho), rng);
        for (size_t i = 0; i < d; i++) {
            sd2 += A[i * d + i] * A[i * d + i];
            nd++;
            for (size_t j = i + 1; j < d; j++) {
                so2 += A[i * d + j] * A[i * d + j];
                so += A[i * d + j];
                no++;
                symmetric &= A[i * d + j] == A[j * d + i];
            }
        }
    }
    double vd = sd2 / (double)nd, vo = so2 / (double)no, mo = so / (double)no;
    NOTE("Gaussian covariance noise at rho %.2f: diagonal variance %.4f, off-diagonal %.4f (s^2 = %.4f), "
         "off-diagonal mean %.5f", rho, vd, vo, s2, mo);
    s_check_law(vd, nd, vo, no, mo, s2);
    CHECK(symmetric, "E is symmetric");
    dps_rng_destroy(&rng);
    free(A);
}

/* 1b. The release's path (gauss_cov_noisy_float: the draws on the workers,
   C + E rounded to float).  The same law and bounds as 1. (20 draws at
   d = 300, rho = 0.25; float rounding moves a draw by 2^-24 of itself,
   nothing at these bounds), on C = 0 in the upper triangle with 1e6 in the
   lower one, which must not be read (a draw that read it would be off by
   1e6).  Symmetry is exact; the trace is the diagonal's sum; the result is
   the same with 1 and 3 workers (the draws depend on the stream only); the
   64 ranges draw from different forks (a range reusing the first range's
   stream would repeat its first draws). */
static void s_test_noise_float(void)
{
    size_t d = 300, reps = 20;
    double rho = 0.25, s2 = 1.0 / rho;
    double *C = calloc(d * d, sizeof *C);
    float *Af = malloc(d * d * sizeof *Af), *Af3 = malloc(d * d * sizeof *Af3);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < i; j++)
            C[i * d + j] = 1e6;
    dps_pool *pool3 = pool_new(3);
    gauss_noise_ws ws, ws3;
    CHECK(gauss_noise_ws_init(&ws, d, NULL) == DPS_OK && gauss_noise_ws_init(&ws3, d, pool3) == DPS_OK, "init");
    dps_rng *rng = NULL, *rng3 = NULL;
    dps_rng_new_seeded(&rng, 1);
    dps_rng_new_seeded(&rng3, 1);
    double sd2 = 0, so2 = 0, so = 0, trace_err = 0;
    size_t nd = 0, no = 0;
    int symmetric = 1, same = 1, forks_differ = 1;
    for (size_t r = 0; r < reps; r++) {
        double tr = gauss_cov_noisy_float(C, d, 1.0 / sqrt(rho), rng, &ws, NULL, Af);
        gauss_cov_noisy_float(C, d, 1.0 / sqrt(rho), rng3, &ws3, pool3, Af3);
        same &= memcmp(Af, Af3, d * d * sizeof *Af) == 0;
        size_t r1 = ws.cut[1]; /* the second range's first row: its first draw is its diagonal */
        forks_differ &= r1 < d && Af[r1 * d + r1] != Af[0];
        double diag = 0;
        for (size_t i = 0; i < d; i++) {
            diag += Af[i * d + i];
            sd2 += (double)Af[i * d + i] * Af[i * d + i];
            nd++;
            for (size_t j = i + 1; j < d; j++) {
                so2 += (double)Af[i * d + j] * Af[i * d + j];
                so += Af[i * d + j];
                no++;
                symmetric &= Af[i * d + j] == Af[j * d + i];
            }
        }
        trace_err = fmax(trace_err, fabs(diag - tr) / (fabs(tr) + 1));
    }
    double vd = sd2 / (double)nd, vo = so2 / (double)no, mo = so / (double)no;
    NOTE("the release's noise (float, on the workers) at rho %.2f: diagonal variance %.4f, off-diagonal %.4f "
         "(s^2 = %.4f), off-diagonal mean %.5f", rho, vd, vo, s2, mo);
    s_check_law(vd, nd, vo, no, mo, s2);
    CHECK(symmetric, "C + E is symmetric");
    CHECK(trace_err < 1e-5, "the trace is the diagonal's sum (relative error %g)", trace_err);
    CHECK(same, "the same draws with 1 and 3 workers");
    CHECK(forks_differ, "each range draws from its own fork");
    CHECK(isnan(gauss_cov_noisy_float(C, d + 1, 1.0, rng, &ws, NULL, Af)), "a d above the workspace's: NaN");
    gauss_noise_ws_free(&ws);
    gauss_noise_ws_free(&ws3);
    pool_free(&pool3);
    dps_rng_destroy(&rng);
    dps_rng_destroy(&rng3);
    free(C);
    free(Af);
    free(Af3);
}

/* 2. Accuracy and the charge.  n = 1 000 rows near a 2-dim subspace of
   R^100 (the paper's generator at tau = 1e4 d: every row is a unit vector of
   the span up to 1e-4 per coordinate), so C is about (n/2) Pi: its 2nd
   eigenvalue is about 500 and its 3rd about 0 (the spread of n = 1 000
   directions on a circle moves lambda_2 by O(sqrt n) = 30 at most 3 sd).
   At rho = 1 (s = 1) ||E||_2 <= 2 s sqrt(d) (1 + 0.1) = 22 with overwhelming
   probability (Wigner, Bai-Yin), so Davis-Kahan gives
   sin(theta) <= 2 ||E|| / (lambda_2 - lambda_3) <= 44 / 400 = 0.11; accept
   sin < 0.2 on each of 3 epochs. */
static void s_test_accuracy(void)
{
    size_t d = 100, k = 2, t = 125, m = 8, n = t * m;
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 5);
    float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B);
    dps_synth_paper(rng, n, d, k, 1e4 * d, X, B);
    dps_config c;
    dps_config_init(&c, d, k);
    c.t = t;
    c.m = m;
    c.window = t;
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.rho_epoch = 1.0;
    c.seeded = 1;
    c.seed = 9;
    c.workers = 2;
    const char *why = NULL;
    CHECK(dps_config_check(&c, &why) == DPS_OK, "gaussian config: %s", why);
    CHECK(!dps_config_uses_buckets(&c), "no buckets");
    dps_zcdp cost = dps_config_epoch_cost(&c);
    CHECK(cost.rho == 1.0 && cost.delta == 0.0, "charged (rho, 0): (%g, %g)", cost.rho, cost.delta);
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "gaussian estimator");
    double worst = 0;
    for (int ep = 0; ep < 3 && e; ep++) {
        size_t taken = 0;
        dps_estimator_push(e, X, n, d, &taken);
        dps_snapshot *snap = NULL;
        CHECK(dps_estimator_close_epoch(e, &snap) == DPS_OK && snap, "epoch closed");
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        CHECK(in.status == DPS_SNAP_RELEASED && in.aggregator == DPS_AGG_GAUSSIAN && in.rows_used == n &&
                  in.buckets_used == 0 && in.epoch_cost.rho == 1.0 && in.epoch_cost.delta == 0.0,
              "released, every row used, charged (1, 0): status %d rows %llu", (int)in.status,
              (unsigned long long)in.rows_used);
        const float *V = dps_snapshot_basis(snap);
        double sn = V ? dps_subspace_sin(V, B, k, d, NULL) : 1.0;
        worst = fmax(worst, sn);
        dps_snapshot_destroy(&snap);
    }
    NOTE("Gaussian covariance at rho 1, n %zu, d %zu: worst sin over 3 epochs %.3f (bound 0.2)", n, d, worst);
    CHECK(worst < 0.2, "accuracy: sin %g", worst);
    dps_estimator_stats st;
    dps_estimator_get_stats(e, &st);
    CHECK(st.rows_discarded == 0 && st.epochs_internal_error == 0, "nothing discarded, no internal error");
    dps_estimator_destroy(&e);
    dps_config_init(&c, GAUSS_COV_MAX_D + 1, 2);
    c.aggregator = DPS_AGG_GAUSSIAN;
    dps_plan plan;
    CHECK(dps_config_check(&c, &why) == DPS_OK && dps_config_plan(&c, &plan) == DPS_OK &&
              strstr(plan.method[0], "power") != NULL,
          "d above dense_max_d: the power iteration (%s)", why);
    c.dense_max_d = GAUSS_COV_MAX_D + 1;
    CHECK(dps_config_check(&c, &why) == DPS_ELIMIT, "dense_max_d above the limit refused");
    free(X);
    free(B);
    dps_rng_destroy(&rng);
}

/* 3. Parameter groups (DESIGN 7.2).  Rows of R^130 = three groups of 80, 40
   and 10 columns: x = (sqrt(0.7) u, sqrt(0.3) v, 0), u a row of the paper's
   generator near a 2-dim subspace B1 of R^80, v one near a 1-dim B2 of R^40
   (tau = 1e4 d_g), so ||x|| = 1 up to 1e-4.  With ranks (2, 1, 0):
   C_1 is about 0.7 (n/2) Pi_1 (lambda_2 = 350 at n = 1 000), C_2 about
   0.3 n Pi_2 (lambda_1 = 300), the next eigenvalues about 0.  At rho = 1
   ||E_g||_2 <= 2.2 sqrt(d_g) <= 20, so Davis-Kahan bounds each group's sine
   by 2 * 20 / 300 = 0.13; accept < 0.2.  The basis is 3 x 130, exactly zero
   outside each group's block, and the epoch is charged (rho, 0) like the
   same configuration without groups (the argument of one charge is in
   epoch_gaussian.c); the snapshot carries the layout.
   Mixed (DESIGN 7.3, moment_groups.c): d2 = 300 above dense_max_d = 100, so
   group 2 runs the noisy power iteration (one block, b = 1 + 10 columns)
   and every group's noise is s = 1/sqrt(rho) = 1; n = 5 000 rows.
   Group 1: ||E_1|| <= 2.2 x 1 sqrt(80) = 20 against lambda_2 = 1 750:
   sin <= 0.04.  Group 2: one step from the public random start X_0 on C_2
   of rank 1 (lambda_1 = 1 500, v its vector): C_2 X_0 = lambda_1 v (X_0^T
   v)^T has norm lambda_1 ||X_0^T v||, ||X_0^T v||^2 ~ Beta(b/2, (d-b)/2),
   mean b/d = 0.037, below 0.008 with probability < 1e-3, so the signal is
   above 1 500 x 0.09 = 135 against noise of spectral norm about
   s (sqrt 300 + sqrt 11) = 21: Wedin gives sin <= 21 / (135 - 21) = 0.18.
   Accept < 0.3 for both; the charge is still (rho, 0). */
static void s_test_groups(size_t d2, size_t dense_max_d, size_t m, double bound)
{
    size_t d1 = 80, d3 = 10, d = d1 + d2 + d3, t = 125, n = t * m;
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 21);
    float *X1 = malloc(n * d1 * sizeof *X1), *B1 = malloc(2 * d1 * sizeof *B1);
    float *X2 = malloc(n * d2 * sizeof *X2), *B2 = malloc(d2 * sizeof *B2);
    float *X = calloc(n * d, sizeof *X);
    dps_synth_paper(rng, n, d1, 2, 1e4 * d1, X1, B1);
    dps_synth_paper(rng, n, d2, 1, 1e4 * d2, X2, B2);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d1; j++)
            X[i * d + j] = (float)(sqrt(0.7) * X1[i * d1 + j]);
        for (size_t j = 0; j < d2; j++)
            X[i * d + d1 + j] = (float)(sqrt(0.3) * X2[i * d2 + j]);
    }
    dps_config c;
    dps_config_init(&c, d, 3);
    c.t = t;
    c.m = m;
    c.window = t;
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.seeded = 1;
    c.seed = 4;
    c.workers = 1;
    c.dense_max_d = dense_max_d;
    dps_zcdp one = dps_config_epoch_cost(&c);
    c.groups = 3;
    size_t gd[3] = {d1, d2, d3}, gk[3] = {2, 1, 0};
    memcpy(c.group_d, gd, sizeof gd);
    memcpy(c.group_k, gk, sizeof gk);
    const char *why = NULL;
    CHECK(dps_config_check(&c, &why) == DPS_OK, "grouped config: %s", why);
    dps_zcdp cost = dps_config_epoch_cost(&c);
    CHECK(cost.rho == one.rho && cost.delta == 0.0, "groups charged once: (%g, %g)", cost.rho, cost.delta);
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "grouped estimator");
    size_t taken = 0;
    dps_snapshot *snap = NULL;
    if (e) {
        dps_estimator_push(e, X, n, d, &taken);
        dps_estimator_close_epoch(e, &snap);
    }
    dps_snapshot_info in;
    memset(&in, 0, sizeof in);
    if (snap)
        dps_snapshot_get_info(snap, &in);
    const float *V = snap ? dps_snapshot_basis(snap) : NULL;
    CHECK(V && in.k == 3 && in.groups == 3 && in.group_d[1] == d2 && in.group_k[2] == 0 &&
              in.epoch_cost.rho == one.rho,
          "released with its groups: k %zu groups %zu", in.k, in.groups);
    size_t col0 = 0, dg = 0, row0 = 0, kg = 0;
    CHECK(dps_snapshot_group(&in, 1, &col0, &dg, &row0, &kg) == DPS_OK && col0 == d1 && dg == d2 && row0 == 2 &&
              kg == 1,
          "group 1 at column %zu, row %zu", col0, row0);
    CHECK(dps_snapshot_group(&in, 3, NULL, NULL, NULL, NULL) == DPS_EINVAL, "group 3 does not exist");
    if (V) {
        int zero_outside = 1;
        for (size_t j = 0; j < d; j++) {
            zero_outside &= j < d1 || (V[0 * d + j] == 0 && V[1 * d + j] == 0);
            zero_outside &= (j >= d1 && j < d1 + d2) || V[2 * d + j] == 0;
        }
        CHECK(zero_outside, "each group's rows are zero outside its columns");
        float *V1 = malloc(2 * d1 * sizeof *V1), *V2 = malloc(d2 * sizeof *V2);
        for (size_t j = 0; j < d1; j++) {
            V1[j] = V[j];
            V1[d1 + j] = V[d + j];
        }
        memcpy(V2, V + 2 * d + d1, d2 * sizeof *V2);
        double s1 = dps_subspace_sin(V1, B1, 2, d1, NULL), s2 = dps_subspace_sin(V2, B2, 1, d2, NULL);
        dps_plan plan;
        dps_config_plan(&c, &plan);
        NOTE("groups (80, %zu, 10) ranks (2, 1, 0) at rho 1, n %zu: sin %.3f (%s) and %.3f (%s) (bound %g)", d2, n,
             s1, plan.method[0], s2, plan.method[1], bound);
        CHECK(s1 < bound && s2 < bound, "each group's basis: sin %g, %g", s1, s2);
        free(V1);
        free(V2);
    }
    dps_snapshot_destroy(&snap);
    dps_estimator_destroy(&e);
    /* what the configuration check refuses */
    c.group_k[2] = 11;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL, "a rank above its width");
    c.group_k[2] = 0;
    c.group_d[2] = 9;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL, "widths that do not add up to d");
    c.group_d[2] = 10;
    c.group_k[1] = 2;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL, "ranks that do not add up to k");
    c.group_k[1] = 1;
    c.aggregator = DPS_AGG_REFERENCE;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL, "groups with a bucket aggregator: %s", why);
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.groups = DPS_MAX_GROUPS + 1;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL, "too many groups");
    free(X1);
    free(X2);
    free(B1);
    free(B2);
    free(X);
    dps_rng_destroy(&rng);
}

/* 4. The workers: one seeded epoch of 700 rows at d = 300 (above the width
   where the sum is cut among the workers; 2 blocks and a partial one) and
   dense_max_d 300 (the eigensolver's products cut too), by 1, 2 and 3
   workers, twice with 2.  Reproducible for a given number (required: every
   sum is one call's); the same for any number with OpenBLAS (its sum for an
   entry does not depend on how the columns or rows are cut: the contract
   in linalg.h says so, and this is where it would be seen to break). */
static void s_release_with(size_t workers, const float *X, size_t n, size_t d, size_t k, float *V)
{
    dps_config c;
    dps_config_init(&c, d, k);
    c.t = 7;
    c.m = n / 7;
    c.window = 7;
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.rho_epoch = 1.0;
    c.seeded = 1;
    c.seed = 4;
    c.workers = (int)workers;
    dps_estimator *e = NULL;
    dps_snapshot *snap = NULL;
    memset(V, 0, k * d * sizeof *V);
    int rc = dps_estimator_new(&e, &c);
    if (!rc)
        rc = dps_estimator_push(e, X, n, d, NULL);
    if (!rc)
        rc = dps_estimator_close_epoch(e, &snap);
    CHECK(!rc && dps_snapshot_basis(snap), "%zu workers: released (%s)", workers, dps_strerror(rc));
    if (!rc && dps_snapshot_basis(snap))
        memcpy(V, dps_snapshot_basis(snap), k * d * sizeof *V);
    dps_snapshot_destroy(&snap);
    dps_estimator_destroy(&e);
}

static void s_test_workers(void)
{
    size_t d = 300, k = 3, n = 700;
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 6);
    float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B), *V[4];
    dps_synth_paper(rng, n, d, k, 1e3 * d, X, B);
    for (int i = 0; i < 4; i++)
        V[i] = malloc(k * d * sizeof *V[i]);
    s_release_with(1, X, n, d, k, V[0]);
    s_release_with(2, X, n, d, k, V[1]);
    s_release_with(2, X, n, d, k, V[2]);
    s_release_with(3, X, n, d, k, V[3]);
    double sn = dps_subspace_sin(V[1], B, k, d, NULL);
    CHECK(sn < 0.5, "a basis was released (sin %g)", sn);
    CHECK(memcmp(V[1], V[2], k * d * sizeof *V[1]) == 0, "2 workers twice: the same release");
    CHECK(memcmp(V[0], V[1], k * d * sizeof *V[0]) == 0 && memcmp(V[0], V[3], k * d * sizeof *V[0]) == 0,
          "1, 2 and 3 workers: the same release");
    for (int i = 0; i < 4; i++)
        free(V[i]);
    free(X);
    free(B);
    dps_rng_destroy(&rng);
}

int main(void)
{
    s_test_noise();
    s_test_noise_float();
    s_test_accuracy();
    s_test_groups(40, 0, 8, 0.2);
    s_test_groups(300, 100, 40, 0.3);
    s_test_workers();
    return check_summary();
}
