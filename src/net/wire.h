/* wire.h - encode/decode the protocol messages of proto/dpsubspace.proto and
   validate every field on arrival.  Private: the generated protobuf-c types
   never leave src/net. */
#ifndef DPS_WIRE_H
#define DPS_WIRE_H

#include "dpsubspace_net.h"
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAX_PRODUCER_ID 64
/* The longest field protobuf reads (its length prefixes stop at INT_MAX,
   protobuf-c's and wire_row_fields_parse's alike): a batch's rows are at
   most this many bytes. */
#define WIRE_MAX_FIELD_BYTES 2147483647u

/* Why a RowBatch message was refused as a whole (it carries no rows). */
typedef enum {
    WIRE_OK = 0,
    WIRE_UNDECODABLE,  /* not a RowBatch (garbage, truncated)          */
    WIRE_VERSION,      /* a protocol version we do not speak           */
    WIRE_DIM,          /* dim differs from the collector's d            */
    WIRE_COUNT,        /* rows * dim * 4 != bytes of data, or overflow  */
    WIRE_EMPTY,        /* rows == 0                                    */
    WIRE_PRODUCER_ID,  /* producer id too long or not printable         */
    WIRE_REPLAYED,     /* a seq of its run the collector already passed (set by the collector) */
    WIRE_SLICE,        /* a sharded producer's slice at a one-process collector (set by it) */
    WIRE_REJECT_COUNT_
} wire_reject;

/* Stable names used in logs and status counters: "undecodable", ... */
const char *wire_reject_name(wire_reject r);

/* A decoded batch.  data is its rows as sent, n * dim little-endian float32
   inside the message decoded (at any alignment: row_unit_le reads them
   there), valid while that message is; wire_rows_own copies them into
   rows, host-order floats the batch owns, for a batch kept longer (rows is
   NULL until then).  Release with wire_rows_release.  A batch refused
   after it parsed still carries its producer_id (if valid) and stream, and
   nothing else, so that the refusal is counted for its producer's run. */
typedef struct {
    const unsigned char *data;
    const float *rows;
    float *owned;
    size_t n, dim;
    uint64_t seq;
    char producer_id[WIRE_MAX_PRODUCER_ID + 1];
    uint32_t shard, shards, full_dim; /* shards 0: whole rows (proto's RowBatch) */
    uint64_t stream;
} wire_rows;

/* Which slice of its rows a batch holds (a sharded producer's; shards 0:
   whole rows), and the producer's run (stream, proto's RowBatch). */
typedef struct {
    uint32_t shard, shards, full_dim;
    uint64_t stream;
} wire_shard;

wire_reject wire_rows_decode(const unsigned char *buf, size_t len, size_t expect_dim, wire_rows *out);
/* The rows into memory the batch owns (DPS_OK, or DPS_ENOMEM: unchanged). */
int wire_rows_own(wire_rows *r);
void wire_rows_release(wire_rows *r);

/* A RowBatch's fields as the message holds them (producer_id and data point
   into it); the fields it does not name are 0.  0, or -1 if buf is not a
   RowBatch (what protobuf-c's unpack refuses).  wire_rows_decode's reader,
   apart so that the fuzzer can hold it against protobuf-c's. */
typedef struct {
    uint32_t version, dim, rows, shard, shards, full_dim;
    uint64_t seq, stream;
    const unsigned char *producer_id, *data;
    size_t producer_id_len, data_len;
} wire_row_fields;
int wire_row_fields_parse(const unsigned char *buf, size_t len, wire_row_fields *f);
/* *out is malloc'd; the caller frees it.  shard: NULL for whole rows of a
   producer that names no run. */
int wire_rows_encode(const char *producer_id, uint64_t seq, const float *rows, size_t n, size_t dim,
                     const wire_shard *shard, unsigned char **out, size_t *len);

/* A status question (proto/dpsubspace.proto's StatusRequest): producer_id
   ("" : none), the producer's run (0: none named), and its credit question
   (credit_seq_end 0: none). */
typedef struct {
    char producer_id[WIRE_MAX_PRODUCER_ID + 1];
    uint64_t run, credit_from, credit_seq_end;
} wire_status_request;

int wire_status_request_encode(const wire_status_request *q, unsigned char **out, size_t *len);
/* DPS_OK and the question (a credit question needs an id and credit_from <=
   credit_seq_end), or DPS_EPROTO. */
int wire_status_request_decode(const unsigned char *buf, size_t len, wire_status_request *q);
int wire_status_encode(const dps_collector_status *st, unsigned char **out, size_t *len);
int wire_status_decode(const unsigned char *buf, size_t len, dps_collector_status *out);

#endif
