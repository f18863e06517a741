/* estimator.c - the streaming estimator's epoch life cycle (DESIGN 3.1-3.3):
   rows in, one private snapshot out per epoch.

   The way of an epoch: its first row begins it (the mechanism's begin, then
   the bucket pipeline's first window); each row is admitted (row_unit) and
   goes to a random bucket (buckets.c) or, for a mechanism without buckets,
   straight to the mechanism; the seal ends its input; the release waits for
   its buckets' bases, checks that enough came in and that the cost fits the cap,
   makes the charge durable (the commit hook), charges the accountant and has
   the mechanism release into a snapshot.  The mechanism is one entry of the
   table of src/mechanisms/epoch_mechanism.h; nothing here depends on which.

   PIPELINE.  An epoch lives in a slot: its mechanism state, its bucket
   pipeline and its own noise generator (forked from the estimator's at its
   begin, in epoch order: a seeded run gives the same snapshots whether each
   epoch is released at once or while the next one fills).  Two slots at
   most: one taking rows, one sealed or releasing; a mechanism whose release
   feeds the next begin (epoch_mechanism.warm) has one, and its next epoch
   begins once the last is released.  The second slot is made when an epoch
   begins while the last one is still sealed (or ahead of time, by
   dps_estimator_prepare_overlap), so a stream that closes each epoch at
   once (dps_estimator_close_epoch) holds one.

   Who owns what: the estimator owns the configuration, the accountant, the
   generators, the worker pool and the slots.  One thread pushes and seals
   (it owns the open slot and the push counters); one thread at a time
   releases (it owns the sealed slot); the mutex guards the accountant, the
   cap, the slots' hand-over and the release counters. */
#include "buckets.h"
#include "epoch_mechanism.h"
#include "estimator_internal.h"
#include "internal.h"
#include "rows.h"
#include "snapshot.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    epoch_state *mech_state;
    bucket_pipe *buckets; /* EPOCH_BUCKETS only */
    dps_rng *noise;       /* this epoch's mechanism noise (from its begin) */
    uint64_t epoch;
    uint64_t rows;        /* sealed: rows taken */
    size_t completed;     /* released: completed buckets (public) */
} epoch_slot;

enum { SLOT_FREE, SLOT_OPEN, SLOT_SEALED, SLOT_RELEASING };

struct dps_estimator {
    dps_config cfg;
    const epoch_mechanism *mech;
    int warm;             /* the mechanism's release feeds the next begin */
    dps_accountant *acc;  /* guarded by mu */
    dps_rng *noise;       /* the parent of the epochs' generators (pushing thread) */
    dps_rng *part;        /* partition choices (forked from noise) */
    dps_pool *pool;
    float *row;           /* EPOCH_ROWS: one admitted row */

    epoch_slot slot[2];
    int state[2];         /* SLOT_*, guarded by mu */
    int open;             /* the slot taking rows */
    int sealed;           /* the slot sealed or releasing, or -1 (guarded) */
    pthread_mutex_t mu;
    pthread_cond_t released; /* a sealed slot was released */

    uint64_t epoch;       /* the open epoch's number */
    int open_started;     /* the open epoch has begun (its first row came) */
    dps_estimator_stats stats;      /* the push counters: owned by the pushing thread */
    uint64_t closed, internal_errors; /* guarded by mu */
    dps_bucket_hook hook; /* tests */
    void *hook_arg;
};

/* -------------------------------------------------------------- lifecycle */
static int s_slot_make(dps_estimator *e, epoch_slot *sl)
{
    const dps_config *c = &e->cfg;
    int rc = e->mech->create(&sl->mech_state, c, e->pool);
    if (!rc && e->mech->intake == EPOCH_BUCKETS) {
        rc = buckets_new(&sl->buckets, c, e->part, e->pool, e->mech, sl->mech_state);
        if (!rc)
            buckets_set_hook(sl->buckets, e->hook, e->hook_arg);
    }
    return rc;
}

/* Call once the pool has no job left. */
static void s_slot_free(dps_estimator *e, epoch_slot *sl)
{
    buckets_free(&sl->buckets);
    if (sl->mech_state)
        e->mech->destroy(&sl->mech_state);
    dps_rng_destroy(&sl->noise);
}

int dps_estimator_new(dps_estimator **out, const dps_config *cfg)
{
    return dps_estimator_new_resumed(out, cfg, DPS_CHARGE_ZCDP);
}

int dps_estimator_new_resumed(dps_estimator **out, const dps_config *cfg, dps_charge_kind spent_before_kind)
{
    if (!out)
        return DPS_EINVAL;
    *out = NULL;
    const char *why = "";
    int rc = dps_config_check(cfg, &why);
    dps_set_last_error(rc ? why : ""); /* the rule that failed, for the caller (dps_last_error) */
    if (rc)
        return rc;
    dps_blas_init_once();
    dps_estimator *e = calloc(1, sizeof *e);
    if (!e)
        return DPS_ENOMEM;
    e->cfg = *cfg;
    const dps_config *c = &e->cfg;
    e->mech = epoch_mechanism_for(c->aggregator);
    e->warm = e->mech->warm && e->mech->warm(c);
    e->epoch = c->first_epoch;
    e->stats.epoch = e->epoch;
    e->sealed = -1;
    e->state[0] = SLOT_OPEN;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->released, NULL);
    rc = dps_accountant_new_resumed(&e->acc, &c->cap, &c->spent_before, spent_before_kind);
    if (!rc)
        rc = c->seeded ? dps_rng_new_seeded(&e->noise, c->seed) : dps_rng_new_secure(&e->noise);
    if (!rc)
        rc = dps_rng_fork(e->noise, &e->part);
    if (!rc)
        rc = (e->pool = pool_new(c->workers)) ? DPS_OK : DPS_ENOMEM;
    if (!rc)
        rc = s_slot_make(e, &e->slot[0]);
    if (!rc && e->mech->intake == EPOCH_ROWS)
        rc = (e->row = malloc(c->d * sizeof *e->row)) ? DPS_OK : DPS_ENOMEM;
    if (rc) {
        dps_estimator_destroy(&e);
        return rc;
    }
    *out = e;
    return DPS_OK;
}

void dps_estimator_destroy(dps_estimator **pe)
{
    if (!pe || !*pe)
        return;
    dps_estimator *e = *pe;
    if (e->pool)
        pool_wait(e->pool);
    for (int i = 0; i < 2; i++) /* before the pool: their tasks' waits read its lock */
        s_slot_free(e, &e->slot[i]);
    pool_free(&e->pool);
    free(e->row);
    dps_rng_destroy(&e->noise);
    dps_rng_destroy(&e->part);
    dps_accountant_destroy(&e->acc);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->released);
    free(e);
    *pe = NULL;
}

/* An epoch sealed and not yet released (any thread; the mutex only is written). */
static int s_pending(const dps_estimator *e)
{
    pthread_mutex_t *mu = (pthread_mutex_t *)&e->mu;
    pthread_mutex_lock(mu);
    int pending = e->sealed >= 0;
    pthread_mutex_unlock(mu);
    return pending;
}

/* ------------------------------------------------------------------- push */
/* The slot other than the open one, made if it is not (pushing thread; never
   the sealed slot, which has its state): DPS_OK or the make's error, with
   nothing kept. */
static int s_other_slot(dps_estimator *e)
{
    epoch_slot *sl = &e->slot[1 - e->open];
    if (sl->mech_state)
        return DPS_OK;
    int rc = s_slot_make(e, sl);
    if (rc)
        s_slot_free(e, sl);
    return rc;
}

/* Start the open epoch lazily, at its first row, in a slot no release holds:
   the slot of the last epoch if it was released, else the other one (made
   the first time it is needed); a warm mechanism has one slot and waits for
   its release (DPS_ESTATE: release first).  Then the first window of
   buckets, the epoch's own generator (forked in epoch order), the
   mechanism's begin (e.g. the public reference points).  The buckets come
   first: their buffers are what fails for want of memory, and then nothing
   is drawn from the noise stream, so a start retried forks what it would
   have.  No memory for the other slot, or for its buckets, while the last
   epoch releases: DPS_ESTATE, and the epoch begins in the last one's slot
   once it is released (its buffers are there). */
static int s_epoch_begin(dps_estimator *e)
{
    pthread_mutex_lock(&e->mu);
    int pending = e->sealed == e->open;
    pthread_mutex_unlock(&e->mu);
    if (pending) {
        if (e->warm)
            return DPS_ESTATE;
        int rc = s_other_slot(e);
        if (rc)
            return rc == DPS_ENOMEM ? DPS_ESTATE : rc;
        e->open = 1 - e->open;
    }
    epoch_slot *sl = &e->slot[e->open];
    int rc = sl->buckets ? buckets_begin(sl->buckets, e->epoch) : DPS_OK;
    if (!rc) {
        rc = dps_rng_fork(e->noise, &sl->noise);
        if (!rc)
            rc = e->mech->begin(sl->mech_state, e->epoch, sl->noise);
        if (rc) { /* the buckets' buffers go back */
            uint64_t none = 0;
            buckets_seal(sl->buckets, &none);
        }
    }
    if (rc) {
        dps_rng_destroy(&sl->noise);
        if (pending) { /* back to the releasing epoch's slot, to begin there once it is released */
            e->open = 1 - e->open;
            rc = rc == DPS_ENOMEM ? DPS_ESTATE : rc;
        }
        return rc;
    }
    e->open_started = 1;
    sl->epoch = e->epoch;
    return DPS_OK;
}

/* A row was admitted by row_unit (src/core/rows.c): normalised to norm 1 (at
   most), or, with NaN, Inf or zero norm, the zero vector, counted here.
   Every float row is either: no row can make a bucket or C non-finite. */
static void s_count(dps_estimator *e, row_kind kind)
{
    switch (kind) {
    case ROW_OK: break;
    case ROW_NAN: e->stats.rows_nan++; break;
    case ROW_INF: e->stats.rows_inf++; break;
    case ROW_ZERO: e->stats.rows_zero++; break;
    }
}

/* How a push's rows are read: host floats (dps_estimator_push), or the
   wire's little-endian float32 at any alignment (dps_estimator_push_le,
   row_unit_le): either way into the unit ball by row_unit's rule. */
typedef row_kind (*row_reader)(const unsigned char *x, size_t d, row_mode mode, float *dst);

static row_kind s_read_host(const unsigned char *x, size_t d, row_mode mode, float *dst)
{
    return row_unit((const float *)(const void *)x, d, mode, dst);
}

/* Each row is read once, into where it stays: a random slot of the open
   buckets, or the mechanism's own block (row_slot) or else e->row. */
static int s_push(dps_estimator *e, const unsigned char *rows, size_t n_rows, size_t dim, size_t *n_taken,
                  row_reader read)
{
    if (n_taken)
        *n_taken = 0;
    if (!e)
        return DPS_EINVAL;
    const dps_config *c = &e->cfg;
    if (n_rows == 0) {
        e->stats.batches_empty++;
        return DPS_EEMPTY;
    }
    if (dim != c->d) {
        e->stats.batches_dim++;
        return DPS_EDIM;
    }
    if (!rows)
        return DPS_EINVAL;
    size_t cap = c->t * c->m, row_bytes = c->d * sizeof(float);
    size_t taken = 0;
    int rc = DPS_OK;
    while (taken < n_rows) {
        if (e->stats.rows_in_epoch >= cap) {
            rc = DPS_EFULL;
            break;
        }
        if (!e->open_started && (rc = s_epoch_begin(e)) != DPS_OK)
            break;
        epoch_slot *sl = &e->slot[e->open];
        const unsigned char *src = rows + taken * row_bytes;
        row_kind kind;
        if (e->mech->intake == EPOCH_ROWS) { /* every row of the epoch, nothing discarded */
            float *dst = e->mech->row_slot ? e->mech->row_slot(sl->mech_state) : NULL;
            dst = dst ? dst : e->row;
            kind = read(src, c->d, ROW_NORMALISE, dst);
            e->mech->take_row(sl->mech_state, dst);
        } else {
            float *slot = buckets_slot(sl->buckets);
            if (!slot) {
                rc = DPS_ENOMEM;
                break;
            }
            kind = read(src, c->d, ROW_NORMALISE, slot);
            rc = buckets_commit(sl->buckets);
        }
        s_count(e, kind);
        taken++;
        e->stats.rows_accepted++;
        e->stats.rows_in_epoch++;
        if (rc)
            break;
    }
    if (n_taken)
        *n_taken = taken;
    return rc;
}

int dps_estimator_push(dps_estimator *e, const float *rows, size_t n_rows, size_t dim, size_t *n_taken)
{
    return s_push(e, (const unsigned char *)rows, n_rows, dim, n_taken, s_read_host);
}

int dps_estimator_push_le(dps_estimator *e, const unsigned char *rows, size_t n_rows, size_t dim, size_t *n_taken)
{
    return s_push(e, rows, n_rows, dim, n_taken, row_unit_le);
}

int dps_estimator_epoch_full(const dps_estimator *e)
{
    return e->stats.rows_in_epoch >= e->cfg.t * e->cfg.m;
}

int dps_estimator_end_block(dps_estimator *e)
{
    if (!e || !e->mech->end_block || !e->mech->blocks(&e->cfg, e->slot[e->open].mech_state))
        return DPS_EINVAL;
    int rc = e->open_started ? DPS_OK : s_epoch_begin(e);
    return rc ? rc : e->mech->end_block(e->slot[e->open].mech_state);
}

uint64_t dps_estimator_power_blocks(const dps_estimator *e)
{
    if (!e || !e->mech->blocks)
        return 0;
    /* the open epoch's state, or the one the next epoch begins on (a warm
       mechanism keeps one state; the others' states differ only in epochs) */
    return e->mech->blocks(&e->cfg, e->slot[e->open].mech_state);
}

/* ------------------------------------------------------------------- seal */
int dps_estimator_seal(dps_estimator *e)
{
    if (!e)
        return DPS_EINVAL;
    if (s_pending(e))
        return DPS_ESTATE;
    epoch_slot *sl = &e->slot[e->open];
    buckets_seal(sl->buckets, &e->stats.rows_discarded); /* its full buckets' bases: waited for by the release */
    sl->rows = e->stats.rows_in_epoch;
    sl->epoch = e->epoch;
    pthread_mutex_lock(&e->mu);
    e->sealed = e->open;
    pthread_mutex_unlock(&e->mu);
    e->epoch++;
    e->open_started = 0;
    e->stats.epoch = e->epoch;
    e->stats.rows_in_epoch = 0;
    return DPS_OK;
}

int dps_estimator_slots_made(const dps_estimator *e)
{
    return (e->slot[0].mech_state != NULL) + (e->slot[1].mech_state != NULL);
}

int dps_estimator_prepare_overlap(dps_estimator *e)
{
    if (!e)
        return DPS_EINVAL;
    return e->warm ? DPS_OK : s_other_slot(e);
}

/* ---------------------------------------------------------------- release */
/* The sealed epoch's end: its rows are used once, its slot is free for the
   epoch after next (the next begin of a warm mechanism waits for this). */
static void s_slot_end(dps_estimator *e, epoch_slot *sl, int internal_error)
{
    if (sl->buckets)
        buckets_end(sl->buckets);
    dps_rng_destroy(&sl->noise);
    pthread_mutex_lock(&e->mu);
    e->closed++;
    e->internal_errors += (uint64_t)internal_error;
    e->sealed = -1;
    pthread_cond_broadcast(&e->released);
    pthread_mutex_unlock(&e->mu);
}

/* NULL when enough came in for the mechanism to run, else why not (in why). */
static const char *s_too_little(const dps_estimator *e, const epoch_slot *sl, char *why, size_t len)
{
    if (e->mech->intake == EPOCH_ROWS) {
        if (sl->rows >= 1)
            return NULL;
        snprintf(why, len, "no rows arrived in this epoch: the mechanism did not run, nothing was spent");
        return why;
    }
    size_t need = e->mech->min_buckets(&e->cfg);
    if (sl->completed >= need)
        return NULL;
    snprintf(why, len,
             "only %zu buckets completed and the mechanism needs %zu to succeed: it did not run, nothing was "
             "spent", sl->completed, need);
    return why;
}

/* What a release needs that could fail for want of memory, taken before
   the charge (dps_release_hooks.reserve): the snapshot and the basis it
   will own; their sizes are the configuration's. */
typedef struct {
    const dps_estimator *e;
    dps_snapshot *snap;
    float *basis;
} s_reserved;

static int s_reserve(void *arg)
{
    s_reserved *r = arg;
    r->snap = snapshot_reserve();
    r->basis = dps_aligned_calloc(r->e->cfg.k * r->e->cfg.d, sizeof(float));
    if (r->snap && r->basis)
        return 0;
    free(r->snap);
    free(r->basis);
    r->snap = NULL;
    r->basis = NULL;
    return DPS_ENOMEM;
}

static int s_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp total_after)
{
    const s_reserved *r = arg;
    return r->e->cfg.commit(r->e->cfg.commit_arg, epoch, cost, total_after);
}

int dps_estimator_release_sealed(dps_estimator *e, dps_snapshot **out)
{
    if (!e || !out)
        return DPS_EINVAL;
    *out = NULL;
    pthread_mutex_lock(&e->mu);
    int i = e->sealed;
    pthread_mutex_unlock(&e->mu);
    if (i < 0)
        return DPS_ESTATE;
    epoch_slot *sl = &e->slot[i];
    /* public: the completed count depends only on how many rows arrived */
    sl->completed = buckets_wait(sl->buckets);
    const dps_config *c = &e->cfg;
    const epoch_mechanism *mech = e->mech;
    int rows_intake = mech->intake == EPOCH_ROWS;
    dps_snapshot_info info;
    memset(&info, 0, sizeof info);
    info.epoch = sl->epoch;
    info.d = c->d;
    info.k = c->k;
    if (c->groups > 1) {
        info.groups = c->groups;
        info.group_d = c->group_d;
        info.group_k = c->group_k;
    }
    info.aggregator = c->aggregator;
    info.buckets_used = sl->completed;
    info.rows_used = rows_intake ? sl->rows : (uint64_t)sl->completed * c->m;
    info.seeded = c->seeded;
    info.public_seed = c->public_seed;
    info.radius_unrelated = mech->radius_unrelated(c);

    char why[200];
    const char *too_little = s_too_little(e, sl, why, sizeof why);
    s_reserved res_mem = {.e = e};
    dps_release_hooks hooks = {.reserve = s_reserve, .commit = c->commit ? s_commit : NULL, .arg = &res_mem};
    pthread_mutex_lock(&e->mu); /* the cap's check, the commit and the charge: one step */
    dps_release_decision decision = dps_release_decide(e->acc, mech->cost(c), mech->kind, too_little, &hooks, &info);
    dps_release_totals(e->acc, &c->cap, &info);
    pthread_mutex_unlock(&e->mu);
    if (decision == DPS_RELEASE_NOT_RUN) {
        int rc = dps_snapshot_new(out, &info, NULL);
        s_slot_end(e, sl, 0);
        return rc;
    }
    if (decision == DPS_RELEASE_NO_MEMORY)
        return DPS_ENOMEM; /* before the charge: nothing spent, the epoch stays sealed */
    if (decision == DPS_RELEASE_UNCOMMITTED) {
        free(res_mem.snap);
        free(res_mem.basis);
        s_slot_end(e, sl, 0); /* the epoch's rows are dropped */
        return DPS_ECOMMIT;
    }

    /* From here on the charge is on disk: every path ends in *out = snap.
       The completed buckets in bucket order.  Buckets finish in order of
       their ids only when W = t... any order is fine for privacy, but keep
       only the done ones, packed, so the input is the same on every run. */
    epoch_input in = {.epoch = sl->epoch, .buckets = sl->completed, .rows = sl->rows, .noise = sl->noise};
    if (!rows_intake)
        in.V = buckets_pack(sl->buckets, &in.done);
    epoch_outcome res;
    memset(&res, 0, sizeof res);
    int rc = dps_rng_new_labelled(&in.pub, c->public_seed, "aggregate", sl->epoch);
    if (!rc)
        rc = mech->release(sl->mech_state, &in, res_mem.basis, &res);
    dps_rng_destroy(&in.pub);
    info.radius = res.radius;
    info.w_hat = res.w_hat;
    info.noise_level = rc || res.failed ? 0 : res.noise_level; /* only with a basis */
    /* An error here is published as FAILED, budget spent (the list of those
       that can still come: dps_release_outcome in include/dpsubspace.h).
       The snapshot and the basis were allocated before the charge, so this
       path allocates nothing. */
    char internal[200];
    dps_release_outcome(&info, rc, res.failed, res.reason, "the mechanism", internal, sizeof internal);
    dps_snapshot *snap = res_mem.snap;
    snapshot_fill(snap, &info, res_mem.basis); /* takes basis */
    snap->power_steps = rc ? 0 : res.steps;
    snap->levels = rc || res.failed ? 0 : res.groups;
    memcpy(snap->group_level, res.group_level, snap->levels * sizeof *snap->group_level);
    s_slot_end(e, sl, rc != 0);
    *out = snap;
    return DPS_OK;
}

int dps_estimator_close_epoch(dps_estimator *e, dps_snapshot **out)
{
    if (!e || !out)
        return DPS_EINVAL;
    *out = NULL;
    int rc = s_pending(e) ? DPS_OK : dps_estimator_seal(e); /* one left sealed by a DPS_ENOMEM: that first */
    return rc ? rc : dps_estimator_release_sealed(e, out);
}

void dps_estimator_get_stats(const dps_estimator *e, dps_estimator_stats *out)
{
    *out = e->stats;
    uint64_t total = 0;
    size_t done_epoch = 0;
    for (int i = 0; i < 2; i++) {
        uint64_t t = 0;
        size_t d = 0;
        buckets_counts(e->slot[i].buckets, &t, &d);
        total += t;
        if (i == e->open)
            done_epoch = e->open_started ? d : 0;
    }
    out->buckets_completed = total;
    out->buckets_done_epoch = done_epoch;
    dps_estimator *m = (dps_estimator *)e; /* the mutex only */
    pthread_mutex_lock(&m->mu);
    out->epochs_closed = e->closed;
    out->epochs_internal_error = e->internal_errors;
    pthread_mutex_unlock(&m->mu);
}

dps_zcdp dps_estimator_spent(const dps_estimator *e)
{
    dps_estimator *m = (dps_estimator *)e; /* the mutex only */
    pthread_mutex_lock(&m->mu);
    dps_zcdp z = dps_accountant_spent(e->acc);
    pthread_mutex_unlock(&m->mu);
    return z;
}

double dps_estimator_eps(const dps_estimator *e, double delta_total)
{
    dps_estimator *m = (dps_estimator *)e; /* the mutex only */
    pthread_mutex_lock(&m->mu);
    double eps = dps_accountant_eps(e->acc, delta_total);
    pthread_mutex_unlock(&m->mu);
    return eps;
}

dps_charge_kind dps_estimator_spent_kind(const dps_estimator *e)
{
    dps_estimator *m = (dps_estimator *)e; /* the mutex only */
    pthread_mutex_lock(&m->mu);
    dps_charge_kind kind = dps_accountant_kind(e->acc);
    pthread_mutex_unlock(&m->mu);
    return kind;
}

int dps_estimator_release_pending(const dps_estimator *e) { return s_pending(e); }

int dps_estimator_set_cap(dps_estimator *e, const dps_budget *cap)
{
    if (!e || !cap)
        return DPS_EINVAL;
    pthread_mutex_lock(&e->mu);
    int rc = dps_accountant_set_cap(e->acc, cap);
    if (rc == DPS_OK)
        e->cfg.cap = *cap;
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void dps_estimator_set_bucket_hook(dps_estimator *e, dps_bucket_hook fn, void *arg)
{
    e->hook = fn;
    e->hook_arg = arg;
    for (int i = 0; i < 2; i++)
        buckets_set_hook(e->slot[i].buckets, fn, arg);
}
