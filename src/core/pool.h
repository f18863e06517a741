/* pool.h - a fixed set of worker threads taking jobs from one FIFO queue.
   Jobs get the index of the worker running them (for per-worker workspaces). */
#ifndef DPS_POOL_H
#define DPS_POOL_H

#include <stddef.h>

typedef struct dps_pool dps_pool;
typedef void (*pool_job_fn)(void *arg, int worker);
typedef void (*pool_for_fn)(void *arg, size_t item, int worker);

/* n >= 1 threads; NULL on failure. */
dps_pool *pool_new(int n);
/* Waits for queued jobs, then joins the threads. */
void pool_free(dps_pool **pool);
int pool_size(const dps_pool *pool);
/* Queue a job; 0 or DPS_ENOMEM. */
int pool_submit(dps_pool *pool, pool_job_fn fn, void *arg);
/* A job in the caller's storage, for jobs queued where a failure could not
   be answered (a bucket handed to a worker mid-epoch): pool_submit_job
   queues it without allocating, so it cannot fail.  The node is the
   pool's from the call until fn begins; fn may then reuse or free it. */
typedef struct pool_job {
    pool_job_fn fn;
    void *arg;
    struct pool_job *next;
    int callers; /* the caller's storage: not freed by the pool */
} pool_job;
void pool_submit_job(dps_pool *pool, pool_job *j, pool_job_fn fn, void *arg);
/* Block until the queue is empty and no job runs. */
void pool_wait(dps_pool *pool);
/* Run fn(arg, i, worker) for every i in [0, n) on the workers; returns when all
   of these are done (not waiting for other jobs queued meanwhile).  Must not be
   called from inside a job.  With no pool (NULL) or a pool of one worker,
   on the calling thread as worker 0, in order. */
void pool_for(dps_pool *pool, size_t n, pool_for_fn fn, void *arg);

/* One job whose end the caller waits for alone: pool_task_start queues
   fn(arg, worker) (in the task's own node: it cannot fail) and returns at
   once, pool_task_wait returns when it has run (at once if none was
   started).  The task is the caller's storage, one run at a time; zero it
   before its first use.  A NULL pool runs it on the calling thread. */
typedef struct {
    dps_pool *pool;
    pool_job_fn fn;
    void *arg;
    int pending;   /* under the pool's mutex */
    pool_job node; /* its place in the queue */
} pool_task;
void pool_task_start(dps_pool *pool, pool_task *t, pool_job_fn fn, void *arg);
void pool_task_wait(pool_task *t);

#endif
