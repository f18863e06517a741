/* test_alloc_failure - the estimator when a bucket's buffer cannot be had.
   Linked with -Wl,--wrap=dps_aligned_alloc (tests/CMakeLists.txt): every
   call the library makes from another file goes through __wrap_ below,
   which refuses the buffers of m x d floats on demand, as a machine out of
   memory would.  What must hold (buckets.h):
   - mid-epoch, a bucket that cannot have a new buffer waits for one a
     worker gives back: every row is taken, every bucket released;
   - at an epoch's start, with no bucket at a worker, the push says
     DPS_ENOMEM and takes nothing; the buffers of the buckets it did open
     go back for the next start, which then needs fewer new ones;
   - an epoch that would begin in the other slot while the last one is
     sealed, and cannot have that slot's buffers, says DPS_ESTATE (release
     first, as with no memory for the slot itself) and begins in the last
     one's slot once it is released;
   - seeded, a start refused and retried changes no release. */
#include "check.h"
#include "estimator_internal.h"
#include "estimator_test_util.h"
#include "internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__real_dps_aligned_alloc(size_t n, size_t size);
void *__wrap_dps_aligned_alloc(size_t n, size_t size);

static size_t g_block;         /* floats in a bucket's buffer: m x d */
static int g_refuse_after;     /* buffers still granted before refusing (-1: never refuse) */
static atomic_int g_refused;   /* buffers refused so far */
static atomic_int g_hold;      /* bucket jobs wait for a refusal (s_hold) */

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

/* The bucket hook, first thing in each bucket's job on a worker: while
   g_hold, it waits until a buffer was refused, so that the pushing thread
   meets the refusal with that bucket still at the worker (else the worker
   may give its buffer back first, and no buffer is asked for). */
static void s_hold(void *arg, uint64_t epoch, size_t bucket, const float *rows, size_t m, size_t d)
{
    (void)arg, (void)epoch, (void)bucket, (void)rows, (void)m, (void)d;
    while (atomic_load(&g_hold) && atomic_load(&g_refused) == 0)
        sched_yield();
}

enum { D = 16, K = 2, T = 8, M = 4 };

static void s_rows(float *x, size_t n)
{
    for (size_t i = 0; i < n * D; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
}

/* Closes the epoch: released over all T buckets, one more charge. */
static void s_close_all(dps_estimator *e, const ledger *l, int charges, const char *what)
{
    dps_snapshot *s = NULL;
    int rc = dps_estimator_close_epoch(e, &s);
    CHECK(rc == DPS_OK && s, "%s: close: %d", what, rc);
    CHECK(l->calls == charges, "%s: charged once: %d charges", what, l->calls);
    if (s) {
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        CHECK(in.status == DPS_SNAP_RELEASED && in.buckets_used == T && in.rows_used == T * M,
              "%s: released over all buckets: %s, %zu buckets, %llu rows", what, dps_snapshot_status_name(in.status),
              in.buckets_used, (unsigned long long)in.rows_used);
    }
    dps_snapshot_destroy(&s);
}

int main(void)
{
    alarm(120); /* a wait for a buffer that never comes back fails here, not at ctest's timeout */
    float rows[T * M * D];
    s_rows(rows, T * M);
    /* window < t: not in place, so each bucket takes a buffer from the pipe
       (s_take_buffer), allocated while fewer than window + workers + 1
       exist; one worker; rho enough for t = 8 buckets (dps_config_check) */
    dps_config c = s_cfg(D, K, T, M, 11);
    c.window = 1;
    c.workers = 1;
    c.rho_epoch = 100;
    ledger l = {0};
    c.commit = s_commit;
    c.commit_arg = &l;
    const char *why = NULL;
    CHECK(dps_config_check(&c, &why) == DPS_OK, "config: %s", why);
    g_block = (size_t)M * D;

    /* mid-epoch: only the first bucket's buffer is ever allocated */
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "estimator, window 1");
    if (!e)
        return check_summary();
    dps_estimator_set_bucket_hook(e, s_hold, NULL);
    g_refuse_after = 1;
    g_refused = 0;
    g_hold = 1;
    size_t taken = 0;
    int rc = dps_estimator_push(e, rows, T * M, D, &taken);
    g_hold = 0;
    CHECK(rc == DPS_OK && taken == T * M, "mid-epoch refusals waited out: rc %d, %zu of %d rows taken", rc, taken,
          T * M);
    CHECK(g_refused >= 1, "a buffer was refused: %d", atomic_load(&g_refused));
    s_close_all(e, &l, 1, "one buffer");
    dps_estimator_destroy(&e);

    /* at the start: window 3, each start granted one more buffer and then
       refused: the first two fail, and each gives back what it had, so the
       third has two buffers back, is granted the third and runs (were they
       not given back, each start would hold one more until the pipe's
       window + workers + 1 = 5 were all lost, and no start would run) */
    c.window = 3;
    l.calls = 0;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "estimator, window 3");
    if (!e)
        return check_summary();
    g_refused = 0;
    for (int i = 0; i < 2; i++) {
        g_refuse_after = 1;
        taken = 99;
        rc = dps_estimator_push(e, rows, T * M, D, &taken);
        CHECK(rc == DPS_ENOMEM && taken == 0, "start %d refused: rc %d, %zu taken", i, rc, taken);
    }
    CHECK(g_refused == 2, "two refusals: %d", atomic_load(&g_refused));
    dps_estimator_stats st;
    dps_estimator_get_stats(e, &st);
    CHECK(st.rows_accepted == 0 && st.rows_in_epoch == 0, "nothing counted: %llu accepted, %llu in the epoch",
          (unsigned long long)st.rows_accepted, (unsigned long long)st.rows_in_epoch);
    g_refuse_after = 1; /* and refused again mid-epoch: waited out */
    taken = 0;
    rc = dps_estimator_push(e, rows, T * M, D, &taken);
    CHECK(rc == DPS_OK && taken == T * M, "the third start runs and takes its rows: rc %d, %zu", rc, taken);
    s_close_all(e, &l, 1, "after refused starts");
    dps_estimator_destroy(&e);

    /* the next epoch while the last one is sealed, with no memory for the
       other slot's buffers: DPS_ESTATE (release first), nothing taken; once
       the last one is released the epoch begins in its slot, with its
       buffers */
    c.window = 2;
    l.calls = 0;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "estimator, overlap");
    if (!e)
        return check_summary();
    g_refuse_after = -1;
    taken = 0;
    rc = dps_estimator_push(e, rows, T * M, D, &taken);
    CHECK(rc == DPS_OK && taken == T * M, "overlap: the first epoch: rc %d, %zu", rc, taken);
    CHECK(dps_estimator_seal(e) == DPS_OK, "overlap: sealed");
    g_refuse_after = 0;
    g_refused = 0;
    taken = 99;
    rc = dps_estimator_push(e, rows, T * M, D, &taken);
    CHECK(rc == DPS_ESTATE && taken == 0, "overlap: no memory for the other slot's buckets: rc %d, %zu taken", rc,
          taken);
    CHECK(g_refused >= 1, "overlap: a buffer was refused: %d", atomic_load(&g_refused));
    dps_snapshot *s = NULL;
    rc = dps_estimator_release_sealed(e, &s);
    CHECK(rc == DPS_OK && s, "overlap: the sealed epoch released: %d", rc);
    dps_snapshot_destroy(&s);
    taken = 0;
    rc = dps_estimator_push(e, rows, T * M, D, &taken);
    CHECK(rc == DPS_OK && taken == T * M, "overlap: the epoch begins in the released slot: rc %d, %zu", rc, taken);
    s_close_all(e, &l, 2, "overlap");
    dps_estimator_destroy(&e);

    /* seeded: an epoch whose start was refused and retried releases what it
       would have, and so does the next (each epoch's noise is the fork of
       its order, drawn only once its buckets have their buffers) */
    c.window = 2;
    float *basis[2][2] = {{NULL}};
    for (int refused_start = 0; refused_start < 2; refused_start++) {
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "seeded estimator");
        if (!e)
            return check_summary();
        if (refused_start) {
            g_refuse_after = 0;
            taken = 99;
            rc = dps_estimator_push(e, rows, T * M, D, &taken);
            CHECK(rc == DPS_ENOMEM && taken == 0, "seeded: the first start refused: rc %d, %zu", rc, taken);
        }
        g_refuse_after = -1;
        for (int ep = 0; ep < 2; ep++) {
            taken = 0;
            rc = dps_estimator_push(e, rows, T * M, D, &taken);
            s = NULL;
            rc = rc == DPS_OK ? dps_estimator_close_epoch(e, &s) : rc;
            CHECK(rc == DPS_OK && s, "seeded epoch %d (start refused: %d): %d", ep, refused_start, rc);
            if (s) {
                basis[refused_start][ep] = malloc((size_t)K * D * sizeof(float));
                memcpy(basis[refused_start][ep], dps_snapshot_basis(s), (size_t)K * D * sizeof(float));
            }
            dps_snapshot_destroy(&s);
        }
        dps_estimator_destroy(&e);
    }
    for (int ep = 0; ep < 2; ep++) {
        CHECK(basis[0][ep] && basis[1][ep] &&
                  memcmp(basis[0][ep], basis[1][ep], (size_t)K * D * sizeof(float)) == 0,
              "seeded epoch %d: the same basis with its first start refused", ep);
        free(basis[0][ep]);
        free(basis[1][ep]);
    }
    return check_summary();
}
