/* test_epoch_gaussian - the Gaussian covariance epoch mechanism
   (DPS_AGG_GAUSSIAN, src/mechanisms/epoch_gaussian.c): the noise has the
   stated law, an epoch is charged (rho, 0), and the release is accurate on
   rows near a subspace within the Davis-Kahan bound. */
#include "check.h"
#include "dpsubspace.h"
#include "gaussian_cov.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        gauss_cov_add_noise(A, d, rho, rng);
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
    CHECK(fabs(vd / s2 - 1) < 5 * sqrt(2.0 / (double)nd), "diagonal variance %g, want %g", vd, s2);
    CHECK(fabs(vo / s2 - 1) < 5 * sqrt(2.0 / (double)no), "off-diagonal variance %g, want %g", vo, s2);
    CHECK(fabs(mo) < 5 * sqrt(s2 / (double)no), "off-diagonal mean %g", mo);
    CHECK(symmetric, "E is symmetric");
    dps_rng_destroy(&rng);
    free(A);
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
    dps_stats st;
    dps_estimator_get_stats(e, &st);
    CHECK(st.rows_discarded == 0 && st.epochs_internal_error == 0, "nothing discarded, no internal error");
    dps_estimator_destroy(&e);
    dps_config_init(&c, GAUSS_COV_MAX_D + 1, 2);
    c.aggregator = DPS_AGG_GAUSSIAN;
    CHECK(dps_config_check(&c, &why) == DPS_ELIMIT, "d above the limit refused");
    free(X);
    free(B);
    dps_rng_destroy(&rng);
}

int main(void)
{
    s_test_noise();
    s_test_accuracy();
    return check_summary();
}
