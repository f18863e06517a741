/* bench_ingest_ref.c - bench-ingest's references: a RowBatch encoded by hand
   (so the raw libzmq sink measures the same bytes without the library), the
   bare PULL sink and its PUSH socket, and mode (b)'s in-process references
   (the estimator pushing and closing epochs, and one epoch's durable writes).
   Who owns what: each sink owns its socket and thread until finished. */
#include "bench_ingest.h"

#include <zmq.h>

/* ------------------------------------------------- RowBatch, by hand */
static size_t s_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

/* proto3 RowBatch {version=1, producer_id, seq (omitted when 0), dim, rows,
   data}: the same field order and encoding protobuf-c produces.  *out is
   malloc'd.  Little-endian host assumed (x86/arm64). */
unsigned char *bi_encode_rowbatch(const char *id, uint64_t seq, const float *rows, size_t n, size_t d,
                                        size_t *len)
{
    size_t idl = strlen(id), data = n * d * 4;
    unsigned char *p = b_alloc(64 + idl + data), *q = p;
    *q++ = 0x08; q += s_varint(q, DPS_WIRE_VERSION);
    *q++ = 0x12; q += s_varint(q, idl); memcpy(q, id, idl); q += idl;
    if (seq) { *q++ = 0x18; q += s_varint(q, seq); }
    *q++ = 0x20; q += s_varint(q, d);
    *q++ = 0x28; q += s_varint(q, n);
    *q++ = 0x32; q += s_varint(q, data); memcpy(q, rows, data); q += data;
    *len = (size_t)(q - p);
    return p;
}


static void *s_sink_thread(void *arg)
{
    sink *s = arg;
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        int r = zmq_msg_recv(&m, s->sock, 0);
        if (r >= 0) {
            s->bytes += r;
            s->t_last = b_now();
            __atomic_add_fetch(&s->count, 1, __ATOMIC_RELEASE);
        }
        zmq_msg_close(&m);
        if (__atomic_load_n(&s->count, __ATOMIC_ACQUIRE) >= __atomic_load_n(&s->target, __ATOMIC_ACQUIRE) ||
            __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
            break;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    s->cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    return NULL;
}

int bi_sink_start(sink *s, const char *endpoint, const n_keys *keys, int curve, size_t max_msg)
{
    memset(s, 0, sizeof *s);
    s->target = UINT64_MAX;
    s->ctx = zmq_ctx_new();
    s->sock = zmq_socket(s->ctx, ZMQ_PULL);
    int hwm = 1, tmo = 20, zero = 0, one = 1; /* RCVHWM: the collector's default --rcvhwm */
    int64_t maxmsg = (int64_t)max_msg;
    zmq_setsockopt(s->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s->sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (curve && (zmq_setsockopt(s->sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
                  zmq_setsockopt(s->sock, ZMQ_CURVE_SECRETKEY, keys->server.secret_key, DPS_KEY_LEN + 1))) {
        fprintf(stderr, "sink: CURVE setup failed: %s\n", zmq_strerror(errno));
        return -1;
    }
    if (zmq_bind(s->sock, endpoint) != 0) {
        fprintf(stderr, "sink: cannot bind %s: %s\n", endpoint, zmq_strerror(errno));
        return -1;
    }
    return pthread_create(&s->th, NULL, s_sink_thread, s) == 0 ? 0 : -1;
}

int bi_sink_wait_count(sink *s, uint64_t n, double timeout)
{
    double end = b_now() + timeout;
    while (__atomic_load_n(&s->count, __ATOMIC_ACQUIRE) < n) {
        if (b_now() > end)
            return -1;
        usleep(200);
    }
    return 0;
}

/* Tell the sink how many messages in all, wait for it (timeout: stop it). */
int bi_sink_finish(sink *s, uint64_t total, double timeout)
{
    __atomic_store_n(&s->target, total, __ATOMIC_RELEASE);
    int rc = bi_sink_wait_count(s, total, timeout);
    if (rc)
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->th, NULL);
    zmq_close(s->sock);
    zmq_ctx_term(s->ctx);
    return rc;
}

/* A raw PUSH socket configured like the producer's. */
void *bi_push(void *ctx, const char *endpoint, const n_keys *keys, int curve)
{
    void *p = zmq_socket(ctx, ZMQ_PUSH);
    int one = 1, hwm = 64, linger = 5000;
    zmq_setsockopt(p, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(p, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(p, ZMQ_LINGER, &linger, sizeof linger);
    if (curve) {
        zmq_setsockopt(p, ZMQ_CURVE_SERVERKEY, keys->server.public_key, DPS_KEY_LEN + 1);
        zmq_setsockopt(p, ZMQ_CURVE_PUBLICKEY, keys->client.public_key, DPS_KEY_LEN + 1);
        zmq_setsockopt(p, ZMQ_CURVE_SECRETKEY, keys->client.secret_key, DPS_KEY_LEN + 1);
    }
    if (zmq_connect(p, endpoint) != 0) {
        fprintf(stderr, "push: cannot connect %s: %s\n", endpoint, zmq_strerror(errno));
        zmq_close(p);
        return NULL;
    }
    return p;
}

/* ------------------------------------------------ (b)'s own references */
/* The durable writes of one epoch, as the collector does them in its state
   directory's filesystem (here: the scratch directory): ledger commit (append
   + fdatasync), snapshot file (write snap_bytes + fsync, rename, fsync of the
   directory), ledger outcome (append + fdatasync).  Median seconds per epoch. */
double bi_sync_ref(size_t snap_bytes, int reps)
{
    char dir[300], led[320], tmp[340], fin[340];
    snprintf(dir, sizeof dir, "%s/syncref", n_tmp);
    mkdir(dir, 0700);
    snprintf(led, sizeof led, "%s/ledger", dir);
    int lf = open(led, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    unsigned char *buf = b_alloc(snap_bytes + 1);
    memset(buf, 0x5a, snap_bytes);
    const char line[] = "commit epoch=123 rho_epoch=1 delta_epoch=1e-06 rho_total=123 delta_total=0.000123 padding\n";
    double v[64];
    int n = reps > 64 ? 64 : reps, ok = lf >= 0;
    for (int i = 0; i < n && ok; i++) {
        double t0 = b_now();
        ok &= write(lf, line, sizeof line - 1) == (ssize_t)(sizeof line - 1) && fdatasync(lf) == 0;
        snprintf(tmp, sizeof tmp, "%s/.e%d.tmp", dir, i);
        snprintf(fin, sizeof fin, "%s/e%d.snap", dir, i);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ok &= fd >= 0 && write(fd, buf, snap_bytes) == (ssize_t)snap_bytes && fsync(fd) == 0;
        if (fd >= 0)
            close(fd);
        ok &= rename(tmp, fin) == 0;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ok &= dfd >= 0 && fsync(dfd) == 0;
        if (dfd >= 0)
            close(dfd);
        ok &= write(lf, line, sizeof line - 1) == (ssize_t)(sizeof line - 1) && fdatasync(lf) == 0;
        v[i] = b_now() - t0;
    }
    if (lf >= 0)
        close(lf);
    free(buf);
    return ok ? n_median(v, (size_t)n) : 0;
}

/* The library alone, in this process, fed from the same rows in batch-sized
   dps_estimator_push calls, for about --seconds, with the same workers:
   'a': as collector (a): t sized so that no epoch closes (within --max-mb),
        --window W; the clock stops when the last push returns (push blocks
        while the workers are behind, so at most workers + 1 full buckets are
        still pending then -- the same end as the collector's, whose drain
        confirms rows taken, not bases computed);
   'b': as collector (b): the library's t, window = t; epochs pushed and closed (at
        least 2 after a warm-up epoch).  *close_med: the median close. */
result bi_estimator_ref(const opts *o, char mode, const float *pool, size_t pool_rows, size_t batch, size_t d,
                              double *close_med)
{
    result res;
    memset(&res, 0, sizeof res);
    dps_config cfg;
    dps_config_init(&cfg, d, o->k); /* m = 2k: the library's */
    cfg.workers = o->workers;
    if (dps_aggregator_from_name(o->aggregator, &cfg.aggregator) != DPS_OK)
        return res; /* the collector refuses it too */
    size_t max_rows = (size_t)(o->max_mb * 1e6 / (4.0 * (double)d));
    if (mode == 'a') {
        cfg.t = max_rows / cfg.m + 2;
        cfg.window = o->window < cfg.t ? o->window : cfg.t;
    } else {
        cfg.window = cfg.t;
    }
    dps_estimator *e = NULL;
    if (dps_estimator_new(&e, &cfg) != DPS_OK)
        return res;
    size_t epoch_rows = mode == 'a' ? batch * 4 : cfg.t * cfg.m, pos = 0;
    double closes[256];
    int nclose = 0, epochs = 0, ok = 1;
    double t0 = 0, c0 = 0, rows = 0;
    for (int ep = 0; ok; ep++) { /* mode 'a': "epoch" 0 is a warm-up of 4 batches, then one long run */
        if (ep == 1) {
            t0 = b_now();
            c0 = b_cpu();
            if (mode == 'a')
                epoch_rows = max_rows - 4 * batch;
        }
        size_t left = epoch_rows;
        while (left && ok) {
            size_t n = batch < left ? batch : left, pr = pos % pool_rows;
            if (n > pool_rows - pr)
                n = pool_rows - pr;
            size_t taken = 0;
            ok = dps_estimator_push(e, pool + pr * d, n, d, &taken) == DPS_OK && taken == n;
            pos += n;
            left -= n;
            if (ep >= 1)
                rows += (double)n;
            if (mode == 'a' && ep >= 1 && b_now() - t0 >= o->seconds)
                break;
        }
        if (mode == 'a') {
            if (ep >= 1)
                break;
            continue;
        }
        double s0 = b_now();
        dps_snapshot *snap = NULL;
        ok = ok && dps_estimator_close_epoch(e, &snap) == DPS_OK;
        dps_snapshot_destroy(&snap);
        if (ep >= 1 && nclose < 256)
            closes[nclose++] = b_now() - s0;
        if (ep >= 1)
            epochs++;
        if (ep >= 2 && b_now() - t0 >= o->seconds)
            break;
    }
    double t1 = b_now(), c1 = b_cpu();
    dps_estimator_destroy(&e);
    if (!ok)
        return res;
    res.ok = 1;
    res.rows = rows;
    res.msgs = res.rows / (double)batch;
    res.bytes = res.rows * (double)d * 4;
    res.secs = t1 - t0;
    res.send_secs = res.secs;
    res.our_cpu = 100.0 * (c1 - c0) / res.secs;
    res.epochs = (uint64_t)epochs;
    if (close_med)
        *close_med = n_median(closes, (size_t)nclose);
    return res;
}
