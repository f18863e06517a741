/* wire.c - protocol messages <-> dps_ types, with validation (see wire.h). */
#include "wire.h"
#include "dpsubspace.pb-c.h"

#include <math.h>
#include <stddef.h>
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

/* ---------------------------------------------------------------- rows */
/* RowBatch is read by hand, so that its payload is left where it arrived
   (protobuf-c copies every bytes field): the rows are read once, by the
   row_unit_le that puts them into the unit ball.  The field numbers and
   types are the generated descriptor's (proto/dpsubspace.proto is the one
   place they are stated); the reading is protobuf-c's, case for case: a
   message protobuf-c refuses is refused, and one it accepts gives the same
   fields (tests/fuzz/fuzz_wire.c compares the two on every input). */
static const unsigned char *s_varint(const unsigned char *p, size_t rem, size_t max, size_t *used)
{
    size_t lim = rem < max ? rem : max;
    for (size_t i = 0; i < lim; i++)
        if (!(p[i] & 0x80)) {
            *used = i + 1;
            return p;
        }
    return NULL;
}

/* protobuf-c's value of a varint of n bytes (1..10) read as a uint32: the
   first five bytes, the fifth unmasked and the bits above 32 dropped. */
static uint32_t s_u32(const unsigned char *p, size_t n)
{
    uint32_t v = 0;
    for (size_t i = 0; i < n && i < 4; i++)
        v |= (uint32_t)(p[i] & 0x7f) << (7 * i);
    if (n > 4)
        v |= (uint32_t)p[4] << 28;
    return v;
}

/* ... as a uint64: a varint shorter than five bytes as a uint32, else every
   byte's seven bits. */
static uint64_t s_u64(const unsigned char *p, size_t n)
{
    if (n < 5)
        return s_u32(p, n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    return v;
}

int wire_row_fields_parse(const unsigned char *buf, size_t len, wire_row_fields *f)
{
    memset(f, 0, sizeof *f);
    const ProtobufCMessageDescriptor *desc = &dps__wire__row_batch__descriptor;
    const unsigned char *p = buf;
    size_t rem = len;
    while (rem > 0) {
        /* the tag: field number and wire type, at most five bytes, field 0 refused */
        if ((p[0] & 0xf8) == 0)
            return -1;
        size_t used;
        if (!s_varint(p, rem, 5, &used))
            return -1;
        uint32_t tag = (uint32_t)(p[0] & 0x7f) >> 3;
        for (size_t i = 1; i < used; i++)
            tag |= (uint32_t)(p[i] & 0x7f) << (4 + 7 * (i - 1));
        unsigned wire_type = p[0] & 7;
        p += used;
        rem -= used;
        size_t field_len, prefix = 0;
        switch (wire_type) {
        case PROTOBUF_C_WIRE_TYPE_VARINT:
            if (!s_varint(p, rem, 10, &field_len))
                return -1;
            break;
        case PROTOBUF_C_WIRE_TYPE_64BIT:
            if (rem < 8)
                return -1;
            field_len = 8;
            break;
        case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
            if (!s_varint(p, rem, 5, &prefix))
                return -1;
            uint64_t n = 0;
            for (size_t i = 0; i < prefix; i++)
                n |= (uint64_t)(p[i] & 0x7f) << (7 * i);
            if (n > WIRE_MAX_FIELD_BYTES || prefix + n > rem)
                return -1;
            field_len = prefix + (size_t)n;
            break;
        }
        case PROTOBUF_C_WIRE_TYPE_32BIT:
            if (rem < 4)
                return -1;
            field_len = 4;
            break;
        default:
            return -1;
        }
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(desc, tag);
        if (fd) { /* a known field; an unknown one is skipped, as protobuf-c keeps it aside */
            int bytes = fd->type == PROTOBUF_C_TYPE_STRING || fd->type == PROTOBUF_C_TYPE_BYTES;
            if (wire_type != (bytes ? PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED : PROTOBUF_C_WIRE_TYPE_VARINT))
                return -1; /* every RowBatch field is a varint or length-prefixed */
            uint32_t u32 = s_u32(p, field_len);
            switch (fd->offset) { /* the last occurrence of a field wins */
            case offsetof(Dps__Wire__RowBatch, version): f->version = u32; break;
            case offsetof(Dps__Wire__RowBatch, dim): f->dim = u32; break;
            case offsetof(Dps__Wire__RowBatch, rows): f->rows = u32; break;
            case offsetof(Dps__Wire__RowBatch, shard): f->shard = u32; break;
            case offsetof(Dps__Wire__RowBatch, shards): f->shards = u32; break;
            case offsetof(Dps__Wire__RowBatch, full_dim): f->full_dim = u32; break;
            case offsetof(Dps__Wire__RowBatch, seq): f->seq = s_u64(p, field_len); break;
            case offsetof(Dps__Wire__RowBatch, stream): f->stream = s_u64(p, field_len); break;
            case offsetof(Dps__Wire__RowBatch, producer_id):
                f->producer_id = p + prefix;
                f->producer_id_len = field_len - prefix;
                break;
            case offsetof(Dps__Wire__RowBatch, data):
                f->data = p + prefix;
                f->data_len = field_len - prefix;
                break;
            default: return -1; /* a field this reader does not know: the schema grew */
            }
        }
        p += field_len;
        rem -= field_len;
    }
    return 0;
}

/* A producer id is at most WIRE_MAX_PRODUCER_ID printable bytes (no control
   character, NUL included). */
static int s_id_ok(const unsigned char *id, size_t n)
{
    if (n > WIRE_MAX_PRODUCER_ID)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (id[i] < 0x20 || id[i] == 0x7f)
            return 0;
    return 1;
}

wire_reject wire_rows_decode(const unsigned char *buf, size_t len, size_t expect_dim, wire_rows *out)
{
    memset(out, 0, sizeof *out);
    wire_row_fields f;
    if (wire_row_fields_parse(buf, len, &f) != 0)
        return WIRE_UNDECODABLE;
    wire_reject r = WIRE_OK;
    if (f.version != DPS_WIRE_VERSION)
        r = WIRE_VERSION;
    else if (f.dim != expect_dim)
        r = WIRE_DIM;
    else if (f.rows == 0)
        r = WIRE_EMPTY;
    else if ((uint64_t)f.rows * f.dim > SIZE_MAX / 4 || f.data_len != (size_t)f.rows * f.dim * 4)
        r = WIRE_COUNT;
    else if (!s_id_ok(f.producer_id, f.producer_id_len))
        r = WIRE_PRODUCER_ID;
    out->stream = f.stream; /* a refused batch keeps its run and (valid) id: the refusal is counted for its producer */
    if (f.producer_id_len && s_id_ok(f.producer_id, f.producer_id_len)) {
        memcpy(out->producer_id, f.producer_id, f.producer_id_len);
        out->producer_id[f.producer_id_len] = 0;
    }
    if (r != WIRE_OK)
        return r;
    out->data = f.data;
    out->n = f.rows;
    out->dim = f.dim;
    out->seq = f.seq;
    out->shard = f.shard;
    out->shards = f.shards;
    out->full_dim = f.full_dim;
    return WIRE_OK;
}

int wire_rows_own(wire_rows *r)
{
    if (r->owned)
        return DPS_OK;
    r->owned = malloc(r->n * r->dim * sizeof(float) + 1);
    if (!r->owned)
        return DPS_ENOMEM;
    if (r->n && r->dim) /* a refused batch holds none */
        s_le_to_host(r->data, r->owned, r->n * r->dim);
    r->rows = r->owned;
    r->data = NULL;
    return DPS_OK;
}

void wire_rows_release(wire_rows *r)
{
    free(r->owned);
    memset(r, 0, sizeof *r);
}

/* The fields before the payload and those after it are packed by
   protobuf-c (fields in the .proto's order, zeros left out), the payload's
   key and length by hand between them, and the rows written once, straight
   into the message: the same bytes as protobuf-c's pack of the whole message
   (test_wire), without the two copies of the rows it needs. */
static size_t s_put_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

int wire_rows_encode(const char *producer_id, uint64_t seq, const float *rows, size_t n, size_t dim,
                     const wire_shard *shard, unsigned char **out, size_t *len)
{
    if (n == 0 || dim == 0 || n > UINT32_MAX || dim > UINT32_MAX || n > SIZE_MAX / 4 / dim)
        return DPS_EINVAL;
    Dps__Wire__RowBatch head = DPS__WIRE__ROW_BATCH__INIT, tail = DPS__WIRE__ROW_BATCH__INIT;
    head.version = DPS_WIRE_VERSION;
    head.producer_id = (char *)(producer_id ? producer_id : "");
    head.seq = seq;
    head.dim = (uint32_t)dim;
    head.rows = (uint32_t)n;
    if (shard) {
        tail.shard = shard->shard;
        tail.shards = shard->shards;
        tail.full_dim = shard->full_dim;
        tail.stream = shard->stream;
    }
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(&dps__wire__row_batch__descriptor, "data");
    size_t payload = n * dim * 4;
    unsigned char key[20];
    size_t klen = s_put_varint(key, (uint64_t)fd->id << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
    klen += s_put_varint(key + klen, payload);
    size_t hs = dps__wire__row_batch__get_packed_size(&head), ts = dps__wire__row_batch__get_packed_size(&tail);
    *out = malloc(hs + klen + payload + ts);
    if (!*out)
        return DPS_ENOMEM;
    unsigned char *at = *out;
    at += dps__wire__row_batch__pack(&head, at);
    memcpy(at, key, klen);
    at += klen;
    s_host_to_le(rows, at, n * dim);
    at += payload;
    at += dps__wire__row_batch__pack(&tail, at);
    *len = (size_t)(at - *out);
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
