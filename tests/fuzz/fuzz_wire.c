/* fuzz_wire - libFuzzer target for everything the collector and its clients
   decode from the network or disk: RowBatch (with the collector's checks),
   Snapshot, StatusRequest, StatusReply.  RowBatch is read by wire.c's own
   reader (the payload left in place): every input is also unpacked by
   protobuf-c, and the two must agree on whether it is a RowBatch and on
   every field.  Built by tools/fuzz with clang. */
#include "dpsubspace.h"
#include "dpsubspace.pb-c.h"
#include "dpsubspace_net.h"
#include "rows.h"
#include "wire.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* wire_row_fields_parse against protobuf-c's unpack: abort on a difference.
   protobuf-c's producer_id is a C string: it ends at the first NUL. */
static void s_same_as_protobuf_c(const uint8_t *data, size_t size)
{
    wire_row_fields f;
    int mine = wire_row_fields_parse(data, size, &f);
    Dps__Wire__RowBatch *m = dps__wire__row_batch__unpack(NULL, size, data);
    if ((mine == 0) != (m != NULL))
        abort();
    if (!m)
        return;
    size_t id_len = f.producer_id ? strnlen((const char *)f.producer_id, f.producer_id_len) : 0;
    if (m->version != f.version || m->dim != f.dim || m->rows != f.rows || m->shard != f.shard ||
        m->shards != f.shards || m->full_dim != f.full_dim || m->seq != f.seq || m->stream != f.stream ||
        strlen(m->producer_id) != id_len || (id_len && memcmp(m->producer_id, f.producer_id, id_len) != 0) ||
        m->data.len != f.data_len || (f.data_len && memcmp(m->data.data, f.data, f.data_len) != 0))
        abort();
    dps__wire__row_batch__free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_same_as_protobuf_c(data, size);
    wire_rows wr;
    if (wire_rows_decode(data, size, 16, &wr) == WIRE_OK) {
        float row[16];
        volatile float sink = 0;
        for (size_t i = 0; i < wr.n; i++) { /* every row byte must be readable, in place */
            row_unit_le(wr.data + i * 16 * 4, 16, ROW_NORMALISE, row);
            sink += row[0];
        }
        if (wire_rows_own(&wr) == DPS_OK) /* and as a copy the batch owns */
            sink += wr.rows[wr.n * 16 - 1];
        (void)sink;
        wire_rows_release(&wr);
    }
    dps_snapshot *s = NULL;
    if (dps_snapshot_decode(data, size, &s) == DPS_OK) {
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        const float *b = dps_snapshot_basis(s);
        volatile float sink = 0;
        for (size_t i = 0; b && i < in.k * in.d; i++)
            sink += b[i];
        (void)sink;
        unsigned char *out = NULL;
        size_t len = 0;
        if (dps_snapshot_encode(s, &out, &len) == DPS_OK) /* what decodes re-encodes */
            free(out);
        dps_snapshot_destroy(&s);
    }
    wire_status_request q;
    wire_status_request_decode(data, size, &q);
    dps_collector_status st;
    wire_status_decode(data, size, &st);
    return 0;
}
