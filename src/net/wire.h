/* wire.h - encode/decode the protocol messages of proto/dpsubspace.proto and
   validate every field on arrival.  Private: the generated protobuf-c types
   never leave src/net. */
#ifndef DPS_WIRE_H
#define DPS_WIRE_H

#include "dpsubspace_net.h"
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAX_PRODUCER_ID 64

/* Why a RowBatch message was refused as a whole (it carries no rows). */
typedef enum {
    WIRE_OK = 0,
    WIRE_UNDECODABLE,  /* not a RowBatch (garbage, truncated)          */
    WIRE_VERSION,      /* a protocol version we do not speak           */
    WIRE_DIM,          /* dim differs from the collector's d            */
    WIRE_COUNT,        /* rows * dim * 4 != bytes of data, or overflow  */
    WIRE_EMPTY,        /* rows == 0                                    */
    WIRE_PRODUCER_ID,  /* producer id too long or not printable         */
    WIRE_REJECT_COUNT_
} wire_reject;

/* Stable names used in logs and status counters: "undecodable", ... */
const char *wire_reject_name(wire_reject r);

/* A decoded batch.  rows points into the decoded message or into owned
   (an aligned, host-order copy); release with wire_rows_release.  A batch
   refused after it decoded still carries its producer_id (and nothing else). */
typedef struct {
    void *msg;
    float *owned;
    const float *rows;
    size_t n, dim;
    uint64_t seq;
    char producer_id[WIRE_MAX_PRODUCER_ID + 1];
    uint32_t shard, shards, full_dim; /* shards 0: whole rows (proto's RowBatch) */
    uint64_t stream;
} wire_rows;

/* Which slice of its rows a batch holds (a sharded producer's). */
typedef struct {
    uint32_t shard, shards, full_dim;
    uint64_t stream;
} wire_shard;

wire_reject wire_rows_decode(const unsigned char *buf, size_t len, size_t expect_dim, wire_rows *out);
void wire_rows_release(wire_rows *r);
/* *out is malloc'd; the caller frees it.  shard: NULL for whole rows. */
int wire_rows_encode(const char *producer_id, uint64_t seq, const float *rows, size_t n, size_t dim,
                     const wire_shard *shard, unsigned char **out, size_t *len);

/* credit_seq_end 0: no question about credit (proto/dpsubspace.proto). */
int wire_status_request_encode(const char *producer_id, uint64_t credit_from, uint64_t credit_seq_end,
                               unsigned char **out, size_t *len);
/* DPS_OK and the producer id asked ("" if none) with its credit question
   (0, 0: none), or DPS_EPROTO. */
int wire_status_request_decode(const unsigned char *buf, size_t len, char producer_id[WIRE_MAX_PRODUCER_ID + 1],
                               uint64_t *credit_from, uint64_t *credit_seq_end);
int wire_status_encode(const dps_collector_status *st, unsigned char **out, size_t *len);
int wire_status_decode(const unsigned char *buf, size_t len, dps_collector_status *out);

#endif
