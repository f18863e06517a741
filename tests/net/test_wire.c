/* test_wire - the protocol codec: every refusal class of a RowBatch, snapshot
   and status round trips, and random/truncated bytes that must be refused
   without crashing. */
#include "check.h"
#include "dpsubspace.h"
#include "dpsubspace.pb-c.h"
#include "dpsubspace_net.h"
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A RowBatch with chosen (possibly inconsistent) fields. */
static unsigned char *s_batch(uint32_t version, const char *id, uint32_t dim, uint32_t rows, size_t nbytes,
                              size_t *len)
{
    Dps__Wire__RowBatch m = DPS__WIRE__ROW_BATCH__INIT;
    m.version = version;
    m.producer_id = (char *)id;
    m.dim = dim;
    m.rows = rows;
    unsigned char *data = calloc(nbytes ? nbytes : 1, 1);
    for (size_t i = 0; i + 4 <= nbytes; i += 4) {
        float v = 0.5f;
        memcpy(data + i, &v, 4);
    }
    m.data.data = data;
    m.data.len = nbytes;
    *len = dps__wire__row_batch__get_packed_size(&m);
    unsigned char *buf = malloc(*len);
    dps__wire__row_batch__pack(&m, buf);
    free(data);
    return buf;
}

/* Parameter groups (DESIGN 7.2) round-trip, and a snapshot whose groups do
   not tile d and k, or whose two lists differ in length, is refused. */
static void s_test_groups(void)
{
    size_t d = 5, k = 2, gd[2] = {3, 2}, gk[2] = {1, 1};
    float basis[10] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    dps_snapshot_info in;
    memset(&in, 0, sizeof in);
    in.d = d;
    in.k = k;
    in.status = DPS_SNAP_RELEASED;
    in.aggregator = DPS_AGG_GAUSSIAN;
    in.reason = "";
    in.budget_unit = "none";
    in.groups = 2;
    in.group_d = gd;
    in.group_k = gk;
    dps_snapshot *s = NULL, *back = NULL;
    CHECK(dps_snapshot_new(&s, &in, basis) == DPS_OK, "grouped snapshot");
    unsigned char *buf = NULL;
    size_t len = 0;
    CHECK(s && dps_snapshot_encode(s, &buf, &len) == DPS_OK, "grouped encode");
    CHECK(buf && dps_snapshot_decode(buf, len, &back) == DPS_OK, "grouped decode");
    dps_snapshot_info out;
    memset(&out, 0, sizeof out);
    if (back)
        dps_snapshot_get_info(back, &out);
    CHECK(out.groups == 2 && out.group_d && out.group_d[0] == 3 && out.group_d[1] == 2 && out.group_k[0] == 1 &&
              out.group_k[1] == 1,
          "groups round-trip (%zu)", out.groups);
    dps_snapshot_destroy(&back);
    Dps__Wire__Snapshot *m = buf ? dps__wire__snapshot__unpack(NULL, len, buf) : NULL;
    CHECK(m != NULL, "unpack");
    for (int v = 0; m && v < 3; v++) {
        uint32_t saved_d = m->group_d[1], saved_k = m->group_k[1];
        size_t saved_n = m->n_group_k;
        if (v == 0)
            m->group_d[1] = 3; /* widths add up to 6, not d = 5 */
        else if (v == 1)
            m->group_k[1] = 3; /* a rank above its width */
        else
            m->n_group_k = 1; /* one rank for two groups */
        size_t sz = dps__wire__snapshot__get_packed_size(m);
        unsigned char *bad = malloc(sz);
        dps__wire__snapshot__pack(m, bad);
        CHECK(dps_snapshot_decode(bad, sz, &back) == DPS_EPROTO, "malformed groups %d refused", v);
        dps_snapshot_destroy(&back);
        free(bad);
        m->group_d[1] = saved_d;
        m->group_k[1] = saved_k;
        m->n_group_k = saved_n;
    }
    if (m)
        dps__wire__snapshot__free_unpacked(m, NULL);
    in.group_d = NULL;
    CHECK(dps_snapshot_new(&back, &in, basis) == DPS_EINVAL, "groups without their widths refused");
    free(buf);
    dps_snapshot_destroy(&s);
}

/* Bytes of a RowBatch written field by field (what a producer other than
   protobuf-c's may send): wire_rows_decode reads it as protobuf-c does. */
typedef struct { unsigned char b[256]; size_t n; } msg_bytes;

static void s_varint(msg_bytes *m, uint64_t v)
{
    do {
        m->b[m->n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void s_field_varint(msg_bytes *m, uint32_t field, uint64_t v)
{
    s_varint(m, (uint64_t)field << 3);
    s_varint(m, v);
}

static void s_field_bytes(msg_bytes *m, uint32_t field, const void *p, size_t n)
{
    s_varint(m, (uint64_t)field << 3 | 2);
    s_varint(m, n);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

/* version 1, id, dim 2, rows 1, the data {0.5, -2} (field numbers of proto/dpsubspace.proto) */
static void s_plain(msg_bytes *m, const char *id, size_t id_len)
{
    static const float row[2] = {0.5f, -2.0f};
    m->n = 0;
    s_field_varint(m, 1, 1);
    s_field_bytes(m, 2, id, id_len);
    s_field_varint(m, 4, 2);
    s_field_varint(m, 5, 1);
    s_field_bytes(m, 6, row, sizeof row);
}

/* wire_rows_encode writes the same bytes as protobuf-c's pack of the same
   RowBatch (it packs the fields around the payload with protobuf-c and the
   rows itself), for ids empty and full, seqs and streams 0 and large, with
   and without a shard, payloads whose length varint takes 1 to 3 bytes. */
static void s_test_writer(void)
{
    static const char *ids[] = {"", "p", "a-producer-id-of-exactly-sixty-four-bytes-xxxxxxxxxxxxxxxxxxxxxxx"};
    static const uint64_t seqs[] = {0, 1, 300, 0xffffffffffffffffull};
    static const size_t shapes[][2] = {{1, 1}, {3, 4}, {40, 100}, {7, 1000}};
    float *rows = malloc(7 * 1000 * sizeof *rows);
    for (size_t i = 0; i < 7 * 1000; i++)
        rows[i] = (float)i * 0.25f - 17.0f;
    int same = 1, cases = 0;
    for (size_t a = 0; a < sizeof ids / sizeof *ids; a++)
        for (size_t b = 0; b < sizeof seqs / sizeof *seqs; b++)
            for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
                for (int sharded = 0; sharded <= 1; sharded++) {
                    size_t n = shapes[c][0], dim = shapes[c][1];
                    wire_shard sh = {1, 3, (uint32_t)(3 * dim), seqs[(b + 1) % 4]};
                    unsigned char *mine = NULL;
                    size_t mine_len = 0;
                    if (wire_rows_encode(ids[a], seqs[b], rows, n, dim, sharded ? &sh : NULL, &mine, &mine_len) !=
                        DPS_OK) {
                        same = 0;
                        continue;
                    }
                    Dps__Wire__RowBatch m = DPS__WIRE__ROW_BATCH__INIT;
                    m.version = DPS_WIRE_VERSION;
                    m.producer_id = (char *)ids[a];
                    m.seq = seqs[b];
                    m.dim = (uint32_t)dim;
                    m.rows = (uint32_t)n;
                    m.data.data = (uint8_t *)rows; /* a little-endian host's floats are the wire's bytes */
                    m.data.len = n * dim * 4;
                    if (sharded) {
                        m.shard = sh.shard;
                        m.shards = sh.shards;
                        m.full_dim = sh.full_dim;
                        m.stream = sh.stream;
                    }
                    size_t len = dps__wire__row_batch__get_packed_size(&m);
                    unsigned char *ref = malloc(len);
                    dps__wire__row_batch__pack(&m, ref);
                    same &= len == mine_len && memcmp(ref, mine, len) == 0;
                    cases++;
                    free(ref);
                    free(mine);
                }
    CHECK(same, "wire_rows_encode: protobuf-c's bytes in all %d cases", cases);
    free(rows);
}

static void s_test_reader(void)
{
    msg_bytes m;
    wire_rows wr;
    /* the payload at every alignment (the id's length moves it) */
    unsigned offsets = 0; /* bit r: a payload at r mod 4 in the message */
    for (size_t id_len = 1; id_len <= 4; id_len++) {
        s_plain(&m, "abcd", id_len);
        CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_OK && wr.data + 8 == m.b + m.n,
              "id of %zu bytes: read, the rows in place", id_len);
        offsets |= 1u << ((size_t)(wr.data - m.b) % 4);
        CHECK(wire_rows_own(&wr) == DPS_OK && wr.rows[0] == 0.5f && wr.rows[1] == -2.0f && wr.n == 1 &&
                  strlen(wr.producer_id) == id_len,
              "id of %zu bytes: the fields and rows", id_len);
        wire_rows_release(&wr);
    }
    CHECK(offsets == 0xf, "payloads at every offset mod 4 (%#x)", offsets);
    s_plain(&m, "p", 1); /* a field given twice: the last one counts, as in protobuf */
    s_field_varint(&m, 4, 3);
    CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_DIM, "the last dim counts");
    s_plain(&m, "p", 1); /* a field this version does not know: skipped */
    s_field_varint(&m, 99, 5);
    s_field_bytes(&m, 100, "xyz", 3);
    CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_OK, "unknown fields skipped");
    wire_rows_release(&wr);
    s_plain(&m, "p", 1); /* dim sent as bytes: not a RowBatch */
    s_field_bytes(&m, 4, "ab", 2);
    CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_UNDECODABLE, "a known field of the wrong wire type refused");
    s_plain(&m, "p", 1); /* wire type 3 (a group) */
    s_varint(&m, 7u << 3 | 3);
    CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_UNDECODABLE, "a group refused");
    s_plain(&m, "p", 1); /* a length past the end */
    s_varint(&m, 100u << 3 | 2);
    s_varint(&m, 50);
    CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_UNDECODABLE, "a length past the message's end refused");
    s_plain(&m, "ab\0cd", 5); /* protobuf-c would have read "ab" */
    CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_PRODUCER_ID && !wr.producer_id[0],
          "an id with a NUL inside refused, and not kept");
    s_plain(&m, "p", 1);
    m.b[m.n++] = 0; /* field 0 */
    CHECK(wire_rows_decode(m.b, m.n, 2, &wr) == WIRE_UNDECODABLE, "field number 0 refused");
}

int main(void)
{
    s_test_groups();
    /* 1. Rows round trip. */
    float rows[3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    unsigned char *buf = NULL;
    size_t len = 0;
    CHECK(wire_rows_encode("p1", 7, rows, 3, 4, NULL, &buf, &len) == DPS_OK, "encode");
    wire_rows wr;
    CHECK(wire_rows_decode(buf, len, 4, &wr) == WIRE_OK, "decode");
    CHECK(wr.n == 3 && wr.dim == 4 && wr.seq == 7 && strcmp(wr.producer_id, "p1") == 0, "fields");
    CHECK(wr.data >= buf && wr.data + sizeof rows <= buf + len && wr.rows == NULL,
          "the rows are left in the message (no copy)");
    CHECK(wire_rows_own(&wr) == DPS_OK && wr.rows && memcmp(wr.rows, rows, sizeof rows) == 0 && !wr.data,
          "rows bit-exact, in memory the batch owns");
    CHECK(wr.shards == 0 && wr.shard == 0 && wr.full_dim == 0 && wr.stream == 0, "whole rows: no shard fields");
    wire_rows_release(&wr);
    /* a shard's batch carries which slice it is, and its stream */
    {
        wire_shard sh = {2, 3, 11, 0x123456789abcdef0ull};
        unsigned char *sb = NULL;
        size_t sl = 0;
        CHECK(wire_rows_encode("p1", 8, rows, 3, 4, &sh, &sb, &sl) == DPS_OK, "encode a shard");
        CHECK(wire_rows_decode(sb, sl, 4, &wr) == WIRE_OK, "decode a shard");
        CHECK(wr.shard == 2 && wr.shards == 3 && wr.full_dim == 11 && wr.stream == sh.stream && wr.seq == 8,
              "shard fields round trip");
        wire_rows_release(&wr);
        free(sb);
    }
    /* wrong dimension for this collector */
    CHECK(wire_rows_decode(buf, len, 5, &wr) == WIRE_DIM, "wrong dim refused");
    /* truncated at every length: refused, never a crash */
    int all_refused = 1;
    for (size_t cut = 0; cut < len; cut++) {
        wire_reject r = wire_rows_decode(buf, cut, 4, &wr);
        if (r == WIRE_OK) {
            all_refused = 0;
            wire_rows_release(&wr);
        }
    }
    CHECK(all_refused, "every truncation refused");
    free(buf);

    /* 2. Each refusal class. */
    struct { uint32_t ver; const char *id; uint32_t dim, rows; size_t bytes; wire_reject want; } cases[] = {
        {2, "p", 4, 1, 16, WIRE_VERSION},
        {0, "p", 4, 1, 16, WIRE_VERSION},
        {1, "p", 3, 1, 12, WIRE_DIM},
        {1, "p", 4, 0, 0, WIRE_EMPTY},
        {1, "p", 4, 2, 16, WIRE_COUNT},
        {1, "p", 4, 1, 17, WIRE_COUNT},
        {1, "p", 4, 0x40000000u, 16, WIRE_COUNT},
        {1, "a-name-that-is-much-too-long-for-a-producer-id-of-sixty-four-bytes!", 4, 1, 16, WIRE_PRODUCER_ID},
        {1, "bad\nid", 4, 1, 16, WIRE_PRODUCER_ID},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        buf = s_batch(cases[i].ver, cases[i].id, cases[i].dim, cases[i].rows, cases[i].bytes, &len);
        wire_reject r = wire_rows_decode(buf, len, 4, &wr);
        CHECK(r == cases[i].want, "case %zu: got %s want %s", i, wire_reject_name(r), wire_reject_name(cases[i].want));
        if (r == WIRE_OK)
            wire_rows_release(&wr);
        free(buf);
    }
    s_test_reader();
    s_test_writer();
    unsigned char junk[64];
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 1);
    int junk_ok = 0;
    for (int i = 0; i < 2000; i++) {
        size_t n = dps_rng_below(rng, sizeof junk) + 1;
        for (size_t j = 0; j < n; j++)
            junk[j] = (unsigned char)dps_rng_u64(rng);
        wire_reject r = wire_rows_decode(junk, n, 4, &wr);
        if (r == WIRE_OK) {
            junk_ok++;
            wire_rows_release(&wr);
        }
    }
    CHECK(junk_ok == 0, "random bytes accepted %d times", junk_ok);

    /* 3. Snapshot round trip: released, refused. */
    size_t k = 2, d = 5;
    float basis[10] = {1, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    dps_snapshot_info in;
    memset(&in, 0, sizeof in);
    in.epoch = 4;
    in.d = d;
    in.k = k;
    in.status = DPS_SNAP_RELEASED;
    in.epoch_cost = (dps_zcdp){1, 1e-6};
    in.total = (dps_zcdp){5, 5e-6};
    in.eps_total = INFINITY;
    in.delta_target = 1e-5;
    in.radius = 0.25;
    in.seq = 9;
    in.time_unix_ms = 123;
    in.reason = "";
    in.budget_left = 0.5;
    in.budget_unit = "rho";
    in.noise_level = 0.375;
    dps_snapshot *s = NULL, *back = NULL;
    dps_snapshot_new(&s, &in, basis);
    CHECK(dps_snapshot_encode(s, &buf, &len) == DPS_OK, "snapshot encode");
    CHECK(dps_snapshot_decode(buf, len, &back) == DPS_OK, "snapshot decode");
    dps_snapshot_info out;
    dps_snapshot_get_info(back, &out);
    CHECK(out.epoch == 4 && out.seq == 9 && out.time_unix_ms == 123 && out.total.rho == 5 && isinf(out.eps_total),
          "snapshot fields");
    CHECK(out.budget_left == 0.5 && strcmp(out.budget_unit, "rho") == 0, "budget left round-trips (%g %s)",
          out.budget_left, out.budget_unit);
    CHECK(out.noise_level == 0.375, "noise level round-trips (%g)", out.noise_level);
    CHECK(memcmp(dps_snapshot_basis(back), basis, sizeof basis) == 0, "basis bit-exact");
    dps_snapshot_destroy(&back);
    for (size_t cut = 0; cut < len; cut += 3) {
        if (dps_snapshot_decode(buf, cut, &back) == DPS_OK) {
            /* a prefix may decode as a valid message only if every required field is intact */
            dps_snapshot_get_info(back, &out);
            CHECK(dps_snapshot_basis(back) != NULL, "prefix decoded without basis");
            dps_snapshot_destroy(&back);
        }
    }
    free(buf);
    dps_snapshot_destroy(&s);
    /* the histogram, covariance, gaussian, power and kron values round-trip; an unknown value is refused */
    for (int a = DPS_AGG_HISTOGRAM; a <= DPS_AGG_KRON; a++) {
        in.aggregator = (dps_aggregator)a;
        dps_snapshot_new(&s, &in, basis);
        dps_snapshot_encode(s, &buf, &len);
        CHECK(dps_snapshot_decode(buf, len, &back) == DPS_OK, "%s snapshot decodes", dps_aggregator_name(a));
        dps_snapshot_get_info(back, &out);
        CHECK(out.aggregator == (dps_aggregator)a, "%s aggregator round-trips", dps_aggregator_name(a));
        dps_snapshot_destroy(&back);
        free(buf);
        dps_snapshot_destroy(&s);
    }
    {
        Dps__Wire__Snapshot *mm = NULL;
        in.aggregator = DPS_AGG_REFERENCE;
        dps_snapshot_new(&s, &in, basis);
        dps_snapshot_encode(s, &buf, &len);
        mm = dps__wire__snapshot__unpack(NULL, len, buf);
        free(buf);
        mm->aggregator = (Dps__Wire__Aggregator)(DPS_AGG_KRON + 1); /* one past the table's last */
        len = dps__wire__snapshot__get_packed_size(mm);
        buf = malloc(len);
        dps__wire__snapshot__pack(mm, buf);
        dps__wire__snapshot__free_unpacked(mm, NULL);
        CHECK(dps_snapshot_decode(buf, len, &back) == DPS_EPROTO, "unknown aggregator refused");
        free(buf);
        dps_snapshot_destroy(&s);
    }
    /* v = 0: no cap, infinity and "none" round-trip; 1: a unit we do not know,
       2: a NaN budget, 4: a negative one, are refused; 3: an older collector's
       snapshot (no budget fields) decodes with the unit "" (not known) */
    for (int v = 0; v < 5; v++) {
        in.budget_left = INFINITY;
        in.budget_unit = "none";
        dps_snapshot_new(&s, &in, basis);
        dps_snapshot_encode(s, &buf, &len);
        Dps__Wire__Snapshot *mm = dps__wire__snapshot__unpack(NULL, len, buf);
        free(buf);
        static char bogus[] = "joules", empty[] = "";
        char *unit = mm->budget_unit; /* unpack's own: put back before freeing */
        if (v == 1)
            mm->budget_unit = bogus;
        if (v == 2 || v == 4)
            mm->budget_left = v == 2 ? NAN : -1;
        if (v == 3) {
            mm->budget_unit = empty;
            mm->budget_left = 0;
        }
        len = dps__wire__snapshot__get_packed_size(mm);
        buf = malloc(len);
        dps__wire__snapshot__pack(mm, buf);
        mm->budget_unit = unit;
        dps__wire__snapshot__free_unpacked(mm, NULL);
        int rc = dps_snapshot_decode(buf, len, &back);
        if (v == 0 || v == 3) {
            CHECK(rc == DPS_OK, "budget case %d decodes", v);
            if (rc == DPS_OK) {
                dps_snapshot_get_info(back, &out);
                CHECK(v == 0 ? isinf(out.budget_left) && strcmp(out.budget_unit, "none") == 0
                             : strcmp(out.budget_unit, "") == 0,
                      "budget case %d: %g '%s'", v, out.budget_left, out.budget_unit);
            }
        } else {
            CHECK(rc == DPS_EPROTO, "budget case %d refused", v);
        }
        dps_snapshot_destroy(&back);
        free(buf);
        dps_snapshot_destroy(&s);
    }
    /* The noise level: NaN (v = 0), negative (1) or infinite (2) is refused;
       0 (3: not computed, or an older collector) decodes as 0. */
    for (int v = 0; v < 4; v++) {
        in.budget_left = 0.5;
        in.budget_unit = "rho";
        dps_snapshot_new(&s, &in, basis);
        dps_snapshot_encode(s, &buf, &len);
        Dps__Wire__Snapshot *mm = dps__wire__snapshot__unpack(NULL, len, buf);
        free(buf);
        mm->noise_level = v == 0 ? NAN : v == 1 ? -0.5 : v == 2 ? INFINITY : 0;
        len = dps__wire__snapshot__get_packed_size(mm);
        buf = malloc(len);
        dps__wire__snapshot__pack(mm, buf);
        dps__wire__snapshot__free_unpacked(mm, NULL);
        int rc = dps_snapshot_decode(buf, len, &back);
        if (v == 3) {
            CHECK(rc == DPS_OK, "noise level 0 decodes");
            if (rc == DPS_OK) {
                dps_snapshot_get_info(back, &out);
                CHECK(out.noise_level == 0, "noise level 0 (not computed): %g", out.noise_level);
            }
        } else {
            CHECK(rc == DPS_EPROTO, "noise level case %d refused", v);
        }
        dps_snapshot_destroy(&back);
        free(buf);
        dps_snapshot_destroy(&s);
    }
    in.budget_left = 0.5;
    in.budget_unit = "rho";
    in.status = DPS_SNAP_REFUSED;
    in.reason = "cap";
    dps_snapshot_new(&s, &in, NULL);
    dps_snapshot_encode(s, &buf, &len);
    CHECK(dps_snapshot_decode(buf, len, &back) == DPS_OK, "refused decodes");
    dps_snapshot_get_info(back, &out);
    CHECK(out.status == DPS_SNAP_REFUSED && strcmp(out.reason, "cap") == 0 && !dps_snapshot_basis(back), "refused");
    dps_snapshot_destroy(&back);
    free(buf);
    dps_snapshot_destroy(&s);
    /* invalid snapshots: k >= d, wrong basis length, NaN in basis */
    Dps__Wire__Snapshot m = DPS__WIRE__SNAPSHOT__INIT;
    m.version = 1;
    m.d = 3;
    m.k = 3;
    len = dps__wire__snapshot__get_packed_size(&m);
    buf = malloc(len);
    dps__wire__snapshot__pack(&m, buf);
    CHECK(dps_snapshot_decode(buf, len, &back) == DPS_EPROTO, "k >= d refused");
    free(buf);
    float nanb[6] = {NAN, 0, 0, 0, 1, 0};
    m.k = 2;
    m.basis.data = (uint8_t *)nanb;
    m.basis.len = 4 * 5;
    len = dps__wire__snapshot__get_packed_size(&m);
    buf = malloc(len);
    dps__wire__snapshot__pack(&m, buf);
    CHECK(dps_snapshot_decode(buf, len, &back) == DPS_EPROTO, "wrong basis length refused");
    free(buf);
    m.basis.len = 4 * 6;
    len = dps__wire__snapshot__get_packed_size(&m);
    buf = malloc(len);
    dps__wire__snapshot__pack(&m, buf);
    CHECK(dps_snapshot_decode(buf, len, &back) == DPS_EPROTO, "NaN basis refused");
    free(buf);

    /* 4. Status round trip. */
    dps_collector_status st, st2;
    memset(&st, 0, sizeof st);
    st.epoch = 3;
    st.rows_accepted = 1000;
    st.budget_left = INFINITY;
    snprintf(st.budget_unit, sizeof st.budget_unit, "none");
    st.rho_total = 1.5;
    st.n_refusals = 2;
    snprintf(st.refusals[0].name, 32, "wrong_dim");
    st.refusals[0].value = 4;
    snprintf(st.refusals[1].name, 32, "auth_refused");
    st.refusals[1].value = 1;
    st.n_counters = 1;
    snprintf(st.counters[0].name, 32, "rows_nan");
    st.counters[0].value = 2;
    CHECK(wire_status_encode(&st, &buf, &len) == DPS_OK, "status encode");
    CHECK(wire_status_decode(buf, len, &st2) == DPS_OK, "status decode");
    CHECK(st2.epoch == 3 && st2.rows_accepted == 1000 && st2.rho_total == 1.5 && isinf(st2.budget_left),
          "status fields");
    CHECK(st2.n_refusals == 2 && strcmp(st2.refusals[0].name, "wrong_dim") == 0 && st2.refusals[0].value == 4 &&
              strcmp(st2.refusals[1].name, "auth_refused") == 0 && st2.refusals[1].value == 1,
          "status refusals, apart from ...");
    CHECK(st2.n_counters == 1 && strcmp(st2.counters[0].name, "rows_nan") == 0 && st2.counters[0].value == 2,
          "... the other counters");
    free(buf);
    wire_status_request q = {.producer_id = "p7"}, got;
    CHECK(wire_status_request_encode(&q, &buf, &len) == DPS_OK && wire_status_request_decode(buf, len, &got) == DPS_OK &&
              strcmp(got.producer_id, "p7") == 0 && got.credit_from == 0 && got.credit_seq_end == 0 && got.run == 0,
          "request with producer id, no credit question, no run");
    free(buf);
    q.credit_from = 5;
    q.credit_seq_end = 69;
    q.run = 0xfedcba9876543211ull;
    CHECK(wire_status_request_encode(&q, &buf, &len) == DPS_OK && wire_status_request_decode(buf, len, &got) == DPS_OK &&
              got.credit_from == 5 && got.credit_seq_end == 69 && got.run == q.run,
          "credit question of a run: from %llu want %llu", (unsigned long long)got.credit_from,
          (unsigned long long)got.credit_seq_end);
    free(buf);
    q.producer_id[0] = 0;
    CHECK(wire_status_request_encode(&q, &buf, &len) == DPS_OK &&
              wire_status_request_decode(buf, len, &got) == DPS_EPROTO, "credit question without an id");
    free(buf);
    snprintf(q.producer_id, sizeof q.producer_id, "p7");
    q.credit_from = 70;
    CHECK(wire_status_request_encode(&q, &buf, &len) == DPS_OK &&
              wire_status_request_decode(buf, len, &got) == DPS_EPROTO, "credit question ending before it starts");
    free(buf);
    /* the batch limit and a refusal travel in the reply */
    dps_collector_status lim = {0}, lim2;
    lim.max_batch_rows = 1643;
    snprintf(lim.refused, sizeof lim.refused, "key_revoked");
    CHECK(wire_status_encode(&lim, &buf, &len) == DPS_OK && wire_status_decode(buf, len, &lim2) == DPS_OK &&
              lim2.max_batch_rows == 1643 && strcmp(lim2.refused, "key_revoked") == 0,
          "max_batch_rows and refused round trip");
    free(buf);
    st.credit = 1;
    st.credit_seq_end = 12;
    CHECK(wire_status_encode(&st, &buf, &len) == DPS_OK && wire_status_decode(buf, len, &st2) == DPS_OK &&
          st2.credit == 1 && st2.credit_seq_end == 12, "credit in the reply");
    free(buf);
    st.credit = 0;
    st.credit_seq_end = 0;
    CHECK(wire_status_encode(&st, &buf, &len) == DPS_OK && wire_status_decode(buf, len, &st2) == DPS_OK &&
          st2.credit == 0, "an old collector's reply: no credit");
    free(buf);

    /* 5. Endpoint locality (the plaintext rule). */
    CHECK(dps_endpoint_is_local("tcp://127.0.0.1:5555") && dps_endpoint_is_local("ipc:///tmp/x") &&
          dps_endpoint_is_local("tcp://[::1]:5") && dps_endpoint_is_local("tcp://localhost:5"), "local endpoints");
    CHECK(!dps_endpoint_is_local("tcp://10.0.0.1:5555") && !dps_endpoint_is_local("tcp://*:5555") &&
          !dps_endpoint_is_local("tcp://localhost.evil.com:5") && !dps_endpoint_is_local(NULL), "non-local endpoints");

    /* A sharded collector's endpoints and slices (one rule for producers and ranks). */
    char ep[64];
    CHECK(dps_shard_endpoint("tcp://127.0.0.1:7780", 0, ep, sizeof ep) == DPS_OK && !strcmp(ep, "tcp://127.0.0.1:7780"),
          "shard 0 is --ingest itself");
    CHECK(dps_shard_endpoint("tcp://127.0.0.1:7780", 3, ep, sizeof ep) == DPS_OK && !strcmp(ep, "tcp://127.0.0.1:7783"),
          "shard 3: port + 3 (%s)", ep);
    CHECK(dps_shard_endpoint("tcp://[::1]:7780", 1, ep, sizeof ep) == DPS_OK && !strcmp(ep, "tcp://[::1]:7781"),
          "an IPv6 host keeps its colons (%s)", ep);
    CHECK(dps_shard_endpoint("ipc:///tmp/c.in", 2, ep, sizeof ep) == DPS_OK && !strcmp(ep, "ipc:///tmp/c.in-2"),
          "ipc: path-2 (%s)", ep);
    CHECK(dps_shard_endpoint("tcp://a:1,ipc:///x,tcp://b:2", 1, ep, sizeof ep) == DPS_OK && !strcmp(ep, "ipc:///x") &&
              dps_shard_endpoint("tcp://a:1,ipc:///x,tcp://b:2", 2, ep, sizeof ep) == DPS_OK && !strcmp(ep, "tcp://b:2"),
          "a list: the shard-th item");
    CHECK(dps_shard_endpoint("tcp://a:1,tcp://b:2", 2, ep, sizeof ep) == DPS_EINVAL, "a list too short refused");
    CHECK(dps_shard_endpoint("tcp://a:65535", 1, ep, sizeof ep) == DPS_EINVAL, "a port past 65535 refused");
    CHECK(dps_shard_endpoint("tcp://a", 1, ep, sizeof ep) == DPS_EINVAL, "no port refused");
    CHECK(dps_shard_endpoint("inproc://x", 1, ep, sizeof ep) == DPS_EINVAL, "inproc has no ranks");
    CHECK(dps_shard_endpoint("tcp://127.0.0.1:7780", 1, ep, 8) == DPS_EINVAL, "a buffer too small refused");
    /* slices: contiguous, covering [0, d), widths differing by at most 1 */
    int tiled = 1;
    for (size_t d = 1; d < 40; d++)
        for (size_t n = 1; n <= d; n++) {
            size_t next = 0, lo = d, hi = 0;
            for (size_t r = 0; r < n; r++) {
                size_t c0, c1;
                dps_shard_slice(d, n, r, &c0, &c1);
                tiled &= c0 == next && c1 > c0;
                next = c1;
                lo = c1 - c0 < lo ? c1 - c0 : lo;
                hi = c1 - c0 > hi ? c1 - c0 : hi;
            }
            tiled &= next == d && hi - lo <= 1;
        }
    CHECK(tiled, "dps_shard_slice tiles [0, d) evenly for every d < 40 and shards <= d");
    dps_rng_destroy(&rng);
    return check_summary();
}
