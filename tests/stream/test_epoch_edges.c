/* test_epoch_edges - the streaming estimator at the edges of an epoch
   (issue 9): hostile rows (subnormal, huge, NaN, Inf) never turn a charged
   epoch into an error or a non-finite basis, in every aggregator; an epoch's
   buckets are released once. */
#include "config_internal.h"
#include "check.h"
#include "dpsubspace.h"
#include "estimator_internal.h"
#include "estimator_test_util.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ hostile rows */
/* Issue 9: after the charge, no outcome may depend on an error the data can
   cause.  Every row that reaches a bucket must be finite with norm <= 1. */
typedef struct {
    pthread_mutex_t mu;
    int bad; /* a row that is non-finite or longer than 1 reached a bucket */
} row_guard;

static void s_guard(void *arg, uint64_t epoch, size_t bucket, const float *rows, size_t m, size_t d)
{
    (void)epoch; (void)bucket;
    row_guard *g = arg;
    int bad = 0;
    for (size_t i = 0; i < m; i++) {
        long double ss = 0; /* squares exact in double; the sum within d 2^-63 relative */
        for (size_t j = 0; j < d; j++) {
            if (!isfinite(rows[i * d + j]))
                bad = 1;
            ss += (double)rows[i * d + j] * rows[i * d + j];
        }
        if (ss * (1.0L + (long double)d * 0x1p-62L) > 1.0L)
            bad = 1;
    }
    pthread_mutex_lock(&g->mu);
    g->bad |= bad;
    pthread_mutex_unlock(&g->mu);
}

/* For every aggregator and every kind of hostile row, D and D' (row 7
   replaced) with the same seed both end in a snapshot (released or FAILED:
   a DP output), never in an error, and the row is counted under its kind.
   Before the fix, the 1e-41 row gave DPS_EINVAL after the charge in the
   covariance mode (no snapshot), and Inf/NaN entered the buckets as such. */
static void s_test_hostile_rows(void)
{
    enum { KINDS = 8 };
    const char *kind_name[KINDS] = {"none", "all 1e-41", "one FLT_TRUE_MIN", "all 3e38", "FLT_MAX among 1e-41",
                                    "NaN", "+Inf and -Inf", "zero"};
    size_t d = 20, k = 2;
    dps_aggregator aggs[] = {DPS_AGG_REFERENCE, DPS_AGG_PROJECTION, DPS_AGG_HISTOGRAM, DPS_AGG_COVARIANCE,
                             DPS_AGG_GAUSSIAN, DPS_AGG_POWER};
    for (size_t a = 0; a < sizeof aggs / sizeof *aggs; a++) {
        dps_config c = s_cfg(d, k, 125, 4, 5);
        c.aggregator = aggs[a];
        c.t = dps_config_min_buckets(&c) + 5 > 125 ? dps_config_min_buckets(&c) + 5 : 125; /* 500 rows for the covariance mode */
        c.window = c.t;
        const char *why = NULL;
        CHECK(dps_config_check(&c, &why) == DPS_OK, "hostile rows: config of aggregator %d: %s", (int)aggs[a], why);
        size_t n = c.t * c.m;
        dps_rng *rng = NULL;
        dps_rng_new_seeded(&rng, 1);
        float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B);
        dps_synth_paper(rng, n, d, k, 1e4 * d, X, B);
        for (int kind = 0; kind < KINDS; kind++) {
            float *x = X + 7 * d, save[20];
            memcpy(save, x, sizeof save);
            for (size_t j = 0; j < d; j++)
                x[j] = kind == 1 ? 1e-41f : kind == 3 ? 3e38f : kind == 4 ? 1e-41f : kind == 7 ? 0.0f
                     : kind == 2 ? 0.0f : x[j];
            if (kind == 2)
                x[4] = FLT_TRUE_MIN;
            if (kind == 4)
                x[3] = FLT_MAX;
            if (kind == 5)
                x[5] = NAN;
            if (kind == 6) {
                x[5] = INFINITY;
                x[6] = -INFINITY;
            }
            dps_estimator *e = NULL;
            CHECK(dps_estimator_new(&e, &c) == DPS_OK, "hostile rows: new");
            row_guard g = {PTHREAD_MUTEX_INITIALIZER, 0};
            dps_estimator_set_bucket_hook(e, s_guard, &g);
            size_t taken = 0;
            dps_estimator_push(e, X, n, d, &taken);
            dps_snapshot *snap = NULL;
            int rc = dps_estimator_close_epoch(e, &snap);
            dps_snapshot_info in;
            memset(&in, 0, sizeof in);
            if (snap)
                dps_snapshot_get_info(snap, &in);
            CHECK(rc == DPS_OK && snap && (in.status == DPS_SNAP_RELEASED || in.status == DPS_SNAP_FAILED) &&
                      in.epoch_cost.rho == c.rho_epoch,
                  "aggregator %d, row '%s': a charged snapshot (rc %s, status %d)", (int)aggs[a], kind_name[kind],
                  dps_strerror(rc), snap ? (int)in.status : -1);
            CHECK(!g.bad, "aggregator %d, row '%s': every bucket row finite with norm <= 1", (int)aggs[a],
                  kind_name[kind]);
            const float *V = snap ? dps_snapshot_basis(snap) : NULL;
            int finite = 1;
            for (size_t i = 0; V && i < k * d; i++)
                finite &= isfinite(V[i]);
            CHECK(finite, "aggregator %d, row '%s': the basis is finite", (int)aggs[a], kind_name[kind]);
            if (kind == 0 && V) /* the clean epoch works, so the comparison means something */
                CHECK(dps_subspace_sin(V, B, k, d, NULL) < 0.5, "aggregator %d: clean epoch accurate", (int)aggs[a]);
            dps_estimator_stats st;
            dps_estimator_get_stats(e, &st);
            CHECK(st.rows_nan == (kind == 5) && st.rows_inf == (kind == 6) && st.rows_zero == (kind == 7) &&
                      st.epochs_internal_error == 0,
                  "aggregator %d, row '%s': counted nan %llu inf %llu zero %llu internal %llu", (int)aggs[a],
                  kind_name[kind], (unsigned long long)st.rows_nan, (unsigned long long)st.rows_inf,
                  (unsigned long long)st.rows_zero, (unsigned long long)st.epochs_internal_error);
            dps_snapshot_destroy(&snap);
            dps_estimator_destroy(&e);
            memcpy(x, save, sizeof save);
        }
        free(X); free(B);
        dps_rng_destroy(&rng);
    }
}

/* An epoch's buckets are released once.  Closing again before any row of
   the next epoch must find no completed bucket: FAILED, nothing spent (before
   the fix the second close released the previous epoch's bases again and
   charged rho again, so one row influenced two releases). */
static void s_test_close_twice(void)
{
    size_t d = 20, k = 2;
    dps_aggregator aggs[] = {DPS_AGG_REFERENCE, DPS_AGG_PROJECTION, DPS_AGG_HISTOGRAM, DPS_AGG_COVARIANCE,
                             DPS_AGG_GAUSSIAN, DPS_AGG_POWER};
    for (size_t a = 0; a < sizeof aggs / sizeof *aggs; a++) {
        dps_config c = s_cfg(d, k, 125, 4, 5);
        c.aggregator = aggs[a];
        c.t = dps_config_min_buckets(&c) + 5 > 125 ? dps_config_min_buckets(&c) + 5 : 125;
        c.window = c.t;
        size_t n = c.t * c.m;
        dps_rng *rng = NULL;
        dps_rng_new_seeded(&rng, 2);
        float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B);
        dps_synth_paper(rng, n, d, k, 1e4 * d, X, B);
        ledger l = {0};
        c.commit = s_commit;
        c.commit_arg = &l;
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "close twice: new");
        dps_snapshot *first = s_run_epoch(e, X, n, d), *second = NULL, *third = NULL;
        CHECK(dps_estimator_close_epoch(e, &second) == DPS_OK, "close twice: second close");
        CHECK(dps_estimator_close_epoch(e, &third) == DPS_OK, "close twice: third close");
        dps_snapshot_info i1, i2, i3;
        dps_snapshot_get_info(first, &i1);
        dps_snapshot_get_info(second, &i2);
        dps_snapshot_get_info(third, &i3);
        CHECK(i1.epoch_cost.rho == c.rho_epoch, "aggregator %d: the first close ran", (int)aggs[a]);
        CHECK(i2.status == DPS_SNAP_FAILED && i2.epoch_cost.rho == 0 && i2.buckets_used == 0 && i2.rows_used == 0 &&
                  i3.status == DPS_SNAP_FAILED && i3.epoch_cost.rho == 0,
              "aggregator %d: closing again releases nothing and spends nothing (status %d, rho %g, buckets %zu)",
              (int)aggs[a], (int)i2.status, i2.epoch_cost.rho, i2.buckets_used);
        CHECK(l.calls == 1 && fabs(dps_estimator_spent(e).rho - c.rho_epoch) < 1e-12,
              "aggregator %d: one charge in all (%d commits, rho %g)", (int)aggs[a], l.calls,
              dps_estimator_spent(e).rho);
        /* and the next epoch works as usual */
        dps_snapshot *next = s_run_epoch(e, X, n, d);
        dps_snapshot_info i4;
        dps_snapshot_get_info(next, &i4);
        CHECK(i4.epoch_cost.rho == c.rho_epoch && i4.buckets_used == (dps_config_uses_buckets(&c) ? c.t : 0),
              "aggregator %d: the next epoch runs on its own buckets", (int)aggs[a]);
        dps_snapshot_destroy(&first);
        dps_snapshot_destroy(&second);
        dps_snapshot_destroy(&third);
        dps_snapshot_destroy(&next);
        dps_estimator_destroy(&e);
        free(X); free(B);
        dps_rng_destroy(&rng);
    }
}

int main(void)
{
    s_test_hostile_rows();
    s_test_close_twice();
    return check_summary();
}
