/* bench_ingest.h - what bench-ingest's two files share: its options, one
   measurement's result, and the references of bench_ingest_ref.c (a RowBatch
   encoded by hand, the bare PULL sink and its PUSH, and (b)'s in-process
   references). */
#ifndef DPS_BENCH_INGEST_H
#define DPS_BENCH_INGEST_H

#include "bench_ingest_net.h"

typedef struct {
    size_t ds[8], nd, k, batch;
    double batch_mb, seconds, max_mb;
    size_t window;
    int workers;
    const char *collector, *transport;
    const char *aggregator; /* the collector's and the in-process reference's */
    int do_plain, do_curve, do_raw, do_api, do_a, do_b;
    const char *coll_args[9];
    int ncoll_args;
} opts;

typedef struct {
    int ok;
    double rows, msgs, bytes, secs; /* measured */
    double send_secs;               /* until the last send returned */
    double our_cpu;                 /* this process, % of a core */
    double coll_cpu, coll_main;     /* collector, % of a core */
    uint64_t epochs, buckets;
    double coll_rss;
    double stall_batch_ms, stall_publish_ms; /* the collector's "ingest stalls" log line (-1: none) */
    double wait_max_ms, wait_total_ms;       /* ... its backpressure (-1: none) */
    double stall_warm_ms;                    /* ... the longest batch from the third epoch on (-1: none) */
} result;

static inline double s_rows_s(const result *r) { return r->ok && r->secs > 0 ? r->rows / r->secs : 0; }

/* CPU seconds per MB of rows, both ends (this process and the collector): on
   a shared machine a steadier figure than the wall-clock rate. */
static inline double s_cpu_per_mb(const result *r)
{
    return r->ok && r->rows > 0 ? (r->our_cpu + r->coll_cpu) / 100.0 * r->secs / (r->bytes / 1e6) : 0;
}

/* ---------------------------------------------------- the bare PULL sink */
typedef struct {
    void *ctx, *sock;
    pthread_t th;
    uint64_t target; /* stop after this many messages (atomic) */
    uint64_t count;  /* atomic */
    double t_last;
    double bytes;
    double cpu;      /* thread CPU seconds */
    int stop;        /* atomic */
} sink;

unsigned char *bi_encode_rowbatch(const char *id, uint64_t seq, const float *rows, size_t n, size_t d,
                                        size_t *len);
int bi_sink_start(sink *s, const char *endpoint, const n_keys *keys, int curve, size_t max_msg);
int bi_sink_wait_count(sink *s, uint64_t n, double timeout);
int bi_sink_finish(sink *s, uint64_t total, double timeout);
void *bi_push(void *ctx, const char *endpoint, const n_keys *keys, int curve);
double bi_sync_ref(size_t snap_bytes, int reps);
result bi_estimator_ref(const opts *o, char mode, const float *pool, size_t pool_rows, size_t batch, size_t d,
                              double *close_med);

#endif
