/* test_histogram - the histogram aggregator (src/mechanisms/histogram.c): the threshold's
   delta (a lone item passes with probability delta), the noisy count's scale,
   agreeing buckets give one cell and a basis within the cell-centre error
   bound, unrelated buckets FAIL, two groups release the larger, bad arguments
   and the size limit, and the streaming estimator with --aggregator histogram
   end to end (config checks, snapshot fields, accuracy on near-exact data). */
#include "config_internal.h"
#include "check.h"
#include "aggregate.h"
#include "dpsubspace.h"
#include "linalg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A random k x d orthonormal basis. */
static void s_basis(dps_rng *r, size_t k, size_t d, float *V)
{
    dps_rng_gaussian_fill_f(r, 1.0, V, k * d);
    la_orthonormalize_rows(V, k, d);
}

typedef struct {
    size_t t, k, d, q;
    float *V, *A, *P;
    agg_input in;
} items;

static void s_items_init(items *it, size_t t, size_t k, size_t d, size_t q)
{
    *it = (items){.t = t, .k = k, .d = d, .q = q};
    it->V = malloc(t * k * d * sizeof(float));
    it->A = malloc(t * k * q * sizeof(float));
    it->P = malloc(q * d * sizeof(float));
    dps_reference_points(7, 0, q, d, it->P);
    it->in = (agg_input){it->V, it->A, t, k, d, q, 0};
}

/* Bucket j gets basis B (k x d). */
static void s_set(items *it, size_t j, const float *B)
{
    memcpy(it->V + j * it->k * it->d, B, it->k * it->d * sizeof(float));
    la_project_reference(B, it->k, it->d, it->P, it->q, it->A + j * it->k * it->q);
}

static void s_items_free(items *it)
{
    free(it->V); free(it->A); free(it->P);
}

int main(void)
{
    dps_rng *rng = NULL, *pub = NULL;
    dps_rng_new_seeded(&rng, 2024);
    dps_rng_new_labelled(&pub, 0, "test", 0);

    /* 1. Threshold and parameters. */
    CHECK(fabs(agg_hist_threshold(2.0, 1e-8) - (1 + log(1 / 2e-8))) < 1e-12, "T formula");
    CHECK(agg_hist_params_ok(2.0, 1e-8) && !agg_hist_params_ok(0, 1e-8) && !agg_hist_params_ok(1, 0) &&
              !agg_hist_params_ok(1, 0.6) && !agg_hist_params_ok(1e-9, 1e-8) && !agg_hist_params_ok(NAN, 1e-8),
          "params_ok range");
    CHECK(agg_hist_min_buckets(2.0, 1e-8) == (size_t)floor(agg_hist_threshold(2.0, 1e-8)) + 1, "min buckets");

    /* 2. A lone item (count 1) passes T with probability exactly delta (the
       bad event of the proof).  delta = 0.05, eps = 1, N = 20000 runs:
       binomial sd sqrt(0.05 * 0.95 / N) = 0.00154; accept within 5 sd. */
    {
        items it;
        s_items_init(&it, 1, 1, 6, 2);
        float B[6];
        s_basis(rng, 1, 6, B);
        s_set(&it, 0, B);
        float basis[6];
        size_t N = 20000, rel = 0;
        agg_hist_result res;
        for (size_t r = 0; r < N; r++) {
            int rc = agg_histogram(&it.in, 1.0, 0.05, 0.1, rng, pub, basis, &res);
            rel += (rc == DPS_OK && !res.failed);
        }
        double rate = (double)rel / N, sd = sqrt(0.05 * 0.95 / N);
        NOTE("lone item released in %.4f of %zu runs (delta = 0.05, 5 sd = %.4f)", rate, N, 5 * sd);
        CHECK(fabs(rate - 0.05) < 5 * sd, "lone item pass rate %g", rate);
        s_items_free(&it);
    }

    /* 3. All buckets agree: one cell holding all t, the noisy count is
       t + Lap(2/eps) (mean |noise| = 2/eps = 1, sd 1: over 2000 runs the mean
       is within 5/sqrt(2000) = 0.11), and the released basis is within
       Wedin's bound of the truth: the centre differs from the item by at
       most l/2 per coordinate, ||E||_2 <= ||E||_F <= (l/2) sqrt(qd), and
       sin <= ||E|| / (s_k - ||E||) with s_k the k-th singular value of the item. */
    {
        size_t t = 125, k = 2, d = 40, q = 20;
        items it;
        s_items_init(&it, t, k, d, q);
        float *B = malloc(k * d * sizeof *B), *basis = malloc(k * d * sizeof *basis);
        s_basis(rng, k, d, B);
        for (size_t j = 0; j < t; j++)
            s_set(&it, j, B);
        agg_hist_result res;
        double l = agg_hist_default_width(k, d), sum_abs = 0;
        size_t N = 2000, ok = 0;
        for (size_t r = 0; r < N; r++) {
            int rc = agg_histogram(&it.in, 2.0, 1e-8, 0, rng, pub, basis, &res);
            ok += rc == DPS_OK && !res.failed && res.cells == 1 && res.count == t;
            sum_abs += fabs(res.count_hat - (double)t);
        }
        CHECK(ok == N, "agreeing buckets: %zu of %zu runs one cell of count t", ok, N);
        CHECK(fabs(res.width - l) < 1e-15, "default width %g vs %g", res.width, l);
        NOTE("mean |noisy count - t| = %.3f (expect 2/eps = 1)", sum_abs / N);
        CHECK(fabs(sum_abs / N - 1.0) < 5.0 / sqrt((double)N), "Laplace scale: mean abs %g", sum_abs / N);
        /* the exact item Y = A^T V (q x d) and its singular values */
        float *Y = calloc(q * d, sizeof *Y);
        for (size_t i = 0; i < q; i++)
            for (size_t c = 0; c < d; c++)
                for (size_t a = 0; a < k; a++)
                    Y[i * d + c] += it.A[a * q + i] * B[a * d + c];
        float *W = malloc(k * d * sizeof *W);
        double sv[3];
        dps_topk_basis(Y, q, d, k, W, sv);
        double E = 0.5 * l * sqrt((double)(q * d)), bound = E / (sv[k - 1] - E);
        double s = dps_subspace_sin(basis, B, k, d, NULL);
        NOTE("agreeing buckets: sin to truth %.4f <= Wedin bound %.4f (l = %.4f, s_k = %.2f)", s, bound, l, sv[k - 1]);
        CHECK(bound > 0 && s <= bound, "accuracy %g > %g", s, bound);

        /* 4. Two groups: 70 buckets on B, 55 on B2: two cells, the larger is
           released (noisy counts 15 apart, Lap(1) each: P[flip] < e^-7). */
        float *B2 = malloc(k * d * sizeof *B2);
        s_basis(rng, k, d, B2);
        for (size_t j = 70; j < t; j++)
            s_set(&it, j, B2);
        int rc = agg_histogram(&it.in, 2.0, 1e-8, 0, rng, pub, basis, &res);
        CHECK(rc == DPS_OK && !res.failed && res.cells == 2 && res.count == 70, "two groups: cells %zu count %zu",
              res.cells, res.count);
        CHECK(dps_subspace_sin(basis, B, k, d, NULL) < dps_subspace_sin(basis, B2, k, d, NULL), "larger group wins");

        /* 5. Unrelated buckets: every item its own cell (count 1); each passes
           with probability delta = 1e-8, so FAIL except with prob <= t delta. */
        for (size_t j = 0; j < t; j++) {
            s_basis(rng, k, d, B2);
            s_set(&it, j, B2);
        }
        rc = agg_histogram(&it.in, 2.0, 1e-8, 0, rng, pub, basis, &res);
        CHECK(rc == DPS_OK && res.failed && res.cells == t, "unrelated: failed %d cells %zu", res.failed, res.cells);

        /* 6. Bad arguments and the limit. */
        CHECK(agg_histogram(&it.in, 0, 1e-8, 0, rng, pub, basis, &res) == DPS_EINVAL, "eps 0");
        CHECK(agg_histogram(&it.in, 2, 0, 0, rng, pub, basis, &res) == DPS_EINVAL, "delta 0");
        CHECK(agg_histogram(&it.in, 2, 0.7, 0, rng, pub, basis, &res) == DPS_EINVAL, "delta > 1/2");
        CHECK(agg_histogram(&it.in, 2, 1e-8, -1, rng, pub, basis, &res) == DPS_EINVAL, "width < 0");
        CHECK(agg_histogram(&it.in, 2, 1e-8, NAN, rng, pub, basis, &res) == DPS_EINVAL, "width NaN");
        CHECK(agg_histogram(NULL, 2, 1e-8, 0, rng, pub, basis, &res) == DPS_EINVAL, "no input");
        CHECK(agg_histogram(&it.in, 2, 1e-8, 0, NULL, pub, basis, &res) == DPS_EINVAL, "no rng");
        agg_input big = it.in;
        big.d = (size_t)1 << 20;
        big.q = 9; /* q*d > 2^23: refused before anything is read */
        CHECK(agg_histogram(&big, 2, 1e-8, 0, rng, pub, basis, &res) == DPS_ELIMIT, "limit");
        big = it.in;
        big.q = 1; /* q < k */
        CHECK(agg_histogram(&big, 2, 1e-8, 0, rng, pub, basis, &res) == DPS_EINVAL, "q < k");
        free(Y); free(W); free(B); free(B2); free(basis);
        s_items_free(&it);
    }

    /* 7. The estimator with the histogram aggregator: config checks ... */
    {
        dps_config c;
        dps_config_init(&c, 60, 2);
        c.aggregator = DPS_AGG_HISTOGRAM;
        c.rho_epoch = 2;
        c.seeded = 1;
        c.seed = 5;
        c.workers = 2;
        const char *why = NULL;
        CHECK(dps_config_check(&c, &why) == DPS_OK, "histogram config ok: %s", why);
        CHECK(dps_config_min_buckets(&c) == agg_hist_min_buckets(2.0, 1e-8), "min buckets from T");
        dps_config b = c;
        b.hist_width = -1;
        CHECK(dps_config_check(&b, &why) == DPS_EINVAL, "negative width");
        b = c;
        b.aggregator = DPS_AGG_REFERENCE;
        b.hist_width = 0.1;
        CHECK(dps_config_check(&b, &why) == DPS_EINVAL, "width for reference refused");
        b = c;
        b.t = agg_hist_min_buckets(2.0, 1e-8) - 1;
        b.window = b.t;
        CHECK(dps_config_check(&b, &why) == DPS_EINVAL, "too few buckets");
        b = c;
        b.d = (size_t)1 << 20;
        CHECK(dps_config_check(&b, &why) == DPS_ELIMIT, "q*d limit: %s", why);
        b = c;
        b.aggregator = (dps_aggregator)7;
        CHECK(dps_config_check(&b, &why) == DPS_EINVAL, "unknown aggregator");

        /* ... and a run on near-exact data (tau = 1e6 d: each row is off the
           span by sqrt(d)/tau = 1.3e-7, far below the cell side 0.046): every
           bucket falls in one cell, the basis is within the cell-centre
           error (same Wedin bound as above, s_k >= ~sqrt(q) - sqrt(k) ... we
           check the conservative sin < 0.3 and that the snapshot says what it did). */
        size_t n = c.t * c.m;
        float *X = malloc(n * c.d * sizeof *X), *truth = malloc(c.k * c.d * sizeof *truth);
        dps_synth_paper(rng, n, c.d, c.k, 1e6 * (double)c.d, X, truth);
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "estimator");
        size_t taken = 0;
        CHECK(dps_estimator_push(e, X, n, c.d, &taken) == DPS_OK && taken == n, "push");
        dps_snapshot *s = NULL;
        CHECK(dps_estimator_close_epoch(e, &s) == DPS_OK && s, "close");
        dps_snapshot_info info;
        dps_snapshot_get_info(s, &info);
        double sn = info.status == DPS_SNAP_RELEASED ? dps_subspace_sin(dps_snapshot_basis(s), truth, c.k, c.d, NULL) : 1;
        NOTE("estimator, histogram: status %s, sin %.4f, l = %.4f, unrelated %.4f, count^ %.1f", dps_snapshot_status_name(info.status),
             sn, info.radius, info.radius_unrelated, info.w_hat);
        CHECK(info.status == DPS_SNAP_RELEASED && sn < 0.3, "released and accurate: %g", sn);
        CHECK(info.aggregator == DPS_AGG_HISTOGRAM && strcmp(dps_aggregator_name(info.aggregator), "histogram") == 0,
              "aggregator name");
        CHECK(fabs(info.radius - agg_hist_default_width(c.k, c.d)) < 1e-12 &&
                  fabs(info.radius_unrelated - sqrt(2.0 * c.k / c.d)) < 1e-12 && !dps_snapshot_weak(&info),
              "radius fields");
        CHECK(fabs(info.epoch_cost.rho - 2.0) < 1e-12 && info.epoch_cost.delta == 1e-8, "cost (rho_epoch, delta_epoch)");
        CHECK(fabs(info.w_hat - (double)c.t) < 40, "noisy count near t: %g", info.w_hat);
        dps_snapshot_destroy(&s);
        dps_estimator_destroy(&e);
        free(X); free(truth);
    }
    dps_rng_destroy(&rng);
    dps_rng_destroy(&pub);
    return check_summary();
}
