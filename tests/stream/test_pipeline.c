/* test_pipeline - the estimator's pipeline (dps_estimator_seal /
   dps_estimator_release_sealed, issue 13): for every mechanism, a seeded
   stream whose epochs are released on a second thread while the next epoch
   fills gives the same snapshots, bit for bit, as the same stream closed
   epoch by epoch; a mechanism without a warm start takes the next epoch's
   rows while the last one is sealed and unreleased; a warm one (the power
   iteration) refuses them (DPS_ESTATE, nothing taken) until the release;
   at most one epoch is sealed; releases come in epoch order. */
#include "check.h"
#include "dpsubspace.h"
#include "near_rows.h"
#include "epoch_mechanism.h"
#include "estimator_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define D 20
#define K 2
#define EPOCHS 3

static dps_config s_config(dps_aggregator a)
{
    dps_config c;
    dps_config_init(&c, D, K);
    c.aggregator = a;
    if (epoch_mechanism_for(a)->uses & EPOCH_USES_SHAPES)
        c.group_rows[0] = 4; /* the row as a 4 x 5 matrix: kron needs a shape */
    c.workers = 2;
    c.t = dps_config_min_buckets(&c) + 2;
    c.window = c.t;
    c.seeded = 1;
    c.seed = 77;
    c.rho_epoch = 4.0;
    return c;
}

static float *s_rows(size_t n) { return near_rows(n, D, K, 1e-7, 5); }

static void s_nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ sequential */
static void s_sequential(const dps_config *c, const float *x, dps_snapshot **out)
{
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, c) == DPS_OK, "new");
    size_t per = c->t * c->m;
    for (int ep = 0; ep < EPOCHS && e; ep++) {
        size_t taken = 0;
        dps_estimator_push(e, x + ep * per * D, per, D, &taken);
        CHECK(taken == per, "sequential: took %zu of %zu", taken, per);
        CHECK(dps_estimator_close_epoch(e, &out[ep]) == DPS_OK && out[ep], "sequential close");
    }
    dps_estimator_destroy(&e);
}

/* ------------------------------------------------------------- pipelined */
typedef struct {
    dps_estimator *e;
    dps_snapshot **out;
    int got;
    int rc[EPOCHS]; /* checked by the main thread after the join (CHECK is not thread-safe) */
} releaser;

static void *s_release_thread(void *arg)
{
    releaser *r = arg;
    while (r->got < EPOCHS) {
        if (!dps_estimator_release_pending(r->e)) {
            s_nap();
            continue;
        }
        dps_snapshot *s = NULL;
        r->rc[r->got] = dps_estimator_release_sealed(r->e, &s);
        r->out[r->got++] = s;
    }
    return NULL;
}

/* prepare: make the second epoch's state at the start (as dps-collector
   does), twice (the second call is a no-op). */
static void s_pipelined(const dps_config *c, const float *x, dps_snapshot **out, int prepare)
{
    releaser r = {NULL, out, 0, {0}};
    CHECK(dps_estimator_new(&r.e, c) == DPS_OK, "new");
    if (!r.e)
        return;
    for (int i = 0; i < 2 * prepare; i++)
        CHECK(dps_estimator_prepare_overlap(r.e) == DPS_OK, "prepare_overlap (call %d)", i + 1);
    int warm = epoch_mechanism_for(c->aggregator)->warm && epoch_mechanism_for(c->aggregator)->warm(c);
    CHECK(dps_estimator_slots_made(r.e) == (prepare && !warm ? 2 : 1), "states made before any row: %d (prepare %d)",
          dps_estimator_slots_made(r.e), prepare);
    pthread_t th;
    pthread_create(&th, NULL, s_release_thread, &r);
    size_t per = c->t * c->m;
    for (int ep = 0; ep < EPOCHS; ep++) {
        size_t done = 0;
        while (done < per) { /* a warm mechanism refuses rows until the last epoch is released */
            size_t taken = 0;
            int rc = dps_estimator_push(r.e, x + (ep * per + done) * D, per - done, D, &taken);
            CHECK(rc == DPS_OK || rc == DPS_ESTATE, "push: %s", dps_strerror(rc));
            if (rc != DPS_OK && rc != DPS_ESTATE)
                break;
            done += taken;
            if (rc == DPS_ESTATE)
                s_nap();
        }
        int rc;
        while ((rc = dps_estimator_seal(r.e)) == DPS_ESTATE) /* one sealed at a time */
            s_nap();
        CHECK(rc == DPS_OK, "seal: %s", dps_strerror(rc));
    }
    pthread_join(th, NULL);
    for (int ep = 0; ep < EPOCHS; ep++)
        CHECK(r.rc[ep] == DPS_OK && out[ep], "release on the second thread: %s", dps_strerror(r.rc[ep]));
    dps_estimator_destroy(&r.e);
}

static void s_same(const dps_config *c, const char *name, dps_snapshot **a, dps_snapshot **b)
{
    for (int ep = 0; ep < EPOCHS; ep++) {
        if (!a[ep] || !b[ep]) {
            CHECK(0, "%s epoch %d: a snapshot missing", name, ep);
            continue;
        }
        dps_snapshot_info ia, ib;
        dps_snapshot_get_info(a[ep], &ia);
        dps_snapshot_get_info(b[ep], &ib);
        CHECK(ib.epoch == (uint64_t)ep, "%s: releases in epoch order (%d got %llu)", name, ep,
              (unsigned long long)ib.epoch);
        CHECK(ia.status == ib.status && ia.rows_used == ib.rows_used && ia.buckets_used == ib.buckets_used,
              "%s epoch %d: the same outcome (status %d / %d)", name, ep, (int)ia.status, (int)ib.status);
        CHECK(ia.total.rho == ib.total.rho, "%s epoch %d: the same total", name, ep);
        const float *va = dps_snapshot_basis(a[ep]), *vb = dps_snapshot_basis(b[ep]);
        CHECK((va == NULL) == (vb == NULL), "%s epoch %d: both have a basis or neither", name, ep);
        if (va && vb)
            CHECK(memcmp(va, vb, c->k * c->d * sizeof *va) == 0, "%s epoch %d: the same basis, bit for bit",
                  name, ep);
        CHECK(ia.status == DPS_SNAP_RELEASED, "%s epoch %d: released (status %d: %s)", name, ep, (int)ia.status,
              ia.reason ? ia.reason : "");
    }
}

/* ------------------------------------------- who waits, who does not */
static void s_states(const dps_config *c, const float *x, int warm)
{
    const char *name = dps_aggregator_name(c->aggregator);
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, c) == DPS_OK, "new");
    if (!e)
        return;
    size_t per = c->t * c->m, taken = 0;
    dps_snapshot *s = NULL;
    CHECK(dps_estimator_release_sealed(e, &s) == DPS_ESTATE && !s, "%s: nothing sealed, nothing released", name);
    dps_estimator_push(e, x, per, D, &taken);
    CHECK(dps_estimator_seal(e) == DPS_OK && dps_estimator_release_pending(e), "%s: sealed", name);
    int rc = dps_estimator_push(e, x + per * D, per, D, &taken);
    if (warm) {
        CHECK(rc == DPS_ESTATE && taken == 0, "%s (warm): the next epoch waits for the release (%s, %zu taken)",
              name, dps_strerror(rc), taken);
    } else {
        CHECK(rc == DPS_OK && taken == per && dps_estimator_epoch_full(e),
              "%s: the next epoch fills while the last is sealed (%s, %zu taken)", name, dps_strerror(rc), taken);
        CHECK(dps_estimator_seal(e) == DPS_ESTATE, "%s: one sealed epoch at a time", name);
    }
    CHECK(dps_estimator_release_sealed(e, &s) == DPS_OK && s, "%s: release", name);
    dps_snapshot_info info;
    if (s) {
        dps_snapshot_get_info(s, &info);
        CHECK(info.epoch == 0 && info.status == DPS_SNAP_RELEASED, "%s: epoch 0 released", name);
        dps_snapshot_destroy(&s);
    }
    CHECK(!dps_estimator_release_pending(e), "%s: nothing pending after the release", name);
    if (warm) {
        rc = dps_estimator_push(e, x + per * D, per, D, &taken);
        CHECK(rc == DPS_OK && taken == per, "%s (warm): the next epoch after the release", name);
    }
    dps_estimator_stats st;
    dps_estimator_get_stats(e, &st);
    CHECK(st.epoch == 1 && st.rows_in_epoch == per && st.epochs_closed == 1, "%s: counters (epoch %llu, %llu rows, "
          "%llu closed)", name, (unsigned long long)st.epoch, (unsigned long long)st.rows_in_epoch,
          (unsigned long long)st.epochs_closed);
    CHECK(dps_estimator_close_epoch(e, &s) == DPS_OK && s, "%s: close the second", name);
    if (s) {
        dps_snapshot_get_info(s, &info);
        CHECK(info.epoch == 1, "%s: then epoch 1", name);
        dps_snapshot_destroy(&s);
    }
    dps_estimator_destroy(&e);
}

int main(void)
{
    for (int a = 0; epoch_mechanisms[a]; a++) {
        const epoch_mechanism *m = epoch_mechanisms[a];
        dps_config c = s_config(m->id);
        const char *why = "";
        if (dps_config_check(&c, &why) != DPS_OK) {
            CHECK(0, "%s: configuration: %s", m->name, why);
            continue;
        }
        size_t per = c.t * c.m;
        float *x = s_rows((EPOCHS + 1) * per);
        dps_snapshot *seq[EPOCHS] = {0}, *pipe[EPOCHS] = {0}, *prep[EPOCHS] = {0};
        s_sequential(&c, x, seq);
        s_pipelined(&c, x, pipe, 0);
        s_same(&c, m->name, seq, pipe);
        s_pipelined(&c, x, prep, 1); /* the second state made ahead: the same releases */
        s_same(&c, m->name, seq, prep);
        int warm = m->warm && m->warm(&c);
        CHECK(warm == (m->id == DPS_AGG_POWER), "%s: warm exactly for the power iteration here (%d)", m->name, warm);
        s_states(&c, x, warm);
        for (int ep = 0; ep < EPOCHS; ep++) {
            dps_snapshot_destroy(&seq[ep]);
            dps_snapshot_destroy(&pipe[ep]);
            dps_snapshot_destroy(&prep[ep]);
        }
        free(x);
        NOTE("%s: pipelined = sequential over %d epochs (%zu rows each)%s", m->name, EPOCHS, per,
             warm ? ", warm" : "");
    }
    CHECK(dps_estimator_prepare_overlap(NULL) == DPS_EINVAL, "prepare_overlap(NULL)");
    return check_summary();
}
