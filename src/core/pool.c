/* pool.c - worker threads over a FIFO of jobs (see pool.h).

   The workers run POOL_WORKER_NICE above the nice value they start with
   (Linux: a thread's own nice value, set on its id): on a machine whose
   cores they fill, the thread
   that pushes rows -- a training loop, the collector's ingest loop -- gets
   the CPU first, and the bucket bases wait (ingest must not slow down
   while the library computes). */
#include "pool.h"
#include "dpsubspace.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { POOL_WORKER_NICE = 5 }; /* weight 335 against 1024 for the same nice + 0 */

/* Best effort: lower this thread's priority (raising nice needs no privilege). */
static void s_lower_priority(void)
{
#if defined(__linux__) && defined(SYS_gettid)
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, tid);
    if (now == -1 && errno)
        return;
    (void)setpriority(PRIO_PROCESS, tid, now + POOL_WORKER_NICE > 19 ? 19 : now + POOL_WORKER_NICE);
#endif
}

typedef pool_job job;

struct dps_pool {
    pthread_mutex_t mu;
    pthread_cond_t has_job; /* signalled when a job is queued or on shutdown */
    pthread_cond_t idle;    /* signalled when the pool may have become idle */
    job *head, *tail;
    size_t running;
    int stop;
    int n;
    pthread_t *threads;
};

typedef struct {
    dps_pool *pool;
    int index;
} worker_arg;

static void *s_worker(void *p)
{
    s_lower_priority();
    worker_arg *wa = p;
    dps_pool *pool = wa->pool;
    int me = wa->index;
    free(wa);
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->head && !pool->stop)
            pthread_cond_wait(&pool->has_job, &pool->mu);
        if (!pool->head && pool->stop)
            break;
        job *j = pool->head;
        pool->head = j->next;
        if (!pool->head)
            pool->tail = NULL;
        pool->running++;
        pthread_mutex_unlock(&pool->mu);
        int ours = !j->callers; /* read first: the caller's node is theirs again once fn begins */
        j->fn(j->arg, me);
        if (ours)
            free(j);
        pthread_mutex_lock(&pool->mu);
        pool->running--;
        if (!pool->head && pool->running == 0)
            pthread_cond_broadcast(&pool->idle);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

dps_pool *pool_new(int n)
{
    if (n < 1)
        n = 1;
    dps_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->threads = calloc((size_t)n, sizeof *pool->threads);
    if (!pool->threads) {
        free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->has_job, NULL);
    pthread_cond_init(&pool->idle, NULL);
    for (int i = 0; i < n; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa || (wa->pool = pool, wa->index = i, pthread_create(&pool->threads[i], NULL, s_worker, wa) != 0)) {
            free(wa);
            pool->n = i;
            pool_free(&pool);
            return NULL;
        }
        pool->n = i + 1;
    }
    return pool;
}

void pool_free(dps_pool **pp)
{
    if (!pp || !*pp)
        return;
    dps_pool *pool = *pp;
    pthread_mutex_lock(&pool->mu);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->has_job);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->has_job);
    pthread_cond_destroy(&pool->idle);
    free(pool->threads);
    free(pool);
    *pp = NULL;
}

int pool_size(const dps_pool *pool) { return pool->n; }

/* Queue j (filled in). */
static void s_enqueue(dps_pool *pool, job *j)
{
    pthread_mutex_lock(&pool->mu);
    if (pool->tail)
        pool->tail->next = j;
    else
        pool->head = j;
    pool->tail = j;
    pthread_cond_signal(&pool->has_job);
    pthread_mutex_unlock(&pool->mu);
}

int pool_submit(dps_pool *pool, pool_job_fn fn, void *arg)
{
    job *j = malloc(sizeof *j);
    if (!j)
        return DPS_ENOMEM;
    *j = (job){.fn = fn, .arg = arg};
    s_enqueue(pool, j);
    return DPS_OK;
}

void pool_submit_job(dps_pool *pool, pool_job *j, pool_job_fn fn, void *arg)
{
    *j = (pool_job){.fn = fn, .arg = arg, .callers = 1};
    s_enqueue(pool, j);
}

void pool_wait(dps_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    while (pool->head || pool->running)
        pthread_cond_wait(&pool->idle, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

/* One pool_for call: its items left (under the pool's mutex; the waiter
   sleeps on the pool's idle condition and checks its own count, so that it
   waits for its items only, not for other callers' jobs queued meanwhile,
   e.g. the next epoch's buckets while the last one is released). */
typedef struct {
    dps_pool *pool;
    size_t left;
} for_batch;

typedef struct {
    pool_for_fn fn;
    void *arg;
    size_t item;
    for_batch *batch;
} for_item;

static void s_for_job(void *p, int worker)
{
    for_item *it = p;
    it->fn(it->arg, it->item, worker);
    dps_pool *pool = it->batch->pool;
    pthread_mutex_lock(&pool->mu);
    if (--it->batch->left == 0)
        pthread_cond_broadcast(&pool->idle);
    pthread_mutex_unlock(&pool->mu); /* the batch is the caller's again: not touched after this */
}

static void s_task_job(void *p, int worker)
{
    pool_task *t = p;
    t->fn(t->arg, worker);
    dps_pool *pool = t->pool;
    pthread_mutex_lock(&pool->mu);
    t->pending = 0;
    pthread_cond_broadcast(&pool->idle);
    pthread_mutex_unlock(&pool->mu); /* the task is the caller's again: not touched after this */
}

void pool_task_start(dps_pool *pool, pool_task *t, pool_job_fn fn, void *arg)
{
    t->pool = pool;
    t->fn = fn;
    t->arg = arg;
    t->pending = 0;
    if (!pool) {
        fn(arg, 0);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    t->pending = 1;
    pthread_mutex_unlock(&pool->mu);
    pool_submit_job(pool, &t->node, s_task_job, t);
}

void pool_task_wait(pool_task *t)
{
    if (!t->pool)
        return;
    pthread_mutex_lock(&t->pool->mu);
    while (t->pending)
        pthread_cond_wait(&t->pool->idle, &t->pool->mu);
    pthread_mutex_unlock(&t->pool->mu);
}

void pool_for(dps_pool *pool, size_t n, pool_for_fn fn, void *arg)
{
    for_item *items = pool && pool->n > 1 ? calloc(n ? n : 1, sizeof *items) : NULL;
    if (!items) { /* no pool, one worker, or no memory: inline on "worker 0" */
        for (size_t i = 0; i < n; i++)
            fn(arg, i, 0);
        return;
    }
    for_batch batch = {pool, n};
    size_t queued = 0;
    for (size_t i = 0; i < n; i++) {
        items[i] = (for_item){fn, arg, i, &batch};
        if (pool_submit(pool, s_for_job, &items[i]) != 0)
            break;
        queued++;
    }
    pthread_mutex_lock(&pool->mu);
    batch.left -= n - queued; /* those run here, below */
    while (batch.left)
        pthread_cond_wait(&pool->idle, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
    for (size_t i = queued; i < n; i++) /* only if a submit failed */
        fn(arg, i, 0);
    free(items);
}
