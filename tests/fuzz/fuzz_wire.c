/* fuzz_wire - libFuzzer target for everything the collector and its clients
   decode from the network or disk: RowBatch (with the collector's checks),
   Snapshot, StatusRequest, StatusReply.  Built by tools/fuzz with clang. */
#include "dpsubspace.h"
#include "dpsubspace_net.h"
#include "wire.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_rows wr;
    if (wire_rows_decode(data, size, 16, &wr) == WIRE_OK) {
        volatile float sink = 0;
        for (size_t i = 0; i < wr.n * wr.dim; i++) /* every row byte must be readable */
            sink += wr.rows[i];
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
