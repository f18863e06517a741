/* test_bucket_layout - with W = t the bucket pipe writes each bucket's basis
   over its own rows and packs the bases to the front of the row region at
   the release (buckets.c, issue 13 item 3: an epoch holds t*m*d floats, not
   t*m*d + t*k*d).  That is a change of storage only, so for every bucket
   mechanism a seeded stream must release the same snapshots, bit for bit, as
   with the bases kept apart (dps_buckets_force_separate_bases): a full epoch,
   then an epoch closed at 95% of its rows, whose completed buckets are
   scattered among unfinished ones, so that the pack moves bases past gaps;
   then a few rows of a third epoch, left open when the estimator is freed.
   And the window's default: W = t for a t set after dps_config_init. */
#include "config_internal.h"
#include "check.h"
#include "dpsubspace.h"
#include "near_rows.h"
#include "estimator_internal.h"

#include <stdlib.h>
#include <string.h>

#define D 24
#define K 3

static dps_config s_config(dps_aggregator a)
{
    dps_config c;
    dps_config_init(&c, D, K);
    c.aggregator = a;
    c.workers = 2;
    c.rho_epoch = 4.0;
    c.t = 2 * dps_config_min_buckets(&c) + 8; /* at 95% of the rows ~0.95^m of buckets fill; W = t */
    c.seeded = 1;
    c.seed = 91;
    return c;
}

static float *s_rows(size_t n) { return near_rows(n, D, K, 1e-7, 12); }

/* Epoch 0 full, epoch 1 closed at 95%: two snapshots. */
static void s_run(const dps_config *c, const float *x, int separate, dps_snapshot **out)
{
    dps_buckets_force_separate_bases(separate);
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, c) == DPS_OK, "new");
    dps_buckets_force_separate_bases(0);
    if (!e)
        return;
    size_t per = c->t * c->m, part = per * 19 / 20, taken = 0;
    dps_estimator_push(e, x, per, D, &taken);
    CHECK(taken == per, "epoch 0: took %zu of %zu", taken, per);
    CHECK(dps_estimator_close_epoch(e, &out[0]) == DPS_OK && out[0], "close 0");
    dps_estimator_push(e, x + per * D, part, D, &taken);
    CHECK(taken == part, "epoch 1: took %zu of %zu", taken, part);
    CHECK(dps_estimator_close_epoch(e, &out[1]) == DPS_OK && out[1], "close 1");
    dps_estimator_push(e, x, c->m, D, &taken); /* destroyed with an epoch open: its row blocks are V's */
    dps_estimator_destroy(&e);
}

/* The window dps_config_init leaves is W = t for the t set after it (s_config):
   the configuration passes, its memory bound is W = t's, and a seeded stream
   releases what window = t set by hand releases, bit for bit.  A window
   below t keeps its own layout. */
static void s_test_window_default(void)
{
    dps_config by_default = s_config(DPS_AGG_REFERENCE), by_hand = by_default;
    by_hand.window = by_hand.t;
    const char *why = NULL;
    CHECK(by_default.t < 125, "t (%zu) is set below dps_config_init's 125", by_default.t);
    CHECK(dps_config_check(&by_default, &why) == DPS_OK, "t set after init, window left: %s", why);
    CHECK(dps_estimator_memory_bound(&by_default) == dps_estimator_memory_bound(&by_hand),
          "the default window holds what W = t holds: %zu / %zu bytes", dps_estimator_memory_bound(&by_default),
          dps_estimator_memory_bound(&by_hand));
    float *x = s_rows(2 * by_hand.t * by_hand.m);
    dps_snapshot *a[2] = {0}, *b[2] = {0};
    s_run(&by_default, x, 0, a);
    s_run(&by_hand, x, 0, b);
    for (int ep = 0; ep < 2; ep++) {
        const float *va = a[ep] ? dps_snapshot_basis(a[ep]) : NULL, *vb = b[ep] ? dps_snapshot_basis(b[ep]) : NULL;
        CHECK(va && vb && memcmp(va, vb, by_hand.k * by_hand.d * sizeof *va) == 0,
              "the default window and window = t, epoch %d: the same basis, bit for bit", ep);
        dps_snapshot_destroy(&a[ep]);
        dps_snapshot_destroy(&b[ep]);
    }

    dps_config narrow = by_hand;
    narrow.window = 4;
    CHECK(dps_config_check(&narrow, &why) == DPS_OK, "an explicit window below t: %s", why);
    CHECK(dps_estimator_memory_bound(&narrow) != dps_estimator_memory_bound(&by_hand),
          "an explicit window below t has its own layout");
    s_run(&narrow, x, 0, a);
    for (int ep = 0; ep < 2; ep++) {
        dps_snapshot_info in = {0};
        if (a[ep])
            dps_snapshot_get_info(a[ep], &in);
        CHECK(a[ep] && in.status == DPS_SNAP_RELEASED, "window 4, epoch %d: released (%s)", ep,
              a[ep] ? in.reason : "no snapshot");
        dps_snapshot_destroy(&a[ep]);
    }
    free(x);
}

int main(void)
{
    s_test_window_default();
    const dps_aggregator aggs[] = {DPS_AGG_REFERENCE, DPS_AGG_PROJECTION, DPS_AGG_HISTOGRAM};
    for (size_t a = 0; a < sizeof aggs / sizeof *aggs; a++) {
        dps_config c = s_config(aggs[a]);
        const char *name = dps_aggregator_name(aggs[a]);
        float *x = s_rows(2 * c.t * c.m);
        dps_snapshot *in_place[2] = {0}, *apart[2] = {0};
        s_run(&c, x, 0, in_place);
        s_run(&c, x, 1, apart);
        for (int ep = 0; ep < 2; ep++) {
            if (!in_place[ep] || !apart[ep])
                continue;
            dps_snapshot_info ia, ib;
            dps_snapshot_get_info(in_place[ep], &ia);
            dps_snapshot_get_info(apart[ep], &ib);
            CHECK(ia.status == ib.status && ia.buckets_used == ib.buckets_used,
                  "%s epoch %d: the same outcome (status %d / %d, buckets %zu / %zu)", name, ep, (int)ia.status,
                  (int)ib.status, (size_t)ia.buckets_used, (size_t)ib.buckets_used);
            CHECK(ia.status == DPS_SNAP_RELEASED, "%s epoch %d: released (%s)", name, ep, ia.reason);
            if (ep == 1)
                CHECK(ia.buckets_used > 0 && ia.buckets_used < c.t,
                      "%s: the partial epoch leaves gaps for the pack (%zu of %zu buckets)", name,
                      (size_t)ia.buckets_used, c.t);
            const float *va = dps_snapshot_basis(in_place[ep]), *vb = dps_snapshot_basis(apart[ep]);
            CHECK(va && vb && memcmp(va, vb, c.k * c.d * sizeof *va) == 0,
                  "%s epoch %d: the same basis, bit for bit", name, ep);
        }
        for (int ep = 0; ep < 2; ep++) {
            dps_snapshot_destroy(&in_place[ep]);
            dps_snapshot_destroy(&apart[ep]);
        }
        free(x);
    }
    return check_summary();
}
