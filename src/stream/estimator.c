/* estimator.c - the streaming estimator (DESIGN 3.1-3.3).

   Who owns what: the estimator owns the epoch's bucket buffers, the stacked
   bases V (t*k x d), the reference projections A (t x k x q) and the reference
   points P (q x d).  One thread pushes and closes; worker threads own a bucket
   from the moment it is full until its basis is written, then give its buffer
   back.  The mutex guards the buffer free list, the per-bucket "done" flags and
   the completed-bucket counters.

   Partition (DESIGN 3.1): W buckets are open at once; each arriving row takes a
   uniformly random free slot among them (a list of free slots, one entry per
   slot, drawn without replacement).  With W = t every arrangement of the
   epoch's t*m rows into buckets is equally likely.  The choice depends only on
   the generator, never on the rows: a row with NaN/Inf or zero norm takes its
   slot as the zero vector (DESIGN 2), so one changed row changes one bucket.

   The covariance mechanism (DPS_AGG_COVARIANCE) has no buckets: each admitted
   row is added to the epoch's C = sum x x^T (d x d, double) in blocks of
   COV_BLOCK rows, and the close runs iterative eigenvector sampling on C. */
#include "aggregate.h"
#include "estimator_internal.h"
#include "internal.h"
#include "linalg.h"
#include "pool.h"
#include "rows.h"
#include "snapshot.h"
#include "wfc.h"

#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    size_t id;     /* bucket index in the epoch, [0, t) */
    size_t filled; /* rows so far */
    float *rows;   /* m x d */
} bucket;

typedef struct {
    struct dps_estimator *est;
    size_t id;
    float *rows;
} bucket_job;

struct dps_estimator {
    dps_config cfg;
    dps_accountant *acc;
    dps_rng *noise; /* mechanism noise: secure, or seeded in tests */
    dps_rng *part;  /* partition choices (forked from noise) */
    dps_pool *pool;
    la_ws **ws;     /* one per worker */
    agg_ws *agg;    /* aggregation scratch, reused every epoch */

    uint64_t epoch;
    int epoch_started;
    float *V;       /* t*k x d */
    float *A;       /* t x k x q (reference) */
    float *P;       /* q x d reference points (public) */
    double xi_max;
    unsigned char *done;

    bucket *open;   /* window entries */
    size_t n_open;
    size_t next_bucket;
    size_t *slots;  /* free slots: entries are indices into open[] */
    size_t nfree;

    pthread_mutex_t mu;
    pthread_cond_t buf_back; /* a buffer came back */
    float **free_bufs;
    size_t n_free_bufs, n_bufs, max_bufs;
    size_t buckets_done;     /* this epoch (guarded) */
    uint64_t buckets_total;  /* all epochs (guarded) */

    double *C;               /* covariance mechanism: the epoch's sum x x^T (upper) */
    double *C_block;         /* ... its pending rows (COV_BLOCK x d, double)   */
    float *C_row;            /* ... one admitted row                          */
    size_t C_pending;

    dps_stats stats;         /* owned by the pushing thread, but for the two above */
    dps_bucket_hook hook;    /* tests only */
    void *hook_arg;
};

enum { COV_BLOCK = 64 }; /* rows per syrk update of the covariance mechanism */

/* ----------------------------------------------------------------- config */
static int s_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 64 ? 64 : (int)n);
}

void dps_config_init(dps_config *c, size_t d, size_t k)
{
    memset(c, 0, sizeof *c);
    c->d = d;
    c->k = k;
    c->t = 125;
    c->m = 2 * k;
    c->window = c->t;
    c->q = 10 * k;
    c->aggregator = DPS_AGG_REFERENCE;
    c->rho_epoch = 1.0;
    c->delta_epoch = 1e-8;
    c->cap.delta_target = 1e-5; /* the delta eps is shown at; no cap by default */
    c->alpha = 0.5;
    c->tau = 0.5;
    c->split_search = 0.2;
    c->split_count = 0.1;
    c->split_mean = 0.7;
    c->xi_min = 1e-6;
    c->workers = s_online_cpus();
}

/* The reference and histogram aggregators both use the public reference
   points P and the per-bucket projections A_j = V_j P^T. */
static int s_uses_reference(const dps_config *c)
{
    return c->aggregator == DPS_AGG_REFERENCE || c->aggregator == DPS_AGG_HISTOGRAM;
}

/* The histogram aggregator is (eps, delta)-DP with eps = sqrt(2 rho_epoch),
   delta = delta_epoch: dps_zcdp_from_dp(eps, delta) = (rho_epoch, delta_epoch). */
static double s_hist_eps(const dps_config *c) { return sqrt(2.0 * c->rho_epoch); }

size_t dps_config_min_buckets(const dps_config *c)
{
    if (c->aggregator == DPS_AGG_COVARIANCE) /* no buckets; any t*m >= 1 rows can be released */
        return 2;
    if (c->aggregator == DPS_AGG_HISTOGRAM) {
        if (!agg_hist_params_ok(s_hist_eps(c), c->delta_epoch))
            return 2;
        return agg_hist_min_buckets(s_hist_eps(c), c->delta_epoch);
    }
    double split = c->split_search + c->split_count + c->split_mean;
    if (!(split > 0) || !(c->rho_epoch > 0) || !(c->alpha > 0) || !(c->delta_epoch > 0 && c->delta_epoch < 1))
        return 2;
    double s_W = (1.0 / c->alpha + 1.0) / sqrt(2.0 * c->rho_epoch * c->split_count / split);
    double need = 1.0 + s_W * (sqrt(2.0 * log(1.0 / c->delta_epoch)) + 2.0);
    return need < 2 ? 2 : (size_t)ceil(need);
}

#define WHY(msg)          \
    do {                  \
        if (why)          \
            *why = (msg); \
        return DPS_EINVAL; \
    } while (0)

int dps_config_check(const dps_config *c, const char **why)
{
    if (why)
        *why = "";
    if (!c)
        WHY("no configuration");
    if (c->d < 2)
        WHY("d must be at least 2");
    if (c->k < 1 || c->k >= c->d)
        WHY("k must satisfy 1 <= k < d");
    if (c->t < 2)
        WHY("t (buckets per epoch) must be at least 2");
    if (c->m < c->k)
        WHY("m (rows per bucket) must be at least k");
    if (c->window < 1 || c->window > c->t)
        WHY("window must satisfy 1 <= W <= t");
    if (s_uses_reference(c) && c->q < c->k)
        WHY("q (reference points) must be at least k");
    if (c->aggregator != DPS_AGG_REFERENCE && c->aggregator != DPS_AGG_PROJECTION &&
        c->aggregator != DPS_AGG_HISTOGRAM && c->aggregator != DPS_AGG_COVARIANCE)
        WHY("unknown aggregator");
    if (!(c->hist_width >= 0) || !isfinite(c->hist_width))
        WHY("hist_width must be >= 0 (0: the default cell width)");
    if (c->hist_width > 0 && c->aggregator != DPS_AGG_HISTOGRAM)
        WHY("hist_width is for the histogram aggregator only");
    if (!(c->rho_epoch > 0) || !isfinite(c->rho_epoch))
        WHY("rho_epoch must be positive");
    if (!(c->delta_epoch > 0 && c->delta_epoch < 1))
        WHY("delta_epoch must be in (0, 1)");
    if (!(c->alpha > 0 && c->alpha <= 1))
        WHY("alpha must be in (0, 1]");
    if (!(c->tau > 0 && c->tau <= 1))
        WHY("tau must be in (0, 1]");
    if (c->tau >= (c->alpha > 0.5 ? 0.5 / c->alpha : 1.0))
        WHY("tau must be below the largest possible weight fraction min(1, 1/(2 alpha)): the radius search "
            "could never reach tau * t and would climb to the largest radius");
    if (!(c->split_search > 0 && c->split_count > 0 && c->split_mean > 0))
        WHY("the rho split parts must all be positive");
    if (!(c->xi_min > 0))
        WHY("xi_min must be positive");
    if (c->workers < 1 || c->workers > 256)
        WHY("workers must be in 1..256");
    if (c->spent_before.rho < 0 || c->spent_before.delta < 0)
        WHY("spent_before must be non-negative");
    if (c->cap.rho_cap < 0 || c->cap.eps_cap < 0 || c->cap.delta_target < 0 || c->cap.delta_target >= 1)
        WHY("budget cap values out of range");
    if ((c->cap.rho_cap > 0 || c->cap.eps_cap > 0) && !(c->cap.delta_target > 0))
        WHY("a budget cap needs delta_target > 0");
    if (c->t > SIZE_MAX / c->m || c->t * c->k > SIZE_MAX / c->d / sizeof(float))
        WHY("t * m or t * k * d overflows");
    if (c->t < dps_config_min_buckets(c)) {
        static __thread char msg[200];
        snprintf(msg, sizeof msg,
                 "t = %zu buckets is too few: with this rho_epoch, alpha, split and delta the noisy count needs "
                 "at least %zu buckets to ever succeed (raise t or rho_epoch)", c->t, dps_config_min_buckets(c));
        if (why)
            *why = msg;
        return DPS_EINVAL;
    }
    if (c->aggregator == DPS_AGG_HISTOGRAM && !agg_hist_params_ok(s_hist_eps(c), c->delta_epoch))
        WHY("histogram aggregator: needs delta_epoch <= 1/2 and ln(1/(1 - delta_epoch)) <= sqrt(2 rho_epoch)/2");
    if (c->aggregator == DPS_AGG_HISTOGRAM && c->q > DPS_HISTOGRAM_MAX_QD / c->d) {
        if (why)
            *why = "the histogram aggregator keeps q*d-sized cell coordinates: q*d above 2^23 is refused";
        return DPS_ELIMIT;
    }
    if (c->aggregator == DPS_AGG_COVARIANCE && c->d > DPS_COV_MAX_D) {
        if (why)
            *why = "the covariance mechanism keeps a d x d matrix: d above 4096 is refused";
        return DPS_ELIMIT;
    }
    if (c->aggregator == DPS_AGG_PROJECTION && c->d > DPS_PROJECTION_MAX_D) {
        if (why)
            *why = "the projection aggregator keeps d x d matrices: d above 10000 is refused";
        return DPS_ELIMIT;
    }
    return DPS_OK;
}

size_t dps_estimator_memory_bound(const dps_config *c)
{
    size_t workers = (size_t)(c->workers < 1 ? 1 : c->workers);
    if (c->aggregator == DPS_AGG_COVARIANCE) /* C; the sampler's S, S2, P, Z (covariance.c) and an eigen-
                                                decomposition's copy and vectors (la_syevr_top): 7 d x d doubles
                                                (7.5 measured by tools/bench/bench-covariance; bound 8); C's block; V */
        return c->d * c->d * sizeof(double) * 8 + COV_BLOCK * c->d * sizeof(double) + c->t * c->k * c->d * sizeof(float);
    size_t bufs = c->window + workers + 1;
    int ref = s_uses_reference(c);
    size_t b = bufs * c->m * c->d * sizeof(float) + c->t * c->k * c->d * sizeof(float);
    b += agg_ws_bytes(c->t, c->k, c->q, c->d, (int)workers, c->aggregator == DPS_AGG_REFERENCE);
    if (c->aggregator == DPS_AGG_HISTOGRAM) /* A, P; offset, two cells, centre */
        b += c->t * c->k * c->q * sizeof(float) + c->q * c->d * sizeof(float) +
             c->q * c->d * (sizeof(double) + 2 * sizeof(int64_t) + sizeof(float));
    else if (ref) /* A, P, and the top-k workspace of the q x d mean */
        b += c->t * c->k * c->q * sizeof(float) + c->q * c->d * sizeof(float) + c->q * LA_CHUNK * sizeof(double);
    else /* the d x d double mean, its float noisy copy, the scaled bases */
        b += c->d * c->d * (sizeof(double) + sizeof(float)) + c->t * c->k * c->d * sizeof(double);
    return b;
}

/* ---------------------------------------------------------------- buffers */
static float *s_take_buffer(dps_estimator *e)
{
    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (e->n_free_bufs) {
            float *b = e->free_bufs[--e->n_free_bufs];
            pthread_mutex_unlock(&e->mu);
            return b;
        }
        if (e->n_bufs < e->max_bufs) {
            e->n_bufs++;
            pthread_mutex_unlock(&e->mu);
            float *b = dps_aligned_alloc(e->cfg.m * e->cfg.d, sizeof(float)); /* rows overwrite it */
            if (!b) {
                pthread_mutex_lock(&e->mu);
                e->n_bufs--;
                pthread_mutex_unlock(&e->mu);
            }
            return b;
        }
        pthread_cond_wait(&e->buf_back, &e->mu); /* workers are behind: wait */
    }
}

static void s_give_buffer_locked(dps_estimator *e, float *b)
{
    e->free_bufs[e->n_free_bufs++] = b;
    pthread_cond_broadcast(&e->buf_back);
}

/* ------------------------------------------------------------- bucket job */
static void s_bucket_job(void *arg, int worker)
{
    bucket_job *j = arg;
    dps_estimator *e = j->est;
    const dps_config *c = &e->cfg;
    float *V = e->V + j->id * c->k * c->d;
    size_t rank = 0;
    if (e->hook)
        e->hook(e->hook_arg, e->epoch, j->id, j->rows, c->m, c->d);
    int rc = la_topk_rows(e->ws[worker], j->rows, c->m, c->d, c->k, V, NULL, &rank, NULL);
    if (rc != DPS_OK)
        rank = 0; /* a numerical failure makes the bucket a public random outlier */
    int usable = 1;
    if (rank < c->k) {
        /* Rank below k (zero rows, repeats): complete from public randomness,
           orthogonal to what the bucket has.  Without memory for the
           generator the bucket is left out of the epoch (its basis would be
           unfinished): a resource failure, which no row can cause. */
        dps_rng *pub = NULL;
        usable = dps_rng_new_labelled(&pub, c->public_seed, "completion", e->epoch * c->t + j->id) == DPS_OK;
        if (usable) {
            la_complete_basis(V, rank, c->k, c->d, pub);
            dps_rng_destroy(&pub);
        }
    }
    if (usable && s_uses_reference(c))
        la_project_reference(V, c->k, c->d, e->P, c->q, e->A + j->id * c->k * c->q);
    pthread_mutex_lock(&e->mu);
    s_give_buffer_locked(e, j->rows);
    e->done[j->id] = (unsigned char)usable;
    e->buckets_done += (size_t)usable;
    e->buckets_total += (size_t)usable;
    pthread_mutex_unlock(&e->mu);
    free(j);
}

/* ---------------------------------------------------------------- epochs */
static int s_open_bucket(dps_estimator *e, size_t slot_index)
{
    const dps_config *c = &e->cfg;
    bucket *b = &e->open[slot_index];
    b->id = e->next_bucket++;
    b->filled = 0;
    b->rows = s_take_buffer(e);
    if (!b->rows)
        return DPS_ENOMEM;
    for (size_t i = 0; i < c->m; i++)
        e->slots[e->nfree++] = slot_index;
    return DPS_OK;
}

static void s_reference_job(void *arg, size_t i, int worker)
{
    (void)worker;
    dps_estimator *e = arg;
    agg_reference_point(e->cfg.public_seed, e->epoch, i, e->cfg.d, e->P + i * e->cfg.d);
}

/* Start the open epoch lazily, at its first row: public reference points and
   the first window of buckets. */
static int s_epoch_begin(dps_estimator *e)
{
    const dps_config *c = &e->cfg;
    memset(e->done, 0, c->t);
    e->buckets_done = 0;
    e->next_bucket = 0;
    e->nfree = 0;
    e->n_open = 0;
    if (s_uses_reference(c)) {
        /* Public reference points, one labelled stream per point, drawn in
           parallel (the same values whatever the worker count). */
        pool_for(e->pool, c->q, s_reference_job, e);
        double f2 = 0;
        for (size_t i = 0; i < c->q * c->d; i++)
            f2 += (double)e->P[i] * e->P[i];
        e->xi_max = 2.0 * sqrt(f2); /* ||y^j - y^l|| <= 2 ||P||_F for any bases */
    } else {
        e->xi_max = sqrt(2.0 * (double)c->k); /* ||Pi_j - Pi_l||_F <= sqrt(2k) */
    }
    size_t w = DPS_MIN(c->window, c->t);
    for (size_t i = 0; i < w; i++) {
        int rc = s_open_bucket(e, i);
        if (rc)
            return rc;
        e->n_open++;
    }
    e->epoch_started = 1;
    return DPS_OK;
}

/* Drop the rows of buckets still open (each row belongs to one epoch only). */
static void s_epoch_discard_open(dps_estimator *e)
{
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->n_open; i++) {
        bucket *b = &e->open[i];
        if (b->rows) {
            e->stats.rows_discarded += b->filled;
            s_give_buffer_locked(e, b->rows);
            b->rows = NULL;
        }
    }
    pthread_mutex_unlock(&e->mu);
    e->n_open = 0;
    e->nfree = 0;
}

/* -------------------------------------------------------------- lifecycle */
int dps_estimator_new(dps_estimator **out, const dps_config *cfg)
{
    if (!out)
        return DPS_EINVAL;
    *out = NULL;
    int rc = dps_config_check(cfg, NULL);
    if (rc)
        return rc;
    dps_blas_init_once();
    dps_estimator *e = calloc(1, sizeof *e);
    if (!e)
        return DPS_ENOMEM;
    e->cfg = *cfg;
    const dps_config *c = &e->cfg;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->buf_back, NULL);
    e->epoch = c->first_epoch;
    e->stats.epoch = e->epoch;
    rc = dps_accountant_new(&e->acc, &c->cap, &c->spent_before);
    if (!rc)
        rc = c->seeded ? dps_rng_new_seeded(&e->noise, c->seed) : dps_rng_new_secure(&e->noise);
    if (!rc)
        rc = dps_rng_fork(e->noise, &e->part);
    if (rc) {
        dps_estimator_destroy(&e);
        return rc;
    }
    size_t w = DPS_MIN(c->window, c->t);
    e->max_bufs = w + (size_t)c->workers + 1;
    e->V = dps_aligned_alloc(c->t * c->k * c->d, sizeof(float)); /* a bucket's rows are written before read */
    e->done = calloc(c->t, 1);
    e->open = calloc(w, sizeof *e->open);
    e->slots = calloc(w * c->m, sizeof *e->slots);
    e->free_bufs = calloc(e->max_bufs, sizeof *e->free_bufs);
    e->ws = calloc((size_t)c->workers, sizeof *e->ws);
    int ok = e->V && e->done && e->open && e->slots && e->free_bufs && e->ws;
    if (ok && s_uses_reference(c)) {
        e->A = dps_aligned_alloc(c->t * c->k * c->q, sizeof(float));
        e->P = dps_aligned_calloc(c->q * c->d, sizeof(float));
        ok = e->A && e->P;
    }
    for (int i = 0; ok && i < c->workers; i++)
        ok = (e->ws[i] = la_ws_new(c->m, c->k)) != NULL;
    if (ok)
        ok = (e->pool = pool_new(c->workers)) != NULL;
    if (ok && c->aggregator == DPS_AGG_COVARIANCE) {
        e->C = calloc(c->d * c->d, sizeof *e->C);
        e->C_block = malloc(COV_BLOCK * c->d * sizeof *e->C_block);
        e->C_row = malloc(c->d * sizeof *e->C_row);
        ok = e->C && e->C_block && e->C_row;
    } else if (ok) {
        ok = (e->agg = agg_ws_new(c->t, c->k, c->q, c->d, c->workers, c->aggregator == DPS_AGG_REFERENCE)) != NULL;
    }
    if (!ok) {
        dps_estimator_destroy(&e);
        return DPS_ENOMEM;
    }
    *out = e;
    return DPS_OK;
}

void dps_estimator_destroy(dps_estimator **pe)
{
    if (!pe || !*pe)
        return;
    dps_estimator *e = *pe;
    if (e->pool) {
        pool_wait(e->pool);
        pool_free(&e->pool);
    }
    if (e->open)
        for (size_t i = 0; i < e->n_open; i++)
            free(e->open[i].rows);
    for (size_t i = 0; i < e->n_free_bufs; i++)
        free(e->free_bufs[i]);
    for (int i = 0; e->ws && i < e->cfg.workers; i++)
        la_ws_free(&e->ws[i]);
    free(e->ws);
    agg_ws_free(&e->agg);
    free(e->free_bufs);
    free(e->slots);
    free(e->open);
    free(e->done);
    free(e->V);
    free(e->A);
    free(e->P);
    free(e->C);
    free(e->C_block);
    free(e->C_row);
    dps_rng_destroy(&e->noise);
    dps_rng_destroy(&e->part);
    dps_accountant_destroy(&e->acc);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->buf_back);
    free(e);
    *pe = NULL;
}

/* ------------------------------------------------------------------- push */

/* Copy one row into dst, normalised to norm 1 (at most: src/core/rows.c); a row
   with NaN, Inf or zero norm becomes the zero vector and is counted.  Every
   float row is either of these: no row can make a bucket or C non-finite. */
static void s_admit_row(dps_estimator *e, const float *src, float *dst)
{
    switch (row_unit(src, e->cfg.d, ROW_NORMALISE, dst)) {
    case ROW_OK: break;
    case ROW_NAN: e->stats.rows_nan++; break;
    case ROW_INF: e->stats.rows_inf++; break;
    case ROW_ZERO: e->stats.rows_zero++; break;
    }
}

/* The covariance mechanism's pending rows into C. */
static void s_cov_flush(dps_estimator *e)
{
    la_syrk_rows_add_double(e->C_block, e->C_pending, e->cfg.d, e->C);
    e->C_pending = 0;
}

/* The covariance mechanism's push: every row of the epoch enters C (no
   partition, nothing discarded). */
static size_t s_cov_push(dps_estimator *e, const float *rows, size_t n_rows)
{
    size_t d = e->cfg.d, cap = e->cfg.t * e->cfg.m, taken = 0;
    while (taken < n_rows && e->stats.rows_in_epoch < cap) {
        s_admit_row(e, rows + taken * d, e->C_row);
        double *dst = e->C_block + e->C_pending * d;
        for (size_t i = 0; i < d; i++)
            dst[i] = e->C_row[i];
        if (++e->C_pending == COV_BLOCK)
            s_cov_flush(e);
        taken++;
        e->stats.rows_accepted++;
        e->stats.rows_in_epoch++;
    }
    e->epoch_started = 1;
    return taken;
}

int dps_estimator_push(dps_estimator *e, const float *rows, size_t n_rows, size_t dim, size_t *n_taken)
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
    size_t cap = c->t * c->m;
    size_t taken = 0;
    int rc = DPS_OK;
    if (c->aggregator == DPS_AGG_COVARIANCE) {
        taken = s_cov_push(e, rows, n_rows);
        rc = taken < n_rows ? DPS_EFULL : DPS_OK;
    }
    while (taken < n_rows && c->aggregator != DPS_AGG_COVARIANCE) {
        if (e->stats.rows_in_epoch >= cap) {
            rc = DPS_EFULL;
            break;
        }
        if (!e->epoch_started && (rc = s_epoch_begin(e)) != DPS_OK)
            break;
        size_t pick = (size_t)dps_rng_below(e->part, e->nfree);
        size_t oi = e->slots[pick];
        e->slots[pick] = e->slots[--e->nfree];
        bucket *b = &e->open[oi];
        s_admit_row(e, rows + taken * c->d, b->rows + b->filled * c->d);
        b->filled++;
        taken++;
        e->stats.rows_accepted++;
        e->stats.rows_in_epoch++;
        if (b->filled == c->m) {
            bucket_job *j = malloc(sizeof *j);
            if (!j) {
                rc = DPS_ENOMEM;
                break;
            }
            *j = (bucket_job){e, b->id, b->rows};
            b->rows = NULL;
            if ((rc = pool_submit(e->pool, s_bucket_job, j)) != DPS_OK) {
                free(j);
                break;
            }
            if (e->next_bucket < c->t && (rc = s_open_bucket(e, oi)) != DPS_OK)
                break;
        }
    }
    if (n_taken)
        *n_taken = taken;
    return rc;
}

int dps_estimator_epoch_full(const dps_estimator *e)
{
    return e->stats.rows_in_epoch >= e->cfg.t * e->cfg.m;
}

/* ------------------------------------------------------------------ close */
/* Every outcome says what the cap leaves, after its charge if any. */
static void s_budget_left(const dps_estimator *e, dps_snapshot_info *info)
{
    info->budget_left = dps_accountant_left(e->acc);
    info->budget_unit = dps_budget_unit(&e->cfg.cap);
}

/* The epoch's end: its rows are used once, the next epoch starts empty. */
static void s_epoch_end(dps_estimator *e)
{
    if (e->C) { /* the covariance mechanism: the epoch's rows are used once */
        memset(e->C, 0, e->cfg.d * e->cfg.d * sizeof *e->C);
        e->C_pending = 0;
    }
    e->epoch++;
    e->epoch_started = 0;
    e->stats.epoch = e->epoch;
    e->stats.epochs_closed++;
    e->stats.rows_in_epoch = 0;
}

/* A snapshot that did not run the mechanism (nothing charged), and the end of
   the epoch. */
static int s_finish(dps_estimator *e, dps_snapshot_info *info, const float *basis, dps_snapshot **out)
{
    s_budget_left(e, info);
    int rc = dps_snapshot_new(out, info, basis);
    s_epoch_end(e);
    return rc;
}

/* COVARIANCE MECHANISM.  The epoch's rows (unit norm, or zero) give C = sum
   x x^T; iterative eigenvector sampling (dps_cov_iterative, Amin et al.
   Alg. 1; proof in src/mechanisms/covariance.c) releases k directions with pure
   eps-DP under replacing one row, eps = sqrt(2 rho_epoch), no eigenvalues.
   Pure eps-DP is eps^2/2 = rho_epoch-zCDP (Bun-Steinke 2016, Prop. 1.4), so
   the epoch is charged (rho_epoch, 0).  n = the epoch's row count (public). */
static int s_cov_release(dps_estimator *e, float *basis)
{
    const dps_config *c = &e->cfg;
    size_t d = c->d;
    s_cov_flush(e);
    for (size_t i = 0; i < d; i++)
        for (size_t j = i + 1; j < d; j++)
            e->C[j * d + i] = e->C[i * d + j];
    dps_iterative_params p = {.k = c->k, .eps = sqrt(2.0 * c->rho_epoch), .eps_values = 0,
                              .split = DPS_SPLIT_UNIFORM};
    return dps_cov_iterative(e->C, (size_t)e->stats.rows_in_epoch, d, &p, e->noise, basis, NULL, NULL, NULL);
}

int dps_estimator_close_epoch(dps_estimator *e, dps_snapshot **out)
{
    if (!e || !out)
        return DPS_EINVAL;
    *out = NULL;
    const dps_config *c = &e->cfg;
    pool_wait(e->pool);
    s_epoch_discard_open(e);
    size_t t_eff = 0; /* public: it depends only on how many rows arrived */
    pthread_mutex_lock(&e->mu);
    t_eff = e->buckets_done;
    pthread_mutex_unlock(&e->mu);

    dps_snapshot_info info;
    memset(&info, 0, sizeof info);
    info.epoch = e->epoch;
    info.d = c->d;
    info.k = c->k;
    info.aggregator = c->aggregator;
    int cov = c->aggregator == DPS_AGG_COVARIANCE;
    info.buckets_used = t_eff;
    info.rows_used = cov ? e->stats.rows_in_epoch : (uint64_t)t_eff * c->m;
    info.seeded = c->seeded;
    info.public_seed = c->public_seed;
    info.radius_unrelated = cov ? 0.0 /* no buckets, no radius */
                            : c->aggregator == DPS_AGG_REFERENCE ? sqrt(2.0 * (double)c->k * (double)c->q)
                            : c->aggregator == DPS_AGG_HISTOGRAM
                                ? sqrt(2.0 * (double)c->k / (double)c->d) /* per-coordinate, see dps_config */
                                : sqrt(2.0 * (double)c->k);
    info.delta_target = c->cap.delta_target > 0 ? c->cap.delta_target : 1e-5;
    info.reason = "";
    dps_zcdp cost = {c->rho_epoch, cov ? 0.0 : c->delta_epoch};

    size_t need = cov ? 1 : dps_config_min_buckets(c);
    size_t have = cov ? (size_t)e->stats.rows_in_epoch : t_eff;
    char why[200];
    if (have < need) {
        info.status = DPS_SNAP_FAILED;
        if (cov)
            snprintf(why, sizeof why, "no rows arrived in this epoch: the mechanism did not run, nothing was spent");
        else
            snprintf(why, sizeof why,
                     "only %zu buckets completed and the mechanism needs %zu to succeed: it did not run, nothing was "
                     "spent", t_eff, need);
        info.reason = why;
    } else if (!dps_accountant_fits(e->acc, cost)) {
        info.status = DPS_SNAP_REFUSED;
        info.reason = "releasing this epoch would pass the privacy budget cap: nothing was spent";
    }
    if (have < need || info.status == DPS_SNAP_REFUSED) {
        info.total = dps_accountant_spent(e->acc);
        info.eps_total = dps_accountant_eps(e->acc, info.delta_target);
        return s_finish(e, &info, NULL, out);
    }

    /* Everything the release needs that could fail for want of memory is
       allocated before the charge: the snapshot and the basis it will own. */
    size_t k = c->k, d = c->d, q = c->q, j2 = 0;
    dps_snapshot *snap = snapshot_reserve();
    float *basis = dps_aligned_calloc(k * d, sizeof(float));
    if (!snap || !basis) {
        free(snap);
        free(basis);
        return DPS_ENOMEM; /* before the charge: nothing spent, the epoch stays open */
    }
    dps_zcdp before = dps_accountant_spent(e->acc);
    dps_zcdp after = {before.rho + cost.rho, before.delta + cost.delta};
    if (c->commit && c->commit(c->commit_arg, e->epoch, cost, after) != 0) {
        free(snap);
        free(basis);
        s_epoch_end(e); /* the epoch's rows are dropped */
        return DPS_ECOMMIT;
    }
    /* From here on the charge is on disk: every path ends in *out = snap. */
    int rc = dps_accountant_charge(e->acc, cost); /* cannot fail: it fits (checked above) */

    double split = c->split_search + c->split_count + c->split_mean;
    wfc_params p = {
        .alpha = c->alpha, .tau = c->tau,
        .rho_search = c->rho_epoch * c->split_search / split,
        .rho_count = c->rho_epoch * c->split_count / split,
        .rho_mean = c->rho_epoch * c->split_mean / split,
        .delta1 = c->delta_epoch, .xi_min = c->xi_min, .xi_max = e->xi_max,
    };
    /* Aggregate the completed buckets in bucket order.  Buckets finished in
       order of their ids only when W = t... any order is fine for privacy, but
       keep only the done ones, packed, so the input is the same on every run. */
    for (size_t j = 0; j < c->t && !cov; j++) {
        if (!e->done[j])
            continue;
        if (j2 != j) {
            memmove(e->V + j2 * k * d, e->V + j * k * d, k * d * sizeof(float));
            if (e->A)
                memmove(e->A + j2 * k * q, e->A + j * k * q, k * q * sizeof(float));
        }
        j2++;
    }
    agg_input in = {e->V, e->A, t_eff, k, d, q, e->xi_max};
    wfc_result res;
    memset(&res, 0, sizeof res);
    dps_rng *pub = NULL;
    if (!rc)
        rc = dps_rng_new_labelled(&pub, c->public_seed, "aggregate", e->epoch);
    agg_hist_result hres;
    memset(&hres, 0, sizeof hres);
    if (!rc && cov) {
        rc = s_cov_release(e, basis);
    } else if (!rc && c->aggregator == DPS_AGG_HISTOGRAM) {
        rc = agg_histogram(&in, s_hist_eps(c), c->delta_epoch, c->hist_width, e->noise, pub, basis, &hres);
        res.failed = hres.failed;
        res.radius = hres.width;
        res.W_hat = hres.count_hat;
    } else if (!rc) {
        rc = c->aggregator == DPS_AGG_REFERENCE ? agg_reference(&in, &p, e->noise, pub, e->pool, e->agg, basis, &res)
                                                : agg_projection(&in, &p, e->noise, e->pool, e->agg, basis, &res);
    }
    dps_rng_destroy(&pub);
    info.epoch_cost = cost;
    info.total = dps_accountant_spent(e->acc);
    info.eps_total = dps_accountant_eps(e->acc, info.delta_target);
    info.radius = res.radius;
    info.w_hat = res.W_hat;
    char internal[200];
    if (rc) {
        /* AFTER THE CHARGE NOTHING MAY DEPEND ON AN ERROR THE DATA CAN CAUSE.
           Every row reaching a mechanism is finite with norm <= 1 (s_admit_row,
           src/core/rows.c) and every bucket basis is finite with orthonormal rows
           (s_bucket_job), so the errors that can still reach this line are
           the following, none of which the rows can cause:
           - DPS_ENOMEM: the labelled generator, the aggregators' and the
             covariance sampler's scratch; every size is a function of the
             public configuration (d, k, t, q, the bucket count);
           - DPS_EINVAL / DPS_ELIMIT from a mechanism's argument checks: the
             arguments are the configuration, checked at dps_estimator_new,
             and the row count (public); C and the bases are finite;
           - DPS_ENUMERIC: LAPACK reporting non-convergence (dsyevr, dgesdd)
             on a finite matrix made of the data and the noise, or the
             Bingham sampler passing its cap of 1e9 proposals.  These are the
             residual risk: in principle they depend on the data, no input is
             known to cause them, and their probability is not in delta.
           Whatever the cause, the epoch is published as FAILED, budget
           spent, like a FAIL of the mechanism: never a silent gap, so the
           outcome differs from a run without the error only in the basis
           being withheld.  The snapshot and the basis were allocated before
           the charge, so this path allocates nothing. */
        snprintf(internal, sizeof internal,
                 "the mechanism stopped on an internal error after the budget was charged (%s): published as "
                 "FAILED; budget spent", dps_strerror(rc));
        info.status = DPS_SNAP_FAILED;
        info.reason = internal;
        e->stats.epochs_internal_error++;
    } else if (res.failed && c->aggregator == DPS_AGG_HISTOGRAM) {
        info.status = DPS_SNAP_FAILED;
        info.reason = "no histogram cell's noisy count passed the threshold: the buckets disagree at this cell "
                      "width; budget spent";
    } else if (res.failed) {
        info.status = DPS_SNAP_FAILED;
        info.reason = "the noisy count of friends was too low (WFC said FAIL): the buckets disagree; budget spent";
    } else {
        info.status = DPS_SNAP_RELEASED;
    }
    s_budget_left(e, &info);
    snapshot_fill(snap, &info, basis); /* takes basis */
    s_epoch_end(e);
    *out = snap;
    return DPS_OK;
}

void dps_estimator_get_stats(const dps_estimator *e, dps_stats *out)
{
    dps_estimator *me = (dps_estimator *)e;
    pthread_mutex_lock(&me->mu);
    *out = e->stats;
    out->buckets_completed = e->buckets_total;
    out->buckets_done_epoch = e->epoch_started ? e->buckets_done : 0;
    pthread_mutex_unlock(&me->mu);
}

dps_zcdp dps_estimator_spent(const dps_estimator *e) { return dps_accountant_spent(e->acc); }

int dps_estimator_set_cap(dps_estimator *e, const dps_budget *cap)
{
    if (!e || !cap)
        return DPS_EINVAL;
    int rc = dps_accountant_set_cap(e->acc, cap);
    if (rc == DPS_OK)
        e->cfg.cap = *cap;
    return rc;
}

void dps_estimator_set_bucket_hook(dps_estimator *e, dps_bucket_hook fn, void *arg)
{
    e->hook = fn;
    e->hook_arg = arg;
}
