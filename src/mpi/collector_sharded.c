/* collector_sharded.c - dps-collector --sharded under mpirun: one
   collector whose rows are sharded by coordinate over the R ranks of
   MPI_COMM_WORLD, so that no rank holds more than 1/R of any row, of the
   power iteration's state or of the basis.

   WHO DOES WHAT.  Rank r binds its own ingest endpoint (dps_shard_endpoint
   of --ingest) and takes batches of slices [c0, c1) of rows
   (dps_shard_slice; producers split rows with dps_producer_opts.shards, or
   dps-produce --shards R).  Rank 0 alone holds the state directory (ledger,
   snapshots), the accountant, the status endpoint and the publish socket.
   Rank 0 orders the rows: it takes one batch at a time from its socket and
   broadcasts its key (producer id, stream, seq, rows); every other rank
   finds its slice of that batch among those it has received (it keeps
   receiving while it waits, so no producer is held up by a rank that is not
   reading), and all ranks agree (an allreduce) that every rank has it --
   then every rank adds the batch's rows in the same order, or every rank
   drops it (a rank that did not get its slice within --shard-wait).  So the
   ranks iterate over one sequence of rows, each its coordinates of it.
   Rows of different batches are never paired: a slice matches only its own
   (id, stream, seq) -- stream is the producer's random 64-bit name, the same
   on its every part, so a producer restarted under the same id starts
   another stream.

   THE MECHANISMS.  The reference aggregator (DPS_AGG_REFERENCE, the
   default) is reference_sharded.h's, whose header argues that it is
   epoch_reference.c's mechanism (delta_epoch-approximate rho_epoch-zCDP per
   epoch, charged (rho_epoch, delta_epoch)): rows go to buckets by a public
   partition of the epoch's sequence of rows, the same on every rank; an
   epoch with fewer completed buckets than WFC can use is not run and not
   charged (a public count: it depends only on how many rows came).
   The power mechanism (--aggregator power) is epoch_power.c's
   (DPS_AGG_POWER), sharded by
   power_sharded.h (whose header argues it is the same mechanism): the
   epoch's N = t m rows in T = min(power_blocks or 3 cold / 1 warm, N)
   disjoint blocks by index, one noisy step (s = power_noise_sd(rho)) at the
   end of each block, the partial last block's step at the close; the warm
   start is the last released basis (public).  GUARANTEE: rho-zCDP per epoch
   under replacing one row, charged (rho, 0) -- epoch_power.c's argument, its
   premises kept here: rows in disjoint blocks by their index in the epoch's
   sequence (the same sequence on every rank, above), every row of norm <= 1
   (power_sharded_add normalises the whole row from its slices), ||X||_2 <= 1
   (power_sharded.h's norm guard), noise on every entry whatever the data.
   Each charge carries its single-process table entry's kind (s->mech->kind):
   the power releases are Gaussian mechanisms of mu = sqrt(2 rho), whose total
   the accountant states by the exact Gaussian profile; the reference ones
   carry a delta, and a total with one is stated by the CKS conversion.
   Pairing slices by key matters for privacy: a "row" made of two people's
   slices would let one person move two rows; the key match and the
   all-or-none agreement prevent it.

   THE ORDER OF AN EPOCH'S END (rank 0): the cap is checked, the charge is
   appended to the ledger and fsync'ed (collector_commit), and only then is
   the decision broadcast and the release computed (the last step, the
   basis gathered to rank 0), numbered, stored with its outcome line and
   published (publish.c's functions).  Noise drawn at the blocks' ends before
   the charge never leaves the ranks unless the epoch is released (as in the
   single-process mechanism).  A refused epoch publishes a REFUSED snapshot;
   a commit that fails stops every rank (exit 3).

   Not in this mode (the single-process collector's): the release thread
   (an epoch's end holds ingest for its duration), credit (the status reply
   says the collector grants none: producers send without), SIGHUP reload,
   parameter groups, the other aggregators.  Signals: rank 0 stops on SIGINT or
   SIGTERM and tells the others; they stop only when told.  (mpirun forwards
   a SIGTERM to every rank, which then stop the same way, but exits 1 itself
   whatever they return: a SIGTERM to rank 0's pid, logged at the start,
   keeps the exit code.)

   Who owns what: main() (collector.c) owns the collector struct and its
   state; this file the MPI state, the per-rank ingest socket's held slices
   and the power iteration, all freed before it returns. */
#include "collector.h"
#include "epoch_aggregate.h"
#include "epoch_power.h"
#include "internal.h"
#include "noise_level.h"
#include "power_sharded.h"
#include "reference_sharded.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zmq.h>

#define SHARD_USER_MAX 128   /* a ZAP User-Id (a key's name) kept with a slice  */
#define SHARD_HELD_MAX 4096  /* slices a rank holds before it stops reading (libzmq's queue holds the rest) */

/* Rank 0's word to every rank (broadcast as bytes). */
enum { CMD_BATCH = 1, CMD_CLOSE = 2, CMD_STOP = 3 };
typedef struct {
    int32_t kind;
    uint32_t n;      /* BATCH: its rows; STOP: the exit code */
    uint64_t seq, stream;
    char id[WIRE_MAX_PRODUCER_ID + 1];
    char user[SHARD_USER_MAX]; /* the batch's CURVE key name on rank 0 ("" in plaintext) */
} shard_cmd;

/* An epoch's end as rank 0 decided it (broadcast). */
enum { END_RELEASE = 0, END_REFUSED = 1, END_COMMIT_FAILED = 2 };

/* A batch this rank received and has not used yet. */
typedef struct held {
    wire_rows wr;
    char user[SHARD_USER_MAX]; /* the CURVE key it came with ("" in plaintext) */
    uint64_t received_ms;
    struct held *next;
} held;

typedef struct {
    collector *c;
    const dps_config *cfg;
    int rank, size;
    size_t c0, c1, w;
    int reference;            /* the mechanism: the reference aggregator (ref), else the power one (p) */
    power_sharded p;
    ref_sharded ref;
    ref_sharded_outcome ro;   /* the reference release's outcome */
    const epoch_mechanism *mech; /* the single-process mechanism's public functions: cost, min_buckets */
    held *first;              /* received, not yet announced (workers) */
    uint64_t held_count, held_bytes; /* and the bytes of their rows */
    uint64_t held_budget;     /* workers read ahead at most this (--ingest-buffer-mb) */
    uint64_t epoch, rows, n;  /* the open epoch, its rows so far, N = t m */
    uint64_t block, blocks, block_end;
    int err;                  /* the first error of the epoch's steps */
    int has_prev;             /* a basis was released: the warm start */
    float *warm, *slice;      /* k x w: the last released slice; this release's */
    float *basis;             /* rank 0: k x d, the gathered basis */
    double sv[64];            /* the last Y's top-k singular values (k <= 64 here) */
    dps_accountant *acc;      /* rank 0 */
    uint64_t rows_accepted, dropped, refused_slices, expired;
    uint64_t buckets_closed;  /* buckets completed in the epochs closed so far (status: all epochs) */
    uint64_t epoch_bytes, epoch_calls; /* p's counts when the epoch began (the benchmark's line) */
} sharded;

/* ------------------------------------------------------------ MPI glue */
int collector_sharded_start(int *argc, char ***argv, int *rank, int *size, char *err, size_t errlen)
{
    int provided = 0; /* only this thread calls MPI (ZeroMQ's and OpenBLAS's threads do not) */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "--sharded: MPI did not start (run it under mpirun)");
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

int collector_sharded_agree(int rc) { return shard_agree(MPI_COMM_WORLD, rc, NULL); }

void collector_sharded_end(void) { MPI_Finalize(); }

/* --------------------------------------------------------------- ingest */
/* Is this decoded batch a slice this rank can take?  With one rank, whole
   rows are (shards 0) as well as shard 0 of 1. */
static int s_slice_ok(const sharded *s, const wire_rows *wr)
{
    if (wr->shards == 0)
        return s->size == 1;
    return wr->shards == (uint32_t)s->size && wr->shard == (uint32_t)s->rank && wr->full_dim == s->cfg->d;
}

/* One message from this rank's socket, decoded and checked: 1 and h
   filled, 0 if none was waiting (or it was refused: counted, logged). */
static int s_receive(sharded *s, held *h)
{
    collector *c = s->c;
    wire_rows *out = &h->wr;
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, c->ingest.pull, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return 0;
    }
    const char *user = zmq_msg_gets(&msg, "User-Id");
    snprintf(h->user, sizeof h->user, "%s", user ? user : "");
    h->received_ms = net_now_ms();
    int revoked = c->zap && !zap_allowed(c->zap, "ingest", user);
    wire_reject r = revoked ? WIRE_OK : wire_rows_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), s->w, out);
    /* held past the message (its slice waits for rank 0); DPS_FAULT=hold-fails: as with no memory */
    if (r == WIRE_OK && !revoked && (collector_fault_here("hold-fails") || wire_rows_own(out) != DPS_OK)) {
        /* rank 0 tells its producer; another rank's missing slice drops the
           batch on every rank when rank 0 announces it (s_batch), told there */
        log_error("rank %d: no memory to hold a batch of %zu rows of producer '%s': dropped", s->rank, out->n,
                  out->producer_id);
        c->ingest.batches_cut_short++;
        if (s->rank == 0)
            ptable_refused_seq(&c->ingest.producers, out->producer_id, out->stream, out->seq);
        wire_rows_release(out);
        zmq_msg_close(&msg);
        return 0;
    }
    zmq_msg_close(&msg);
    if (revoked) {
        c->status.revoked++;
        return 0;
    }
    char id[WIRE_MAX_PRODUCER_ID + 1]; /* the refusal is counted for it after the batch is released */
    snprintf(id, sizeof id, "%s", out->producer_id);
    uint64_t run = out->stream;
    if (r == WIRE_OK && s->size > 1 && out->stream == 0) {
        /* a slice pairs with its row's other slices by (id, stream, seq, key): a
           producer must name its stream (at random), or two producers under
           one id could have their slices paired into one row */
        log_warn("rank %d: a batch of %s names no stream: refused (a sharded producer draws one at random)",
                 s->rank, id);
        wire_rows_release(out);
        r = WIRE_DIM;
    } else if (r == WIRE_OK && s->rank == 0 && !ptable_admit(&c->ingest.producers, id, run, out->seq)) {
        /* rank 0 decides for every rank: a replayed batch is never announced */
        log_warn("a batch %" PRIu64 " of %s refused: its run already sent that seq (a replayed or reordered batch)",
                 out->seq, id);
        wire_rows_release(out);
        r = WIRE_REPLAYED;
    } else if (r == WIRE_OK && !s_slice_ok(s, out)) {
        log_warn("rank %d: a batch of %s is shard %" PRIu32 " of %" PRIu32 " of rows of %" PRIu32 " coordinates, "
                 "not this rank's (%d of %d, d = %zu): refused (is the producer's --shards %d?)",
                 s->rank, out->producer_id, out->shard, out->shards, out->full_dim, s->rank, s->size, s->cfg->d,
                 s->size);
        wire_rows_release(out);
        r = WIRE_DIM;
    }
    if (r != WIRE_OK) {
        if (r == WIRE_DIM && s->refused_slices < 10) /* the first few: the rest are counted (dps-status) */
            log_warn("rank %d: a batch of %s refused: its rows are not this rank's slice (%zu of d = %zu "
                     "coordinates): is the producer sharded over %d ranks (dps-produce --shards %d)?",
                     s->rank, id[0] ? id : "a producer", s->w, s->cfg->d, s->size, s->size);
        c->status.rejected[r]++;
        s->refused_slices++;
        if (s->rank == 0)
            ptable_refused(&c->ingest.producers, id, run);
        log_debug("rank %d: batch refused: %s", s->rank, wire_reject_name(r));
        return 0;
    }
    return 1;
}

/* Drop held slices older than 4 --shard-wait: rank 0 did not announce their
   batch in that time, so it never will (it refused its part, or a producer
   sent only some parts); counted, logged. */
static void s_expire_held(sharded *s)
{
    uint64_t now = net_now_ms(), age = (uint64_t)(4 * 1000 * s->c->o.shard_wait);
    for (held **pp = &s->first; *pp;) {
        held *h = *pp;
        if (now - h->received_ms <= age) {
            pp = &h->next;
            continue;
        }
        log_warn("rank %d: a slice of batch %" PRIu64 " of %s was never asked for by rank 0: dropped", s->rank,
                 h->wr.seq, h->wr.producer_id);
        *pp = h->next;
        s->held_count--;
        s->held_bytes -= (uint64_t)h->wr.n * s->w * sizeof(float);
        s->expired++;
        wire_rows_release(&h->wr);
        free(h);
    }
}

/* Receive what is waiting into the held list (workers), up to
   SHARD_HELD_MAX slices and, reading ahead of rank 0 (asked 0), the
   --ingest-buffer-mb budget: the rest waits in libzmq's queue (its producers
   block), so memory stays bounded whatever is sent to a worker's port.  A
   worker looking for the slice rank 0 asked for (asked 1) reads past the
   budget: that slice may be behind the held ones in the queue. */
static void s_hold_waiting(sharded *s, int asked)
{
    s_expire_held(s);
    while (s->held_count < SHARD_HELD_MAX && (asked || s->held_bytes < s->held_budget)) {
        held *h = malloc(sizeof *h);
        if (!h) /* not taken now: it stays in libzmq's queue, read later */
            return;
        if (!s_receive(s, h)) {
            free(h);
            return;
        }
        h->next = s->first;
        s->first = h;
        s->held_count++;
        s->held_bytes += (uint64_t)h->wr.n * s->w * sizeof(float);
    }
}

/* The held slice of cmd's batch, unlinked (NULL if not here); slices of the
   same stream with a smaller seq are dropped: rank 0 has passed them. */
static held *s_take_held(sharded *s, const shard_cmd *cmd)
{
    held *found = NULL;
    for (held **pp = &s->first; *pp;) {
        held *h = *pp;
        int same = h->wr.stream == cmd->stream && strcmp(h->wr.producer_id, cmd->id) == 0 &&
                   strcmp(h->user, cmd->user) == 0;
        if (same && (h->wr.seq == cmd->seq || h->wr.seq < cmd->seq)) {
            *pp = h->next;
            s->held_count--;
            s->held_bytes -= (uint64_t)h->wr.n * s->w * sizeof(float);
            if (h->wr.seq == cmd->seq && !found) {
                found = h;
            } else {
                wire_rows_release(&h->wr);
                free(h);
            }
            continue;
        }
        pp = &h->next;
    }
    return found;
}

static void s_free_held(sharded *s)
{
    while (s->first) {
        held *h = s->first;
        s->first = h->next;
        wire_rows_release(&h->wr);
        free(h);
    }
    s->held_count = s->held_bytes = 0;
}

static volatile sig_atomic_t s_stop_signal;
static void s_on_signal(int sig)
{
    (void)sig;
    s_stop_signal = 1;
}

/* Rank 0's next word, on every rank.  Workers keep receiving while they wait
   (nonblocking broadcast), so producers never wait on a rank that is idle. */
static void s_command(sharded *s, shard_cmd *cmd)
{
    MPI_Request req;
    MPI_Ibcast(cmd, (int)sizeof *cmd, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if (s->rank == 0) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    static int told; /* a worker's signal is only said once */
    for (;;) {
        int done = 0;
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (s_stop_signal && !told) {
            told = 1;
            log_warn("rank %d (pid %ld): SIGINT/SIGTERM received; the ranks stop when rank 0 is told (SIGTERM to its "
                     "pid, logged at the start, or to mpirun), so this rank goes on until then", s->rank,
                     (long)getpid());
        }
        if (s->held_bytes >= s->held_budget) { /* read far enough ahead: wait for rank 0 */
            usleep(2000);
            continue;
        }
        zmq_pollitem_t item = {s->c->ingest.pull, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 5) > 0)
            s_hold_waiting(s, 0);
    }
}

/* A worker's slice of cmd's batch: held, or received within --shard-wait. */
static held *s_find(sharded *s, const shard_cmd *cmd)
{
    uint64_t deadline = net_now_ms() + (uint64_t)(s->c->o.shard_wait * 1000);
    for (;;) {
        held *h = s_take_held(s, cmd);
        if (h || net_now_ms() >= deadline)
            return h;
        zmq_pollitem_t item = {s->c->ingest.pull, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 10) > 0)
            s_hold_waiting(s, 1);
    }
}

/* ---------------------------------------------------------------- epoch */
static void s_step(sharded *s)
{
    int rc = power_sharded_step(&s->p, power_noise_sd(s->cfg->rho_epoch));
    if (rc && !s->err)
        s->err = rc;
    s->block++;
    s->block_end = power_block_start(s->n, s->blocks, s->block + 1);
}

/* The epoch's first row: the public start (moment_begin's rule for T). */
static void s_begin(sharded *s)
{
    if (s->reference) { /* public draws, agreed (every rank is at this row) */
        s->err = collector_sharded_agree(ref_sharded_begin(&s->ref, s->epoch));
        return;
    }
    uint64_t t = s->cfg->power_blocks ? s->cfg->power_blocks : (s->has_prev ? 1 : 3);
    s->blocks = DPS_MIN(t, s->n);
    s->block = 0;
    s->block_end = power_block_start(s->n, s->blocks, 1);
    s->err = power_sharded_start(&s->p, s->has_prev ? s->warm : NULL, s->cfg->public_seed, s->epoch);
}

/* This rank's MPI traffic so far (the mechanism not in use counts 0). */
static uint64_t s_bytes(const sharded *s) { return s->p.traffic.bytes + s->ref.traffic.bytes; }
static uint64_t s_calls(const sharded *s) { return s->p.traffic.calls + s->ref.traffic.calls; }

/* Rank 0: number, store and send an epoch's snapshot.  A write of the state
   directory that fails (a refused line, the snapshot, its outcome line:
   logged by publish.c, the ledger halted) stops the collector with exit
   code 3 at the loop's next turn, as the single-process collector does:
   nothing more is written, and nothing unstored is sent. */
static void s_publish(sharded *s, dps_snapshot_info *info, const float *basis)
{
    collector_outgoing out; /* collector_number_info logs a failure (memory, or its refused line) */
    int rc = collector_number_info(s->c, info, basis, &out);
    if (rc == DPS_ECOMMIT || (rc == DPS_OK && collector_store(s->c, &out) != DPS_OK)) {
        s->c->ledger.failed = 1;
        collector_stop = 1; /* s_next tells every rank to stop */
        return;
    }
    if (rc == DPS_OK)
        collector_send(s->c, &out);
}

/* Rank 0, before the charge: is there memory to publish a k x d basis (the
   numbered snapshot's copy, its encoding, ZeroMQ's copy as it is sent and as
   the welcome message)?  A public question (the sizes are the
   configuration's): an epoch without it is not charged, as the
   single-process stream does (estimator.c reserves before the charge). */
static int s_room_to_publish(const sharded *s)
{
    size_t bytes = s->cfg->k * s->cfg->d * sizeof(float);
    void *probe[4] = {NULL, NULL, NULL, NULL};
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        probe[i] = malloc(bytes + 4096);
        ok &= probe[i] != NULL;
        if (probe[i]) /* touched, so that the pages are there, not only the addresses */
            memset(probe[i], 0, bytes + 4096);
    }
    for (int i = 0; i < 4; i++)
        free(probe[i]);
    return ok;
}

/* Rank 0 (dps_release_hooks.commit): the ledger's durable record. */
static int s_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp after)
{
    const sharded *s = arg;
    return collector_commit(s->c, epoch, cost, after);
}

/* Rank 0 (dps_release_hooks.reserve): is there memory to publish? */
static int s_reserve(void *arg)
{
    return s_room_to_publish(arg) ? 0 : DPS_ENOMEM;
}

/* Rank 0: the end of a release's decision (dps_release_decide: too little,
   the cap, the memory, the charge on disk); END_*. */
static int s_decide(sharded *s, dps_snapshot_info *info)
{
    collector *c = s->c;
    size_t need = s->reference ? s->mech->min_buckets(s->cfg) : 0;
    char *too_little = NULL;
    if (s->reference && s->ref.completed < need) { /* public: the count depends only on how many rows came */
        static char why[400];
        snprintf(why, sizeof why, "only %zu buckets completed of %" PRIu64 " rows (the open buckets' %" PRIu64
                 " dropped) and the mechanism needs %zu to succeed: it did not run, nothing was spent%s",
                 s->ref.completed, s->rows, s->rows - (uint64_t)s->ref.completed * s->cfg->m, need,
                 s->ref.win > 8 && s->rows < s->n ? " (an early close fills few buckets unless --window is small)" : "");
        too_little = why;
    }
    /* The hooks' arg is the sharded state for reserve; collector_commit takes
       the collector, so commit goes through s_commit. */
    dps_release_hooks hooks = {.reserve = s_reserve, .commit = s_commit, .arg = s};
    switch (dps_release_decide(s->acc, s->mech->cost(s->cfg), s->mech->kind, too_little, &hooks, info)) {
    case DPS_RELEASE_RUN:
        return END_RELEASE;
    case DPS_RELEASE_NOT_RUN:
        return END_REFUSED;
    case DPS_RELEASE_NO_MEMORY:
        info->status = DPS_SNAP_FAILED;
        info->reason = "rank 0 had no memory to publish a basis: the mechanism did not run, nothing was spent";
        log_error("epoch %" PRIu64 ": rank 0 has no memory for the 4 copies of the k x d basis a publication "
                  "needs (%.1f MB each): not charged, not released (give rank 0 more memory)",
                  s->epoch, (double)(s->cfg->k * s->cfg->d * sizeof(float)) / 1e6);
        return END_REFUSED;
    case DPS_RELEASE_UNCOMMITTED:
    default:
        c->ledger.failed = 1;
        return END_COMMIT_FAILED;
    }
}

/* The power mechanism's release (every rank): the last, partial block's
   step, the basis gathered; the warm start kept.  rc, the same on every rank. */
static int s_release_power(sharded *s)
{
    /* the last, partial block (moment_release's rule) */
    if (s->block < s->blocks && s->rows > power_block_start(s->n, s->blocks, s->block))
        s_step(s);
    int rc = s->err;
    if (!rc)
        rc = power_sharded_basis(&s->p, s->slice, s->sv);
    if (!rc)
        rc = power_sharded_gather(&s->p, s->rank == 0 ? s->basis : NULL);
    rc = power_sharded_agree(&s->p, rc);
    if (!rc) {
        memcpy(s->warm, s->slice, s->cfg->k * s->w * sizeof *s->warm);
        s->has_prev = 1;
    }
    return rc;
}

/* The reference aggregator's release (every rank): WFC, the noisy mean, its
   top-k, gathered on rank 0 unless WFC said FAIL.  rc, the same on every rank. */
static int s_release_reference(sharded *s)
{
    int rc = s->err; /* a bucket's error (memory) was agreed by every rank */
    if (!rc)
        rc = ref_sharded_release(&s->ref, s->slice, &s->ro);
    if (!rc && !s->ro.failed)
        shard_gather_rows(MPI_COMM_WORLD, s->cfg->k, s->cfg->d, s->slice, s->rank == 0 ? s->basis : NULL,
                          &s->ref.traffic);
    return rc;
}

/* Rank 0: the released epoch's outcome: into info its noise level and the
   aggregator's radius, W^; whether the mechanism said FAIL, and why. */
static int s_outcome(sharded *s, dps_snapshot_info *info, const char **why)
{
    const dps_config *cfg = s->cfg;
    if (s->reference) {
        epoch_outcome o = {.failed = s->ro.failed, .radius = s->ro.radius, .w_hat = s->ro.w_hat};
        wfc_result res = {.failed = s->ro.failed, .radius = s->ro.radius, .W_hat = s->ro.w_hat};
        epoch_agg_wfc_outcome(&res, &o); /* the single-process wording of a FAIL */
        info->radius = o.radius;
        info->w_hat = o.w_hat;
        info->noise_level = o.failed ? 0 : s->ro.noise_level;
        *why = o.reason;
        return o.failed;
    }
    /* noise level: moment_release's (post-processing of the last noisy Y's
       singular values and the public noise scale) */
    double lost = 0, total = 0; /* one group: the units factor cancels */
    int any = power_noise_parts(s->sv, cfg->k, cfg->d, s->p.b, power_noise_sd(cfg->rho_epoch), &lost, &total);
    info->noise_level = any ? sqrt(lost / total) : 1;
    *why = NULL;
    return 0;
}

/* The epoch's end, on every rank: rank 0 decides (and charges), every rank
   runs the release, rank 0 publishes.  Returns END_*. */
static int s_close(sharded *s)
{
    collector *c = s->c;
    const dps_config *cfg = s->cfg;
    double t0 = MPI_Wtime();
    uint64_t bytes0 = s_bytes(s), calls0 = s_calls(s);
    if (s->reference) /* the open buckets' rows are dropped (each row is one epoch's); public count */
        ref_sharded_seal(&s->ref);
    dps_snapshot_info info;
    memset(&info, 0, sizeof info);
    info.epoch = s->epoch;
    info.d = cfg->d;
    info.k = cfg->k;
    info.aggregator = cfg->aggregator;
    info.rows_used = s->reference ? (uint64_t)s->ref.completed * cfg->m : s->rows;
    info.buckets_used = s->reference ? s->ref.completed : 0;
    info.radius_unrelated = s->mech->radius_unrelated ? s->mech->radius_unrelated(cfg) : 0;
    info.seeded = cfg->seeded;
    info.public_seed = cfg->public_seed;
    /* An error of the epoch's steps does not spare the charge: whether it
       happened may depend on the rows (an eigensolver's failure), so the
       charge must not (dps_release_outcome: charged, then published FAILED). */
    int end = s->rank == 0 ? s_decide(s, &info) : END_RELEASE;
    MPI_Bcast(&end, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int rc = DPS_OK;
    if (end == END_RELEASE)
        rc = s->reference ? s_release_reference(s) : s_release_power(s);
    if (s->rank == 0 && end != END_COMMIT_FAILED) {
        char internal[200];
        if (end == END_RELEASE) {
            const char *why = NULL;
            int failed = rc ? 0 : s_outcome(s, &info, &why);
            dps_release_outcome(&info, rc, failed, why, "the sharded release", internal, sizeof internal);
            if (rc)
                log_error("epoch %" PRIu64 ": the sharded release failed after the charge: %s", s->epoch,
                          dps_strerror(rc));
        }
        dps_release_totals(s->acc, &cfg->cap, &info);
        s_publish(s, &info, info.status == DPS_SNAP_RELEASED ? s->basis : NULL);
        /* tools/bench/run-mpi-collector reads this line */
        const char *what = end != END_RELEASE ? "not run: nothing charged, the outcome stored and published"
                           : s->reference ? "charge, WFC, the noisy mean's top-k, basis gathered, stored, published"
                                          : "charge, last step, basis gathered, stored, published";
        log_info("epoch %" PRIu64 " closed in %.1f ms (%s); "
                 "rank 0 moved %.3f MB in %" PRIu64 " collectives for it, %.3f MB in %" PRIu64 " for the epoch",
                 s->epoch, 1e3 * (MPI_Wtime() - t0), what, (double)(s_bytes(s) - bytes0) / 1e6, s_calls(s) - calls0,
                 (double)(s_bytes(s) - s->epoch_bytes) / 1e6, s_calls(s) - s->epoch_calls);
    }
    s->epoch_bytes = s_bytes(s);
    s->epoch_calls = s_calls(s);
    if (s->reference)
        s->buckets_closed += s->ref.completed;
    s->epoch++;
    s->rows = 0;
    c->epoch_started_ms = net_now_ms();
    return end;
}

/* One row's slice into the open epoch (every rank, the same row). */
static int s_add(sharded *s, const float *row_slice)
{
    if (s->rows == 0)
        s_begin(s);
    if (s->reference) {
        /* collective at a bucket's last row, the same row on every rank; its
           errors are agreed, so every rank skips the same rows after one */
        if (!s->err)
            s->err = ref_sharded_add(&s->ref, row_slice);
        return ++s->rows == s->n ? s_close(s) : END_RELEASE;
    }
    int rc = power_sharded_add(&s->p, row_slice);
    if (rc && !s->err)
        s->err = rc;
    if (++s->rows == s->block_end && s->block < s->blocks)
        s_step(s);
    return s->rows == s->n ? s_close(s) : END_RELEASE;
}

/* cmd's batch on every rank, or on none. */
static int s_batch(sharded *s, const shard_cmd *cmd, held *mine)
{
    if (s->rank != 0)
        mine = s_find(s, cmd);
    int have = mine && mine->wr.n == cmd->n, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int end = END_RELEASE;
    if (all) {
        for (uint32_t i = 0; i < cmd->n && end != END_COMMIT_FAILED; i++)
            end = s_add(s, mine->wr.rows + (size_t)i * s->w);
        s->rows_accepted += cmd->n;
        if (s->rank == 0)
            ptable_record(&s->c->ingest.producers, cmd->id, cmd->stream, cmd->seq, cmd->n);
    } else {
        s->dropped++;
        if (s->rank == 0) {
            log_warn("batch %" PRIu64 " of %s dropped on every rank: some rank did not get its slice within "
                     "--shard-wait %g s (a producer that is not sharded over %d ranks, or that died between its "
                     "parts' sends), or had no memory to hold it (that rank's log says so)", cmd->seq, cmd->id,
                     s->c->o.shard_wait, s->size);
            ptable_refused(&s->c->ingest.producers, cmd->id, cmd->stream);
        } else if (!have) {
            log_warn("rank %d: no slice of batch %" PRIu64 " of %s within --shard-wait", s->rank, cmd->seq, cmd->id);
        }
    }
    if (mine) {
        wire_rows_release(&mine->wr);
        free(mine);
    }
    return end;
}

/* --------------------------------------------------------------- status */
/* Rank 0's status endpoint: a producer's count (its drain) and the counters
   this mode keeps; no credit (producers send without). */
static void s_status(sharded *s)
{
    collector *c = s->c;
    wire_status_request q;
    dps_collector_status st;
    if (!collector_status_request(c, &q, &st))
        return;
    dps_zcdp spent = dps_accountant_spent(s->acc);
    st.d = s->cfg->d;
    st.k = s->cfg->k;
    st.epoch = s->epoch;
    st.rows_accepted = s->rows_accepted;
    st.rows_in_epoch = s->rows;
    st.epoch_rows = s->n;
    st.rho_total = spent.rho;
    st.delta_total = spent.delta;
    st.delta_target = c->o.delta_target;
    st.eps_total = dps_accountant_eps(s->acc, c->o.delta_target);
    st.budget_left = dps_accountant_left(s->acc);
    snprintf(st.budget_unit, sizeof st.budget_unit, "%s", dps_budget_unit(&s->cfg->cap));
    st.last_snapshot_seq = c->pub.last_seq;
    st.uptime_s = (net_now_ms() - c->status.started_ms) / 1000;
    st.shards = (uint32_t)s->size;
    st.buckets_completed = s->buckets_closed + (s->reference && s->rows ? s->ref.completed : 0);
    struct { const char *name; uint64_t v; } counts[] = {
        {"batches_dropped_slice_missing", s->dropped}, {"slices_refused", s->refused_slices},
        {"slices_expired", s->expired}, {"batches_cut_short", c->ingest.batches_cut_short},
        {"rows_nan", s->p.rows_nan + s->ref.rows_nan}, {"rows_inf", s->p.rows_inf + s->ref.rows_inf},
        {"rows_zero", s->p.rows_zero + s->ref.rows_zero}, {"rows_discarded", s->ref.rows_discarded},
    };
    _Static_assert(sizeof counts / sizeof *counts <= DPS_STATUS_MAX_COUNTERS, "the counters fit the reply");
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        snprintf(st.counters[i].name, sizeof st.counters[i].name, "%s", counts[i].name);
        st.counters[i].value = counts[i].v;
    }
    st.n_counters = sizeof counts / sizeof *counts;
    collector_status_send(c, &st);
}

/* Every request waiting: questions from producers that gave up waiting
   (while an epoch closed) are answered first, in order, then the live ones. */
static void s_status_all(sharded *s)
{
    for (int i = 0; i < 64; i++) {
        zmq_pollitem_t st = {s->c->status.rep, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&st, 1, 0) <= 0)
            break;
        s_status(s);
    }
}

/* ---------------------------------------------------------------- setup */

/* This machine's MemAvailable in MB (/proc/meminfo), or -1. */
static double s_mem_available_mb(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

/* Sockets, the iteration and the buffers of this rank; 0 or an exit code
   (err says why). */
static int s_setup(sharded *s, const dps_keypair *kp, char *err, size_t errlen)
{
    collector *c = s->c;
    const dps_config *cfg = s->cfg;
    int power = cfg->aggregator == DPS_AGG_POWER; /* only its release keeps k singular values here */
    if ((power && cfg->k > sizeof s->sv / sizeof *s->sv) || cfg->d < (size_t)s->size) {
        snprintf(err, errlen, "--sharded needs d >= the number of ranks (%d)%s", s->size,
                 power ? " and, with --aggregator power, k <= 64" : "");
        return 2;
    }
    dps_shard_slice(cfg->d, (size_t)s->size, (size_t)s->rank, &s->c0, &s->c1);
    s->w = s->c1 - s->c0;
    s->n = cfg->t * cfg->m;
    /* this rank's share of the batches in transit that --ingest-buffer-mb
       budgets for whole rows (its slices are 1/R of them) */
    s->held_budget = (uint64_t)(c->o.ingest_buffer_mb * 1048576.0 / s->size);
    char ep[512];
    if (dps_shard_endpoint(c->o.ingest, (size_t)s->rank, ep, sizeof ep) != DPS_OK) {
        snprintf(err, errlen, "--ingest %s names no endpoint for rank %d (give tcp://HOST:PORT, ipc://PATH, or a "
                 "comma-separated list of one per rank)", c->o.ingest, s->rank);
        return 2;
    }
    if (!strcmp(ep, c->o.publish) || !strcmp(ep, c->o.status)) {
        snprintf(err, errlen, "rank %d's ingest endpoint %s is also the %s endpoint: with --sharded rank r binds "
                 "--ingest's port + r, so give --publish and --status ports outside them (e.g. --publish "
                 "tcp://127.0.0.1:7790 --status tcp://127.0.0.1:7791), or --ingest a list", s->rank, ep,
                 !strcmp(ep, c->o.publish) ? "--publish" : "--status");
        return 2;
    }
    c->ctx = zmq_ctx_new();
    if (!c->o.insecure_plaintext) {
        c->zap = zap_start(c->ctx, c->o.authorized_keys, c->o.subscriber_keys[0] ? c->o.subscriber_keys : NULL);
        if (!c->zap) {
            snprintf(err, errlen, "cannot start the ZAP handler");
            return 1;
        }
    }
    c->ingest.pull = zmq_socket(c->ctx, ZMQ_PULL);
    int hwm = (int)c->o.rcvhwm;
    /* as large as a batch of whole rows: a producer that does not split its
       rows is then refused (it hears so in its drain) instead of having its
       connection dropped by libzmq without a word */
    int64_t maxmsg = (int64_t)(c->o.max_batch_rows * 4 * s->cfg->d + 1024);
    zmq_setsockopt(c->ingest.pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->ingest.pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (collector_server_socket(c, c->ingest.pull, ep, "ingest", kp, err, errlen))
        return 2;
    if (s->rank == 0) {
        c->pub.xpub = zmq_socket(c->ctx, ZMQ_XPUB);
        c->status.rep = zmq_socket(c->ctx, ZMQ_REP);
        int pub_hwm = 1000;
        zmq_setsockopt(c->pub.xpub, ZMQ_SNDHWM, &pub_hwm, sizeof pub_hwm);
        if (collector_server_socket(c, c->pub.xpub, c->o.publish, "publish", kp, err, errlen) ||
            collector_server_socket(c, c->status.rep, c->o.status, "status", kp, err, errlen))
            return 2;
        if (c->pub.latest) { /* late subscribers get the last stored snapshot */
            unsigned char *buf = NULL;
            size_t len = 0;
            if (dps_snapshot_encode(c->pub.latest, &buf, &len) == DPS_OK) {
                zmq_setsockopt(c->pub.xpub, ZMQ_XPUB_WELCOME_MSG, buf, len);
                free(buf);
            }
        }
        if (ptable_init(&c->ingest.producers, 4096) != 0 ||
            dps_accountant_new_resumed(&s->acc, &cfg->cap, &c->ledger.led.total, ledger_kind(&c->ledger.led)) != DPS_OK) {
            snprintf(err, errlen, "out of memory");
            return 1;
        }
        s->basis = dps_aligned_calloc(cfg->k * cfg->d, sizeof(float));
        if (!s->basis) {
            snprintf(err, errlen, "out of memory for the gathered basis (k x d floats)");
            return 1;
        }
    }
    s->warm = calloc(cfg->k * s->w, sizeof *s->warm);
    s->slice = calloc(cfg->k * s->w, sizeof *s->slice);
    if (!s->warm || !s->slice) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    log_info("rank %d of %d (pid %ld): ingest %s, coordinates [%zu, %zu) of d = %zu", s->rank, s->size,
             (long)getpid(), ep, s->c0, s->c1, cfg->d);
    return 0;
}

static void s_teardown(sharded *s)
{
    s_free_held(s);
    power_sharded_free(&s->p);
    ref_sharded_free(&s->ref);
    dps_accountant_destroy(&s->acc);
    free(s->warm);
    free(s->slice);
    free(s->basis);
}

/* ----------------------------------------------------------------- loop */
/* Rank 0: the next word for every rank, and the batch it names. */
static void s_next(sharded *s, shard_cmd *cmd, held **mine)
{
    collector *c = s->c;
    memset(cmd, 0, sizeof *cmd);
    *mine = NULL;
    while (!s_stop_signal && !collector_stop) {
        zmq_pollitem_t items[3] = {{c->ingest.pull, 0, ZMQ_POLLIN, 0}, {c->pub.xpub, 0, ZMQ_POLLIN, 0},
                                   {c->status.rep, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(items, 3, 100);
        if (n < 0 && errno != EINTR) {
            log_error("poll failed: %s", zmq_strerror(errno));
            break;
        }
        if (n > 0 && (items[2].revents & ZMQ_POLLIN))
            s_status_all(s);
        if (n > 0 && (items[1].revents & ZMQ_POLLIN))
            collector_subscriptions(c);
        if (n > 0 && (items[0].revents & ZMQ_POLLIN)) {
            held *h = malloc(sizeof *h);
            if (h && s_receive(s, h)) {
                cmd->kind = CMD_BATCH;
                cmd->n = (uint32_t)h->wr.n;
                cmd->seq = h->wr.seq;
                cmd->stream = h->wr.stream;
                snprintf(cmd->id, sizeof cmd->id, "%s", h->wr.producer_id);
                snprintf(cmd->user, sizeof cmd->user, "%s", h->user);
                *mine = h;
                return;
            }
            free(h);
        }
        if (c->o.epoch_seconds > 0 && s->rows > 0 &&
            net_now_ms() - c->epoch_started_ms >= (uint64_t)(c->o.epoch_seconds * 1000)) {
            cmd->kind = CMD_CLOSE;
            return;
        }
        if (c->o.exit_after && c->pub.published >= c->o.exit_after) {
            log_info("published %" PRIu64 " snapshots as asked (--exit-after); stopping", c->pub.published);
            /* a producer whose last batch closed the epoch asks for its count
               now: answer for a moment before the endpoint goes */
            for (uint64_t until = net_now_ms() + 500; net_now_ms() < until;) {
                zmq_pollitem_t st = {c->status.rep, 0, ZMQ_POLLIN, 0};
                if (zmq_poll(&st, 1, 50) > 0)
                    s_status_all(s);
            }
            break;
        }
    }
    cmd->kind = CMD_STOP;
}

int collector_sharded_serve(collector *c, dps_config *cfg, const dps_keypair *kp, int rank, int size)
{
    sharded s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.rank = rank;
    s.size = size;
    collector_config(&c->o, &c->ledger.led, cfg);
    s.cfg = cfg;
    pthread_mutex_init(&c->ledger.mu, NULL);
    c->rel.seq = c->pub.last_seq;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (c->o.seeded && rank == 0)
        log_warn("SEEDED MODE (--seed): the noise is reproducible and NOT secure; every snapshot says so");
    char err[4096] = "";
    int code = s_setup(&s, kp, err, sizeof err);
    if (code)
        fprintf(stderr, "dps-collector: rank %d: %s\n", rank, err);
    code = collector_sharded_agree(code);
    /* the epoch numbering is the ledger's (rank 0's) */
    uint64_t epoch = c->ledger.led.next_epoch;
    MPI_Bcast(&epoch, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    s.epoch = epoch;
    size_t b = DPS_MIN(cfg->k + cfg->power_oversample, cfg->d);
    s.reference = cfg->aggregator == DPS_AGG_REFERENCE;
    s.mech = epoch_mechanism_for(cfg->aggregator);
    if (!code) {
        int rc = s.reference ? ref_sharded_init(&s.ref, MPI_COMM_WORLD, cfg, cfg->seeded, cfg->seed)
                             : power_sharded_init(&s.p, MPI_COMM_WORLD, cfg->d, cfg->k, b, cfg->seeded, cfg->seed);
        if (rc) {
            char why[300] = "";
            if (rc == DPS_EINVAL && s.reference)
                snprintf(why, sizeof why, " (it needs k <= m <= d, q < 2^21, (t + 1) k < 2^21, and the close's "
                         "(t k)(t k + 1)/2 + t k q doubles below 2^31: t k = %zu here)", cfg->t * cfg->k);
            else if (rc == DPS_ENOMEM && s.reference)
                snprintf(why, sizeof why, " (each rank needs up to %.0f MB for it: (t k + 2 q) d / R floats of "
                         "bases, points and mean, --window W times m d / R of open buckets' rows, and the close's "
                         "(t k)^2 terms; lower --window or t, or add ranks)", (double)ref_sharded_bytes(cfg, s.w) / 1e6);
            if (rank == 0)
                fprintf(stderr, "dps-collector: the sharded %s cannot start: %s%s\n",
                        s.reference ? "reference aggregator" : "power iteration", dps_strerror(rc), why);
            code = rc == DPS_EINVAL ? 2 : 1;
        }
    }
    if (code) {
        s_teardown(&s);
        return code;
    }
    c->status.started_ms = c->epoch_started_ms = net_now_ms();
    if (s.reference) { /* allocated, not yet touched: say so now rather than when the kernel kills a rank */
        double need = (double)ref_sharded_bytes(cfg, s.w) / 1e6, have = s_mem_available_mb() * 1.048576;
        if (have > 0 && need > have)
            log_warn("rank %d: the reference aggregator may need up to %.0f MB on this rank, more than this machine "
                     "has available (%.0f MB, for every rank it runs): lower --window or t, or spread the ranks over "
                     "more machines", rank, need, have);
    }
    if (rank == 0) {
        char how[200];
        if (s.reference)
            snprintf(how, sizeof how, "the reference aggregator: t = %zu buckets of m = %zu rows, %zu open at once, "
                     "q = %zu reference points, at most %.0f MB a rank", cfg->t, cfg->m, s.ref.win, cfg->q,
                     (double)ref_sharded_bytes(cfg, s.w) / 1e6);
        else
            snprintf(how, sizeof how, "blocks of the power iteration (%zu columns)", b);
        log_info("sharded over %d rank%s: publish %s, status %s (%s); d=%zu k=%zu, epoch = %" PRIu64 " rows in %s, "
                 "rho %.4g per epoch, first epoch %" PRIu64 ", state %s", size, size == 1 ? "" : "s", c->o.publish,
                 c->o.status, c->o.insecure_plaintext ? "PLAINTEXT, loopback only" : "CURVE", cfg->d, cfg->k, s.n,
                 how, cfg->rho_epoch, s.epoch, c->o.state_dir);
    }
    for (;;) {
        shard_cmd cmd;
        held *mine = NULL;
        if (rank == 0)
            s_next(&s, &cmd, &mine);
        s_command(&s, &cmd);
        int end = END_RELEASE;
        if (cmd.kind == CMD_BATCH)
            end = s_batch(&s, &cmd, mine);
        else if (cmd.kind == CMD_CLOSE)
            end = s_close(&s);
        if (end == END_COMMIT_FAILED || cmd.kind == CMD_STOP)
            break;
    }
    if (rank == 0) {
        if (s.rows)
            log_info("stopping: the open epoch's %" PRIu64 " rows are discarded (no budget was spent on them)", s.rows);
        log_info("stopped: %" PRIu64 " rows accepted, %" PRIu64 " snapshots published this run; %" PRIu64
                 " batches dropped (a rank without its slice), %" PRIu64 " slices refused on rank 0",
                 s.rows_accepted, c->pub.published, s.dropped, s.refused_slices);
    }
    if (s.expired) /* each worker logs its own; rank 0's count is 0 */
        log_warn("rank %d: %" PRIu64 " slices expired unasked (their batch never reached rank 0, or was refused "
                 "there)", rank, s.expired);
    if (c->ingest.batches_cut_short) /* each rank its own */
        log_error("rank %d: rows were LOST this run: %" PRIu64 " batches could not be held for want of memory (see "
                  "the errors above)", rank, c->ingest.batches_cut_short);
    if (c->ledger.failed && rank == 0)
        collector_log_state_failed(c);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    log_info("rank %d: peak RSS %.1f MB; %.3f MB moved through MPI in %" PRIu64 " collective calls by the %s",
             rank, (double)ru.ru_maxrss / 1024.0, (double)s_bytes(&s) / 1e6, s_calls(&s),
             s.reference ? "reference aggregator" : "power iteration");
    int failed = c->ledger.failed;
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    code = failed ? 3 : s.dropped || c->ingest.batches_cut_short ? 4 : 0;
    s_teardown(&s);
    return code;
}
