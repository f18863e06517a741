/* subscriber.c - receives a collector's snapshots on a SUB socket and keeps
   the latest released basis for projecting vectors (a training loop's view).
   Who owns what: the subscriber owns its context, socket and the latest
   released snapshot; snapshots returned by recv belong to the caller. */
#include "dpsubspace_net.h"
#include "transport.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

struct dps_subscriber {
    void *ctx, *sock;
    net_monitor mon;
    dps_snapshot *latest; /* latest released */
    uint64_t last_seq;    /* highest sequence number seen */
    uint64_t from_epoch;  /* snapshots of earlier epochs are skipped */
    uint64_t received, missed, bad;
};

int dps_subscriber_new(dps_subscriber **out, const char *endpoint, const dps_security *sec)
{
    if (!out || !endpoint)
        return DPS_EINVAL;
    *out = NULL;
    dps_subscriber *s = calloc(1, sizeof *s);
    if (!s)
        return DPS_ENOMEM;
    s->ctx = zmq_ctx_new();
    int rc = s->ctx ? DPS_OK : DPS_ENOMEM;
    if (!rc && !(s->sock = zmq_socket(s->ctx, ZMQ_SUB)))
        rc = DPS_ENET;
    if (!rc)
        rc = net_client_security(s->sock, endpoint, sec);
    int zero = 0;
    if (!rc && (zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof zero) ||
                zmq_setsockopt(s->sock, ZMQ_SUBSCRIBE, "", 0) || net_monitor_start(s->ctx, s->sock, &s->mon, 0) ||
                zmq_connect(s->sock, endpoint)))
        rc = DPS_ENET;
    if (rc) {
        dps_subscriber_destroy(&s);
        return rc;
    }
    *out = s;
    return DPS_OK;
}

int dps_subscriber_connected(dps_subscriber *s)
{
    if (!s)
        return 0;
    net_monitor_poll(&s->mon, 0);
    return s->mon.succeeded;
}

void dps_subscriber_destroy(dps_subscriber **ps)
{
    if (!ps || !*ps)
        return;
    dps_subscriber *s = *ps;
    if (s->sock) {
        net_monitor_stop(s->sock, &s->mon);
        zmq_close(s->sock);
    }
    if (s->ctx)
        zmq_ctx_term(s->ctx);
    dps_snapshot_destroy(&s->latest);
    free(s);
    *ps = NULL;
}

/* Keep a copy of a released snapshot as the latest. */
static void s_keep(dps_subscriber *s, const dps_snapshot *snap)
{
    dps_snapshot_info in;
    dps_snapshot_get_info(snap, &in);
    if (in.status != DPS_SNAP_RELEASED)
        return;
    dps_snapshot *copy = NULL;
    if (dps_snapshot_new(&copy, &in, dps_snapshot_basis(snap)) == DPS_OK) {
        dps_snapshot_destroy(&s->latest);
        s->latest = copy;
    }
}

int dps_subscriber_recv(dps_subscriber *s, int timeout_ms, dps_snapshot **out)
{
    if (!s || !out)
        return DPS_EINVAL;
    *out = NULL;
    uint64_t end = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        /* slices of at most 100 ms, so that a refusal of our key is noticed */
        uint64_t now = net_now_ms();
        int left = timeout_ms < 0 ? 100 : (int)(end > now ? end - now : 0);
        zmq_pollitem_t it = {s->sock, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, left < 100 ? left : 100);
        net_monitor_poll(&s->mon, 0);
        if (n < 0 && errno != EINTR)
            return DPS_ENET;
        if (n <= 0) {
            if (s->mon.auth_failed && !s->mon.succeeded)
                return DPS_EAUTH;
            if (timeout_ms >= 0 && net_now_ms() >= end)
                return DPS_ETIMEOUT;
            continue;
        }
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, s->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            continue;
        }
        dps_snapshot *snap = NULL;
        int rc = dps_snapshot_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &snap);
        zmq_msg_close(&msg);
        if (rc) {
            s->bad++;
            return DPS_EPROTO;
        }
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        if (in.seq != 0 && in.seq <= s->last_seq) { /* welcome message we already had */
            dps_snapshot_destroy(&snap);
            continue;
        }
        if (s->last_seq && in.seq > s->last_seq + 1)
            s->missed += in.seq - s->last_seq - 1;
        s->last_seq = in.seq;
        if (in.epoch < s->from_epoch) { /* e.g. a previous job's last basis, sent as the welcome */
            dps_snapshot_destroy(&snap);
            continue;
        }
        s->received++;
        s_keep(s, snap);
        *out = snap;
        return DPS_OK;
    }
}

int dps_subscriber_set_from_epoch(dps_subscriber *s, uint64_t epoch)
{
    if (!s)
        return DPS_EINVAL;
    s->from_epoch = epoch;
    return DPS_OK;
}

int dps_subscriber_update(dps_subscriber *s)
{
    if (!s)
        return -DPS_EINVAL;
    int changed = 0;
    for (;;) {
        dps_snapshot *snap = NULL;
        int rc = dps_subscriber_recv(s, 0, &snap);
        if (rc == DPS_ETIMEOUT)
            return changed;
        if (rc == DPS_EPROTO)
            continue;
        if (rc)
            return -rc;
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        changed |= in.status == DPS_SNAP_RELEASED;
        dps_snapshot_destroy(&snap);
    }
}

const dps_snapshot *dps_subscriber_latest(const dps_subscriber *s) { return s ? s->latest : NULL; }

int dps_subscriber_project(const dps_subscriber *s, const float *x, float *out, size_t d)
{
    if (!s || !x || !out)
        return DPS_EINVAL;
    if (!s->latest)
        return DPS_ESTATE;
    dps_snapshot_info in;
    dps_snapshot_get_info(s->latest, &in);
    if (in.d != d)
        return DPS_EDIM;
    const float *V = dps_snapshot_basis(s->latest);
    double c[in.k];
    for (size_t a = 0; a < in.k; a++) {
        double v = 0;
        for (size_t j = 0; j < d; j++)
            v += (double)V[a * d + j] * x[j];
        c[a] = v;
    }
    for (size_t j = 0; j < d; j++) {
        double v = 0;
        for (size_t a = 0; a < in.k; a++)
            v += c[a] * V[a * d + j];
        out[j] = (float)v;
    }
    return DPS_OK;
}

void dps_subscriber_counts(const dps_subscriber *s, uint64_t *received, uint64_t *missed, uint64_t *bad)
{
    if (received)
        *received = s->received;
    if (missed)
        *missed = s->missed;
    if (bad)
        *bad = s->bad;
}
