/* bench_ingest - dps-collector ingest throughput against raw libzmq PUSH/PULL
   with the same message bytes, measured in the same run, plain and CURVE.

   For each d and each security setting (plaintext, CURVE), in this order:

     raw        the reference.  A PUSH socket in this process sends one RowBatch
                message (B rows x d float32, encoded once, by hand, in the wire
                format of proto/dpsubspace.proto) over and over to a bare PULL
                socket (its own ZeroMQ context and thread) that receives each
                message and discards it.  Same socket options as the
                producer/collector pair (SNDHWM 64, IMMEDIATE, RCVHWM 1), same
                transport, same mechanism (CURVE: server keys on the PULL side,
                no ZAP handler).
     api->sink  the C producer API (dps_producer_send_rows) to the same bare
                PULL sink: the producer's own cost (encode per batch) apart.
     collector  the real dps-collector binary fed by dps_producer_send_rows,
                the producer having a status endpoint: the clock stops when
                dps_producer_drain returns, i.e. when the collector confirms
                it has taken every batch.  rows/s = rows confirmed / time.
                (a) ingest only: --t so large that no epoch closes during the
                    run, m = 2k, --window W (default 32: the bucket buffers of
                    a huge t would otherwise all be allocated and zeroed at
                    the first row), --workers 2: rows go into buckets, and the
                    workers compute each full bucket's basis (and, for the
                    reference aggregator, its projection of the q public
                    reference points).
                (b) default epochs: the library's t, m = 2k, window = t, q = 10k: an
                    epoch closes every t*m rows and the loop stops ingesting
                    while it aggregates, writes (fsync) the ledger, stores
                    (fsync) and publishes the snapshot.
   Every measurement sends for about --seconds (time-limited loop), then waits
   for the receiver; a collector run is also capped by --max-mb of data (its
   memory at (a) grows with t); (b), whose memory does not grow, sends for
   --seconds as the in-process reference runs (capped, a run at d = 1e5
   would be one or two epochs, mostly their first touch of memory, which
   the reference pays once among many epochs).  Data: a pool of distinct rows near a k-dim
   span (bench-aggregate's generator), cycled.  The raw reference runs again
   after the subjects: the summary takes the faster of the two and shows
   after/before (a shared machine shows up there).

   The headline is collector rows/s / raw rows/s (same message size, same run).
   Also printed, each measured in this run:
     - the collector's CPU per thread from /proc/<pid>/task/ over the
       measurement (what limits it), this process's CPU, the collector's peak
       RSS, and CPU seconds per MB at both ends (steadier than wall-clock
       rates when other processes take the cores);
     - for (a): the in-process estimator with the same settings (push only, no
       network): (a)/est says what the collector adds to the library;
     - for (b): the in-process estimator pushing and closing epochs of the
       same size, and the time of one epoch's durable writes (2 fdatasync'ed
       ledger appends, a snapshot file fsync'ed, renamed, its directory
       fsync'ed) in the scratch directory's filesystem.
   A second reference that decodes+validates each message with the library's
   decode path is not measured: that path (wire_rows_decode) is not public API. */
#include "bench_ingest.h"

#include <zmq.h>

static const char s_synopsis[] = "usage: bench-ingest --collector PATH [options]\n";

/* --collector-arg: appended to o->coll_args (at most 8). */
static int s_coll_arg(const char *v, void *to)
{
    opts *o = to;
    if (o->ncoll_args < 8)
        o->coll_args[o->ncoll_args++] = v;
    return 0;
}

/* ------------------------------------------------------------ results */

static void s_print(const char *label, const result *r, const result *ref, size_t d, const char *secname,
                    const char *what)
{
    if (!r->ok) {
        printf("  %-30s  FAILED\n", label);
        printf("RESULT ingest d=%zu sec=%s what=%s status=failed\n", d, secname, what);
        return;
    }
    double rs = s_rows_s(r), ratio = ref && s_rows_s(ref) > 0 ? rs / s_rows_s(ref) : 1.0;
    printf("  %-30s  %9.0f rows in %6.3f s (sends done at %6.3f s): %10.0f rows/s %8.0f msg/s %8.1f MB/s  "
           "x raw %.3f  | this process cpu %3.0f%%, cpu both ends %.2f ms/MB\n",
           label, r->rows, r->secs, r->send_secs, rs, r->msgs / r->secs, r->bytes / r->secs / 1e6, ratio,
           r->our_cpu, 1e3 * s_cpu_per_mb(r));
    printf("RESULT ingest d=%zu sec=%s what=%s rows=%.0f secs=%.4f rows_s=%.0f mb_s=%.1f ratio_raw=%.4f "
           "our_cpu=%.0f coll_cpu=%.0f coll_main=%.0f cpu_ms_per_mb=%.3f epochs=%llu\n",
           d, secname, what, r->rows, r->secs, rs, r->bytes / r->secs / 1e6, ratio, r->our_cpu, r->coll_cpu,
           r->coll_main, 1e3 * s_cpu_per_mb(r), (unsigned long long)r->epochs);
    fflush(stdout);
}

/* Ceilings of (b)/est from the CPU measured in the same run, each epoch's
   work as measured and only idle time gone (0 when a figure is missing).
   Per epoch of t m rows: T the estimator's wall time, W_e its CPU, W_c the
   collector's, W_p the producer's (this process during (b)); n cores.
   *here:  the collector and its producer share the n cores:
           (b)/est <= n T / (W_c + W_p);
   *ideal: as *here for a collector whose work per epoch were the
           estimator's (W_c = W_e): what no collector can pass here with
           this producer, n T / (W_e + W_p);
   *own:   the producer elsewhere, the collector given the estimator's CPU
           (W_e / T cores): (b)/est <= W_e / W_c. */
typedef struct {
    double here, ideal, own;
    double w_c, w_p, w_e; /* ms of CPU per epoch */
} b_ceilings;

static b_ceilings s_b_ceilings(const result *b, const result *est, size_t epoch_rows)
{
    b_ceilings c;
    memset(&c, 0, sizeof c);
    if (!b->ok || !est->ok || b->coll_cpu <= 0 || s_rows_s(b) <= 0 || s_rows_s(est) <= 0)
        return c;
    double n = (double)sysconf(_SC_NPROCESSORS_ONLN), t = 1e3 * (double)epoch_rows / s_rows_s(est);
    double tb = 1e3 * (double)epoch_rows / s_rows_s(b);
    c.w_c = tb * b->coll_cpu / 100.0;
    c.w_p = tb * b->our_cpu / 100.0;
    c.w_e = t * est->our_cpu / 100.0;
    c.here = n * t / (c.w_c + c.w_p);
    c.ideal = n * t / (c.w_e + c.w_p);
    c.own = c.w_e / c.w_c;
    return c;
}

/* ------------------------------------------------------ the measurements */
static int s_run_id = 0;

static result s_raw(const opts *o, const n_keys *keys, int curve, const unsigned char *msg, size_t len,
                    size_t batch)
{
    result res;
    memset(&res, 0, sizeof res);
    char ep[300], name[64];
    snprintf(name, sizeof name, "raw%d", ++s_run_id);
    n_endpoint(ep, sizeof ep, o->transport, name);
    sink s;
    if (bi_sink_start(&s, ep, keys, curve, len + 1024))
        return res;
    void *ctx = zmq_ctx_new();
    void *p = bi_push(ctx, ep, keys, curve);
    if (!p)
        return res;
    const uint64_t warm = 4;
    for (uint64_t i = 0; i < warm; i++)
        zmq_send(p, msg, len, 0);
    if (bi_sink_wait_count(&s, warm, 10)) {
        fprintf(stderr, "raw: the sink did not receive the warm-up messages\n");
        bi_sink_finish(&s, 0, 0);
        return res;
    }
    double bytes0 = s.bytes, c0 = b_cpu(), t0 = b_now();
    uint64_t n = 0;
    for (;;) {
        if (zmq_send(p, msg, len, 0) < 0) {
            fprintf(stderr, "raw: send failed: %s\n", zmq_strerror(errno));
            break;
        }
        n++;
        if ((n & 7) == 0 && b_now() - t0 >= o->seconds)
            break;
    }
    double ts = b_now();
    int rc = bi_sink_finish(&s, warm + n, 120);
    double c1 = b_cpu();
    zmq_close(p);
    zmq_ctx_term(ctx);
    if (rc) {
        fprintf(stderr, "raw: the sink got %llu of %llu messages\n", (unsigned long long)s.count,
                (unsigned long long)(warm + n));
        return res;
    }
    res.ok = 1;
    res.msgs = (double)n;
    res.rows = (double)n * (double)batch;
    res.bytes = s.bytes - bytes0;
    res.secs = s.t_last - t0;
    res.send_secs = ts - t0;
    res.our_cpu = 100.0 * (c1 - c0) / res.secs;
    return res;
}

static void s_producer_opts(dps_producer_opts *po, const char *ep, size_t d, size_t batch, const dps_security *sec,
                            const char *status_ep, const char *id)
{
    dps_producer_opts_init(po, ep, d);
    po->batch_rows = batch;
    po->sec = *sec;
    po->status_endpoint = status_ep;
    po->producer_id = id;
}

static result s_api_sink(const opts *o, const n_keys *keys, int curve, const float *pool, size_t npool_batches,
                         size_t batch, size_t d)
{
    result res;
    memset(&res, 0, sizeof res);
    char ep[300], name[64], id[64];
    snprintf(name, sizeof name, "api%d", ++s_run_id);
    snprintf(id, sizeof id, "bench-ingest-%d-%d", (int)getpid(), s_run_id);
    n_endpoint(ep, sizeof ep, o->transport, name);
    sink s;
    if (bi_sink_start(&s, ep, keys, curve, batch * d * 4 + 1024))
        return res;
    dps_security sec = n_sec(keys, curve);
    dps_producer_opts po;
    s_producer_opts(&po, ep, d, batch, &sec, NULL, id);
    dps_producer *p = NULL;
    int rc = dps_producer_new(&p, &po);
    if (!rc)
        rc = dps_producer_wait_ready(p, 10000);
    if (!rc)
        rc = dps_producer_send_rows(p, pool, batch, d); /* warm-up: one batch */
    if (rc || bi_sink_wait_count(&s, 1, 10)) {
        fprintf(stderr, "api->sink: %s\n", rc ? dps_strerror(rc) : "the warm-up batch did not arrive");
        dps_producer_destroy(&p);
        bi_sink_finish(&s, 0, 0);
        return res;
    }
    double bytes0 = s.bytes, c0 = b_cpu(), t0 = b_now();
    uint64_t n = 0;
    for (;;) {
        rc = dps_producer_send_rows(p, pool + (n % npool_batches) * batch * d, batch, d);
        if (rc) {
            fprintf(stderr, "api->sink: send failed: %s\n", dps_strerror(rc));
            break;
        }
        n++;
        if (b_now() - t0 >= o->seconds)
            break;
    }
    double ts = b_now();
    int rc2 = bi_sink_finish(&s, 1 + n, 120);
    double c1 = b_cpu();
    dps_producer_destroy(&p);
    if (rc || rc2)
        return res;
    res.ok = 1;
    res.msgs = (double)n;
    res.rows = (double)n * (double)batch;
    res.bytes = s.bytes - bytes0;
    res.secs = s.t_last - t0;
    res.send_secs = ts - t0;
    res.our_cpu = 100.0 * (c1 - c0) / res.secs;
    return res;
}

static int s_pred_rows(const dps_collector_status *st, const void *arg)
{
    return st->rows_accepted >= *(const uint64_t *)arg;
}

/* mode 'a' (ingest only) or 'b' (default epochs). */
static result s_collector(const opts *o, const n_keys *keys, int curve, char mode, const float *pool,
                          size_t npool_batches, size_t batch, size_t d, const unsigned char *msg, size_t len,
                          double raw_rows_s)
{
    result res;
    memset(&res, 0, sizeof res);
    size_t k = o->k, m = 2 * k;
    /* Rows we may send: enough for --seconds at the raw rate (with margin), within --max-mb. */
    double want = raw_rows_s * o->seconds * 1.5 + 4.0 * batch, cap = o->max_mb * 1e6 / (4.0 * (double)d);
    uint64_t max_rows = (uint64_t)(want < cap ? want : cap);
    if (mode == 'b') /* for --seconds, as the in-process reference runs */
        max_rows = (uint64_t)want;
    uint64_t max_batches = max_rows / batch < 8 ? 8 : max_rows / batch;
    max_rows = max_batches * batch;
    uint64_t pre = 2 * batch; /* the hand-encoded message + the producer's warm-up batch */
    char ts[32], ms[32], ws[32], wk[32];
    snprintf(ms, sizeof ms, "%zu", m);
    snprintf(wk, sizeof wk, "%d", o->workers);
    const char *extra[32];
    int a = 0;
    if (mode == 'a') {
        size_t t = (size_t)((max_rows + pre) / m + 2);
        snprintf(ts, sizeof ts, "%zu", t);
        snprintf(ws, sizeof ws, "%zu", o->window < t ? o->window : t);
        extra[a++] = "--t"; extra[a++] = ts;
        extra[a++] = "--window"; extra[a++] = ws;
        printf("  collector (a): --t %s --m %s --window %s --workers %s (t*k*d*4 = %.0f MB of bases zeroed at start)\n",
               ts, ms, ws, wk, (double)t * k * d * 4 / 1e6);
    }
    extra[a++] = "--m"; extra[a++] = ms;
    extra[a++] = "--workers"; extra[a++] = wk;
    extra[a++] = "--aggregator"; extra[a++] = o->aggregator;
    for (int i = 0; i < o->ncoll_args; i++)
        extra[a++] = o->coll_args[i];
    extra[a] = NULL;
    char name[64], id[64];
    snprintf(name, sizeof name, "coll%d", ++s_run_id);
    snprintf(id, sizeof id, "bench-ingest-%d-%d", (int)getpid(), s_run_id);
    n_collector c;
    if (n_collector_start(&c, o->collector, o->transport, name, keys, curve, d, k, extra, 60000))
        return res;

    /* The reference's message, as is, must be accepted: same bytes. */
    void *ctx = zmq_ctx_new();
    void *push = bi_push(ctx, c.ingest, keys, curve);
    uint64_t want_rows = batch;
    dps_collector_status st;
    int ok = push && zmq_send(push, msg, len, 0) == (int)len &&
             n_wait_status(&c, s_pred_rows, &want_rows, 10000, 5, &st) == DPS_OK;
    if (push)
        zmq_close(push);
    zmq_ctx_term(ctx);
    if (!ok) {
        fprintf(stderr, "collector: the reference's hand-encoded RowBatch was not accepted\n");
        n_collector_tail(&c, 10);
        n_collector_stop(&c);
        return res;
    }

    dps_producer_opts po;
    s_producer_opts(&po, c.ingest, d, batch, &c.sec, c.status, id);
    dps_producer *p = NULL;
    int rc = dps_producer_new(&p, &po);
    if (!rc)
        rc = dps_producer_wait_ready(p, 10000);
    if (!rc)
        rc = dps_producer_send_rows(p, pool, batch, d);
    if (!rc)
        rc = dps_producer_drain(p, 30000);
    if (rc) {
        fprintf(stderr, "collector: producer setup/warm-up failed: %s\n", dps_strerror(rc));
        n_collector_tail(&c, 10);
        dps_producer_destroy(&p);
        n_collector_stop(&c);
        return res;
    }
    dps_collector_status st0;
    dps_collector_status_query(c.status, &c.sec, 2000, &st0);
    n_cpu_snap ca, cb;
    n_cpu_take(c.pid, &ca);
    double c0 = b_cpu(), t0 = b_now();
    uint64_t n = 0;
    for (;;) {
        rc = dps_producer_send_rows(p, pool + ((n + 1) % npool_batches) * batch * d, batch, d);
        if (rc) {
            fprintf(stderr, "collector: send failed: %s\n", dps_strerror(rc));
            break;
        }
        n++;
        if (n >= max_batches || b_now() - t0 >= o->seconds)
            break;
    }
    double tsend = b_now();
    if (!rc)
        rc = dps_producer_drain(p, 600000);
    double t1 = b_now(), c1 = b_cpu();
    n_cpu_take(c.pid, &cb);
    char cpu[512];
    n_cpu_report(c.pid, &ca, &cb, cpu, sizeof cpu, &res.coll_cpu, &res.coll_main);
    res.coll_rss = n_peak_rss(c.pid);
    dps_collector_status st1;
    memset(&st1, 0, sizeof st1);
    int qrc = dps_collector_status_query_producer(c.status, &c.sec, 5000, id, &st1);
    dps_producer_destroy(&p);
    int ex = n_collector_stop(&c);
    n_collector_stalls(&c, &res.stall_batch_ms, &res.stall_warm_ms, &res.stall_publish_ms, &res.wait_max_ms,
                       &res.wait_total_ms);
    if (rc || qrc) {
        fprintf(stderr, "collector: %s\n", dps_strerror(rc ? rc : qrc));
        n_collector_tail(&c, 10);
        return res;
    }
    uint64_t sent = (n + 1) * batch;
    if (st1.producer_rows != sent)
        fprintf(stderr, "collector: WARNING: it confirms %llu rows of ours, we sent %llu\n",
                (unsigned long long)st1.producer_rows, (unsigned long long)sent);
    res.ok = 1;
    res.msgs = (double)n;
    res.rows = (double)n * (double)batch;
    res.bytes = (double)n * (double)len; /* the producer's messages are len +- a few bytes (id, seq) */
    res.secs = t1 - t0;
    res.send_secs = tsend - t0;
    res.our_cpu = 100.0 * (c1 - c0) / res.secs;
    res.epochs = st1.epoch - st0.epoch;
    res.buckets = st1.buckets_completed - st0.buckets_completed;
    char lbl[64];
    snprintf(lbl, sizeof lbl, "collector (%c)", mode);
    printf("  %s: cpu over the run %s; peak RSS %.0f MB; epochs closed %llu, buckets completed %llu "
           "(%.0f%% of the rows' buckets); exit %d\n",
           lbl, cpu, res.coll_rss / 1e6, (unsigned long long)res.epochs, (unsigned long long)res.buckets,
           100.0 * (double)res.buckets * (double)m / res.rows, ex);
    size_t nrej = 0;
    for (size_t i = 0; i < st1.n_refusals + st1.n_counters; i++) {
        const dps_named_count *c = i < st1.n_refusals ? &st1.refusals[i] : &st1.counters[i - st1.n_refusals];
        if (c->value)
            printf("  %s: counter %s = %llu%s\n", lbl, c->name, (unsigned long long)c->value,
                   !strcmp(c->name, "disconnects") ? " (1 expected: the reference message's PUSH socket)" : ""),
                nrej++;
    }
    return res;
}

/* --------------------------------------------------------------- main */
int main(int argc, char **argv)
{
    cli_set_program("bench-ingest");
    opts o;
    memset(&o, 0, sizeof o);
    o.ds[0] = 100; o.ds[1] = 1000; o.ds[2] = 10000; o.nd = 3;
    o.k = 4;
    o.batch_mb = 1.048576;
    o.seconds = 1.5;
    o.max_mb = 512;
    o.window = 32;
    o.workers = 2;
    o.transport = "ipc";
    o.do_plain = o.do_curve = 1;
    o.aggregator = "reference";
    o.do_raw = o.do_api = o.do_a = o.do_b = 1;
    b_size_list ds = {o.ds, o.nd, 8};
    const char *security = NULL, *only = NULL;
    int quick = 0, help = 0;
    cli_opt flags[] = {
        {"--collector", CLI_OPT_STRING, &o.collector, "PATH", "required", "the dps-collector binary", 0},
        B_SIZES("--d", &ds, "LIST", "100,1000,10000", "dimensions"),
        B_SIZE("--k", &o.k, "K", "4; m = 2k", "subspace dimension"),
        B_SIZE("--batch", &o.batch, "B", "256, or fewer for ~--batch-mb messages", "rows per message"),
        {"--batch-mb", CLI_OPT_DOUBLE, &o.batch_mb, "X", "1.048576 = 1 MiB", "target message size for large d", 0},
        {"--seconds", CLI_OPT_DOUBLE, &o.seconds, "S", "1.5", "sending time per measurement", 0},
        {"--max-mb", CLI_OPT_DOUBLE, &o.max_mb, "X", "512", "cap on the data sent to a collector (a) per measurement ((b) sends for --seconds)", 0},
        B_SIZE("--window", &o.window, "W", "32", "collector (a): open buckets"),
        B_INT("--workers", &o.workers, "N", "2", "collector --workers"),
        {"--aggregator", CLI_OPT_STRING, &o.aggregator, "NAME", "reference",
         "the collector's --aggregator, and the in-process reference's", 0},
        {"--transport", CLI_OPT_STRING, &o.transport, "T", "ipc", "ipc or tcp (127.0.0.1)", 0},
        {"--security", CLI_OPT_STRING, &security, "LIST", "both", "plain,curve", 0},
        {"--only", CLI_OPT_STRING, &only, "LIST", "all",
         "raw,api,a,b (raw is always run when a, b or api are: it is the reference)", 0},
        {"--collector-arg", CLI_OPT_PARSE, &(cli_parse_to){s_coll_arg, &o}, "A", NULL,
         "pass A to every collector (repeatable; e.g. --verbose, with BENCH_KEEP_TMP=1 to keep the scratch "
         "directory and its logs)", 0},
        {"--quick", CLI_OPT_FLAG, &quick, NULL, NULL, "--seconds 0.6 --max-mb 256", 0},
        B_HELP(&help),
    };
    size_t n_flags = sizeof flags / sizeof flags[0];
    int prc = b_parse(argc, argv, flags, n_flags, &help, s_synopsis);
    if (prc >= 0)
        return prc;
    o.nd = ds.n;
    if (quick && !cli_opt_given(flags, n_flags, "--seconds"))
        o.seconds = 0.6;
    if (quick && !cli_opt_given(flags, n_flags, "--max-mb"))
        o.max_mb = 256;
    if (security) {
        o.do_plain = strstr(security, "plain") != NULL;
        o.do_curve = strstr(security, "curve") != NULL;
    }
    if (only) {
        char buf[64];
        snprintf(buf, sizeof buf, ",%s,", only);
        o.do_api = strstr(buf, ",api,") != NULL;
        o.do_a = strstr(buf, ",a,") != NULL;
        o.do_b = strstr(buf, ",b,") != NULL;
        o.do_raw = 1;
    }
    if (!o.collector || access(o.collector, X_OK) != 0 || o.k < 1 || !(o.seconds > 0) || o.workers < 1 ||
        (strcmp(o.transport, "ipc") && strcmp(o.transport, "tcp")) || (!o.do_plain && !o.do_curve)) {
        if (o.collector && access(o.collector, X_OK) != 0)
            CLI_USAGE("%s is not an executable", o.collector);
        CLI_USAGE("give --collector PATH, --k >= 1, --seconds > 0, --workers >= 1, --transport ipc or tcp and "
                  "--security plain and/or curve (see --help)");
    }
    signal(SIGPIPE, SIG_IGN);
    dps_blas_set_threads(1);
    b_header("bench-ingest: dps-collector ingest vs raw ZeroMQ PUSH/PULL (same run, same message bytes)", 1);
    int zmaj, zmin, zpat;
    zmq_version(&zmaj, &zmin, &zpat);
    printf("# libzmq %d.%d.%d (CURVE %s)  transport %s  collector %s\n", zmaj, zmin, zpat,
           zmq_has("curve") ? "yes" : "NO", o.transport, o.collector);
    printf("# k=%zu m=%zu workers=%d  sending %.2f s per measurement, collector data capped at %.0f MB; "
           "(a): --window %zu, t sized so that no epoch closes; (b): t=%zu window=t\n",
           o.k, 2 * o.k, o.workers, o.seconds, o.max_mb, o.window, b_lib_t());
    printf("# headline: x raw = rows/s / rows/s of raw PUSH->PULL with the same message bytes, same security, same run\n");
    fflush(stdout);
    n_tmp_init("dps-bi");
    n_keys keys;
    if (o.do_curve && n_keys_make(&keys) != DPS_OK) {
        fprintf(stderr, "bench-ingest: cannot make CURVE keys\n");
        return 1;
    }
    if (!o.do_curve)
        memset(&keys, 0, sizeof keys);

    typedef struct {
        size_t d, batch;
        double len, sync, est_close;
        const char *sec;
        result raw, raw2, api, a, b, est, est_a;
    } row;
    row rows[16];
    size_t nrows = 0;
    b_rng r;
    b_seed(&r, 2024);
    for (size_t di = 0; di < o.nd && nrows < 14; di++) {
        size_t d = o.ds[di], k = o.k;
        if (k >= d) {
            fprintf(stderr, "bench-ingest: k >= d (%zu)\n", d);
            continue;
        }
        size_t batch = o.batch ? o.batch : n_batch_rows(d, o.batch_mb * 1e6);
        size_t bbytes = batch * d * 4;
        size_t npool = (size_t)(32e6 / (double)bbytes);
        npool = npool < 8 ? 8 : npool > 256 ? 256 : npool;
        float *pool = b_alloc(npool * bbytes);
        n_rows_lowrank(&r, npool * batch, d, k, 1e-3, pool);
        size_t len = 0;
        char id[64];
        snprintf(id, sizeof id, "bench-ingest-%d-raw", (int)getpid());
        unsigned char *msg = bi_encode_rowbatch(id, 0, pool, batch, d, &len);
        result est, est_a;
        memset(&est, 0, sizeof est);
        memset(&est_a, 0, sizeof est_a);
        double est_close = 0, sync = 0;
        if (o.do_a) {
            est_a = bi_estimator_ref(&o, 'a', pool, npool * batch, batch, d, NULL);
            printf("\n# d=%zu k=%zu: reference for (a), this process\n", d, k);
            if (est_a.ok)
                printf("  in-process estimator, no epoch closes, window %zu, workers %d: %.0f rows pushed in %.3f s: "
                       "%.0f rows/s | cpu %.0f%%\n",
                       o.window, o.workers, est_a.rows, est_a.secs, s_rows_s(&est_a), est_a.our_cpu);
            printf("RESULT ingest d=%zu what=estimator_ref_a rows_s=%.0f cpu=%.0f\n", d, s_rows_s(&est_a),
                   est_a.our_cpu);
            fflush(stdout);
        }
        if (o.do_b) {
            printf("\n# d=%zu k=%zu: references for (b), this process\n", d, k);
            sync = bi_sync_ref(k * d * 4 + 200, 10);
            printf("  durable writes of one epoch (2 ledger appends + fdatasync, snapshot %zu B + fsync + rename + "
                   "dir fsync) in %s: %.2f ms (median of 10)\n",
                   k * d * 4 + 200, n_tmp, 1e3 * sync);
            est = bi_estimator_ref(&o, 'b', pool, npool * batch, batch, d, &est_close);
            if (est.ok)
                printf("  in-process estimator, t=%zu m=%zu window=t workers=%d: %llu epochs (push + close) in "
                       "%.3f s: %.0f rows/s, %.1f ms per epoch, of which close %.1f ms (median) | cpu %.0f%%\n",
                       b_lib_t(), 2 * k, o.workers, (unsigned long long)est.epochs, est.secs, s_rows_s(&est),
                       1e3 * est.secs / (double)est.epochs, 1e3 * est_close, est.our_cpu);
            printf("RESULT ingest d=%zu what=estimator_ref rows_s=%.0f epoch_ms=%.2f close_ms=%.2f sync_ms=%.2f\n", d,
                   s_rows_s(&est), est.ok ? 1e3 * est.secs / (double)est.epochs : 0, 1e3 * est_close, 1e3 * sync);
            fflush(stdout);
        }
        for (int sec = 0; sec < 2; sec++) {
            if ((sec == 0 && !o.do_plain) || (sec == 1 && !o.do_curve))
                continue;
            const char *sname = sec ? "curve" : "plain";
            printf("\n# d=%zu k=%zu  batch %zu rows = %zu-byte RowBatch (%.2f MB)  %s over %s\n", d, k, batch, len,
                   (double)len / 1e6, sname, o.transport);
            fflush(stdout);
            row *rw = &rows[nrows++];
            memset(rw, 0, sizeof *rw);
            rw->d = d;
            rw->batch = batch;
            rw->len = (double)len;
            rw->sec = sname;
            rw->est = est;
            rw->est_a = est_a;
            rw->est_close = est_close;
            rw->sync = sync;
            rw->raw = s_raw(&o, &keys, sec, msg, len, batch);
            s_print("raw PUSH->PULL (reference)", &rw->raw, NULL, d, sname, "raw");
            if (!rw->raw.ok)
                continue;
            if (o.do_api) {
                rw->api = s_api_sink(&o, &keys, sec, pool, npool, batch, d);
                s_print("producer API -> bare PULL", &rw->api, &rw->raw, d, sname, "api_sink");
            }
            if (o.do_a) {
                rw->a = s_collector(&o, &keys, sec, 'a', pool, npool, batch, d, msg, len, s_rows_s(&rw->raw));
                s_print("collector (a) ingest only", &rw->a, &rw->raw, d, sname, "collector_a");
                if (rw->a.ok && est_a.ok)
                    printf("  collector (a): %.3f x the in-process estimator's %.0f rows/s\n",
                           s_rows_s(&rw->a) / s_rows_s(&est_a), s_rows_s(&est_a));
            }
            if (o.do_b) {
                rw->b = s_collector(&o, &keys, sec, 'b', pool, npool, batch, d, msg, len, s_rows_s(&rw->raw));
                s_print("collector (b) default epochs", &rw->b, &rw->raw, d, sname, "collector_b");
                if (rw->b.ok && rw->b.epochs && est.ok)
                    printf("  collector (b): %.1f ms per epoch (%.2f x the in-process estimator's %.1f ms)\n",
                           1e3 * rw->b.secs * (double)(2 * k * b_lib_t()) / rw->b.rows,
                           s_rows_s(&est) / s_rows_s(&rw->b), 1e3 * est.secs / (double)est.epochs);
                b_ceilings cl = s_b_ceilings(&rw->b, &est, 2 * k * b_lib_t());
                if (cl.here > 0) {
                    printf("  collector (b): CPU per epoch: collector %.1f ms, its producer %.1f ms; the in-process "
                           "estimator %.1f ms. (b)/est at most, with that work and no idle time: %.2f on these %ld "
                           "cores; %.2f for a collector that cost what the estimator does; %.2f with the producer "
                           "elsewhere and the estimator's CPU\n",
                           cl.w_c, cl.w_p, cl.w_e, cl.here, sysconf(_SC_NPROCESSORS_ONLN), cl.ideal, cl.own);
                    printf("RESULT ingest d=%zu sec=%s what=collector_b_ceiling here=%.3f ideal=%.3f own_cores=%.3f "
                           "cpu_ms_collector=%.2f cpu_ms_producer=%.2f cpu_ms_estimator=%.2f\n",
                           d, sname, cl.here, cl.ideal, cl.own, cl.w_c, cl.w_p, cl.w_e);
                }
                if (rw->b.ok && rw->b.stall_batch_ms >= 0)
                    printf("  collector (b): longest ingest stall %.2f ms (one batch in the estimator: its rows and "
                           "a seal, backpressure apart), %.2f ms from the third epoch on (the first two fault their "
                           "memory in); longest publish on the ingest loop %.2f ms; backpressure "
                           "(the next epoch full while the last releases): longest %.1f ms, %.0f ms in all = %.0f%% "
                           "of the run\n",
                           rw->b.stall_batch_ms, rw->b.stall_warm_ms, rw->b.stall_publish_ms, rw->b.wait_max_ms,
                           rw->b.wait_total_ms,
                           100.0 * rw->b.wait_total_ms / 1e3 / rw->b.secs);
            }
            if (o.do_api || o.do_a || o.do_b) { /* the reference again: did the machine change under us? */
                rw->raw2 = s_raw(&o, &keys, sec, msg, len, batch);
                s_print("raw PUSH->PULL (again, after)", &rw->raw2, &rw->raw, d, sname, "raw_after");
            }
        }
        free(msg);
        free(pool);
    }

    printf("\n## summary: rows/s as a multiple of raw PUSH->PULL (same message bytes, same security, same run;\n"
           "## the reference is the faster of the raw runs before and after the subjects)\n");
    printf("%-6s %-5s %5s %6s | %10s %8s %6s | %7s | %7s %7s %5s %5s %7s | %7s %5s %6s %7s %14s | %8s %8s %7s\n", "d",
           "sec", "batch", "msg MB", "raw rows/s", "raw MB/s", "after", "api/raw", "(a)/raw", "(a)/est", "cpu", "main",
           "cpu/raw", "(b)/raw", "cpu", "epochs", "(b)/est", "ceil h/i/o", "(b) ep", "est ep", "sync");
    for (size_t i = 0; i < nrows; i++) {
        row *w = &rows[i];
        const result *ref = &w->raw;
        if (w->raw2.ok && s_rows_s(&w->raw2) > s_rows_s(&w->raw))
            ref = &w->raw2;
        double rr = s_rows_s(ref);
        char api[16] = "-", ra[16] = "-", rb[16] = "-", aft[16] = "-", be[16] = "-", bep[16] = "-", eep[16] = "-",
             ae[16] = "-", ac[16] = "-", ceil[24] = "-";
        if (w->a.ok && s_cpu_per_mb(ref) > 0)
            snprintf(ac, sizeof ac, "%.2f", s_cpu_per_mb(&w->a) / s_cpu_per_mb(ref));
        if (w->a.ok && w->est_a.ok)
            snprintf(ae, sizeof ae, "%.3f", s_rows_s(&w->a) / s_rows_s(&w->est_a));
        if (w->api.ok && rr > 0)
            snprintf(api, sizeof api, "%.3f", s_rows_s(&w->api) / rr);
        if (w->a.ok && rr > 0)
            snprintf(ra, sizeof ra, "%.3f", s_rows_s(&w->a) / rr);
        if (w->b.ok && rr > 0)
            snprintf(rb, sizeof rb, "%.3f", s_rows_s(&w->b) / rr);
        if (w->raw2.ok && w->raw.ok)
            snprintf(aft, sizeof aft, "%.2f", s_rows_s(&w->raw2) / s_rows_s(&w->raw));
        b_ceilings cl = s_b_ceilings(&w->b, &w->est, 2 * o.k * b_lib_t());
        if (cl.here > 0)
            snprintf(ceil, sizeof ceil, "%.2f/%.2f/%.2f", cl.here, cl.ideal, cl.own);
        if (w->b.ok && w->est.ok) {
            snprintf(be, sizeof be, "%.3f", s_rows_s(&w->b) / s_rows_s(&w->est));
            snprintf(bep, sizeof bep, "%.1f", 1e3 * (double)(2 * o.k * b_lib_t()) / s_rows_s(&w->b));
            snprintf(eep, sizeof eep, "%.1f", 1e3 * (double)(2 * o.k * b_lib_t()) / s_rows_s(&w->est));
        }
        printf("%-6zu %-5s %5zu %6.2f | %10.0f %8.0f %6s | %7s | %7s %7s %4.0f%% %4.0f%% %7s | %7s %4.0f%% %6llu %7s %14s "
               "| %8s %8s %7.1f\n",
               w->d, w->sec, w->batch, w->len / 1e6, rr, ref->ok ? ref->bytes / ref->secs / 1e6 : 0, aft, api, ra, ae,
               w->a.coll_cpu, w->a.coll_main, ac, rb, w->b.coll_cpu, (unsigned long long)w->b.epochs, be, ceil, bep, eep,
               1e3 * w->sync);
        printf("RESULT ingest_summary d=%zu sec=%s raw_rows_s=%.0f api_ratio=%s a_ratio=%s a_over_est=%s b_ratio=%s "
               "b_over_est=%s raw_after_over_before=%s\n",
               w->d, w->sec, rr, api, ra, ae, rb, be, aft);
    }
    printf("# after = raw after / raw before (far from 1: the machine changed during the measurement)\n");
    printf("# cpu/raw = CPU seconds per MB, both ends (producer process + collector), collector (a) / raw: steadier\n"
           "#           than the wall-clock ratios when other processes take the cores\n");
    printf("# (a)/est = collector (a) rows/s / the in-process estimator's with the same settings (push only);\n"
           "# (b)/est = collector (b) rows/s / the in-process estimator's (push + close, no network, no disk);\n"
           "# (b) ep, est ep = ms per epoch of t*m rows; sync = ms of one epoch's durable writes (fsyncs) here\n");
    printf("# ceil h/i/o = what (b)/est could reach if each epoch's CPU stayed as measured and only idle time went:\n"
           "#           h on these cores, shared with the producer; i the same for a collector that cost what the\n"
           "#           estimator does (no collector passes it here with this producer); o with the producer\n"
           "#           elsewhere and the collector given the estimator's CPU\n");
    printf("# cpu = the collector's CPU over its run, %% of one core (main = its single ingest/aggregation loop "
           "thread); 2 cores in all here\n");
    b_footer();
    return 0;
}
