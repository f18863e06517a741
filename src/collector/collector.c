/* collector.c - dps-collector: the daemon of DESIGN 1.

   One thread runs the loop: ingest (PULL) -> validate -> estimator push;
   epoch full (or period) -> close: the estimator calls our ledger hook, which
   appends and fsyncs the epoch's cost BEFORE the mechanism runs; the snapshot
   is stored (atomic file) and then published (XPUB, also set as the welcome
   message for late subscribers).  Status requests (REP) are answered between
   batches.  The estimator's workers compute bucket bases meanwhile; while they
   are behind, push blocks, this loop stops reading, the PULL queue fills to
   its high-water mark and producers block: rows are never dropped.  The
   bytes queued for all producers together are bounded (s_ingest_setup).
   Who owns what: main() owns the sockets, the estimator, the ledger and the
   ZAP handler; the loop borrows them. */
#include "args.h"
#include "dpsubspace.h"
#include "dpsubspace_net.h"
#include "credit.h"
#include "ledger.h"
#include "log.h"
#include "options.h"
#include "producers.h"
#include "store.h"
#include "transport.h"
#include "wire.h"
#include "zap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static volatile sig_atomic_t s_stop = 0, s_reload = 0;
static void s_on_signal(int sig)
{
    if (sig == SIGHUP)
        s_reload = 1; /* the loop reloads keys and configuration */
    else
        s_stop = 1;
}

/* Test-only fault injection: DPS_FAULT=<point> kills the process there, as
   kill -9 would, so the crash tests can hit exact moments. */
static void s_fault(const char *point)
{
    const char *f = getenv("DPS_FAULT");
    if (f && strcmp(f, point) == 0) {
        log_warn("fault injection: dying at %s", point);
        raise(SIGKILL);
    }
}

typedef struct {
    collector_options o;
    void *ctx, *pull, *xpub, *rep;
    net_monitor pull_mon;
    zap_handler *zap;
    ledger led;
    dps_estimator *est;
    uint64_t rejected[WIRE_REJECT_COUNT_];
    uint64_t published, last_seq;
    uint64_t started_ms, epoch_started_ms;
    dps_snapshot *latest;
    producer_table producers;
    int warned_delta;
    uint64_t revoked;          /* batches and status requests from keys no longer authorized */
    uint64_t sub_removals;     /* zap_removals("publish") when the publish socket was last bound */
    int argc;                  /* the command line, read again with the config file on SIGHUP */
    char **argv;
    ingest_plan plan;          /* the ingest memory bound (options_ingest_plan) */
    int over_plan;             /* more producers connected than plan.producers */
    uint64_t connections_dropped; /* connections that ended with their producer still running */
    credit_pool credit;        /* the producers' credit (credit.h): capacity from plan */
    uint64_t credit_swept_ms;  /* when silent producers' credit was last reclaimed */
    uint64_t watched_ms;       /* when s_ingest_watch last counted */
    int watch_due;             /* a producer without credit came on a new connection */
} collector;

/* ---------------------------------------------------------------- ledger */
static int s_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp after)
{
    collector *c = arg;
    (void)after;
    s_fault("before-commit");
    int rc = ledger_append(&c->led, "commit", epoch, cost, NULL);
    if (rc) {
        log_error("could not write the ledger (%s): epoch %" PRIu64 " is not released", dps_strerror(rc), epoch);
        return -1;
    }
    s_fault("after-commit");
    return 0;
}

/* ------------------------------------------------------------ snapshots */
static void s_log_snapshot(const dps_snapshot_info *in)
{
    char eps[32], left[64];
    if (isfinite(in->eps_total))
        snprintf(eps, sizeof eps, "%.3f", in->eps_total);
    else
        snprintf(eps, sizeof eps, "inf");
    if (strcmp(in->budget_unit, "none") == 0)
        snprintf(left, sizeof left, "no budget cap");
    else
        snprintf(left, sizeof left, "budget left %.4g %s", in->budget_left, in->budget_unit);
    if (in->status == DPS_SNAP_RELEASED)
        log_info("epoch %" PRIu64 " released (seq %" PRIu64 "): %zu buckets, %" PRIu64 " rows, radius %.3g; "
                 "rho this epoch %.4g, total rho %.4g, delta %.3g; eps %s at delta %.0e; %s",
                 in->epoch, in->seq, in->buckets_used, in->rows_used, in->radius, in->epoch_cost.rho,
                 in->total.rho, in->total.delta, eps, in->delta_target, left);
    else
        log_info("epoch %" PRIu64 " %s (seq %" PRIu64 "): %s; total rho %.4g, eps %s at delta %.0e; %s", in->epoch,
                 dps_status_name(in->status), in->seq, in->reason, in->total.rho, eps, in->delta_target, left);
    if (strcmp(in->budget_unit, "none") == 0)
        log_warn("no privacy budget cap (--no-cap): spent so far eps %s at delta %.0e (total rho %.4g), and nothing "
                 "stops it from growing; set --cap-rho or --cap-eps (SIGHUP reads the config file again)",
                 eps, in->delta_target, in->total.rho);
    if (dps_snapshot_weak(in))
        log_warn("epoch %" PRIu64 ": the buckets agreed only at radius %.3g, %.0f%% of the distance between unrelated "
                 "buckets (%.3g): this basis carries little information.  Buckets of m rows are too small for this "
                 "data to concentrate near a k-dimensional subspace: raise --m (and t, or rho)",
                 in->epoch, in->radius, 100 * in->radius / in->radius_unrelated, in->radius_unrelated);
}

/* Number, store, publish; the ledger already holds the cost. */
static int s_release(collector *c, dps_snapshot *snap)
{
    dps_snapshot_info in;
    dps_snapshot_get_info(snap, &in);
    in.seq = ++c->last_seq;
    in.time_unix_ms = net_unix_ms();
    dps_snapshot *numbered = NULL;
    int rc = dps_snapshot_new(&numbered, &in, dps_snapshot_basis(snap));
    if (rc)
        return rc;
    unsigned char *buf = NULL;
    size_t len = 0;
    rc = dps_snapshot_encode(numbered, &buf, &len);
    if (rc) {
        dps_snapshot_destroy(&numbered);
        return rc;
    }
    if (in.status == DPS_SNAP_REFUSED)
        ledger_append(&c->led, "refused", in.epoch, (dps_zcdp){0, 0}, NULL);
    if (store_put(c->o.state_dir, in.epoch, buf, len) != DPS_OK)
        log_error("could not store the snapshot of epoch %" PRIu64 " in %s/snapshots (publishing it anyway)",
                  in.epoch, c->o.state_dir);
    char extra[96];
    snprintf(extra, sizeof extra, "status=%s seq=%" PRIu64, dps_status_name(in.status), in.seq);
    ledger_append(&c->led, "outcome", in.epoch, (dps_zcdp){0, 0}, extra);
    s_fault("after-store");
    if (zmq_send(c->xpub, buf, len, 0) < 0)
        log_warn("publishing epoch %" PRIu64 " failed: %s", in.epoch, zmq_strerror(errno));
    if (zmq_setsockopt(c->xpub, ZMQ_XPUB_WELCOME_MSG, buf, len) != 0)
        log_warn("could not set the welcome message: %s", zmq_strerror(errno));
    free(buf);
    c->published++;
    s_log_snapshot(&in);
    dps_snapshot_destroy(&c->latest);
    c->latest = numbered;
    if (in.total.delta >= 0.5 * in.delta_target && !c->warned_delta) {
        log_warn("the mechanisms' deltas add up to %.3g, over half of --delta-target %.3g: eps becomes infinite "
                 "when they reach it (lower --delta-epoch, or state eps at a larger delta)",
                 in.total.delta, in.delta_target);
        c->warned_delta = 1;
    }
    return DPS_OK;
}

static int s_close_epoch(collector *c)
{
    dps_snapshot *snap = NULL;
    dps_stats st;
    dps_estimator_get_stats(c->est, &st);
    uint64_t t0 = net_now_ms();
    int rc = dps_estimator_close_epoch(c->est, &snap);
    c->epoch_started_ms = net_now_ms();
    if (rc == DPS_ECOMMIT) {
        log_error("epoch %" PRIu64 " dropped: the ledger could not be written; stopping", st.epoch);
        s_stop = 1;
        return rc;
    }
    if (rc) { /* before the charge (dps_estimator_close_epoch): nothing spent, the epoch stays open */
        log_error("closing epoch %" PRIu64 " failed before its charge: %s", st.epoch, dps_strerror(rc));
        return rc;
    }
    log_debug("epoch %" PRIu64 " aggregated in %" PRIu64 " ms", st.epoch, net_now_ms() - t0);
    rc = s_release(c, snap);
    if (rc) /* only memory for the numbered copy or its encoding (sizes public): a resource failure, loud */
        log_error("epoch %" PRIu64 " was charged and computed but could not be published (%s): its charge stays "
                  "in the ledger, its snapshot is lost", st.epoch, dps_strerror(rc));
    dps_snapshot_destroy(&snap);
    return rc;
}

/* --------------------------------------------------------------- ingest */
static void s_reject(collector *c, wire_reject r, size_t len)
{
    uint64_t n = ++c->rejected[r];
    if (c->o.verbose || n <= 5 || n % 1000 == 0)
        log_warn("refused a %zu-byte message: %s (%" PRIu64 " so far)", len, wire_reject_name(r), n);
}

/* A producer's connection ended while it was still running: libzmq dropped
   it, and the batches in flight on it with it (see producers.h). */
static void s_lost(collector *c, const char *id, const char *how)
{
    c->connections_dropped++;
    log_warn("producer %s %s after its connection ended: libzmq dropped that connection, and the batches in "
             "flight on it were LOST (%" PRIu64 " connections dropped so far).  It does so when a batch is above "
             "--max-batch-rows (%" PRIu64 ") or when it cannot allocate memory (is the collector under a memory "
             "limit that --ingest-buffer-mb and the estimator do not fit in?)",
             id, how, c->connections_dropped, c->o.max_batch_rows);
}

static void s_on_disconnect(void *arg, int fd)
{
    collector *c = arg;
    ptable_ended(&c->producers, fd);
    credit_ended(&c->credit, fd);
}

static int s_ingest(collector *c)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, c->pull, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return 0;
    }
    /* The connection's key may have left the authorized directory since its
       handshake: its batches are refused from the handler's next refresh on. */
    int revoked = c->zap && !zap_allowed(c->zap, "ingest", zmq_msg_gets(&msg, "User-Id"));
    wire_rows wr;
    size_t len = zmq_msg_size(&msg);
    int fd = zmq_msg_get(&msg, ZMQ_SRCFD); /* which connection: -1 if unknown */
    wire_reject r = wire_rows_decode(zmq_msg_data(&msg), len, c->o.d, &wr);
    if (zmq_msg_more(&msg)) { /* a multipart message is not ours: drop all parts */
        r = r == WIRE_OK ? WIRE_UNDECODABLE : r;
        if (r == WIRE_UNDECODABLE)
            wire_rows_release(&wr);
        int more = 1;
        while (more) {
            zmq_msg_t part;
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, c->pull, 0) < 0) {
                zmq_msg_close(&part);
                break;
            }
            more = zmq_msg_more(&part);
            zmq_msg_close(&part);
        }
    }
    zmq_msg_close(&msg);
    if (r == WIRE_OK && revoked) {
        uint64_t n = ++c->revoked;
        if (c->o.verbose || n <= 5 || n % 1000 == 0)
            log_warn("refused a batch of %zu rows from producer '%s': its key is no longer in %s (%" PRIu64
                     " refused so far)", wr.n, wr.producer_id, c->o.authorized_keys, n);
        ptable_refused(&c->producers, wr.producer_id, net_now_ms());
        wire_rows_release(&wr);
        return 1;
    }
    if (r != WIRE_OK) {
        s_reject(c, r, len);
        if (wr.producer_id[0]) /* a draining producer learns of it */
            ptable_refused(&c->producers, wr.producer_id, net_now_ms());
        return 1;
    }
    size_t done = 0;
    while (done < wr.n && !s_stop) {
        size_t taken = 0;
        int rc = dps_estimator_push(c->est, wr.rows + done * wr.dim, wr.n - done, wr.dim, &taken);
        done += taken;
        if (rc == DPS_EFULL) {
            s_close_epoch(c);
        } else if (rc) {
            log_error("push failed: %s", dps_strerror(rc));
            break;
        }
    }
    if (dps_estimator_epoch_full(c->est) && !s_stop)
        s_close_epoch(c);
    if (done == wr.n) { /* taken: a producer draining may now disconnect */
        /* Connections that ended before this batch arrived, first: the kernel
           may have given this batch's connection the fd of one of them. */
        net_monitor_poll(&c->pull_mon, 0);
        uint64_t gaps = c->producers.total_gaps;
        ptable_record(&c->producers, wr.producer_id, wr.seq, wr.n, net_now_ms());
        int with_credit = credit_taken(&c->credit, wr.producer_id, wr.seq, fd, net_now_ms());
        const producer_entry *pe = ptable_find(&c->producers, wr.producer_id);
        c->watch_due |= !with_credit && pe && pe->fd != fd; /* a new connection without credit: count now */
        ptable_set_credit(&c->producers, wr.producer_id, with_credit);
        if (c->producers.total_gaps > gaps)
            log_warn("producer %s: %" PRIu64 " batches before seq %" PRIu64 " never arrived: LOST in transit",
                     wr.producer_id, c->producers.total_gaps - gaps, wr.seq);
        if (ptable_batch_on(&c->producers, wr.producer_id, fd, wr.seq))
            s_lost(c, wr.producer_id, "sent again");
    }
    wire_rows_release(&wr);
    return 1;
}

/* --------------------------------------------------------------- status */
/* The collector's counters, for a status reply. */
static void s_status_counters(collector *c, dps_collector_status *st)
{
    dps_stats es;
    dps_estimator_get_stats(c->est, &es);
    dps_zcdp spent = dps_estimator_spent(c->est);
    st->epoch = es.epoch;
    st->rows_accepted = es.rows_accepted;
    st->buckets_completed = es.buckets_completed;
    st->rows_in_epoch = es.rows_in_epoch;
    st->epoch_rows = c->o.t * c->o.m;
    st->rho_spent = spent.rho;
    st->delta_spent = spent.delta;
    st->delta_target = c->o.delta_target;
    st->eps_spent = dps_zcdp_eps_total(spent, c->o.delta_target);
    if (c->o.cap_rho > 0) {
        snprintf(st->budget_unit, sizeof st->budget_unit, "rho");
        st->budget_left = fmax(0, c->o.cap_rho - spent.rho);
    } else if (c->o.cap_eps > 0) {
        snprintf(st->budget_unit, sizeof st->budget_unit, "eps");
        st->budget_left = fmax(0, c->o.cap_eps - st->eps_spent);
    } else {
        snprintf(st->budget_unit, sizeof st->budget_unit, "none");
        st->budget_left = INFINITY;
    }
    st->last_snapshot_seq = c->last_seq;
    st->uptime_s = (net_now_ms() - c->started_ms) / 1000;
    st->d = c->o.d;
    st->k = c->o.k;
    uint64_t zap_ok = 0, zap_refused = 0;
    if (c->zap)
        zap_counts(c->zap, &zap_ok, &zap_refused);
    struct { const char *name; uint64_t v; } rows[] = {
        {"rows_nan", es.rows_nan}, {"rows_inf", es.rows_inf}, {"rows_zero", es.rows_zero},
        {"rows_discarded", es.rows_discarded}, {"auth_refused", zap_refused}, {"auth_revoked", c->revoked},
        {"disconnects", c->pull_mon.disconnects}, {"seq_gaps", c->producers.total_gaps},
        {"epochs_internal_error", es.epochs_internal_error},
        {"connections_dropped", c->connections_dropped},
        {"credit_grants", c->credit.grants}, {"credit_waits", c->credit.waits},
        {"credit_reclaimed", c->credit.reclaimed}, {"credit_overruns", c->credit.overruns},
    };
    for (int r = 1; r < WIRE_REJECT_COUNT_; r++) {
        snprintf(st->rejected[st->n_rejected].name, sizeof st->rejected[0].name, "%s", wire_reject_name(r));
        st->rejected[st->n_rejected++].value = c->rejected[r];
    }
    _Static_assert(WIRE_REJECT_COUNT_ - 1 + sizeof rows / sizeof *rows <= DPS_STATUS_MAX_COUNTERS,
                   "every status counter fits the reply (raise DPS_STATUS_MAX_COUNTERS)");
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        snprintf(st->rejected[st->n_rejected].name, sizeof st->rejected[0].name, "%s", rows[i].name);
        st->rejected[st->n_rejected++].value = rows[i].v;
    }
}

static void s_status(collector *c)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, c->rep, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return;
    }
    char asked[WIRE_MAX_PRODUCER_ID + 1];
    uint64_t from = 0, want = 0;
    int ok = wire_status_request_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), asked, &from, &want) == DPS_OK;
    if (ok && c->zap && !zap_allowed(c->zap, "status", zmq_msg_gets(&msg, "User-Id"))) {
        ok = 0; /* a key removed since the connection was made */
        c->revoked++;
    }
    zmq_msg_close(&msg);
    if (!ok) {
        zmq_send(c->rep, "", 0, 0); /* REP must answer; an empty reply does not decode */
        return;
    }
    if (asked[0] && ptable_asked(&c->producers, asked, net_now_ms()))
        s_lost(c, asked, "kept asking for its count");
    dps_collector_status st;
    memset(&st, 0, sizeof st);
    const producer_entry *pe = asked[0] ? ptable_find(&c->producers, asked) : NULL;
    if (pe) {
        st.producer_batches = pe->batches;
        st.producer_rows = pe->rows;
        st.producer_seq_gaps = pe->gaps;
        st.producer_refused = pe->refused;
    }
    st.credit = 1;
    st.d = c->o.d;
    st.k = c->o.k;
    if (want) /* a credit question: a producer waits for it, the counters are not for it */
        st.credit_seq_end = credit_request(&c->credit, asked, from, want, net_now_ms());
    else
        s_status_counters(c, &st);
    unsigned char *buf = NULL;
    size_t len = 0;
    if (wire_status_encode(&st, &buf, &len) == DPS_OK) {
        zmq_send(c->rep, buf, len, 0);
        free(buf);
    } else {
        zmq_send(c->rep, "", 0, 0);
    }
}

/* Subscription notices from XPUB: read them so they do not pile up. */
static void s_subscriptions(collector *c)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    while (zmq_msg_recv(&msg, c->xpub, ZMQ_DONTWAIT) >= 0) {
        if (zmq_msg_size(&msg) >= 1 && ((const unsigned char *)zmq_msg_data(&msg))[0] == 1)
            log_debug("a subscriber joined");
        zmq_msg_close(&msg);
        zmq_msg_init(&msg);
    }
    zmq_msg_close(&msg);
}

/* -------------------------------------------------------------- reload */
static void s_config(const collector_options *o, const ledger *led, dps_config *cfg);

/* SIGHUP: read the command line and the config file again.  Settings that can
   change while running (options_apply_live) take effect now; a change to any
   other is logged and waits for a restart.  A configuration that does not
   parse or check is refused as a whole: the running one stays. */
static void s_reload_config(collector *c)
{
    collector_options next;
    options_defaults(&next);
    char err[8192];
    dps_config cfg;
    const char *why = "";
    if (options_parse(&next, c->argc, c->argv, err, sizeof err) != 0 || options_finish(&next, err, sizeof err) != 0) {
        log_error("SIGHUP: configuration not reloaded, the running one stays: %s", err);
        return;
    }
    s_config(&next, &c->led, &cfg);
    if (dps_config_check(&cfg, &why) != DPS_OK) {
        log_error("SIGHUP: configuration not reloaded, the running one stays: %s", why);
        return;
    }
    option_change ch[64];
    size_t n = options_diff(&c->o, &next, ch, sizeof ch / sizeof *ch);
    int cap = 0;
    for (size_t i = 0; i < n && i < sizeof ch / sizeof *ch; i++)
        cap |= ch[i].live && (strncmp(ch[i].name, "cap-", 4) == 0 || strcmp(ch[i].name, "no-cap") == 0 ||
                              strcmp(ch[i].name, "delta-target") == 0);
    dps_budget budget = {next.cap_rho, next.cap_eps, next.delta_target};
    if (cap && dps_estimator_set_cap(c->est, &budget) != DPS_OK) {
        log_error("SIGHUP: configuration not reloaded, the running one stays: the budget cap is out of range");
        return;
    }
    for (size_t i = 0; i < n && i < sizeof ch / sizeof *ch; i++) {
        if (ch[i].live)
            log_info("SIGHUP: %s changed from %s to %s", ch[i].name, ch[i].before, ch[i].after);
        else
            log_warn("SIGHUP: %s changed from %s to %s in the configuration; it takes effect at the next start "
                     "(restart the collector), %s meanwhile", ch[i].name, ch[i].before, ch[i].after, ch[i].before);
    }
    options_apply_live(&c->o, &next);
    log_set_level(c->o.quiet ? LOG_QUIET : c->o.verbose ? LOG_DEBUG : LOG_INFO);
    if (cap) {
        dps_zcdp spent = dps_estimator_spent(c->est);
        log_info("SIGHUP: privacy budget cap now %s; spent so far rho %.6g delta %.3g",
                 c->o.cap_rho > 0 ? "on rho" : c->o.cap_eps > 0 ? "on eps" : "none", spent.rho, spent.delta);
    }
    if (!n)
        log_info("SIGHUP: configuration unchanged");
}

/* A subscriber key left the subscriber-keys directory: drop every subscriber
   connection by binding the publish socket again.  The removed key's
   reconnection is refused by the ZAP handler; the others reconnect (libzmq
   retries every 100 ms) and receive the latest snapshot again as the welcome
   message, which subscribers recognise by its sequence number.  Returns 0 when
   the socket is bound again; on failure the loop retries. */
static int s_rebind_publish(collector *c)
{
    char ep[1024];
    size_t n = sizeof ep;
    if (zmq_getsockopt(c->xpub, ZMQ_LAST_ENDPOINT, ep, &n) != 0 || !ep[0])
        snprintf(ep, sizeof ep, "%s", c->o.publish);
    zmq_unbind(c->xpub, ep); /* fails only if already unbound (an earlier failed attempt) */
    if (zmq_bind(c->xpub, ep) != 0) {
        log_error("could not bind the publish socket %s again: %s (retrying)", ep, zmq_strerror(errno));
        return -1;
    }
    log_info("a subscriber key was removed: every subscriber reconnects to %s, and the removed key is refused", ep);
    return 0;
}

/* --------------------------------------------------------- ingest memory
   Issue 9 item 5.  libzmq queues up to ZMQ_RCVHWM messages per connected
   producer (the mark is per pipe), so memory grew with the number of
   producers, and under a memory limit libzmq, unable to allocate a batch,
   dropped connections with the batches queued on them and told no one.
   What bounds the bytes of batches in transit, for the whole collector:
   - ZMQ_MAXMSGSIZE = plan.msg_max caps a message (libzmq drops a larger one
     with its connection);
   - ZMQ_RCVHWM = --rcvhwm (default 1; 2 with CURVE, where the credential
     libzmq makes of ZAP's User-Id takes one place), fixed before bind: libzmq 4.3 gives
     each new connection the mark its listener copied at bind time, and
     re-applies a changed mark only to pipes the socket has already attached
     (both checked against the installed 4.3.4).  We rejected raising the
     mark while few producers are connected (choice (a) of the issue): a
     producer that connects before we see it starts at the mark of bind time,
     and those already attached keep their deeper queues until drained, so
     the bound would hold only between arrivals;
   - credit (credit.h), what makes the bound hold whatever the number of
     producers: a producer with a status endpoint sends only the batches the
     collector granted it, and the collector grants at most capacity =
     (budget - loop) / msg_max batches to all producers together (one fewer
     with CURVE: libzmq holds a batch's ciphertext while it makes its
     plaintext, one batch at a time in its one I/O thread).  Every batch of a
     credit-taking producer in transit, wherever it is (its own queue, the
     kernel, libzmq's queue or decoder, this loop), is one it was granted and
     we have not taken, so those batches take at most capacity x msg_max +
     loop <= budget.  The round trip costs about one status question per
     fair share of batches (see credit.h; tools/bench/README.md measures it);
   - a producer that takes no credit (no status endpoint, an old producer,
     a raw PUSH) is bounded only by libzmq: per connection at most rcvhwm + 2
     batches (its queue, one decoded while the queue is full, and under
     CURVE one ciphertext while its plaintext is made), plus its 8 KB read
     buffer (not in the bound: 128 KB for 16 producers); this loop at most 3
     (the message, protobuf-c's copy, an aligned copy).  Those producers come
     on top of the credit: plan.producers of them fit the buffer alone
     (options_ingest_plan), and with more than that connected the collector
     says so in a warning with the excess.  Neither refused nor parked:
     libzmq 4.3 can turn a connection away only through ZAP, and a producer
     refused there never reconnects (checked: one ZAP request, then its
     sends block for good); parking would mean holding some ZAP replies while
     answering others (a ROUTER where zap.c has a REP) and counting the slots
     of parked producers that give up, which is not done;
   - outside the process, the kernel buffers up to 2 x ZMQ_RCVBUF (1 MB) per
     tcp connection.
   (glibc keeps freed batches for reuse; mmap'ing every block from 256 KB up
   lowered the peak RSS of 16 producers at d = 1e4 from 383 to 376 MB and
   cost about a third of the ingest rate, so it is not done.) */
#define INGEST_RCVBUF (1 << 20)

static int s_ingest_setup(collector *c)
{
    options_ingest_plan(&c->o, &c->plan);
    uint64_t cap = c->plan.budget > c->plan.loop ? (c->plan.budget - c->plan.loop) / c->plan.msg_max : 0;
    cap -= !c->o.insecure_plaintext && cap > 1; /* CURVE: the plaintext made while its ciphertext is held */
    if (credit_init(&c->credit, cap ? cap : 1, 4096) != 0)
        return -1;
    int64_t maxmsg = (int64_t)c->plan.msg_max;
    int hwm = (int)c->o.rcvhwm, rcvbuf = INGEST_RCVBUF;
    zmq_setsockopt(c->pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(c->pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->pull, ZMQ_RCVBUF, &rcvbuf, sizeof rcvbuf);
    return 0;
}

/* The kB of a /proc/self/status line (VmSize, VmRSS, VmHWM), or 0. */
static uint64_t s_proc_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long v = 0;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            sscanf(line + n + 1, "%llu", &v);
            break;
        }
    if (f)
        fclose(f);
    return (uint64_t)v;
}

/* Address space OpenBLAS maps for each thread that calls it, at its first
   call (Debian's 0.3.21: blas_memory_alloc maps 128 MB; under a limit it
   retries forever instead of failing). */
#define BLAS_THREAD_BUFFER (128.0 * (1 << 20))

/* Say what memory the collector needs, and warn when an address-space
   limit (ulimit -v) leaves less than that. */
static void s_ingest_report(collector *c, const dps_config *cfg)
{
    const double mb = 1 << 20;
    double est = (double)dps_estimator_memory_bound(cfg) / mb;
    log_info("ingest buffer %.0f MB for all producers: batches up to %.1f MB (--max-batch-rows %" PRIu64
             " at d %" PRIu64 "); producers that take credit (a status endpoint) share %" PRIu64 " batches "
             "whatever their number; each that does not can queue %" PRIu64 " (%" PRIu64 " in its queue + 2), "
             "so the buffer holds %" PRIu64 " of those (see --help).  The estimator adds at most %.0f MB",
             (double)c->plan.budget / mb, (double)c->plan.msg_max / mb, c->o.max_batch_rows, c->o.d,
             c->credit.capacity, options_batch_slots(&c->o) + 2, options_batch_slots(&c->o), c->plan.producers, est);
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    double have = (double)rl.rlim_cur / mb - (double)s_proc_kb("VmSize") / 1024;
    double blas = (double)(c->o.workers + 1) * BLAS_THREAD_BUFFER / mb;
    if (have < (double)c->plan.budget / mb + est + blas)
        log_warn("the address-space limit (ulimit -v) of %.0f MB leaves %.0f MB after start-up, less than the "
                 "ingest buffer (%.0f MB), the estimator (%.0f MB) and OpenBLAS (%.0f MB of address space for "
                 "%" PRIu64 " threads) need: when libzmq cannot allocate a batch it drops the connection with the "
                 "batches in flight on it, and OpenBLAS retries for ever.  Lower --ingest-buffer-mb or raise the "
                 "limit",
                 (double)rl.rlim_cur / mb, have, (double)c->plan.budget / mb, est, blas, c->o.workers + 1);
}

/* Warn once each time more producers are connected than the buffer holds
   without credit: those that take credit share
   the buffer whatever their number; the others may each queue
   plan.per_producer.  Counted (a scan of the table) when one comes on a new
   connection, and once a second. */
static void s_ingest_watch(collector *c)
{
    if (!c->watch_due && net_now_ms() - c->watched_ms < 1000)
        return;
    c->watch_due = 0;
    c->watched_ms = net_now_ms();
    uint64_t open = ptable_without_credit(&c->producers);
    if (open > c->plan.producers && !c->over_plan) {
        c->over_plan = 1;
        log_warn("%" PRIu64 " producers connected without credit (no status endpoint, or an old producer), more "
                 "than the %" PRIu64 " that --ingest-buffer-mb %.0f holds: the batches they queue may take up to "
                 "%.0f MB more than the buffer",
                 open, c->plan.producers, c->o.ingest_buffer_mb,
                 (double)((open - c->plan.producers) * c->plan.per_producer) / (1 << 20));
    } else if (open <= c->plan.producers && c->over_plan) {
        c->over_plan = 0;
        log_info("%" PRIu64 " producers connected without credit: within --ingest-buffer-mb again", open);
    }
}

/* ---------------------------------------------------------------- setup */
static int s_server_socket(collector *c, void *sock, const char *endpoint, const char *domain,
                           const dps_keypair *kp, char *err, size_t errlen)
{
    if (c->o.insecure_plaintext) {
        if (!dps_endpoint_is_local(endpoint)) {
            snprintf(err, errlen, "--insecure-plaintext refuses %s: rows are private data; plaintext only on "
                     "loopback tcp or ipc", endpoint);
            return -1;
        }
    } else {
        int one = 1;
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, kp->secret_key, DPS_KEY_LEN + 1) ||
            zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain))) {
            snprintf(err, errlen, "CURVE setup failed on %s: %s", endpoint, zmq_strerror(errno));
            return -1;
        }
    }
    int linger = 1000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(sock, endpoint) != 0) {
        snprintf(err, errlen, "cannot bind %s: %s", endpoint, zmq_strerror(errno));
        return -1;
    }
    return 0;
}

static int s_lock_state(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen,
                 "%s is in use by another collector (or unreadable): two collectors on one ledger would "
                 "spend the same budget twice", dir);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd; /* held until exit */
}

static int s_restore(collector *c, char *err, size_t errlen)
{
    if (ledger_open(&c->led, c->o.state_dir, err, errlen) != DPS_OK)
        return -1;
    if (c->led.torn_cut)
        log_warn("the ledger's last line was torn by a crash and was cut off: that write never completed, so "
                 "its epoch's mechanism never ran and nothing of it was released");
    if (store_init(c->o.state_dir, err, errlen) != DPS_OK)
        return -1;
    uint64_t max_seq = 0, max_epoch = 0;
    size_t count = 0, bad = 0;
    store_latest(c->o.state_dir, &c->latest, &max_seq, &max_epoch, &count, &bad);
    if (bad)
        log_warn("%zu snapshot files in %s/snapshots do not decode; ignored", bad, c->o.state_dir);
    c->last_seq = max_seq > c->led.last_seq ? max_seq : c->led.last_seq;
    uint64_t next = c->led.next_epoch;
    if (count && max_epoch + 1 > next)
        next = max_epoch + 1;
    c->led.next_epoch = next;
    if (c->led.lines || count)
        log_info("resumed from %s: %" PRIu64 " ledger entries, spent rho %.6g delta %.3g, next epoch %" PRIu64
                 ", %zu snapshots stored, last seq %" PRIu64,
                 c->o.state_dir, c->led.lines, c->led.total.rho, c->led.total.delta, next, count, c->last_seq);
    return 0;
}

static void s_config(const collector_options *o, const ledger *led, dps_config *cfg)
{
    dps_config_init(cfg, o->d, o->k);
    cfg->t = o->t;
    cfg->m = o->m;
    cfg->window = o->window;
    cfg->q = o->q;
    dps_aggregator_from_name(o->aggregator, &cfg->aggregator); /* checked by options_finish */
    cfg->hist_width = o->hist_width;
    cfg->rho_epoch = o->rho_epoch;
    cfg->delta_epoch = o->delta_epoch;
    cfg->alpha = o->alpha;
    cfg->tau = o->tau;
    cfg->split_search = o->split_search;
    cfg->split_count = o->split_count;
    cfg->split_mean = o->split_mean;
    cfg->cap = (dps_budget){o->cap_rho, o->cap_eps, o->delta_target};
    cfg->public_seed = o->public_seed;
    cfg->seeded = o->seeded;
    cfg->seed = o->seed;
    cfg->workers = (int)o->workers;
    cfg->first_epoch = led->next_epoch;
    cfg->spent_before = led->total;
}

/* Free whatever exists, in reverse order of creation; every exit of main
   after the state directory was opened comes through here. */
static void s_teardown(collector *c)
{
    if (c->pull) {
        net_monitor_stop(c->pull, &c->pull_mon);
        int zero = 0;
        zmq_setsockopt(c->pull, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(c->pull);
    }
    if (c->rep)
        zmq_close(c->rep);
    if (c->xpub)
        zmq_close(c->xpub);
    zap_stop(&c->zap);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    dps_estimator_destroy(&c->est);
    dps_snapshot_destroy(&c->latest);
    ptable_free(&c->producers);
    credit_free(&c->credit);
    ledger_close(&c->led);
}

/* Start the estimator and the sockets, serve until stopped or asked to exit;
   returns main's exit code.  The caller tears down whatever was created. */
static int s_serve(collector *c, dps_config *cfg, const dps_keypair *kp)
{
    char err[8192];
    s_config(&c->o, &c->led, cfg);
    cfg->commit = s_commit;
    cfg->commit_arg = c;
    if (c->o.seeded)
        log_warn("SEEDED MODE (--seed): the noise is reproducible and NOT secure; every snapshot says so");
    int rc = dps_estimator_new(&c->est, cfg);
    if (rc) {
        fprintf(stderr, "dps-collector: cannot start the estimator: %s\n", dps_strerror(rc));
        return 1;
    }

    c->ctx = zmq_ctx_new();
    if (!c->o.insecure_plaintext) {
        c->zap = zap_start(c->ctx, c->o.authorized_keys, c->o.subscriber_keys[0] ? c->o.subscriber_keys : NULL);
        if (!c->zap) {
            fprintf(stderr, "dps-collector: cannot start the ZAP handler\n");
            return 1;
        }
    }
    c->pull = zmq_socket(c->ctx, ZMQ_PULL);
    c->xpub = zmq_socket(c->ctx, ZMQ_XPUB);
    c->rep = zmq_socket(c->ctx, ZMQ_REP);
    int pub_hwm = 1000;
    if (s_ingest_setup(c) != 0) {
        fprintf(stderr, "dps-collector: out of memory\n");
        return 1;
    }
    zmq_setsockopt(c->xpub, ZMQ_SNDHWM, &pub_hwm, sizeof pub_hwm);
    if (s_server_socket(c, c->pull, c->o.ingest, "ingest", kp, err, sizeof err) ||
        s_server_socket(c, c->xpub, c->o.publish, "publish", kp, err, sizeof err) ||
        s_server_socket(c, c->rep, c->o.status, "status", kp, err, sizeof err)) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return 2;
    }
    net_monitor_start(c->ctx, c->pull, &c->pull_mon, 1); /* dropped connections on ingest */
    c->pull_mon.on_disconnect = s_on_disconnect;
    c->pull_mon.on_disconnect_arg = c;
    if (c->latest) {
        unsigned char *buf = NULL;
        size_t len = 0;
        if (dps_snapshot_encode(c->latest, &buf, &len) == DPS_OK) {
            zmq_setsockopt(c->xpub, ZMQ_XPUB_WELCOME_MSG, buf, len);
            free(buf);
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (ptable_init(&c->producers, 4096) != 0) {
        fprintf(stderr, "dps-collector: out of memory\n");
        return 1;
    }
    c->started_ms = c->epoch_started_ms = net_now_ms();
    log_info("listening: ingest %s, publish %s, status %s (%s); d=%" PRIu64 " k=%" PRIu64 ", epoch = %" PRIu64
             " buckets x %" PRIu64 " rows, rho %.4g per epoch, %s aggregator, state %s",
             c->o.ingest, c->o.publish, c->o.status, c->o.insecure_plaintext ? "PLAINTEXT, loopback only" : "CURVE",
             c->o.d, c->o.k, c->o.t, c->o.m, c->o.rho_epoch, c->o.aggregator, c->o.state_dir);
    dps_accountant *acc = NULL; /* the budget as the ledger left it */
    if (dps_accountant_new(&acc, &cfg->cap, &c->led.total) == DPS_OK) {
        double eps = dps_accountant_eps(acc, c->o.delta_target), left = dps_accountant_left(acc);
        if (c->o.no_cap)
            log_warn("no privacy budget cap (--no-cap): epochs are released without limit; spent so far rho %.4g "
                     "(eps %.4g at delta %.0e)", c->led.total.rho, eps, c->o.delta_target);
        else
            log_info("privacy budget cap: %s %.4g; spent so far rho %.4g (eps %.4g at delta %.0e); left %.4g %s%s",
                     dps_budget_unit(&cfg->cap), c->o.cap_rho > 0 ? c->o.cap_rho : c->o.cap_eps, c->led.total.rho,
                     eps, c->o.delta_target, left, dps_budget_unit(&cfg->cap),
                     dps_accountant_fits(acc, (dps_zcdp){cfg->rho_epoch, cfg->aggregator == DPS_AGG_COVARIANCE
                                                                             ? 0 : cfg->delta_epoch})
                         ? "" : ": the next epoch would pass it and will be refused");
        dps_accountant_destroy(&acc);
    }

    s_ingest_report(c, cfg);

    if (c->zap)
        c->sub_removals = zap_removals(c->zap, "publish");
    while (!s_stop) {
        if (s_reload) {
            s_reload = 0;
            log_info("SIGHUP: reloading keys and configuration");
            zap_reload(c->zap);
            s_reload_config(c);
        }
        if (c->zap) {
            uint64_t removals = zap_removals(c->zap, "publish");
            if (removals != c->sub_removals && s_rebind_publish(c) == 0)
                c->sub_removals = removals;
        }
        zmq_pollitem_t items[3] = {
            {c->pull, 0, ZMQ_POLLIN, 0}, {c->xpub, 0, ZMQ_POLLIN, 0}, {c->rep, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(items, 3, 100);
        if (n < 0 && errno != EINTR) {
            log_error("poll failed: %s", zmq_strerror(errno));
            break;
        }
        if (n > 0) {
            if (items[2].revents & ZMQ_POLLIN)
                s_status(c);
            if (items[1].revents & ZMQ_POLLIN)
                s_subscriptions(c);
            for (int i = 0; i < 64 && (items[0].revents & ZMQ_POLLIN) && !s_stop; i++)
                if (!s_ingest(c))
                    break;
        }
        net_monitor_poll(&c->pull_mon, 0);
        s_ingest_watch(c);
        /* Silent producers' credit comes back, but only once the PULL queue
           was found empty: after this loop was blocked (an epoch's
           aggregation), the batches queued meanwhile are taken first and
           make their producers heard. */
        if (n >= 0 && !(items[0].revents & ZMQ_POLLIN) && net_now_ms() - c->credit_swept_ms >= 1000) {
            c->credit_swept_ms = net_now_ms();
            credit_reclaim(&c->credit, c->credit_swept_ms, CREDIT_SILENCE_MS);
        }
        if (c->o.epoch_seconds > 0 && net_now_ms() - c->epoch_started_ms >= (uint64_t)(c->o.epoch_seconds * 1000)) {
            dps_stats es;
            dps_estimator_get_stats(c->est, &es);
            if (es.rows_in_epoch > 0)
                s_close_epoch(c);
            else
                c->epoch_started_ms = net_now_ms();
        }
        if (c->o.exit_after && c->published >= c->o.exit_after) {
            log_info("published %" PRIu64 " snapshots as asked (--exit-after); stopping", c->published);
            break;
        }
    }
    dps_stats es;
    dps_estimator_get_stats(c->est, &es);
    if (es.rows_in_epoch)
        log_info("stopping: the open epoch's %" PRIu64 " rows are discarded (no budget was spent on them)",
                 es.rows_in_epoch);
    else
        log_info("stopping");
    log_info("stopped: %" PRIu64 " rows accepted, %" PRIu64 " snapshots published this run", es.rows_accepted,
             c->published);
    if (c->connections_dropped || c->producers.total_gaps) {
        log_error("batches were LOST in transit this run: %" PRIu64 " producer connections dropped with the batches "
                  "in flight on them, %" PRIu64 " batches missing from producers' sequences (see the warnings above)",
                  c->connections_dropped, c->producers.total_gaps);
        return 4;
    }
    return 0;
}
int main(int argc, char **argv)
{
    collector c;
    memset(&c, 0, sizeof c);
    c.led.fd = -1;
    options_defaults(&c.o);
    char err[8192];
    c.argc = argc;
    c.argv = argv;
    if (options_parse(&c.o, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return 2;
    }
    if (cli_version_given()) {
        cli_print_version();
        return 0;
    }
    if (c.o.help) {
        options_usage(stdout);
        return 0;
    }
    if (options_finish(&c.o, err, sizeof err) != 0) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return 2;
    }
    log_set_level(c.o.quiet ? LOG_QUIET : c.o.verbose ? LOG_DEBUG : LOG_INFO);
    dps_config cfg;
    dps_config_init(&cfg, c.o.d, c.o.k);
    const char *why = "";
    ledger dummy;
    memset(&dummy, 0, sizeof dummy);
    s_config(&c.o, &dummy, &cfg);
    if (dps_config_check(&cfg, &why) != DPS_OK) {
        fprintf(stderr, "dps-collector: %s\n", why);
        return 2;
    }
    dps_keypair kp;
    if (!c.o.insecure_plaintext) {
        int rc = dps_keypair_load(&kp, c.o.server_key);
        if (rc) {
            fprintf(stderr, "dps-collector: --server-key %s: %s (it must be a .key_secret made by dps-keygen)\n",
                    c.o.server_key, dps_strerror(rc));
            return 2;
        }
        struct stat st;
        if (stat(c.o.authorized_keys, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "dps-collector: --authorized-keys %s is not a directory\n", c.o.authorized_keys);
            return 2;
        }
    }
    if (mkdir(c.o.state_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "dps-collector: cannot create --state-dir %s: %s\n", c.o.state_dir, strerror(errno));
        return 3;
    }
    if (s_lock_state(c.o.state_dir, err, sizeof err) < 0 || s_restore(&c, err, sizeof err) != 0) {
        fprintf(stderr, "dps-collector: %s\n", err);
        s_teardown(&c);
        return 3;
    }
    int code = s_serve(&c, &cfg, &kp);
    s_teardown(&c);
    return code;
}
