/* test_alloc_failure - the estimator when a bucket's buffer cannot be had.
   Linked with -Wl,--wrap=dps_aligned_alloc (tests/CMakeLists.txt): every
   call the library makes from another file goes through __wrap_ below,
   which refuses the buffers of m x d floats on demand, as a machine out of
   memory would.  What must hold (buckets.h, estimator.c's s_push):
   - the row that completed a bucket whose successor could not be opened
     was taken and counted, and push says DPS_ENOMEM there, even when
     another open bucket has room;
   - with no slot left open, push takes nothing and says DPS_ENOMEM, every
     time (buckets_slot returns NULL: no slot is read below the array);
   - the epoch still closes, over the buckets that completed (here too few
     for the mechanism to run, so nothing is charged);
   - with memory back, the next epoch takes its t m rows and releases all
     t buckets. */
#include "check.h"
#include "estimator_test_util.h"
#include "internal.h"

#include <stdlib.h>

void *__real_dps_aligned_alloc(size_t n, size_t size);
void *__wrap_dps_aligned_alloc(size_t n, size_t size);

static size_t g_block;      /* floats in a bucket's buffer: m x d */
static int g_refuse_after;  /* buffers still granted before refusing (-1: never refuse) */
static int g_refused;       /* buffers refused so far */

void *__wrap_dps_aligned_alloc(size_t n, size_t size)
{
    if (g_block && n == g_block && size == sizeof(float) && g_refuse_after >= 0) {
        if (g_refuse_after == 0) {
            g_refused++;
            return NULL;
        }
        g_refuse_after--;
    }
    return __real_dps_aligned_alloc(n, size);
}

enum { D = 16, K = 2, T = 8, M = 4 };

static void s_rows(float *x, size_t n)
{
    for (size_t i = 0; i < n * D; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
}

int main(void)
{
    float rows[T * M * D];
    s_rows(rows, T * M);
    /* window 1 of t = 8: not in place, so each bucket takes a buffer from
       the pipe (s_take_buffer), allocated while fewer than window + workers
       + 1 exist; one worker. */
    dps_config c = s_cfg(D, K, T, M, 11);
    c.window = 1;
    c.workers = 1;
    c.rho_epoch = 100; /* enough for t = 8 buckets to release (dps_config_check) */
    ledger l = {0};
    dps_config_set_commit(&c, s_commit, &l);
    const char *why = NULL;
    CHECK(dps_config_check(&c, &why) == DPS_OK, "config: %s", why);
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "estimator");
    if (!e)
        return check_summary();
    g_block = (size_t)M * D;

    /* the first bucket's buffer is granted, its successor's refused */
    g_refuse_after = 1;
    size_t taken = 99;
    int rc = dps_estimator_push(e, rows, T * M, D, &taken);
    CHECK(rc == DPS_ENOMEM, "push with the second bucket's buffer refused: %d", rc);
    CHECK(taken == M, "the row that completed the first bucket was taken: %zu of %d", taken, M);
    CHECK(g_refused == 1, "one buffer refused: %d", g_refused);
    dps_estimator_stats st;
    dps_estimator_get_stats(e, &st);
    CHECK(st.rows_accepted == M && st.rows_in_epoch == M, "counted: %llu accepted, %llu in the epoch",
          (unsigned long long)st.rows_accepted, (unsigned long long)st.rows_in_epoch);

    /* no slot open: nothing taken, every time, with memory back or not (the
       epoch's next bucket was already lost) */
    for (int i = 0; i < 3; i++) {
        taken = 99;
        rc = dps_estimator_push(e, rows + M * D, 1, D, &taken);
        CHECK(rc == DPS_ENOMEM && taken == 0, "push %d with no slot: rc %d, taken %zu", i, rc, taken);
        g_refuse_after = -1;
    }
    dps_estimator_get_stats(e, &st);
    CHECK(st.rows_accepted == M, "nothing more counted: %llu", (unsigned long long)st.rows_accepted);

    /* the epoch still closes: one completed bucket of the 7 the mechanism
       needs (dps_config_check's count at this rho), so it does not run and
       nothing is charged -- as any epoch with too few buckets */
    dps_snapshot *s = NULL;
    rc = dps_estimator_close_epoch(e, &s);
    CHECK(rc == DPS_OK && s, "close after the refusal: %d", rc);
    CHECK(l.calls == 0, "nothing charged: %d", l.calls);
    if (s) {
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        CHECK(in.status == DPS_SNAP_FAILED && in.buckets_used == 1 && in.rows_used == M && in.epoch_cost.rho == 0,
              "not run over the one completed bucket: %s, %zu buckets, %llu rows, rho %g",
              dps_snapshot_status_name(in.status), in.buckets_used, (unsigned long long)in.rows_used,
              in.epoch_cost.rho);
    }
    dps_snapshot_destroy(&s);

    /* memory back: a whole epoch */
    taken = 0;
    rc = dps_estimator_push(e, rows, T * M, D, &taken);
    CHECK(rc == DPS_OK && taken == T * M, "the next epoch takes its rows: rc %d, %zu", rc, taken);
    rc = dps_estimator_close_epoch(e, &s);
    CHECK(rc == DPS_OK && s, "the next epoch closes: %d", rc);
    CHECK(l.calls == 1, "charged once: %d", l.calls);
    if (s) {
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        CHECK(in.status == DPS_SNAP_RELEASED && in.buckets_used == T && in.rows_used == T * M,
              "released over all buckets: %s, %zu, %llu rows", dps_snapshot_status_name(in.status), in.buckets_used,
              (unsigned long long)in.rows_used);
    }
    dps_snapshot_destroy(&s);
    dps_estimator_destroy(&e);

    /* window 2: the push stops at the row whose bucket's successor was
       refused, while the other open bucket still has room (so fewer than 2 m
       rows are taken; going on would fill the other bucket first) */
    c.window = 2;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "estimator, window 2");
    g_refuse_after = 2;
    g_refused = 0;
    taken = 0;
    rc = e ? dps_estimator_push(e, rows, T * M, D, &taken) : DPS_EINVAL;
    CHECK(rc == DPS_ENOMEM && g_refused == 1 && taken >= M && taken < 2 * M,
          "window 2: stopped at the refusal: rc %d, %d refused, %zu taken", rc, g_refused, taken);
    dps_estimator_destroy(&e);
    return check_summary();
}
