/* release.c - dps-collector's release and writer threads: the loop seals a full epoch (dps_estimator_seal) and goes on ingesting
   the next one while the release thread releases the sealed epoch (the
   ledger hook, then the mechanism: dps_estimator_release_sealed) and numbers
   its snapshot (collector_number), and the writer stores it (fsynced) with
   its outcome line (collector_store); the loop then sends it (collector_send)
   when the writer's byte arrives on a pipe it polls.

   Order: one epoch sealed at a time (the estimator's rule); the release
   thread hands its result to the writer (one waiting at most) and takes the
   next sealed epoch at once, so epoch e + 1's commit and mechanism run while
   epoch e's snapshot is being made durable: the durable writes of one epoch
   (three fsyncs for the snapshot, one for its outcome line: 1.1-1.7 ms here)
   leave the release's critical path.  Kept: the commit of an epoch is on disk
   before its mechanism runs (the hook), and its snapshot is stored and its
   outcome line written before it is sent; snapshots are numbered, stored and
   sent in epoch order (one thread each, FIFO hand-overs).  The ledger may
   read commit e, commit e + 1, outcome e (each line names its epoch; a
   restart reads totals from commit lines only).  Backpressure: only when the
   open epoch is full (or, for a warm mechanism, begins) while the last is
   still sealed does the loop wait, until the release thread has released it.
   A failed write of the state directory (a commit, refused or outcome line,
   a snapshot) halts the releases (rel.halt) and the loop stops with exit
   code 3; the ledger takes no more lines from then on (ledger.h), so
   nothing is written after the failure and nothing charged meanwhile is
   sent unstored.
   Who owns what: the threads own nothing but the hand-over fields (under
   rel.mu, release.h); the ledger is shared under ledger.mu (ledger_guard.h). */
#include "collector.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

/* Released and charged, but its snapshot could not be made (out of memory:
   collector_number says so): nothing to send.  Not a dps_err (those are >= 0). */
#define REL_LOST (-1)
/* Charged, but the state directory failed a write of its snapshot or its
   outcome line (collector_store says which): not sent; the loop stops. */
#define REL_WRITE_FAILED (-2)

static void *s_release_thread(void *arg)
{
    collector *c = arg;
    pthread_mutex_lock(&c->rel.mu);
    for (;;) {
        while (!c->rel.stop && !c->rel.asked)
            pthread_cond_wait(&c->rel.cv, &c->rel.mu);
        if (c->rel.stop || c->rel.halt) { /* no new release once stopping (the loop drains before it stops us)
                                             or after a ledger failure (an epoch sealed meanwhile is dropped
                                             unreleased: nothing of it was charged) */
            c->rel.asked = 0;
            pthread_cond_broadcast(&c->rel.cv);
            break;
        }
        c->rel.asked = 0;
        c->rel.busy = 1;
        uint64_t epoch = c->rel.epoch; /* the loop may seal the next one (and set rel_epoch) once this is released */
        pthread_mutex_unlock(&c->rel.mu);
        collector_hold("slow-release", 3000);
        dps_snapshot *snap = NULL;
        uint64_t t0 = net_now_ms();
        int rc = dps_estimator_release_sealed(c->est, &snap);
        pthread_mutex_lock(&c->rel.mu);
        if (rc == DPS_ECOMMIT)
            c->rel.halt = 1; /* the loop stops when it takes this result; collector_seal seals nothing more */
        pthread_cond_broadcast(&c->rel.cv); /* released: the loop's backpressure may end */
        pthread_mutex_unlock(&c->rel.mu);
        collector_result r;
        memset(&r, 0, sizeof r);
        if (!rc) {
            int nrc = collector_number(c, snap, &r.out);
            rc = nrc == DPS_ECOMMIT ? DPS_ECOMMIT : nrc ? REL_LOST : DPS_OK; /* ECOMMIT: its refused line failed */
        }
        dps_snapshot_destroy(&snap);
        r.rc = rc;
        r.epoch = epoch;
        r.release_ms = net_now_ms() - t0;
        pthread_mutex_lock(&c->rel.mu);
        if (rc == DPS_ECOMMIT)
            c->rel.halt = 1;
        while (c->rel.wr_has) /* the writer still has the one before */
            pthread_cond_wait(&c->rel.cv, &c->rel.mu);
        c->rel.wr_in = r;
        c->rel.wr_has = 1;
        c->rel.busy = 0;
        pthread_cond_broadcast(&c->rel.cv);
    }
    pthread_mutex_unlock(&c->rel.mu);
    return NULL;
}

/* Free what a result holds (one the loop will not send). */
static void s_result_free(collector_result *r)
{
    dps_snapshot_destroy(&r->out.numbered);
    free(r->out.buf);
    memset(r, 0, sizeof *r);
}

static void *s_writer_thread(void *arg)
{
    collector *c = arg;
    pthread_mutex_lock(&c->rel.mu);
    for (;;) {
        while (!c->rel.wr_has && !(c->rel.stop && !c->rel.busy))
            pthread_cond_wait(&c->rel.cv, &c->rel.mu);
        if (!c->rel.wr_has)
            break; /* stopping, and the release thread holds nothing more to hand over */
        collector_result r = c->rel.wr_in;
        memset(&c->rel.wr_in, 0, sizeof c->rel.wr_in);
        c->rel.wr_has = 0;
        c->rel.wr_busy = 1;
        pthread_cond_broadcast(&c->rel.cv);
        pthread_mutex_unlock(&c->rel.mu);
        collector_hold("slow-store", 2000);
        uint64_t t0 = net_now_ms();
        if (!r.rc && collector_store(c, &r.out) != DPS_OK)
            r.rc = REL_WRITE_FAILED;
        r.store_ms = net_now_ms() - t0;
        pthread_mutex_lock(&c->rel.mu);
        if (r.rc == REL_WRITE_FAILED)
            c->rel.halt = 1; /* no new release: the ledger takes no more lines */
        while (c->rel.has && !c->rel.stop) /* the loop still has the one before */
            pthread_cond_wait(&c->rel.cv, &c->rel.mu);
        if (c->rel.has) { /* stopping and the loop takes no more: stored and in the ledger, not sent */
            if (r.out.numbered)
                log_warn("stopping: epoch %" PRIu64 "'s snapshot is stored but was not sent (a restart publishes "
                         "the latest stored one)", r.epoch);
            s_result_free(&r);
        } else {
            c->rel.done = r;
            c->rel.has = 1;
            ssize_t w = write(c->rel.pipe[1], "r", 1); /* wake the loop; a full pipe already wakes it */
            (void)w;
        }
        c->rel.wr_busy = 0;
        pthread_cond_broadcast(&c->rel.cv);
    }
    pthread_mutex_unlock(&c->rel.mu);
    return NULL;
}

int collector_release_start(collector *c)
{
    if (pipe(c->rel.pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++)
        fcntl(c->rel.pipe[i], F_SETFL, fcntl(c->rel.pipe[i], F_GETFL) | O_NONBLOCK);
    pthread_mutex_init(&c->rel.mu, NULL);
    pthread_cond_init(&c->rel.cv, NULL);
    pthread_mutex_init(&c->ledger.mu, NULL);
    c->rel.seq = c->pub.last_seq; /* the thread numbers from here on */
    if (pthread_create(&c->rel.rel_thread, NULL, s_release_thread, c) != 0)
        return -1;
    if (pthread_create(&c->rel.wr_thread, NULL, s_writer_thread, c) != 0) {
        pthread_mutex_lock(&c->rel.mu);
        c->rel.stop = 1;
        pthread_cond_broadcast(&c->rel.cv);
        pthread_mutex_unlock(&c->rel.mu);
        pthread_join(c->rel.rel_thread, NULL);
        return -1;
    }
    c->rel.started = 1;
    return 0;
}

/* The loop's side of a stored release: publish it (or stop on a ledger
   failure, or ask the release thread again after a failure before the
   charge).  Called and returns with rel.mu held. */
static void s_take(collector *c)
{
    collector_result r = c->rel.done;
    memset(&c->rel.done, 0, sizeof c->rel.done);
    c->rel.has = 0;
    pthread_cond_broadcast(&c->rel.cv); /* the writer may hand over the next */
    pthread_mutex_unlock(&c->rel.mu);
    int rc = r.rc;
    if (rc == DPS_ECOMMIT || rc == REL_WRITE_FAILED) {
        if (rc == DPS_ECOMMIT)
            log_error("epoch %" PRIu64 " dropped: the ledger could not be written; stopping", r.epoch);
        else
            log_error("epoch %" PRIu64 " charged and not published: the state directory could not be written; "
                      "stopping", r.epoch);
        c->ledger.failed = 1;
        collector_stop = 1;
    } else if (rc == REL_LOST) {
        rc = 0; /* the next epoch goes on */
    } else if (rc) { /* before the charge: nothing spent, the epoch stays sealed; the thread tries again */
        log_error("releasing epoch %" PRIu64 " failed before its charge: %s (trying again)", r.epoch,
                  dps_strerror(rc));
    } else {
        log_debug("epoch %" PRIu64 " released in %" PRIu64 " ms on the release thread, stored in %" PRIu64
                  " ms on the writer", r.epoch, r.release_ms, r.store_ms);
        double t0 = net_clock_ms();
        collector_send(c, &r.out);
        double pub = net_clock_ms() - t0;
        if (pub > c->stall.publish_ms)
            c->stall.publish_ms = pub;
    }
    s_result_free(&r);
    pthread_mutex_lock(&c->rel.mu);
    if (rc && rc != DPS_ECOMMIT && rc != REL_WRITE_FAILED)
        c->rel.asked = 1;
    pthread_cond_broadcast(&c->rel.cv);
}

/* Empty the wake-up pipe (non-blocking). */
static void s_drain_pipe(collector *c)
{
    char buf[64];
    while (read(c->rel.pipe[0], buf, sizeof buf) > 0)
        ;
}

void collector_release_poll(collector *c)
{
    s_drain_pipe(c);
    pthread_mutex_lock(&c->rel.mu);
    if (c->rel.has)
        s_take(c);
    pthread_mutex_unlock(&c->rel.mu);
}

/* Wait (publishing what the writer hands over meanwhile) while busy(c).
   Returns with nothing handed over left untaken, and leaves the wake-up
   pipe alone: a byte the writer writes after this returns is for the next
   poll (draining here lost one when the writer handed over between the
   last check and the drain, and that snapshot waited for the next). */
/* answer: the loop waits in slices of 100 ms and answers the status
   endpoint between them, so that producers waiting for credit are told to
   wait and a producer's collector timeout (dps_producer_set_collector_timeout)
   never mistakes a long release for a dead collector. */
static void s_wait_while(collector *c, int (*busy)(collector *), int answer)
{
    pthread_mutex_lock(&c->rel.mu);
    for (;;) {
        if (c->rel.has) {
            s_take(c);
            continue;
        }
        if (!busy(c) || collector_stop)
            break;
        if (!answer) {
            pthread_cond_wait(&c->rel.cv, &c->rel.mu);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
        until.tv_nsec += 100 * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&c->rel.cv, &c->rel.mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&c->rel.mu);
            for (int i = 0; i < 64; i++) { /* what is waiting, then back to the wait */
                zmq_pollitem_t it = {c->status.rep, 0, ZMQ_POLLIN, 0};
                if (zmq_poll(&it, 1, 0) <= 0)
                    break;
                collector_status(c);
            }
            pthread_mutex_lock(&c->rel.mu);
        }
    }
    pthread_mutex_unlock(&c->rel.mu);
}

/* Anything sealed (and still to be released), releasing, storing or unsent. */
static int s_any_busy(collector *c)
{
    return (c->rel.asked && !c->rel.halt) || c->rel.busy || c->rel.wr_has || c->rel.wr_busy || c->rel.has;
}

/* The estimator still holds a sealed epoch (the thread broadcasts when it
   is released; a failure before the charge keeps it sealed and is asked
   again through s_take), or a ledger failure waits for the loop to stop. */
static int s_sealed(collector *c) { return dps_estimator_release_pending(c->est) || c->rel.halt; }

void collector_release_wait(collector *c) { s_wait_while(c, s_any_busy, 0); }

void collector_backpressure(collector *c)
{
    double t0 = net_clock_ms();
    s_wait_while(c, s_sealed, 1);
    double w = net_clock_ms() - t0;
    c->stall.waited_ms += w;
    c->stall.waited_total_ms += w;
    if (w > c->stall.waited_max_ms)
        c->stall.waited_max_ms = w;
    log_debug("waited %.1f ms for the last epoch's release", w);
}

static int s_halted(collector *c)
{
    pthread_mutex_lock(&c->rel.mu);
    int h = c->rel.halt;
    pthread_mutex_unlock(&c->rel.mu);
    return h;
}

int collector_seal(collector *c)
{
    if (dps_estimator_release_pending(c->est) || s_halted(c))
        collector_backpressure(c); /* the last epoch is still releasing, or a ledger failure: until the loop stops */
    if (collector_stop)
        return DPS_ESTATE;
    dps_estimator_stats st;
    dps_estimator_get_stats(c->est, &st);
    int rc = dps_estimator_seal(c->est);
    c->epoch_started_ms = net_now_ms();
    if (rc) {
        log_error("sealing epoch %" PRIu64 " failed: %s", st.epoch, dps_strerror(rc));
        return rc;
    }
    pthread_mutex_lock(&c->rel.mu);
    int halted = c->rel.halt; /* the ledger failed since the check above: this epoch is never released */
    if (!halted) {
        c->rel.epoch = st.epoch;
        c->rel.asked = 1;
        pthread_cond_broadcast(&c->rel.cv);
    }
    pthread_mutex_unlock(&c->rel.mu);
    return halted ? DPS_ESTATE : DPS_OK;
}

void collector_release_stop(collector *c)
{
    if (!c->rel.started)
        return;
    int stopping = collector_stop;
    collector_stop = 0; /* the epoch already sealed is released, stored and published: its charge is in the ledger */
    collector_release_wait(c);
    collector_stop = stopping || collector_stop;
    pthread_mutex_lock(&c->rel.mu);
    c->rel.stop = 1;
    pthread_cond_broadcast(&c->rel.cv);
    pthread_mutex_unlock(&c->rel.mu);
    pthread_join(c->rel.rel_thread, NULL); /* ends after handing over what it holds */
    pthread_join(c->rel.wr_thread, NULL);  /* ends after storing what it was handed */
    c->rel.started = 0;
    if (c->rel.has && c->rel.done.out.numbered) { /* a second signal cut the last wait short: stored, in the ledger, not sent */
        log_warn("stopping: epoch %" PRIu64 "'s snapshot is stored but was not sent (a restart publishes the "
                 "latest stored one)", c->rel.done.epoch);
    }
    s_result_free(&c->rel.done);
    s_result_free(&c->rel.wr_in); /* empty: the writer ends only once nothing waits for it */
    c->rel.has = 0;
    close(c->rel.pipe[0]);
    close(c->rel.pipe[1]);
    pthread_mutex_destroy(&c->rel.mu);
    pthread_cond_destroy(&c->rel.cv);
    pthread_mutex_destroy(&c->ledger.mu);
}
