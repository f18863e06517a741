/* release.c - dps-collector's release thread (issue 13 item 1): the loop
   seals a full epoch (dps_estimator_seal) and goes on ingesting the next
   one while this thread releases the sealed epoch (the ledger hook, then
   the mechanism: dps_estimator_release_sealed) and stores its snapshot
   (numbered, fsynced: collector_prepare); the loop then sends it
   (collector_send) when the thread's byte arrives on a pipe it polls.

   Order: one epoch sealed at a time (the estimator's rule), and the thread
   takes the next one only after the loop has published the last, so the
   ledger reads commit e, outcome e, commit e + 1 and snapshots leave in
   epoch order.  Backpressure: only when the open epoch is full (or, for a
   warm mechanism, begins) while the last is still releasing does the loop
   wait, for that one release.
   Who owns what: the thread owns nothing but the hand-over fields (under
   rel_mu); the ledger is shared with the loop under led_mu. */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Released and charged, but its snapshot could not be made (out of memory:
   collector_prepare says so): nothing to send.  Not a dps_err (those are >= 0). */
#define REL_LOST (-1)

static void *s_thread(void *arg)
{
    collector *c = arg;
    pthread_mutex_lock(&c->rel_mu);
    for (;;) {
        while (!c->rel_stop && !(c->rel_asked && !c->rel_has))
            pthread_cond_wait(&c->rel_cv, &c->rel_mu);
        if (c->rel_stop && !(c->rel_asked && !c->rel_has))
            break;
        c->rel_asked = 0;
        c->rel_busy = 1;
        uint64_t epoch = c->rel_epoch; /* the loop may seal the next one (and set rel_epoch) once this is released */
        pthread_mutex_unlock(&c->rel_mu);
        collector_hold("slow-release", 3000);
        dps_snapshot *snap = NULL;
        uint64_t t0 = net_now_ms();
        int rc = dps_estimator_release_sealed(c->est, &snap);
        collector_outgoing out;
        memset(&out, 0, sizeof out);
        if (!rc && collector_prepare(c, snap, &out) != DPS_OK)
            rc = REL_LOST;
        dps_snapshot_destroy(&snap);
        uint64_t took = net_now_ms() - t0;
        pthread_mutex_lock(&c->rel_mu);
        c->rel_out = out;
        c->rel_done_epoch = epoch;
        c->rel_rc = rc;
        c->rel_ms = took;
        c->rel_busy = 0;
        c->rel_has = 1;
        ssize_t w = write(c->rel_pipe[1], "r", 1); /* wake the loop; a full pipe already wakes it */
        (void)w;
        pthread_cond_broadcast(&c->rel_cv);
    }
    pthread_mutex_unlock(&c->rel_mu);
    return NULL;
}

int collector_release_start(collector *c)
{
    if (pipe(c->rel_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++)
        fcntl(c->rel_pipe[i], F_SETFL, fcntl(c->rel_pipe[i], F_GETFL) | O_NONBLOCK);
    pthread_mutex_init(&c->rel_mu, NULL);
    pthread_cond_init(&c->rel_cv, NULL);
    pthread_mutex_init(&c->led_mu, NULL);
    c->rel_seq = c->last_seq; /* the thread numbers from here on */
    if (pthread_create(&c->rel_thread, NULL, s_thread, c) != 0)
        return -1;
    c->rel_started = 1;
    return 0;
}

/* The loop's side of a finished release: publish it (or stop on a ledger
   failure); then the thread may take the next sealed epoch. */
static void s_take(collector *c)
{
    collector_outgoing out = c->rel_out;
    int rc = c->rel_rc;
    uint64_t took = c->rel_ms;
    memset(&c->rel_out, 0, sizeof c->rel_out);
    c->rel_has = 0;
    uint64_t epoch = c->rel_done_epoch;
    pthread_mutex_unlock(&c->rel_mu);
    if (rc == DPS_ECOMMIT) {
        log_error("epoch %" PRIu64 " dropped: the ledger could not be written; stopping", epoch);
        collector_stop = 1;
    } else if (rc == REL_LOST) {
        rc = 0; /* the next epoch goes on */
    } else if (rc) { /* before the charge: nothing spent, the epoch stays sealed; the thread tries again */
        log_error("releasing epoch %" PRIu64 " failed before its charge: %s (trying again)", epoch,
                  dps_strerror(rc));
    } else {
        log_debug("epoch %" PRIu64 " released and stored in %" PRIu64 " ms on the release thread", epoch, took);
        double t0 = net_clock_ms();
        collector_send(c, &out);
        double pub = net_clock_ms() - t0;
        if (pub > c->stall_publish_ms)
            c->stall_publish_ms = pub;
    }
    pthread_mutex_lock(&c->rel_mu);
    if (rc && rc != DPS_ECOMMIT)
        c->rel_asked = 1;
    pthread_cond_broadcast(&c->rel_cv);
}

/* Empty the wake-up pipe (non-blocking). */
static void s_drain_pipe(collector *c)
{
    char buf[64];
    while (read(c->rel_pipe[0], buf, sizeof buf) > 0)
        ;
}

void collector_release_poll(collector *c)
{
    s_drain_pipe(c);
    pthread_mutex_lock(&c->rel_mu);
    if (c->rel_has)
        s_take(c);
    pthread_mutex_unlock(&c->rel_mu);
}

void collector_release_wait(collector *c)
{
    pthread_mutex_lock(&c->rel_mu);
    while ((c->rel_asked || c->rel_busy || c->rel_has) && !collector_stop) {
        if (c->rel_has) {
            s_take(c);
            continue;
        }
        pthread_cond_wait(&c->rel_cv, &c->rel_mu);
    }
    pthread_mutex_unlock(&c->rel_mu);
    s_drain_pipe(c);
}

void collector_backpressure(collector *c)
{
    double t0 = net_clock_ms();
    collector_release_wait(c);
    double w = net_clock_ms() - t0;
    c->waited_ms += w;
    c->waited_total_ms += w;
    if (w > c->waited_max_ms)
        c->waited_max_ms = w;
    log_debug("waited %.1f ms for the last epoch's release", w);
}

int collector_seal(collector *c)
{
    if (dps_estimator_release_pending(c->est))
        collector_backpressure(c); /* the last epoch is still releasing */
    if (collector_stop)
        return DPS_ESTATE;
    dps_stats st;
    dps_estimator_get_stats(c->est, &st);
    int rc = dps_estimator_seal(c->est);
    c->epoch_started_ms = net_now_ms();
    if (rc) {
        log_error("sealing epoch %" PRIu64 " failed: %s", st.epoch, dps_strerror(rc));
        return rc;
    }
    pthread_mutex_lock(&c->rel_mu);
    c->rel_epoch = st.epoch;
    c->rel_asked = 1;
    pthread_cond_broadcast(&c->rel_cv);
    pthread_mutex_unlock(&c->rel_mu);
    return DPS_OK;
}

void collector_release_stop(collector *c)
{
    if (!c->rel_started)
        return;
    int stopping = collector_stop;
    collector_stop = 0; /* the epoch already sealed is released and published: its charge is in the ledger */
    collector_release_wait(c);
    collector_stop = stopping || collector_stop;
    pthread_mutex_lock(&c->rel_mu);
    c->rel_stop = 1;
    pthread_cond_broadcast(&c->rel_cv);
    pthread_mutex_unlock(&c->rel_mu);
    pthread_join(c->rel_thread, NULL);
    c->rel_started = 0;
    if (c->rel_has && c->rel_out.numbered) { /* a second signal cut the last wait short: stored, in the ledger, not sent */
        log_warn("stopping: epoch %" PRIu64 "'s snapshot is stored but was not sent (a restart publishes the "
                 "latest stored one)", c->rel_done_epoch);
    }
    dps_snapshot_destroy(&c->rel_out.numbered);
    free(c->rel_out.buf);
    memset(&c->rel_out, 0, sizeof c->rel_out);
    c->rel_has = 0;
    close(c->rel_pipe[0]);
    close(c->rel_pipe[1]);
    pthread_mutex_destroy(&c->rel_mu);
    pthread_cond_destroy(&c->rel_cv);
    pthread_mutex_destroy(&c->led_mu);
}
