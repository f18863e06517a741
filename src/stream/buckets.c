/* buckets.c - the bucket pipeline (buckets.h; DESIGN 3.1).

   Partition: W buckets are open at once; each arriving row takes a uniformly
   random free slot among them (a list of free slots, one entry per slot,
   drawn without replacement).  With W = t every arrangement of the epoch's
   t*m rows into buckets is equally likely.  The choice depends only on the
   generator, never on the rows: a row with NaN/Inf or zero norm takes its
   slot as the zero vector (DESIGN 2), so one changed row changes one bucket.

   Memory (DESIGN 3.1): with W = t every bucket is open from the epoch's
   first row, and a bucket fills only when its last row comes, so the
   epoch's rows must all be held: t*m*d floats is the floor of an exact
   uniform partition.  The pipe then holds nothing more: bucket j's rows are
   block j of one region of t*m*d floats, and its basis, computed into the
   worker's k x d scratch, is written over the block's first k rows
   ("in place"); the release packs the bases to the region's front.  With
   W < t a bucket's block is reused for the next bucket, so the bases have
   their own t*k*d floats and the W + workers + 1 blocks are recycled.

   First touch: on the machines measured a fresh 4 KB page costs 3-28 us to
   fault in, so the t*m*d region's first epoch stalled ingest 15-60 ms a
   batch (d = 1e4, tools/bench/bench-ingest).  A pool job populates the
   region's page tables as soon as it is allocated (MADV_POPULATE_WRITE:
   faults pages in without writing them, so it races with no row), off the
   pushing thread; it counts as one of the pipe's jobs.

   Threads: the mutex guards the buffer free list, the per-bucket "done" flags,
   the completed-bucket counters and the count of this pipe's jobs in flight
   (two pipes share the pool when an epoch releases while the next fills). */
#include "buckets.h"
#include "internal.h"
#include "linalg.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; glibc's headers name it from 2.35 */
#endif

typedef struct {
    size_t id;     /* bucket index in the epoch, [0, t) */
    size_t filled; /* rows so far */
    float *rows;   /* m x d */
} bucket;

typedef struct {
    bucket_pipe *p;
    size_t id;
    float *rows;
    pool_job node; /* queued without allocating: a full bucket always goes to a worker */
} bucket_job;

struct bucket_pipe {
    const dps_config *cfg;
    dps_rng *part;  /* partition choices */
    dps_pool *pool;
    const epoch_mechanism *mech;
    epoch_state *mech_state;
    la_ws **ws;     /* one per worker */

    uint64_t epoch;
    int in_place;   /* W = t: V is the region of the t row blocks (above) */
    float *V;       /* t*k x d bases, or in place t x (m x d) row blocks */
    float **scratch; /* in place: a k x d basis per worker */
    unsigned char *done;
    bucket_job *jobs; /* t: bucket i's job, reused each epoch once the last one's have run */

    bucket *open;   /* window entries */
    size_t n_open;
    size_t next_bucket;
    size_t *slots;  /* free slots: entries are indices into open[] */
    size_t nfree;
    size_t picked;  /* the open[] entry buckets_slot gave the row last */

    pthread_mutex_t mu;
    pthread_cond_t buf_back; /* a buffer came back */
    pthread_cond_t idle;     /* in_flight reached 0 */
    size_t in_flight;        /* this pipe's jobs queued or running: bucket bases, first touch (guarded) */
    size_t bucket_jobs;      /* of those, bucket bases: each gives its buffer back (guarded) */
    float **free_bufs;
    size_t n_free_bufs, n_bufs, max_bufs;
    size_t buckets_done;     /* this epoch (guarded) */
    uint64_t buckets_total;  /* all epochs (guarded) */

    dps_bucket_hook hook;    /* tests only */
    void *hook_arg;
};

static int s_force_separate; /* tests only (estimator_internal.h) */
void dps_buckets_force_separate_bases(int on) { s_force_separate = on; }

static int s_in_place(const dps_config *c) { return buckets_window(c) == c->t && !s_force_separate; }

size_t buckets_memory(const dps_config *c, epoch_intake intake)
{
    if (intake == EPOCH_ROWS)
        return c->d * sizeof(float); /* no pipe: one admitted row, straight to the mechanism */
    size_t workers = (size_t)(c->workers < 1 ? 1 : c->workers);
    size_t block = c->m * c->d * sizeof(float), basis = c->k * c->d * sizeof(float);
    if (s_in_place(c))
        return c->t * block + workers * basis;
    return (buckets_window(c) + workers + 1) * block + c->t * basis;
}

/* One of the pipe's jobs ended (mutex held). */
static void s_job_done_locked(bucket_pipe *p)
{
    if (--p->in_flight == 0)
        pthread_cond_broadcast(&p->idle);
}

static void s_job_done(bucket_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    s_job_done_locked(p);
    pthread_mutex_unlock(&p->mu);
}

/* The first touch (top of the file): populate the whole pages of V, 64 MB
   a call (each call holds the process's memory-map lock for reading; in
   pieces, an mmap elsewhere in the process waits for one piece at most).
   On a kernel without MADV_POPULATE_WRITE (before Linux 5.14) madvise
   refuses and the rows fault their pages in as before. */
static void s_populate_job(void *arg, int worker)
{
    (void)worker;
    bucket_pipe *p = arg;
#ifdef MADV_POPULATE_WRITE
    const dps_config *c = p->cfg;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p->V + page - 1) & ~(page - 1);
    uintptr_t b = ((uintptr_t)p->V + c->t * c->m * c->d * sizeof(float)) & ~(page - 1);
    const uintptr_t piece = (uintptr_t)64 << 20;
    for (; a < b; a += piece)
        if (madvise((void *)a, b - a < piece ? b - a : piece, MADV_POPULATE_WRITE) != 0)
            break; /* not supported (or no memory): the rows fault their pages in */
#endif
    s_job_done(p);
}

static void s_populate(bucket_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->in_flight++;
    pthread_mutex_unlock(&p->mu);
    if (pool_submit(p->pool, s_populate_job, p) != DPS_OK)
        s_job_done(p); /* no job: the rows fault their pages in */
}

int buckets_new(bucket_pipe **out, const dps_config *c, dps_rng *part, dps_pool *pool, const epoch_mechanism *mech,
                epoch_state *mech_state)
{
    *out = NULL;
    bucket_pipe *p = calloc(1, sizeof *p);
    if (!p)
        return DPS_ENOMEM;
    *p = (bucket_pipe){.cfg = c, .part = part, .pool = pool, .mech = mech, .mech_state = mech_state};
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->buf_back, NULL);
    pthread_cond_init(&p->idle, NULL);
    size_t w = buckets_window(c);
    p->in_place = s_in_place(c);
    p->max_bufs = p->in_place ? 0 : w + (size_t)c->workers + 1;
    /* a bucket's rows are written before read */
    p->V = dps_aligned_alloc(c->t * (p->in_place ? c->m : c->k) * c->d, sizeof(float));
    if (p->in_place && (p->scratch = calloc((size_t)c->workers, sizeof *p->scratch)))
        for (int i = 0; i < c->workers; i++)
            if (!(p->scratch[i] = dps_aligned_alloc(c->k * c->d, sizeof(float)))) {
                buckets_free(&p);
                return DPS_ENOMEM;
            }
    p->done = calloc(c->t, 1);
    p->jobs = calloc(c->t, sizeof *p->jobs);
    p->open = calloc(w, sizeof *p->open);
    p->slots = calloc(w * c->m, sizeof *p->slots);
    p->free_bufs = calloc(p->max_bufs + 1, sizeof *p->free_bufs); /* + 1: never calloc(0) */
    p->ws = calloc((size_t)c->workers, sizeof *p->ws);
    int ok = p->V && (!p->in_place || p->scratch) && p->done && p->jobs && p->open && p->slots && p->free_bufs && p->ws;
    for (int i = 0; ok && i < c->workers; i++)
        ok = (p->ws[i] = la_ws_new(c->m, c->d, c->k)) != NULL;
    if (!ok) {
        buckets_free(&p);
        return DPS_ENOMEM;
    }
    if (p->in_place)
        s_populate(p);
    *out = p;
    return DPS_OK;
}

void buckets_free(bucket_pipe **pp)
{
    if (!pp || !*pp)
        return;
    bucket_pipe *p = *pp;
    pthread_mutex_lock(&p->mu); /* the first-touch job may still run */
    while (p->in_flight)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
    if (p->open && !p->in_place) /* in place, the rows are blocks of V */
        for (size_t i = 0; i < p->n_open; i++)
            free(p->open[i].rows);
    for (size_t i = 0; i < p->n_free_bufs; i++)
        free(p->free_bufs[i]);
    for (int i = 0; p->ws && i < p->cfg->workers; i++)
        la_ws_free(&p->ws[i]);
    for (int i = 0; p->scratch && i < p->cfg->workers; i++)
        free(p->scratch[i]);
    free(p->scratch);
    free(p->ws);
    free(p->free_bufs);
    free(p->slots);
    free(p->open);
    free(p->done);
    free(p->jobs);
    free(p->V);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->buf_back);
    pthread_cond_destroy(&p->idle);
    free(p);
    *pp = NULL;
}

/* ---------------------------------------------------------------- buffers */
static float *s_take_buffer(bucket_pipe *p)
{
    int no_memory = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->n_free_bufs) {
            float *b = p->free_bufs[--p->n_free_bufs];
            pthread_mutex_unlock(&p->mu);
            return b;
        }
        if (!no_memory && p->n_bufs < p->max_bufs) {
            p->n_bufs++;
            pthread_mutex_unlock(&p->mu);
            float *b = dps_aligned_alloc(p->cfg->m * p->cfg->d, sizeof(float)); /* rows overwrite it */
            if (b)
                return b;
            pthread_mutex_lock(&p->mu);
            p->n_bufs--;
            no_memory = 1;
            continue; /* one may have come back meanwhile */
        }
        if (!p->bucket_jobs) { /* no memory for another, and none will come back */
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        /* workers are behind, or there is no memory for another buffer: a
           bucket's job gives its buffer back */
        pthread_cond_wait(&p->buf_back, &p->mu);
    }
}

static void s_give_buffer_locked(bucket_pipe *p, float *b)
{
    if (p->in_place)
        return; /* the block is the bucket's own, and now holds its basis */
    p->free_bufs[p->n_free_bufs++] = b;
    pthread_cond_broadcast(&p->buf_back);
}

/* ------------------------------------------------------------- bucket job */
static void s_bucket_job(void *arg, int worker)
{
    bucket_job *j = arg;
    bucket_pipe *p = j->p;
    const dps_config *c = p->cfg;
    float *V = p->in_place ? p->scratch[worker] : p->V + j->id * c->k * c->d;
    size_t rank = 0;
    if (p->hook)
        p->hook(p->hook_arg, p->epoch, j->id, j->rows, c->m, c->d);
    int rc = la_topk_rows(p->ws[worker], j->rows, c->m, c->d, c->k, V, NULL, &rank, NULL);
    if (rc != DPS_OK)
        rank = 0; /* a numerical failure makes the bucket a public random outlier */
    int usable = 1;
    if (rank < c->k) {
        /* Rank below k (zero rows, repeats): complete from public randomness,
           orthogonal to what the bucket has.  Without memory for the
           generator the bucket is left out of the epoch (its basis would be
           unfinished): a resource failure, which no row can cause. */
        dps_rng *pub = NULL;
        usable = dps_rng_new_labelled(&pub, c->public_seed, "completion", p->epoch * c->t + j->id) == DPS_OK;
        if (usable) {
            la_complete_basis(V, rank, c->k, c->d, pub);
            dps_rng_destroy(&pub);
        }
    }
    if (usable && p->in_place) {
        memcpy(j->rows, V, c->k * c->d * sizeof(float)); /* over its rows, which are done with */
        V = j->rows;
    }
    if (usable)
        p->mech->take_bucket(p->mech_state, j->id, V);
    pthread_mutex_lock(&p->mu);
    s_give_buffer_locked(p, j->rows);
    p->bucket_jobs--;
    p->done[j->id] = (unsigned char)usable;
    p->buckets_done += (size_t)usable;
    p->buckets_total += (size_t)usable;
    s_job_done_locked(p);
    pthread_mutex_unlock(&p->mu); /* j is the pipe's again: not touched after this */
}

/* ---------------------------------------------------------------- epochs */
static int s_open_bucket(bucket_pipe *p, size_t slot_index)
{
    bucket *b = &p->open[slot_index];
    b->id = p->next_bucket++;
    b->filled = 0;
    b->rows = p->in_place ? p->V + b->id * p->cfg->m * p->cfg->d : s_take_buffer(p);
    if (!b->rows)
        return DPS_ENOMEM;
    for (size_t i = 0; i < p->cfg->m; i++)
        p->slots[p->nfree++] = slot_index;
    return DPS_OK;
}

int buckets_begin(bucket_pipe *p, uint64_t epoch)
{
    const dps_config *c = p->cfg;
    p->epoch = epoch;
    memset(p->done, 0, c->t);
    p->buckets_done = 0;
    p->next_bucket = 0;
    p->nfree = 0;
    p->n_open = 0;
    size_t w = buckets_window(c);
    for (size_t i = 0; i < w; i++) {
        int rc = s_open_bucket(p, i);
        if (rc) { /* the buckets opened give their buffers back: a later begin starts afresh */
            uint64_t none = 0;
            buckets_seal(p, &none);
            return rc;
        }
        p->n_open++;
    }
    return DPS_OK;
}

float *buckets_slot(bucket_pipe *p)
{
    if (p->nfree == 0) /* a bucket could not be opened (buckets_commit's DPS_ENOMEM) */
        return NULL;
    size_t pick = (size_t)dps_rng_below(p->part, p->nfree);
    size_t oi = p->slots[pick];
    p->slots[pick] = p->slots[--p->nfree];
    p->picked = oi;
    bucket *b = &p->open[oi];
    return b->rows + b->filled * p->cfg->d;
}

int buckets_commit(bucket_pipe *p)
{
    const dps_config *c = p->cfg;
    size_t oi = p->picked;
    bucket *b = &p->open[oi];
    if (++b->filled < c->m)
        return DPS_OK;
    bucket_job *j = &p->jobs[b->id]; /* free: bucket b->id's last job ran in an epoch waited for */
    j->p = p;
    j->id = b->id;
    j->rows = b->rows;
    b->rows = NULL;
    pthread_mutex_lock(&p->mu);
    p->in_flight++;
    p->bucket_jobs++;
    pthread_mutex_unlock(&p->mu);
    pool_submit_job(p->pool, &j->node, s_bucket_job, j);
    return p->next_bucket < c->t ? s_open_bucket(p, oi) : DPS_OK;
}

void buckets_seal(bucket_pipe *p, uint64_t *rows_discarded)
{
    if (!p)
        return;
    /* Drop the rows of buckets still open (each row belongs to one epoch only);
       the full ones are the workers' until their bases are written. */
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_open; i++) {
        bucket *b = &p->open[i];
        if (b->rows) {
            *rows_discarded += b->filled;
            s_give_buffer_locked(p, b->rows);
            b->rows = NULL;
        }
    }
    pthread_mutex_unlock(&p->mu);
    p->n_open = 0;
    p->nfree = 0;
}

size_t buckets_wait(bucket_pipe *p)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    while (p->in_flight)
        pthread_cond_wait(&p->idle, &p->mu);
    size_t completed = p->buckets_done;
    pthread_mutex_unlock(&p->mu);
    return completed;
}

void buckets_end(bucket_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->buckets_done = 0;
    memset(p->done, 0, p->cfg->t);
    pthread_mutex_unlock(&p->mu);
}

float *buckets_pack(bucket_pipe *p, const unsigned char **done)
{
    const dps_config *c = p->cfg;
    size_t basis = c->k * c->d;
    if (p->in_place) { /* basis j from block j to the front: each lands at or below where it was */
        for (size_t j = 0, n = 0; j < c->t; j++)
            if (p->done[j])
                memmove(p->V + basis * n++, p->V + j * c->m * c->d, basis * sizeof(float));
    } else {
        epoch_pack(p->V, basis * sizeof(float), p->done, c->t);
    }
    *done = p->done;
    return p->V;
}

void buckets_counts(bucket_pipe *p, uint64_t *total, size_t *this_epoch)
{
    if (!p) {
        *total = 0;
        *this_epoch = 0;
        return;
    }
    pthread_mutex_lock(&p->mu);
    *total = p->buckets_total;
    *this_epoch = p->buckets_done;
    pthread_mutex_unlock(&p->mu);
}

void buckets_set_hook(bucket_pipe *p, dps_bucket_hook fn, void *arg)
{
    if (!p)
        return;
    p->hook = fn;
    p->hook_arg = arg;
}
