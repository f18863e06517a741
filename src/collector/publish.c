/* publish.c - an epoch's end in dps-collector: the ledger hook (the cost
   appended and fsync'ed BEFORE the mechanism runs), then the snapshot
   numbered, stored (atomic file, fsync) and published (XPUB, and the
   welcome message of late subscribers), and its log line.  The hook and the
   numbering run on the release thread, the store and the outcome line on
   the writer thread (release.c); only the send and the log are the loop's,
   which owns the socket.
   Who owns what: borrows the collector (collector.h); the snapshot the
   estimator returns is freed here once published. */
#include "collector.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>


/* ---------------------------------------------------------------- ledger */
/* The error line of a failed write of the state directory: what failed
   (why: the file, the line, what is left on disk), and what to do. */
static void s_log_write_failed(const collector *c, const char *what, const char *why)
{
    log_error("%s%s.  The collector stops and writes nothing more; make room in (or repair) the file system of %s, "
              "then start it again", what, why, c->o.state_dir);
}

/* Append a ledger line; on failure the first one logs why (after it the
   ledger is halted, and a later append fails without writing). */
static int s_append(collector *c, const char *kind, uint64_t epoch, dps_zcdp cost, const char *extra)
{
    char why[sizeof c->ledger.led.why];
    pthread_mutex_lock(&c->ledger.mu);
    int was_halted = c->ledger.led.halted;
    int rc = ledger_append(&c->ledger.led, kind, epoch, cost, extra);
    memcpy(why, c->ledger.led.why, sizeof why);
    pthread_mutex_unlock(&c->ledger.mu);
    if (rc && !was_halted)
        s_log_write_failed(c, "could not write the ledger: ", why[0] ? why : dps_strerror(rc));
    return rc;
}

int collector_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp after)
{
    collector *c = arg;
    (void)after;
    collector_fault("before-commit");
    int rc;
    if (collector_fault_here("commit-fails")) { /* slowly: the next epoch fills meanwhile */
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        const char *why = "fault injection (DPS_FAULT=commit-fails)";
        pthread_mutex_lock(&c->ledger.mu);
        ledger_halt(&c->ledger.led, why);
        pthread_mutex_unlock(&c->ledger.mu);
        s_log_write_failed(c, "could not write the ledger: ", why);
        rc = DPS_EIO;
    } else {
        rc = s_append(c, "commit", epoch, cost, NULL);
    }
    if (rc) {
        log_error("epoch %" PRIu64 " is not released: its cost is not in the ledger, and nothing of it was spent",
                  epoch);
        return -1;
    }
    collector_fault("after-commit");
    return 0;
}

/* ------------------------------------------------------------ snapshots */
static void s_log_snapshot(const collector_outgoing *out)
{
    const dps_snapshot_info *in = &out->info;
    char eps[32], left[64];
    if (isfinite(in->eps_total))
        snprintf(eps, sizeof eps, "%.3f", in->eps_total);
    else
        snprintf(eps, sizeof eps, "inf");
    if (strcmp(in->budget_unit, "none") == 0)
        snprintf(left, sizeof left, "no budget cap");
    else
        snprintf(left, sizeof left, "budget left %.4g %s", in->budget_left, in->budget_unit);
    char what[96]; /* the mechanisms that take rows, not buckets, have no buckets nor radius */
    if (in->buckets_used || in->radius > 0)
        snprintf(what, sizeof what, "%zu buckets, %" PRIu64 " rows, radius %.3g", in->buckets_used, in->rows_used,
                 in->radius);
    else
        snprintf(what, sizeof what, "%" PRIu64 " rows", in->rows_used);
    if (in->status == DPS_SNAP_RELEASED)
        log_info("epoch %" PRIu64 " released (seq %" PRIu64 "): %s, "
                 "noise level %.3g%s%s; rho this epoch %.4g, total rho %.4g, delta %.3g; eps %s at delta %.0e; %s",
                 in->epoch, in->seq, what, in->noise_level, dps_snapshot_weak(in) ? " WEAK" : "", out->weak_groups,
                 in->epoch_cost.rho, in->total.rho, in->total.delta, eps, in->delta_target, left);
    else
        log_info("epoch %" PRIu64 " %s (seq %" PRIu64 "): %s; total rho %.4g, eps %s at delta %.0e; %s", in->epoch,
                 dps_snapshot_status_name(in->status), in->seq, in->reason, in->total.rho, eps, in->delta_target, left);
    if (strcmp(in->budget_unit, "none") == 0)
        log_warn("no privacy budget cap (--no-cap): spent so far eps %s at delta %.0e (total rho %.4g), and nothing "
                 "stops it from growing; set --cap-rho or --cap-eps (SIGHUP reads the config file again)",
                 eps, in->delta_target, in->total.rho);
    if (dps_snapshot_weak(in) && in->noise_level > 0)
        log_warn("epoch %" PRIu64 ": WEAK: noise level %.3g >= %.2g: this basis is near the random level and carries "
                 "little information.  The noise of the release is too large for this data: raise rho, or the rows "
                 "per epoch; on gradient-like data use --aggregator gaussian",
                 in->epoch, in->noise_level, DPS_NOISE_LEVEL_WEAK);
    else if (dps_snapshot_weak(in))
        log_warn("epoch %" PRIu64 ": the buckets agreed only at radius %.3g, %.0f%% of the distance between unrelated "
                 "buckets (%.3g): this basis carries little information.  Buckets of m rows are too small for this "
                 "data to concentrate near a k-dimensional subspace: raise --m (and t, or rho)",
                 in->epoch, in->radius, 100 * in->radius / in->radius_unrelated, in->radius_unrelated);
}

/* "; WEAK groups 1 (level 1), 3 (level 0.82)": the parameter groups
   (numbered from 1, as --param-groups lists them) whose own level is WEAK,
   whether or not the release's is; "" if none (or no groups), "..." when
   they do not fit. */
static void s_weak_groups(const dps_snapshot *snap, const dps_snapshot_info *in, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t g = 0; g < in->groups; g++) {
        if (!dps_snapshot_group_weak(snap, g))
            continue;
        char one[48];
        int n = snprintf(one, sizeof one, "%s%zu (level %.3g)", used ? ", " : "; WEAK groups ", g + 1,
                         dps_snapshot_group_noise_level(snap, g));
        if (used + (size_t)n + 4 >= len) {
            snprintf(buf + used, len - used, "...");
            return;
        }
        memcpy(buf + used, one, (size_t)n + 1);
        used += (size_t)n;
    }
}

/* Free what an outgoing snapshot holds (one that will not be sent). */
static void s_outgoing_free(collector_outgoing *out)
{
    dps_snapshot_destroy(&out->numbered);
    free(out->buf);
    out->buf = NULL;
}

/* Number and encode (the release thread); the ledger already holds the
   cost.  Numbers come from rel_seq, the thread's own counter (the loop reads
   last_seq). */
int collector_number(collector *c, dps_snapshot *snap, collector_outgoing *out)
{
    dps_snapshot_info info;
    dps_snapshot_get_info(snap, &info);
    int rc = collector_number_info(c, &info, dps_snapshot_basis(snap), out);
    s_weak_groups(snap, &info, out->weak_groups, sizeof out->weak_groups);
    return rc;
}

int collector_number_info(collector *c, const dps_snapshot_info *info, const float *basis, collector_outgoing *out)
{
    memset(out, 0, sizeof *out);
    out->info = *info;
    dps_snapshot_info *in = &out->info;
    in->seq = c->rel.seq + 1;
    in->time_unix_ms = net_unix_ms();
    int rc = dps_snapshot_new(&out->numbered, in, basis);
    if (!rc) /* its strings (reason, budget unit) from the copy the loop will own: snap is freed after this */
        dps_snapshot_get_info(out->numbered, in);
    if (!rc)
        rc = dps_snapshot_encode(out->numbered, &out->buf, &out->len);
    if (rc) { /* only memory for the numbered copy or its encoding (sizes public): a resource failure, loud */
        log_error("epoch %" PRIu64 " was charged and computed but could not be published (%s): its charge stays "
                  "in the ledger, its snapshot is lost", in->epoch, dps_strerror(rc));
        s_outgoing_free(out);
        return rc;
    }
    if (in->status == DPS_SNAP_REFUSED && s_append(c, "refused", in->epoch, (dps_zcdp){0, 0}, NULL) != DPS_OK) {
        /* nothing of it was spent; the collector stops (DPS_ECOMMIT: the ledger took no line) */
        log_error("epoch %" PRIu64 "'s refusal by the cap is not published", in->epoch);
        s_outgoing_free(out);
        return DPS_ECOMMIT;
    }
    c->rel.seq = in->seq;
    return DPS_OK;
}

/* The snapshot durable in the store, then its outcome line (after the next
   epoch's commit line when that release began meanwhile: each line names its
   epoch); the loop publishes it after.
   A write that fails here (disk full, EIO) stops the collector, and the
   snapshot is not published: a snapshot leaves only once stored with its
   outcome line.  Publishing it would cost no privacy (its commit line holds
   its cost), but a restart republishes the latest stored snapshot and
   numbers from the largest seq of the store and the ledger, so one sent
   unstored could be followed, after a restart, by another under its seq;
   and a file system that refused this write would refuse the next commit.
   Withheld, the epoch is charged and not released: the safe side.  The
   ledger is halted, so nothing more is written in this run.
   Returns DPS_OK, or DPS_EIO with out's bytes and snapshot freed
   (collector_send sends nothing then). */
int collector_store(collector *c, collector_outgoing *out)
{
    dps_snapshot_info *in = &out->info;
    pthread_mutex_lock(&c->ledger.mu);
    int halted = c->ledger.led.halted;
    pthread_mutex_unlock(&c->ledger.mu);
    if (halted) { /* its commit came before the failure: charged; nothing is written after the failure */
        log_error("epoch %" PRIu64 " is charged (its commit line is in the ledger) but neither stored nor published: "
                  "the state directory failed a write (above)", in->epoch);
        s_outgoing_free(out);
        return DPS_EIO;
    }
    int stored = collector_fault_here("store-fails") ? (errno = EIO, DPS_EIO)
                                                      : store_put(c->o.state_dir, in->epoch, out->buf, out->len);
    if (stored != DPS_OK) {
        char why[sizeof c->ledger.led.why];
        snprintf(why, sizeof why, "the snapshot of epoch %" PRIu64 " could not be stored in %s/snapshots (%s)",
                 in->epoch, c->o.state_dir, strerror(errno));
        pthread_mutex_lock(&c->ledger.mu);
        ledger_halt(&c->ledger.led, why);
        pthread_mutex_unlock(&c->ledger.mu);
        s_log_write_failed(c, "", why);
        log_error("epoch %" PRIu64 " is not published: charged, not released (its cost stays in the ledger)",
                  in->epoch);
        s_outgoing_free(out);
        return DPS_EIO;
    }
    char extra[96];
    snprintf(extra, sizeof extra, "status=%s seq=%" PRIu64, dps_snapshot_status_name(in->status), in->seq);
    if (s_append(c, "outcome", in->epoch, (dps_zcdp){0, 0}, extra) != DPS_OK) {
        log_error("epoch %" PRIu64 "'s snapshot is stored but not published now (a restart publishes the latest "
                  "stored one)", in->epoch);
        s_outgoing_free(out);
        return DPS_EIO;
    }
    collector_fault("after-store");
    long gone = store_prune(c->o.state_dir, c->o.keep_snapshots, c->o.keep_days, (double)net_unix_ms() / 1000.0);
    if (gone > 0)
        log_debug("retention: %ld stored snapshot%s deleted (--keep-snapshots %" PRIu64 ", --keep-days %g)", gone,
                  gone == 1 ? "" : "s", c->o.keep_snapshots, c->o.keep_days);
    return DPS_OK;
}

/* Send a stored snapshot to the subscribers (the loop: it owns the socket). */
void collector_send(collector *c, collector_outgoing *out)
{
    dps_snapshot_info *in = &out->info;
    if (!out->buf) /* collector_store failed (and said so): not stored, so not sent */
        return;
    if (zmq_send(c->pub.xpub, out->buf, out->len, 0) < 0)
        log_warn("publishing epoch %" PRIu64 " failed: %s", in->epoch, zmq_strerror(errno));
    if (zmq_setsockopt(c->pub.xpub, ZMQ_XPUB_WELCOME_MSG, out->buf, out->len) != 0)
        log_warn("could not set the welcome message: %s", zmq_strerror(errno));
    free(out->buf);
    out->buf = NULL;
    c->pub.published++;
    c->pub.last_seq = in->seq;
    s_log_snapshot(out);
    dps_snapshot_destroy(&c->pub.latest);
    c->pub.latest = out->numbered;
    out->numbered = NULL;
    if (in->total.delta >= 0.5 * in->delta_target && !c->pub.warned_delta) {
        log_warn("the mechanisms' deltas add up to %.3g, over half of --delta-target %.3g: eps becomes infinite "
                 "when they reach it (lower --delta, or state eps at a larger delta)",
                 in->total.delta, in->delta_target);
        c->pub.warned_delta = 1;
    }
}
