/* bench_latency - time from an epoch's last row leaving the producer to its
   snapshot reaching a subscriber, through the real dps-collector, against the
   time of one in-process dps_estimator_close_epoch on the same data size
   (measured in the same run): the difference is the network + ledger + store
   + publish overhead on top of the aggregation itself.

   Per d (default 1e4, 1e5): k = 4, the library's t, m = 2k, reference aggregator,
   --workers 2, window = t (the collector's defaults but for --workers).
   The collector is started with a fresh state directory; a subscriber
   (dps_subscriber_new) and a producer (dps_producer_*, with status endpoint)
   connect.  Then, for each measured epoch:
     1. send t*m - 1 rows (one epoch's rows but the last) and flush;
     2. poll dps_collector_status_query until rows_in_epoch = t*m - 1;
        "idle" epochs also wait until the t - 1 full buckets' bases are done
        (buckets_completed), so that the collector's workers are idle;
     3. t0; send the last row and flush; dps_subscriber_recv returns the
        snapshot at t1.  latency = t1 - t0, split with the snapshot's
        time_unix_ms (the collector's release time, taken after aggregation,
        before encode/store/publish; same host clock): "to release" and
        "release -> subscriber".
   "busy" epochs (step 2 waits for rows only, as a producer would) come first,
   then "idle" ones.  In a busy epoch the last row can arrive while the workers
   are still computing bucket bases: close waits for them, so busy - idle is
   the backlog of bucket work at the last row (printed as "pending").
   Reference, same process, after the collector has stopped: a
   dps_estimator with the same configuration (secure noise, like the collector),
   t*m rows pushed, workers drained, then dps_estimator_close_epoch timed. */
#include "bench_ingest_net.h"

#include <sys/time.h>

typedef struct {
    size_t ds[8], nd, k, t, m, batch;
    int workers, epochs, ref_reps, curve, do_ref;
    const char *collector, *transport;
} opts;

static const char s_synopsis[] = "usage: bench-latency --collector PATH [options]\n";

static double s_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

typedef struct { uint64_t epoch, rows; } want_rows;
static int s_pred_rows(const dps_collector_status *st, const void *arg)
{
    const want_rows *w = arg;
    return st->epoch == w->epoch && st->rows_in_epoch >= w->rows;
}
static int s_pred_buckets(const dps_collector_status *st, const void *arg)
{
    return st->buckets_completed >= *(const uint64_t *)arg;
}

typedef struct {
    double lat, to_release, delivery, ingest, pending;
    int status;
} epoch_res;

static void s_stats(const double *v0, size_t n, double *med, double *max)
{
    double v[64];
    size_t c = n > 64 ? 64 : n;
    memcpy(v, v0, c * sizeof *v);
    *med = n_median(v, c);
    *max = 0;
    for (size_t i = 0; i < c; i++)
        if (v[i] > *max)
            *max = v[i];
}

/* One d through the collector; fills busy[] and idle[] (o->epochs each). */
static int s_collector_run(const opts *o, const n_keys *keys, size_t d, const float *X, size_t batch,
                           epoch_res *busy, epoch_res *idle, int *nb, int *ni)
{
    size_t k = o->k, t = o->t, m = o->m, n = t * m;
    char ts[32], ms[32], wk[32];
    snprintf(ts, sizeof ts, "%zu", t);
    snprintf(ms, sizeof ms, "%zu", m);
    snprintf(wk, sizeof wk, "%d", o->workers);
    const char *extra[] = {"--t", ts, "--m", ms, "--workers", wk, "--aggregator", "reference", NULL};
    char name[32], id[64];
    snprintf(name, sizeof name, "lat%zu", d);
    snprintf(id, sizeof id, "bench-latency-%d-%zu", (int)getpid(), d);
    n_collector c;
    if (n_collector_start(&c, o->collector, o->transport, name, keys, o->curve, d, k, extra, 60000))
        return -1;
    dps_subscriber *sub = NULL;
    dps_producer *p = NULL;
    dps_producer_opts po;
    dps_producer_opts_init(&po, c.ingest, d);
    po.batch_rows = batch;
    po.sec = c.sec;
    po.status_endpoint = c.status;
    po.producer_id = id;
    int rc = dps_subscriber_new(&sub, c.publish, &c.sec);
    if (!rc)
        rc = dps_producer_new(&p, &po);
    if (!rc)
        rc = dps_producer_wait_ready(p, 10000);
    dps_collector_status st0;
    if (!rc)
        rc = dps_collector_status_query(c.status, &c.sec, 2000, &st0);
    if (rc) {
        fprintf(stderr, "bench-latency: setup failed: %s\n", dps_strerror(rc));
        n_collector_tail(&c, 10);
        goto out;
    }
    { /* what one status query costs (a new context, connection, handshake each time): drain polls with it */
        double q[15];
        int nq = 0;
        for (int i = 0; i < 15; i++) {
            dps_collector_status sq;
            double q0 = b_now();
            if (dps_collector_status_query(c.status, &c.sec, 2000, &sq) == DPS_OK)
                q[nq++] = b_now() - q0;
        }
        double qmed = 0, qmax = 0;
        s_stats(q, (size_t)nq, &qmed, &qmax);
        printf("  dps_collector_status_query round trip (idle collector, %s): median %.2f ms, max %.2f ms over %d\n",
               o->curve ? "CURVE" : "plaintext", 1e3 * qmed, 1e3 * qmax, nq);
        printf("RESULT latency d=%zu kind=status_query ms=%.3f max_ms=%.3f\n", d, 1e3 * qmed, 1e3 * qmax);
    }
    *nb = *ni = 0;
    for (int e = 0; e < 2 * o->epochs && !rc; e++) {
        int is_idle = e >= o->epochs;
        double ti0 = b_now();
        rc = dps_producer_send_rows(p, X, n - 1, d);
        if (!rc)
            rc = dps_producer_flush(p);
        want_rows w = {st0.epoch + (uint64_t)e, n - 1};
        dps_collector_status st;
        if (!rc)
            rc = n_wait_status(&c, s_pred_rows, &w, 600000, 2, &st);
        double ingest = b_now() - ti0;
        uint64_t want_b = st0.buckets_completed + (uint64_t)e * t + (t - 1);
        if (!rc && is_idle)
            rc = n_wait_status(&c, s_pred_buckets, &want_b, 600000, 2, &st);
        if (rc) {
            fprintf(stderr, "bench-latency: epoch %d: waiting for the collector: %s\n", e, dps_strerror(rc));
            n_collector_tail(&c, 10);
            break;
        }
        double pending = (double)(want_b - (st.buckets_completed < want_b ? st.buckets_completed : want_b));
        double w0 = s_wall_ms(), t0 = b_now();
        rc = dps_producer_send_rows(p, X + (n - 1) * d, 1, d);
        if (!rc)
            rc = dps_producer_flush(p);
        dps_snapshot *snap = NULL;
        if (!rc)
            rc = dps_subscriber_recv(sub, 600000, &snap);
        double t1 = b_now(), w1 = s_wall_ms();
        if (rc) {
            fprintf(stderr, "bench-latency: epoch %d: %s\n", e, dps_strerror(rc));
            n_collector_tail(&c, 10);
            break;
        }
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        epoch_res r = {t1 - t0, ((double)in.time_unix_ms - w0) / 1e3, (w1 - (double)in.time_unix_ms) / 1e3, ingest,
                       pending, (int)in.status};
        printf("  epoch %llu %-4s: last row -> snapshot %8.1f ms  (to release %7.1f ms, release -> subscriber "
               "%6.1f ms)  status %s seq %llu | epoch's other rows taken in %.2f s, bucket jobs pending at the last "
               "row: %.0f of %zu\n",
               (unsigned long long)in.epoch, is_idle ? "idle" : "busy", 1e3 * r.lat, 1e3 * r.to_release,
               1e3 * r.delivery, dps_snapshot_status_name(in.status), (unsigned long long)in.seq, ingest, pending, t);
        printf("RESULT latency d=%zu kind=%s epoch=%llu ms=%.2f to_release_ms=%.1f delivery_ms=%.1f status=%s "
               "pending=%.0f\n",
               d, is_idle ? "idle" : "busy", (unsigned long long)in.epoch, 1e3 * r.lat, 1e3 * r.to_release,
               1e3 * r.delivery, dps_snapshot_status_name(in.status), pending);
        fflush(stdout);
        dps_snapshot_destroy(&snap);
        if (is_idle)
            idle[(*ni)++] = r;
        else
            busy[(*nb)++] = r;
    }
out:
    dps_producer_destroy(&p);
    dps_subscriber_destroy(&sub);
    n_collector_stop(&c);
    return rc ? -1 : 0;
}

/* In-process: push t*m rows, drain, time close_epoch.  Returns the median close. */
static double s_reference(const opts *o, size_t d, const float *X, double *max_out, double *push_out)
{
    dps_config cfg;
    dps_config_init(&cfg, d, o->k);
    cfg.t = o->t;
    cfg.m = o->m;
    cfg.window = o->t;
    cfg.workers = o->workers;
    cfg.aggregator = DPS_AGG_REFERENCE;
    dps_estimator *e = NULL;
    int rc = dps_estimator_new(&e, &cfg);
    if (rc) {
        fprintf(stderr, "bench-latency: reference estimator: %s\n", dps_strerror(rc));
        return 0;
    }
    size_t n = o->t * o->m;
    double closes[64], pushes[64];
    int reps = o->ref_reps > 64 ? 64 : o->ref_reps, done = 0;
    for (int i = 0; i < reps; i++) {
        double p0 = b_now();
        size_t taken = 0;
        rc = dps_estimator_push(e, X, n, d, &taken);
        double p1 = b_now();
        if (rc || taken != n) {
            fprintf(stderr, "bench-latency: reference push: %s (%zu of %zu)\n", dps_strerror(rc), taken, n);
            break;
        }
        dps_estimator_stats st;
        do {
            usleep(500);
            dps_estimator_get_stats(e, &st);
        } while (st.buckets_done_epoch < o->t);
        double c0 = b_now();
        dps_snapshot *s = NULL;
        rc = dps_estimator_close_epoch(e, &s);
        double c1 = b_now();
        if (rc) {
            fprintf(stderr, "bench-latency: reference close: %s\n", dps_strerror(rc));
            break;
        }
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        printf("  reference: in-process close_epoch %8.1f ms  (status %s; push of the epoch's rows %.2f s, workers "
               "drained before close)\n",
               1e3 * (c1 - c0), dps_snapshot_status_name(in.status), p1 - p0);
        printf("RESULT latency d=%zu kind=reference_close ms=%.2f status=%s\n", d, 1e3 * (c1 - c0),
               dps_snapshot_status_name(in.status));
        fflush(stdout);
        dps_snapshot_destroy(&s);
        closes[done] = c1 - c0;
        pushes[done++] = p1 - p0;
    }
    dps_estimator_destroy(&e);
    double med = 0, pm = 0;
    s_stats(closes, (size_t)done, &med, max_out);
    s_stats(pushes, (size_t)done, push_out, &pm);
    return med;
}

int main(int argc, char **argv)
{
    cli_set_program("bench-latency");
    opts o;
    memset(&o, 0, sizeof o);
    o.ds[0] = 10000; o.ds[1] = 100000; o.nd = 2;
    o.k = 4;
    o.t = b_lib_t();
    o.workers = 2;
    o.epochs = 4;
    o.ref_reps = 3;
    o.transport = "ipc";
    b_size_list ds = {o.ds, o.nd, 8};
    int quick = 0, no_ref = 0, help = 0;
    char t_def[24];
    cli_opt flags[] = {
        {"--collector", CLI_OPT_STRING, &o.collector, "PATH", "required", "the dps-collector binary", 0},
        B_SIZES("--d", &ds, "LIST", "1e4,1e5", "dimensions"),
        B_SIZE("--k", &o.k, "K", "4", "subspace dimension"),
        B_SIZE("--t", &o.t, "T", b_lib_t_text(t_def, sizeof t_def), "buckets per epoch"),
        B_SIZE("--m", &o.m, "M", "2k", "rows per bucket"),
        B_INT("--workers", &o.workers, "N", "2", "collector and reference workers"),
        B_INT("--epochs", &o.epochs, "N", "4", "measured epochs per kind (busy, idle)"),
        B_SIZE("--batch", &o.batch, "B", "256, or fewer for ~1 MiB messages", "producer rows per message"),
        {"--transport", CLI_OPT_STRING, &o.transport, "T", "ipc", "ipc or tcp", 0},
        {"--curve", CLI_OPT_FLAG, &o.curve, NULL, NULL, "CURVE on every socket (default plaintext)", 0},
        B_INT("--ref-reps", &o.ref_reps, "N", "3", "in-process close_epoch repetitions"),
        {"--no-ref", CLI_OPT_FLAG, &no_ref, NULL, NULL, "skip the in-process reference", 0},
        {"--quick", CLI_OPT_FLAG, &quick, NULL, NULL, "--epochs 2 --ref-reps 2", 0},
        B_HELP(&help),
    };
    size_t n_flags = sizeof flags / sizeof flags[0];
    int prc = b_parse(argc, argv, flags, n_flags, &help, s_synopsis);
    if (prc >= 0)
        return prc;
    o.nd = ds.n;
    o.do_ref = !no_ref;
    if (quick && !cli_opt_given(flags, n_flags, "--epochs"))
        o.epochs = 2;
    if (quick && !cli_opt_given(flags, n_flags, "--ref-reps"))
        o.ref_reps = 2;
    if (!o.m) {
        dps_config lib; /* the library's m */
        dps_config_init(&lib, 2, o.k);
        o.m = lib.m;
    }
    if (!o.collector || access(o.collector, X_OK) != 0 || o.workers < 1 || o.epochs < 1 || o.epochs > 32 ||
        o.ref_reps < 1 || o.t < 2 || (strcmp(o.transport, "ipc") && strcmp(o.transport, "tcp")))
        CLI_USAGE("give --collector PATH (an executable), --transport ipc or tcp and positive counts (see --help)");
    signal(SIGPIPE, SIG_IGN);
    dps_blas_set_threads(1); /* the library's own setting, as in the collector */
    b_header("bench-latency: last row -> snapshot at a subscriber, through dps-collector", 1);
    printf("# k=%zu t=%zu m=%zu q=%zu (default 10k) reference aggregator, workers %d, window t; %s over %s; %d busy + "
           "%d idle epochs per d\n",
           o.k, o.t, o.m, 10 * o.k, o.workers, o.curve ? "CURVE" : "plaintext", o.transport, o.epochs, o.epochs);
    printf("# headline: idle latency / in-process close_epoch (same data size, same run); overhead = the difference\n");
    fflush(stdout);
    n_tmp_init("dps-bl");
    n_keys keys;
    memset(&keys, 0, sizeof keys);
    if (o.curve && n_keys_make(&keys) != DPS_OK) {
        fprintf(stderr, "bench-latency: cannot make CURVE keys\n");
        return 1;
    }
    typedef struct { size_t d; double bmed, bmax, imed, imax, rmed, rmax, rel_med, del_med; int ok; } row;
    row rows[8];
    size_t nrows = 0;
    b_rng r;
    b_seed(&r, 99);
    for (size_t di = 0; di < o.nd; di++) {
        size_t d = o.ds[di], n = o.t * o.m;
        size_t batch = o.batch ? o.batch : n_batch_rows(d, 1048576.0);
        double gb = (double)n * d * 4 / 1e9;
        printf("\n# d=%zu: one epoch = %zu rows = %.2f GB; producer batch %zu rows (%.2f MB messages)\n", d, n, gb,
               batch, (double)batch * d * 4 / 1e6);
        fflush(stdout);
        float *X = b_alloc(n * d * sizeof *X);
        n_rows_lowrank(&r, n, d, o.k, 1e-3, X);
        epoch_res busy[32], idle[32];
        int nb = 0, ni = 0;
        row *w = &rows[nrows++];
        memset(w, 0, sizeof *w);
        w->d = d;
        if (s_collector_run(&o, &keys, d, X, batch, busy, idle, &nb, &ni) == 0)
            w->ok = 1;
        double v[32], v2[32], dummy;
        for (int i = 0; i < nb; i++)
            v[i] = busy[i].lat;
        s_stats(v, (size_t)nb, &w->bmed, &w->bmax);
        for (int i = 0; i < ni; i++) {
            v[i] = idle[i].lat;
            v2[i] = idle[i].to_release;
        }
        s_stats(v, (size_t)ni, &w->imed, &w->imax);
        s_stats(v2, (size_t)ni, &w->rel_med, &dummy);
        for (int i = 0; i < ni; i++)
            v[i] = idle[i].delivery;
        s_stats(v, (size_t)ni, &w->del_med, &dummy);
        if (o.do_ref) {
            double pmed = 0;
            w->rmed = s_reference(&o, d, X, &w->rmax, &pmed);
        }
        free(X);
    }
    printf("\n## summary (ms; median / max over the epochs; reference = in-process close_epoch, same run)\n");
    printf("%-8s | %17s | %17s | %9s %9s | %17s | %8s %9s\n", "d", "busy med/max", "idle med/max", "to rel",
           "rel->sub", "reference med/max", "idle/ref", "overhead");
    for (size_t i = 0; i < nrows; i++) {
        row *w = &rows[i];
        char ratio[16] = "-", over[16] = "-";
        if (w->rmed > 0 && w->imed > 0) {
            snprintf(ratio, sizeof ratio, "%.2f", w->imed / w->rmed);
            snprintf(over, sizeof over, "%.1f", 1e3 * (w->imed - w->rmed));
        }
        printf("%-8zu | %8.1f %8.1f | %8.1f %8.1f | %9.1f %9.1f | %8.1f %8.1f | %8s %9s\n", w->d, 1e3 * w->bmed,
               1e3 * w->bmax, 1e3 * w->imed, 1e3 * w->imax, 1e3 * w->rel_med, 1e3 * w->del_med, 1e3 * w->rmed,
               1e3 * w->rmax, ratio, over);
    }
    printf("# busy: the last row sent as soon as the collector had taken the others (workers may still be on bucket\n"
           "#       bases: close waits for them); idle: workers done first.  to rel / rel->sub: idle medians split at\n"
           "#       the snapshot's time_unix_ms (ms resolution).  overhead = idle median - reference median.\n");
    b_footer();
    return 0;
}
