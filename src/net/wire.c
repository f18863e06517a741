/* wire.c - protocol messages <-> dps_ types, with validation (see wire.h). */
#include "wire.h"
#include "dpsubspace.pb-c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_reject_names[WIRE_REJECT_COUNT_] = {
    [WIRE_OK] = "ok", [WIRE_UNDECODABLE] = "undecodable", [WIRE_VERSION] = "bad_version",
    [WIRE_DIM] = "wrong_dim", [WIRE_COUNT] = "count_mismatch", [WIRE_EMPTY] = "empty_batch",
    [WIRE_PRODUCER_ID] = "bad_producer_id", [WIRE_REPLAYED] = "replayed", [WIRE_SLICE] = "slice_not_sharded",
};

const char *wire_reject_name(wire_reject r)
{
    return (r >= 0 && r < WIRE_REJECT_COUNT_) ? s_reject_names[r] : "unknown";
}

/* Little-endian float32 bytes -> host floats (a copy with swaps on big-endian hosts). */
static void s_le_to_host(const unsigned char *src, float *dst, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 | (uint32_t)src[4 * i + 2] << 16 |
                     (uint32_t)src[4 * i + 3] << 24;
        memcpy(dst + i, &v, 4);
    }
#else
    memcpy(dst, src, n * 4);
#endif
}

static void s_host_to_le(const float *src, unsigned char *dst, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, src + i, 4);
        dst[4 * i] = v & 0xff; dst[4 * i + 1] = (v >> 8) & 0xff;
        dst[4 * i + 2] = (v >> 16) & 0xff; dst[4 * i + 3] = v >> 24;
    }
#else
    memcpy(dst, src, n * 4);
#endif
}

static int s_little_endian_host(void)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return 0;
#else
    return 1;
#endif
}

/* ---------------------------------------------------------------- rows */
wire_reject wire_rows_decode(const unsigned char *buf, size_t len, size_t expect_dim, wire_rows *out)
{
    memset(out, 0, sizeof *out);
    Dps__Wire__RowBatch *m = dps__wire__row_batch__unpack(NULL, len, buf);
    if (!m)
        return WIRE_UNDECODABLE;
    wire_reject r = WIRE_OK;
    if (m->version != DPS_WIRE_VERSION)
        r = WIRE_VERSION;
    else if (m->dim != expect_dim)
        r = WIRE_DIM;
    else if (m->rows == 0)
        r = WIRE_EMPTY;
    else if ((uint64_t)m->rows * m->dim > SIZE_MAX / 4 || m->data.len != (size_t)m->rows * m->dim * 4)
        r = WIRE_COUNT;
    else if (m->producer_id && strlen(m->producer_id) > WIRE_MAX_PRODUCER_ID)
        r = WIRE_PRODUCER_ID;
    if (r == WIRE_OK && m->producer_id)
        for (const char *c = m->producer_id; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                r = WIRE_PRODUCER_ID;
    if (r != WIRE_OK) { /* keep the id (if printable) and run so the refusal can be counted for its producer */
        if (r != WIRE_PRODUCER_ID && m->producer_id)
            snprintf(out->producer_id, sizeof out->producer_id, "%s", m->producer_id);
        out->stream = m->stream;
        dps__wire__row_batch__free_unpacked(m, NULL);
        return r;
    }
    out->msg = m;
    out->n = m->rows;
    out->dim = m->dim;
    out->seq = m->seq;
    out->shard = m->shard;
    out->shards = m->shards;
    out->full_dim = m->full_dim;
    out->stream = m->stream;
    snprintf(out->producer_id, sizeof out->producer_id, "%s", m->producer_id ? m->producer_id : "");
    if (s_little_endian_host() && ((uintptr_t)m->data.data % sizeof(float)) == 0) {
        out->rows = (const float *)(const void *)m->data.data;
    } else {
        out->owned = malloc(m->data.len ? m->data.len : 1);
        if (!out->owned) {
            dps__wire__row_batch__free_unpacked(m, NULL);
            memset(out, 0, sizeof *out);
            return WIRE_UNDECODABLE;
        }
        s_le_to_host(m->data.data, out->owned, out->n * out->dim);
        out->rows = out->owned;
    }
    return WIRE_OK;
}

void wire_rows_release(wire_rows *r)
{
    if (r->msg)
        dps__wire__row_batch__free_unpacked(r->msg, NULL);
    free(r->owned);
    memset(r, 0, sizeof *r);
}

int wire_rows_encode(const char *producer_id, uint64_t seq, const float *rows, size_t n, size_t dim,
                     const wire_shard *shard, unsigned char **out, size_t *len)
{
    if (n == 0 || dim == 0 || n > UINT32_MAX || dim > UINT32_MAX || n > SIZE_MAX / 4 / dim)
        return DPS_EINVAL;
    Dps__Wire__RowBatch m = DPS__WIRE__ROW_BATCH__INIT;
    m.version = DPS_WIRE_VERSION;
    m.producer_id = (char *)(producer_id ? producer_id : "");
    m.seq = seq;
    m.dim = (uint32_t)dim;
    m.rows = (uint32_t)n;
    if (shard) {
        m.shard = shard->shard;
        m.shards = shard->shards;
        m.full_dim = shard->full_dim;
        m.stream = shard->stream;
    }
    unsigned char *data = malloc(n * dim * 4);
    if (!data)
        return DPS_ENOMEM;
    s_host_to_le(rows, data, n * dim);
    m.data.data = data;
    m.data.len = n * dim * 4;
    size_t sz = dps__wire__row_batch__get_packed_size(&m);
    *out = malloc(sz ? sz : 1);
    if (!*out) {
        free(data);
        return DPS_ENOMEM;
    }
    *len = dps__wire__row_batch__pack(&m, *out);
    free(data);
    return DPS_OK;
}

/* ------------------------------------------------------------ snapshots */
int dps_snapshot_encode(const dps_snapshot *s, unsigned char **out, size_t *len)
{
    if (!s || !out || !len)
        return DPS_EINVAL;
    dps_snapshot_info in;
    dps_snapshot_get_info(s, &in);
    Dps__Wire__Snapshot m = DPS__WIRE__SNAPSHOT__INIT;
    m.version = DPS_WIRE_VERSION;
    m.seq = in.seq;
    m.epoch = in.epoch;
    m.d = (uint32_t)in.d;
    m.k = (uint32_t)in.k;
    m.status = (Dps__Wire__SnapshotStatus)in.status;
    m.aggregator = (Dps__Wire__Aggregator)in.aggregator;
    m.rows_used = in.rows_used;
    m.buckets_used = (uint32_t)in.buckets_used;
    m.radius = in.radius;
    m.w_hat = in.w_hat;
    m.rho_epoch = in.epoch_cost.rho;
    m.delta_epoch = in.epoch_cost.delta;
    m.rho_total = in.total.rho;
    m.delta_total = in.total.delta;
    m.eps_total = in.eps_total;
    m.delta_target = in.delta_target;
    m.seeded = in.seeded != 0;
    m.public_seed = in.public_seed;
    m.reason = (char *)(in.reason ? in.reason : "");
    m.time_unix_ms = in.time_unix_ms;
    m.radius_unrelated = in.radius_unrelated;
    m.budget_left = in.budget_left;
    m.budget_unit = (char *)(in.budget_unit ? in.budget_unit : "");
    uint32_t group_d[DPS_MAX_GROUPS], group_k[DPS_MAX_GROUPS];
    for (size_t g = 0; g < in.groups && g < DPS_MAX_GROUPS; g++) {
        group_d[g] = (uint32_t)in.group_d[g];
        group_k[g] = (uint32_t)in.group_k[g];
    }
    m.n_group_d = m.n_group_k = in.groups;
    m.group_d = group_d;
    m.group_k = group_k;
    m.noise_level = in.noise_level;
    unsigned char *basis = NULL;
    const float *b = dps_snapshot_basis(s);
    if (b) {
        basis = malloc(in.k * in.d * 4);
        if (!basis)
            return DPS_ENOMEM;
        s_host_to_le(b, basis, in.k * in.d);
        m.basis.data = basis;
        m.basis.len = in.k * in.d * 4;
    }
    size_t sz = dps__wire__snapshot__get_packed_size(&m);
    *out = malloc(sz ? sz : 1);
    if (!*out) {
        free(basis);
        return DPS_ENOMEM;
    }
    *len = dps__wire__snapshot__pack(&m, *out);
    free(basis);
    return DPS_OK;
}

static int s_nonneg(double x) { return isfinite(x) && x >= 0; }

/* An aggregator of the library's mechanism table (its name maps back to
   it): the table is the one list, so a new mechanism's snapshots decode
   without an edit here. */
static int s_known_aggregator(int a)
{
    dps_aggregator back;
    return a >= 0 && dps_aggregator_from_name(dps_aggregator_name((dps_aggregator)a), &back) == DPS_OK &&
           (int)back == a;
}

static int s_budget_unit_ok(const char *u)
{
    return !u || !*u || strcmp(u, "rho") == 0 || strcmp(u, "eps") == 0 || strcmp(u, "none") == 0;
}

int dps_snapshot_decode(const unsigned char *buf, size_t len, dps_snapshot **out)
{
    if (!buf || !out)
        return DPS_EINVAL;
    *out = NULL;
    Dps__Wire__Snapshot *m = dps__wire__snapshot__unpack(NULL, len, buf);
    if (!m)
        return DPS_EPROTO;
    int rc = DPS_OK;
    int released = m->status == DPS__WIRE__SNAPSHOT_STATUS__RELEASED;
    if (m->version != DPS_WIRE_VERSION || m->d < 2 || m->k < 1 || m->k >= m->d ||
        (m->status != DPS__WIRE__SNAPSHOT_STATUS__RELEASED && m->status != DPS__WIRE__SNAPSHOT_STATUS__FAILED &&
         m->status != DPS__WIRE__SNAPSHOT_STATUS__REFUSED) ||
        !s_known_aggregator((int)m->aggregator) ||
        (uint64_t)m->k * m->d > SIZE_MAX / 4 ||
        (released ? m->basis.len != (size_t)m->k * m->d * 4 : m->basis.len != 0) ||
        !s_nonneg(m->rho_epoch) || !s_nonneg(m->delta_epoch) || !s_nonneg(m->rho_total) ||
        !s_nonneg(m->delta_total) || isnan(m->eps_total) || m->eps_total < 0 || !s_nonneg(m->delta_target) ||
        !s_nonneg(m->radius) || !s_nonneg(m->radius_unrelated) || !isfinite(m->w_hat) || !s_nonneg(m->noise_level) ||
        isnan(m->budget_left) || m->budget_left < 0 || !s_budget_unit_ok(m->budget_unit) ||
        m->n_group_d != m->n_group_k || m->n_group_d > DPS_MAX_GROUPS)
        rc = DPS_EPROTO;
    float *basis = NULL;
    if (!rc && released) {
        basis = malloc(m->basis.len);
        if (!basis)
            rc = DPS_ENOMEM;
        else {
            s_le_to_host(m->basis.data, basis, (size_t)m->k * m->d);
            for (size_t i = 0; i < (size_t)m->k * m->d; i++)
                if (!isfinite(basis[i])) {
                    rc = DPS_EPROTO;
                    break;
                }
        }
    }
    if (!rc) {
        dps_snapshot_info in;
        memset(&in, 0, sizeof in);
        in.epoch = m->epoch;
        in.d = m->d;
        in.k = m->k;
        in.status = (dps_snapshot_status)m->status;
        in.aggregator = (dps_aggregator)m->aggregator;
        in.rows_used = m->rows_used;
        in.buckets_used = m->buckets_used;
        in.radius = m->radius;
        in.w_hat = m->w_hat;
        in.epoch_cost = (dps_zcdp){m->rho_epoch, m->delta_epoch};
        in.total = (dps_zcdp){m->rho_total, m->delta_total};
        in.eps_total = m->eps_total;
        in.delta_target = m->delta_target;
        in.seeded = m->seeded;
        in.public_seed = m->public_seed;
        in.reason = m->reason ? m->reason : "";
        in.seq = m->seq;
        in.time_unix_ms = m->time_unix_ms;
        in.radius_unrelated = m->radius_unrelated;
        in.budget_left = m->budget_left;
        in.budget_unit = m->budget_unit ? m->budget_unit : "";
        size_t group_d[DPS_MAX_GROUPS], group_k[DPS_MAX_GROUPS];
        for (size_t g = 0; g < m->n_group_d; g++) {
            group_d[g] = m->group_d[g];
            group_k[g] = m->group_k[g];
        }
        in.groups = m->n_group_d;
        in.group_d = group_d;
        in.group_k = group_k;
        in.noise_level = m->noise_level;
        rc = dps_snapshot_new(out, &in, basis);
        if (rc == DPS_EINVAL)
            rc = DPS_EPROTO; /* groups that do not tile d and k */
    }
    free(basis);
    dps__wire__snapshot__free_unpacked(m, NULL);
    return rc;
}

/* --------------------------------------------------------------- status */
int wire_status_request_encode(const wire_status_request *q, unsigned char **out, size_t *len)
{
    Dps__Wire__StatusRequest m = DPS__WIRE__STATUS_REQUEST__INIT;
    m.version = DPS_WIRE_VERSION;
    m.producer_id = (char *)q->producer_id;
    m.run = q->run;
    m.credit_from = q->credit_from;
    m.credit_seq_end = q->credit_seq_end;
    size_t sz = dps__wire__status_request__get_packed_size(&m);
    *out = malloc(sz ? sz : 1);
    if (!*out)
        return DPS_ENOMEM;
    *len = dps__wire__status_request__pack(&m, *out);
    return DPS_OK;
}

int wire_status_request_decode(const unsigned char *buf, size_t len, wire_status_request *q)
{
    memset(q, 0, sizeof *q);
    Dps__Wire__StatusRequest *m = dps__wire__status_request__unpack(NULL, len, buf);
    if (!m)
        return DPS_EPROTO;
    int rc = m->version == DPS_WIRE_VERSION ? DPS_OK : DPS_EPROTO;
    if (!rc && m->producer_id) {
        if (strlen(m->producer_id) > WIRE_MAX_PRODUCER_ID)
            rc = DPS_EPROTO;
        else
            snprintf(q->producer_id, sizeof q->producer_id, "%s", m->producer_id);
    }
    q->run = m->run;
    if (!rc && m->credit_seq_end) { /* a question about credit needs an id, and asks from where it is */
        if (!q->producer_id[0] || m->credit_seq_end < m->credit_from)
            rc = DPS_EPROTO;
        q->credit_from = m->credit_from;
        q->credit_seq_end = m->credit_seq_end;
    }
    dps__wire__status_request__free_unpacked(m, NULL);
    return rc;
}

/* n named counts (at most DPS_STATUS_MAX_COUNTERS) as the message's
   Counters: cs holds them, cp points at them; returns how many. */
static size_t s_counts_encode(const dps_named_count *in, size_t n, Dps__Wire__Counter *cs, Dps__Wire__Counter **cp)
{
    n = n < DPS_STATUS_MAX_COUNTERS ? n : DPS_STATUS_MAX_COUNTERS;
    for (size_t i = 0; i < n; i++) {
        dps__wire__counter__init(&cs[i]);
        cs[i].name = (char *)in[i].name;
        cs[i].value = in[i].value;
        cp[i] = &cs[i];
    }
    return n;
}

/* The message's Counters into out (at most DPS_STATUS_MAX_COUNTERS); returns how many. */
static size_t s_counts_decode(Dps__Wire__Counter *const *in, size_t n, dps_named_count *out)
{
    n = n < DPS_STATUS_MAX_COUNTERS ? n : DPS_STATUS_MAX_COUNTERS;
    for (size_t i = 0; i < n; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%s", in[i]->name ? in[i]->name : "");
        out[i].value = in[i]->value;
    }
    return n;
}

int wire_status_encode(const dps_collector_status *st, unsigned char **out, size_t *len)
{
    Dps__Wire__StatusReply m = DPS__WIRE__STATUS_REPLY__INIT;
    Dps__Wire__Counter cs[2][DPS_STATUS_MAX_COUNTERS];
    Dps__Wire__Counter *cp[2][DPS_STATUS_MAX_COUNTERS];
    m.version = DPS_WIRE_VERSION;
    m.epoch = st->epoch;
    m.rows_accepted = st->rows_accepted;
    m.n_refusals = s_counts_encode(st->refusals, st->n_refusals, cs[0], cp[0]);
    m.refusals = cp[0];
    m.n_counters = s_counts_encode(st->counters, st->n_counters, cs[1], cp[1]);
    m.counters = cp[1];
    m.buckets_completed = st->buckets_completed;
    m.rows_in_epoch = st->rows_in_epoch;
    m.epoch_rows = st->epoch_rows;
    m.rho_total = st->rho_total;
    m.delta_total = st->delta_total;
    m.eps_total = st->eps_total;
    m.delta_target = st->delta_target;
    m.budget_left = st->budget_left;
    m.budget_unit = (char *)st->budget_unit;
    m.last_snapshot_seq = st->last_snapshot_seq;
    m.uptime_s = st->uptime_s;
    m.d = (uint32_t)st->d;
    m.k = (uint32_t)st->k;
    m.producer_batches = st->producer_batches;
    m.producer_rows = st->producer_rows;
    m.producer_seq_gaps = st->producer_seq_gaps;
    m.producer_refused = st->producer_refused;
    m.credit = st->credit != 0;
    m.credit_seq_end = st->credit_seq_end;
    m.shards = st->shards;
    m.max_batch_rows = st->max_batch_rows;
    m.refused = (char *)st->refused;
    size_t sz = dps__wire__status_reply__get_packed_size(&m);
    *out = malloc(sz ? sz : 1);
    if (!*out)
        return DPS_ENOMEM;
    *len = dps__wire__status_reply__pack(&m, *out);
    return DPS_OK;
}

int wire_status_decode(const unsigned char *buf, size_t len, dps_collector_status *out)
{
    memset(out, 0, sizeof *out);
    Dps__Wire__StatusReply *m = dps__wire__status_reply__unpack(NULL, len, buf);
    if (!m)
        return DPS_EPROTO;
    if (m->version != DPS_WIRE_VERSION) {
        dps__wire__status_reply__free_unpacked(m, NULL);
        return DPS_EPROTO;
    }
    out->epoch = m->epoch;
    out->rows_accepted = m->rows_accepted;
    out->buckets_completed = m->buckets_completed;
    out->rows_in_epoch = m->rows_in_epoch;
    out->epoch_rows = m->epoch_rows;
    out->rho_total = m->rho_total;
    out->delta_total = m->delta_total;
    out->eps_total = m->eps_total;
    out->delta_target = m->delta_target;
    out->budget_left = m->budget_left;
    snprintf(out->budget_unit, sizeof out->budget_unit, "%s", m->budget_unit ? m->budget_unit : "");
    out->last_snapshot_seq = m->last_snapshot_seq;
    out->uptime_s = m->uptime_s;
    out->d = m->d;
    out->k = m->k;
    out->producer_batches = m->producer_batches;
    out->producer_rows = m->producer_rows;
    out->producer_seq_gaps = m->producer_seq_gaps;
    out->producer_refused = m->producer_refused;
    out->credit = m->credit;
    out->credit_seq_end = m->credit_seq_end;
    out->shards = m->shards;
    out->max_batch_rows = m->max_batch_rows;
    snprintf(out->refused, sizeof out->refused, "%s", m->refused ? m->refused : "");
    out->n_refusals = s_counts_decode(m->refusals, m->n_refusals, out->refusals);
    out->n_counters = s_counts_decode(m->counters, m->n_counters, out->counters);
    dps__wire__status_reply__free_unpacked(m, NULL);
    return DPS_OK;
}
