/* status_reply.c - dps-collector's status endpoint (REP): the counters
   (operator information, not private), a producer's own counts for its
   drain, and its credit (credit.h); and the publish socket's subscription
   notices.
   Who owns what: borrows the collector (collector.h). */
#include "collector.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>


/* --------------------------------------------------------------- status */
/* Append the count name = v to list (of *n). */
static void s_count(dps_named_count *list, size_t *n, const char *name, uint64_t v)
{
    snprintf(list[*n].name, sizeof list[*n].name, "%s", name);
    list[(*n)++].value = v;
}

/* The collector's counters, for a status reply. */
static void s_status_counters(collector *c, dps_collector_status *st)
{
    dps_estimator_stats es;
    dps_estimator_get_stats(c->est, &es);
    dps_zcdp spent = dps_estimator_spent(c->est);
    st->epoch = es.epoch;
    st->rows_accepted = es.rows_accepted;
    st->buckets_completed = es.buckets_completed;
    st->rows_in_epoch = es.rows_in_epoch;
    st->epoch_rows = c->o.t * c->o.m;
    st->rho_total = spent.rho;
    st->delta_total = spent.delta;
    st->delta_target = c->o.delta_target;
    st->eps_total = dps_estimator_eps(c->est, c->o.delta_target); /* the accountant's rule (exact if all Gaussian) */
    if (c->o.cap_rho > 0) {
        snprintf(st->budget_unit, sizeof st->budget_unit, "rho");
        st->budget_left = fmax(0, c->o.cap_rho - spent.rho);
    } else if (c->o.cap_eps > 0) {
        snprintf(st->budget_unit, sizeof st->budget_unit, "eps");
        st->budget_left = fmax(0, c->o.cap_eps - st->eps_total);
    } else {
        snprintf(st->budget_unit, sizeof st->budget_unit, "none");
        st->budget_left = INFINITY;
    }
    st->last_snapshot_seq = c->pub.last_seq;
    st->uptime_s = (net_now_ms() - c->status.started_ms) / 1000;
    st->d = c->o.d;
    st->k = c->o.k_total;
    uint64_t zap_ok = 0, zap_refused = 0;
    if (c->zap)
        zap_counts(c->zap, &zap_ok, &zap_refused);
    /* refusals: batches and requests refused (by the decoder's reasons, and keys) */
    for (int r = 1; r < WIRE_REJECT_COUNT_; r++)
        s_count(st->refusals, &st->n_refusals, wire_reject_name(r), c->status.rejected[r]);
    s_count(st->refusals, &st->n_refusals, "auth_refused", zap_refused);
    s_count(st->refusals, &st->n_refusals, "auth_revoked", c->status.revoked);
    _Static_assert(WIRE_REJECT_COUNT_ + 1 <= DPS_STATUS_MAX_COUNTERS, "the refusals fit the reply");
    /* counters: what was taken or lost otherwise */
    struct { const char *name; uint64_t v; } other[] = {
        {"rows_nan", es.rows_nan}, {"rows_inf", es.rows_inf}, {"rows_zero", es.rows_zero},
        {"rows_discarded", es.rows_discarded}, {"disconnects", c->ingest.pull_mon.disconnects},
        {"seq_gaps", c->ingest.producers.total_gaps}, {"epochs_internal_error", es.epochs_internal_error},
        {"connections_dropped", c->ingest.connections_dropped}, {"connections_empty", c->ingest.connections_empty},
        {"batches_cut_short", c->ingest.batches_cut_short},
        {"credit_grants", c->ingest.credit.grants}, {"credit_waits", c->ingest.credit.waits},
        {"credit_reclaimed", c->ingest.credit.reclaimed}, {"credit_overruns", c->ingest.credit.overruns},
        {"credit_stalls", c->ingest.credit.stalls},
    };
    _Static_assert(sizeof other / sizeof *other <= DPS_STATUS_MAX_COUNTERS, "the counters fit the reply");
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        s_count(st->counters, &st->n_counters, other[i].name, other[i].v);
}

int collector_status_request(collector *c, wire_status_request *q, dps_collector_status *st)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, c->status.rep, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return 0;
    }
    int ok = wire_status_request_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), q) == DPS_OK;
    int revoked = ok && c->zap && !zap_allowed(c->zap, "status", zmq_msg_gets(&msg, "User-Id"));
    zmq_msg_close(&msg);
    memset(st, 0, sizeof *st);
    if (revoked) { /* a key removed since the connection was made: the asker learns it and stops */
        c->status.revoked++;
        snprintf(st->refused, sizeof st->refused, "key_revoked");
        collector_status_send(c, st);
        return 0;
    }
    if (!ok) {
        zmq_send(c->status.rep, "", 0, 0); /* REP must answer; an empty reply does not decode */
        return 0;
    }
    const producer_entry *pe = q->producer_id[0] ? ptable_find(&c->ingest.producers, q->producer_id, q->run) : NULL;
    if (pe) {
        st->producer_batches = pe->batches;
        st->producer_rows = pe->rows;
        st->producer_seq_gaps = pe->gaps;
        st->producer_refused = pe->refused;
    }
    st->max_batch_rows = (uint32_t)c->o.max_batch_rows;
    return 1;
}

void collector_status_send(collector *c, const dps_collector_status *st)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    if (wire_status_encode(st, &buf, &len) == DPS_OK) {
        zmq_send(c->status.rep, buf, len, 0);
        free(buf);
    } else {
        zmq_send(c->status.rep, "", 0, 0);
    }
}

void collector_status(collector *c)
{
    wire_status_request q;
    dps_collector_status st;
    if (!collector_status_request(c, &q, &st))
        return;
    if (q.producer_id[0] && ptable_asked(&c->ingest.producers, q.producer_id, q.run, net_now_ms()))
        collector_lost(c, q.producer_id, "kept asking for its count");
    st.credit = 1;
    st.d = c->o.d;
    st.k = c->o.k_total;
    if (q.credit_seq_end) /* a credit question: a producer waits for it, the counters are not for it */
        st.credit_seq_end = credit_request(&c->ingest.credit, q.producer_id, q.run, q.credit_from, q.credit_seq_end,
                                           net_now_ms());
    else
        s_status_counters(c, &st);
    collector_status_send(c, &st);
}

/* Subscription notices from XPUB: read them so they do not pile up. */
void collector_subscriptions(collector *c)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    while (zmq_msg_recv(&msg, c->pub.xpub, ZMQ_DONTWAIT) >= 0) {
        if (zmq_msg_size(&msg) >= 1 && ((const unsigned char *)zmq_msg_data(&msg))[0] == 1)
            log_debug("a subscriber joined");
        zmq_msg_close(&msg);
        zmq_msg_init(&msg);
    }
    zmq_msg_close(&msg);
}
