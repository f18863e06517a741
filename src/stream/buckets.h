/* buckets.h - the bucket pipeline of the streaming estimator (DESIGN 3.1):
   the random partition of an epoch's rows into t buckets of m rows, the
   buffers they fill, and the worker jobs that turn each full bucket into its
   top-k basis and hand it to the epoch mechanism (take_bucket).

   Who owns what: the pipeline owns the bucket buffers, the stacked bases V
   (t*k x d; with W = t written over the buckets' own rows, buckets.c), the
   per-bucket "done" flags and the per-worker workspaces; the
   estimator owns the partition generator, the pool and the mechanism, which
   outlive it.  An EPOCH_ROWS mechanism leaves the pipeline idle.  One thread adds rows and closes; a worker owns a bucket from
   the moment it is full until its basis is written, then gives its buffer
   back. */
#ifndef DPS_BUCKETS_H
#define DPS_BUCKETS_H

#include "epoch_mechanism.h"
#include "estimator_internal.h"
#include "pool.h"

typedef struct bucket_pipe bucket_pipe;

/* W, the buckets open at once: cfg->window, or t when it is 0 (the default,
   so that W follows a t set after dps_config_init); never above t. */
static inline size_t buckets_window(const dps_config *c)
{
    return c->window && c->window < c->t ? c->window : c->t;
}

/* For a checked configuration; DPS_ENOMEM. */
int buckets_new(bucket_pipe **out, const dps_config *c, dps_rng *part, dps_pool *pool, const epoch_mechanism *mech,
                epoch_state *mech_state);
/* Call once the pool has no job left (pool_wait). */
void buckets_free(bucket_pipe **p);
/* The bytes of the rows and bases the pipeline holds for this intake (an
   EPOCH_ROWS mechanism takes no bucket buffer): t*m*d floats + a k x d
   scratch per worker with W = t; (W + workers + 1) row blocks of m*d floats
   + t*k*d floats of bases with W < t. */
size_t buckets_memory(const dps_config *c, epoch_intake intake);

/* Start epoch `epoch`: no bucket done, the first window of buckets open.
   DPS_ENOMEM if their buffers could not be had: none is kept open, and a
   later begin starts afresh. */
int buckets_begin(bucket_pipe *p, uint64_t epoch);
/* One row into the open buckets, in two steps: buckets_slot picks a
   uniformly random free slot of them (d floats) for the caller to write the
   admitted row into (row_unit, ROW_NORMALISE); buckets_commit then takes
   it.  A full bucket goes to a worker (its job queued in the pipe's own
   storage: nothing allocated) and the next bucket opens, in a buffer a
   worker gives back when there is no memory for another: that bucket's own
   at the latest, so no memory failure stops an epoch once begun.  The
   DPS_ENOMEM that buckets_commit could return were no buffer to come back,
   and buckets_slot's NULL after it (nothing drawn, nothing taken), are a
   guard that the pipe's rules leave unused. */
float *buckets_slot(bucket_pipe *p);
int buckets_commit(bucket_pipe *p);
/* A row-intake (EPOCH_ROWS) estimator has no pipe: buckets_seal, buckets_wait,
   buckets_counts and buckets_set_hook take p = NULL as a pipe without
   buckets (0 completed, nothing discarded). */

/* The end of the epoch's input (the adding thread): drop the rows of the
   buckets still open (added to *rows_discarded); the full buckets' jobs go
   on.  Then buckets_wait (any one thread) waits for this pipe's jobs only
   and returns the number of completed buckets (public: it depends only on
   how many rows arrived). */
void buckets_seal(bucket_pipe *p, uint64_t *rows_discarded);
size_t buckets_wait(bucket_pipe *p);
/* The epoch is over (released, or dropped): its completed buckets are
   forgotten, so that closing again before the next epoch's first row finds
   none (they must never be released twice). */
void buckets_end(bucket_pipe *p);
/* Pack the completed buckets' bases to the front of V, in bucket order
   (epoch_pack); *done: the t flags that say which ones they were. */
float *buckets_pack(bucket_pipe *p, const unsigned char **done);
/* Completed buckets: over all epochs, and in the epoch begun last. */
void buckets_counts(bucket_pipe *p, uint64_t *total, size_t *this_epoch);

/* Tests (estimator_internal.h). */
void buckets_set_hook(bucket_pipe *p, dps_bucket_hook fn, void *arg);

#endif
