/* collector.c - dps-collector: the daemon of docs/design.md section 1.

   One thread runs the loop: ingest (PULL, ingest.c) -> validate -> estimator
   push; epoch full (or period) -> close (publish.c): the estimator calls the
   ledger hook, which appends and fsyncs the epoch's cost BEFORE the
   mechanism runs; the snapshot is stored (atomic file) and then published
   (XPUB, also set as the welcome message for late subscribers).  Status
   requests (REP, status_reply.c) are answered between batches; SIGHUP
   reloads keys and configuration (reload.c).  The estimator's workers
   compute bucket bases meanwhile; while they are behind, push blocks, this
   loop stops reading, the producers' queues fill and they block: rows are
   never dropped, and the bytes in transit are bounded (ingest.c).
   This file: the signals, setup, the loop, teardown and main.
   Who owns what: main() owns the sockets, the estimator, the ledger and the
   ZAP handler (the struct in collector.h); the modules borrow them. */
#include "args.h"
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>


volatile sig_atomic_t collector_stop = 0;
static volatile sig_atomic_t s_reload = 0;
static void s_on_signal(int sig)
{
    if (sig == SIGHUP)
        s_reload = 1; /* the loop reloads keys and configuration */
    else
        collector_stop = 1;
}

/* Test-only fault injection: DPS_FAULT=<point> kills the process there, as
   kill -9 would, so the crash tests can hit exact moments. */
void collector_fault(const char *point)
{
    const char *f = getenv("DPS_FAULT");
    if (f && strcmp(f, point) == 0) {
        log_warn("fault injection: dying at %s", point);
        raise(SIGKILL);
    }
}

int collector_fault_here(const char *point)
{
    const char *f = getenv("DPS_FAULT");
    if (!f || strcmp(f, point) != 0)
        return 0;
    log_warn("fault injection: failing at %s", point);
    return 1;
}

/* Test-only: DPS_FAULT=<point> holds the calling thread there for ms
   (the pipeline test: a release slow enough to watch ingest go on). */
void collector_hold(const char *point, unsigned ms)
{
    const char *f = getenv("DPS_FAULT");
    if (f && strcmp(f, point) == 0) {
        log_warn("fault injection: holding %u ms at %s", ms, point);
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* ---------------------------------------------------------------- setup */
int collector_server_socket(collector *c, void *sock, const char *endpoint, const char *domain,
                            const dps_keypair *kp, char *err, size_t errlen)
{
    if (c->o.insecure_plaintext) {
        if (!dps_endpoint_is_local(endpoint)) {
            snprintf(err, errlen, "--insecure-plaintext refuses %s: rows are private data; plaintext only on "
                     "loopback tcp or ipc", endpoint);
            return -1;
        }
    } else {
        int one = 1;
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, kp->secret_key, DPS_KEY_LEN + 1) ||
            zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain))) {
            snprintf(err, errlen, "CURVE setup failed on %s: %s", endpoint, zmq_strerror(errno));
            return -1;
        }
    }
    int linger = 1000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(sock, endpoint) != 0) {
        snprintf(err, errlen, "cannot bind %s: %s", endpoint, zmq_strerror(errno));
        return -1;
    }
    return 0;
}

static int s_lock_state(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen,
                 "%s is in use by another collector (or unreadable): two collectors on one ledger would "
                 "spend the same budget twice", dir);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd; /* held until exit */
}

static int s_restore(collector *c, char *err, size_t errlen)
{
    if (ledger_open(&c->ledger.led, c->o.state_dir, err, errlen) != DPS_OK)
        return -1;
    if (c->ledger.led.torn_cut)
        log_warn("the ledger's last line was torn by a crash and was cut off: that write never completed, so "
                 "its epoch's mechanism never ran and nothing of it was released");
    if (store_init(c->o.state_dir, err, errlen) != DPS_OK)
        return -1;
    uint64_t max_seq = 0, max_epoch = 0;
    size_t count = 0, bad = 0;
    store_latest(c->o.state_dir, &c->pub.latest, &max_seq, &max_epoch, &count, &bad);
    if (bad)
        log_warn("%zu snapshot files in %s/snapshots do not decode; ignored", bad, c->o.state_dir);
    if (store_check_shape(c->o.state_dir, c->o.d, c->pub.latest, err, errlen) != DPS_OK)
        return -1; /* another d: its snapshots and ledger are another stream's */
    c->pub.last_seq = max_seq > c->ledger.led.last_seq ? max_seq : c->ledger.led.last_seq;
    uint64_t next = c->ledger.led.next_epoch;
    if (count && max_epoch + 1 > next)
        next = max_epoch + 1;
    c->ledger.led.next_epoch = next;
    if (c->ledger.led.lines || count)
        log_info("resumed from %s: %" PRIu64 " ledger entries, spent rho %.6g delta %.3g, next epoch %" PRIu64
                 ", %zu snapshots stored, last seq %" PRIu64,
                 c->o.state_dir, c->ledger.led.lines, c->ledger.led.total.rho, c->ledger.led.total.delta, next, count, c->pub.last_seq);
    return 0;
}

void collector_config(const collector_options *o, const ledger *led, dps_config *cfg)
{
    dps_config_init(cfg, o->d, o->k);
    dps_config_set_int(cfg, DPS_PARAM_T, o->t);
    dps_config_set_int(cfg, DPS_PARAM_M, o->m);
    dps_config_set_int(cfg, DPS_PARAM_WINDOW, o->window);
    dps_config_set_int(cfg, DPS_PARAM_Q, o->q);
    dps_aggregator agg = DPS_AGG_REFERENCE;
    dps_aggregator_from_name(o->aggregator, &agg); /* checked by options_finish */
    dps_config_set_int(cfg, DPS_PARAM_AGGREGATOR, (uint64_t)agg);
    dps_config_set_real(cfg, DPS_PARAM_HIST_WIDTH, o->hist_width);
    char err[200]; /* the groups were checked by options_finish */
    cli_groups_apply(o->param_groups[0] ? o->param_groups : NULL, o->group_k[0] ? o->group_k : NULL, cfg, err,
                     sizeof err);
    dps_config_set_int(cfg, DPS_PARAM_POWER_BLOCKS, o->power_blocks);
    dps_config_set_int(cfg, DPS_PARAM_POWER_OVERSAMPLE, o->power_oversample);
    dps_config_set_int(cfg, DPS_PARAM_DENSE_MAX_D, o->dense_max_d);
    dps_config_set_real(cfg, DPS_PARAM_RHO_EPOCH, o->rho_epoch);
    dps_config_set_real(cfg, DPS_PARAM_DELTA_EPOCH, o->delta_epoch);
    dps_config_set_real(cfg, DPS_PARAM_ALPHA, o->alpha);
    dps_config_set_real(cfg, DPS_PARAM_TAU, o->tau);
    dps_config_set_real(cfg, DPS_PARAM_SPLIT_SEARCH, o->split_search);
    dps_config_set_real(cfg, DPS_PARAM_SPLIT_COUNT, o->split_count);
    dps_config_set_real(cfg, DPS_PARAM_SPLIT_MEAN, o->split_mean);
    dps_config_set_real(cfg, DPS_PARAM_CAP_RHO, o->cap_rho);
    dps_config_set_real(cfg, DPS_PARAM_CAP_EPS, o->cap_eps);
    dps_config_set_real(cfg, DPS_PARAM_DELTA_TARGET, o->delta_target);
    dps_config_set_int(cfg, DPS_PARAM_PUBLIC_SEED, o->public_seed);
    dps_config_set_int(cfg, DPS_PARAM_SEEDED, (uint64_t)o->seeded);
    dps_config_set_int(cfg, DPS_PARAM_SEED, o->seed);
    dps_config_set_int(cfg, DPS_PARAM_WORKERS, o->workers);
    dps_config_set_int(cfg, DPS_PARAM_FIRST_EPOCH, led->next_epoch);
    dps_config_set_real(cfg, DPS_PARAM_SPENT_RHO, led->total.rho);
    dps_config_set_real(cfg, DPS_PARAM_SPENT_DELTA, led->total.delta);
}

/* Free whatever exists, in reverse order of creation; every exit of main
   after the state directory was opened comes through here. */
void collector_log_state_failed(const collector *c)
{
    log_error("stopped because the state directory could not be written (a ledger line or a snapshot: see above): "
              "nothing was released without its charge on disk, nothing unstored was sent; make room in %s (or fix "
              "the disk) and start again", c->o.state_dir);
}

static void s_teardown(collector *c)
{
    collector_release_stop(c);
    if (c->ingest.pull) {
        net_monitor_stop(c->ingest.pull, &c->ingest.pull_mon);
        int zero = 0;
        zmq_setsockopt(c->ingest.pull, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(c->ingest.pull);
    }
    if (c->status.rep)
        zmq_close(c->status.rep);
    if (c->pub.xpub)
        zmq_close(c->pub.xpub);
    zap_stop(&c->zap);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    dps_estimator_destroy(&c->est);
    dps_snapshot_destroy(&c->pub.latest);
    ptable_free(&c->ingest.producers);
    credit_free(&c->ingest.credit);
    free(c->ingest.conn_state);
    ledger_close(&c->ledger.led);
}

/* Start the estimator and the sockets, serve until stopped or asked to exit;
   returns main's exit code.  The caller tears down whatever was created. */
static int s_serve(collector *c, dps_config *cfg, const dps_keypair *kp)
{
    char err[8192];
    collector_config(&c->o, &c->ledger.led, cfg);
    c->stall.first_epoch = c->ledger.led.next_epoch; /* this run's first epoch (stall.warm_ms counts from the third) */
    dps_config_set_commit(cfg, collector_commit, c);
    if (c->o.seeded)
        log_warn("SEEDED MODE (--seed): the noise is reproducible and NOT secure; every snapshot says so");
    int rc = dps_estimator_new_resumed(&c->est, cfg, ledger_kind(&c->ledger.led));
    if (rc) {
        fprintf(stderr, "dps-collector: cannot start the estimator: %s\n", dps_strerror(rc));
        return 1;
    }
    /* the second epoch's state now, not on the ingest loop when epoch 1 begins */
    if ((rc = dps_estimator_prepare_overlap(c->est)) != DPS_OK)
        log_warn("no memory for a second epoch's state now (%s): it is tried again when an epoch begins while the "
                 "last one releases",
                 dps_strerror(rc));
    if (collector_release_start(c) != 0) {
        fprintf(stderr, "dps-collector: cannot start the release thread: %s\n", strerror(errno));
        return 1;
    }

    c->ctx = zmq_ctx_new();
    if (!c->o.insecure_plaintext) {
        c->zap = zap_start(c->ctx, c->o.authorized_keys, c->o.subscriber_keys[0] ? c->o.subscriber_keys : NULL);
        if (!c->zap) {
            fprintf(stderr, "dps-collector: cannot start the ZAP handler\n");
            return 1;
        }
    }
    c->ingest.pull = zmq_socket(c->ctx, ZMQ_PULL);
    c->pub.xpub = zmq_socket(c->ctx, ZMQ_XPUB);
    c->status.rep = zmq_socket(c->ctx, ZMQ_REP);
    int pub_hwm = 1000;
    if (collector_ingest_setup(c) != 0) {
        fprintf(stderr, "dps-collector: out of memory\n");
        return 1;
    }
    zmq_setsockopt(c->pub.xpub, ZMQ_SNDHWM, &pub_hwm, sizeof pub_hwm);
    if (collector_server_socket(c, c->ingest.pull, c->o.ingest, "ingest", kp, err, sizeof err) ||
        collector_server_socket(c, c->pub.xpub, c->o.publish, "publish", kp, err, sizeof err) ||
        collector_server_socket(c, c->status.rep, c->o.status, "status", kp, err, sizeof err)) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return 2;
    }
    net_monitor_start(c->ctx, c->ingest.pull, &c->ingest.pull_mon, 1); /* dropped connections on ingest */
    c->ingest.pull_mon.on_disconnect = collector_on_disconnect;
    c->ingest.pull_mon.on_accept = collector_on_accept;
    c->ingest.pull_mon.on_disconnect_arg = c;
    if (c->pub.latest) {
        unsigned char *buf = NULL;
        size_t len = 0;
        if (dps_snapshot_encode(c->pub.latest, &buf, &len) == DPS_OK) {
            zmq_setsockopt(c->pub.xpub, ZMQ_XPUB_WELCOME_MSG, buf, len);
            free(buf);
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (ptable_init(&c->ingest.producers, 4096) != 0) {
        fprintf(stderr, "dps-collector: out of memory\n");
        return 1;
    }
    c->status.started_ms = c->epoch_started_ms = net_now_ms();
    log_info("listening: ingest %s, publish %s, status %s (%s); d=%" PRIu64 " k=%" PRIu64 ", epoch = %" PRIu64
             " buckets x %" PRIu64 " rows, rho %.4g per epoch, %s aggregator, state %s",
             c->o.ingest, c->o.publish, c->o.status, c->o.insecure_plaintext ? "PLAINTEXT, loopback only" : "CURVE",
             c->o.d, c->o.k_total, c->o.t, c->o.m, c->o.rho_epoch, c->o.aggregator, c->o.state_dir);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    log_info("OpenBLAS kernels: %s (OPENBLAS_CORETYPE %s, read when the library loads; on AVX-512 CPUs SkylakeX runs "
             "the gradient mechanisms' accumulation 1.2-1.7x faster than Haswell: tools/bench/README.md, bench-gradmech)",
             dps_blas_corename(), coretype && *coretype ? coretype : "unset");
    static char plan[DPS_MAX_GROUPS + 1][CLI_PLAN_LINE]; /* what each epoch will do (as dps-estimate --plan) */
    int near_random = 0;
    size_t n_plan = cli_plan_lines(cfg, plan, DPS_MAX_GROUPS + 1, &near_random);
    for (size_t i = 0; i < n_plan; i++)
        log_info("%s", plan[i]);
    if (near_random)
        log_warn("with these settings at least one group's basis will be near random (see the plan above)");
    dps_accountant *acc = NULL; /* the budget as the ledger left it */
    const dps_budget cap = {c->o.cap_rho, c->o.cap_eps, c->o.delta_target}; /* the configuration's (collector_config) */
    uint64_t agg = 0;
    dps_config_get_int(cfg, DPS_PARAM_AGGREGATOR, &agg);
    if (dps_accountant_new_resumed(&acc, &cap, &c->ledger.led.total, ledger_kind(&c->ledger.led)) == DPS_OK) {
        double eps = dps_accountant_eps(acc, c->o.delta_target), left = dps_accountant_left(acc);
        if (c->o.no_cap)
            log_warn("no privacy budget cap (--no-cap): epochs are released without limit; spent so far rho %.4g "
                     "(eps %.4g at delta %.0e)", c->ledger.led.total.rho, eps, c->o.delta_target);
        else
            log_info("privacy budget cap: %s %.4g; spent so far rho %.4g (eps %.4g at delta %.0e); left %.4g %s%s",
                     dps_budget_unit(&cap), c->o.cap_rho > 0 ? c->o.cap_rho : c->o.cap_eps, c->ledger.led.total.rho,
                     eps, c->o.delta_target, left, dps_budget_unit(&cap),
                     dps_accountant_fits_kind(acc, dps_config_epoch_cost(cfg),
                                              dps_aggregator_charge_kind((dps_aggregator)agg))
                         ? "" : ": the next epoch would pass it and will be refused");
        if (dps_accountant_kind(acc) != DPS_CHARGE_GAUSSIAN && c->ledger.led.total.delta == 0 &&
            dps_aggregator_charge_kind((dps_aggregator)agg) == DPS_CHARGE_GAUSSIAN)
            log_info("eps is stated by the CKS conversion of rho from now on: the ledger records what each epoch "
                     "spent (rho %.4g so far), not which mechanism spent it, so the exact Gaussian eps of gaussian "
                     "or power epochs alone (%.4g at delta %.0e, were every epoch so far one of them) is not claimed "
                     "after a restart", c->ledger.led.total.rho,
                     dps_zcdp_eps_total_kind(c->ledger.led.total, DPS_CHARGE_GAUSSIAN, c->o.delta_target),
                     c->o.delta_target);
        dps_accountant_destroy(&acc);
    }

    collector_ingest_report(c, cfg);

    if (c->zap)
        c->pub.sub_removals = zap_removals(c->zap, "publish");
    while (!collector_stop) {
        if (s_reload) {
            s_reload = 0;
            log_info("SIGHUP: reloading keys and configuration");
            zap_reload(c->zap);
            collector_reload_config(c);
        }
        if (c->zap) {
            uint64_t removals = zap_removals(c->zap, "publish");
            if (removals != c->pub.sub_removals && collector_rebind_publish(c) == 0)
                c->pub.sub_removals = removals;
        }
        zmq_pollitem_t items[4] = {{c->ingest.pull, 0, ZMQ_POLLIN, 0},
                                   {c->pub.xpub, 0, ZMQ_POLLIN, 0},
                                   {c->status.rep, 0, ZMQ_POLLIN, 0},
                                   {NULL, c->rel.pipe[0], ZMQ_POLLIN, 0}};
        int n = zmq_poll(items, 4, 100);
        if (n < 0 && errno != EINTR) {
            log_error("poll failed: %s", zmq_strerror(errno));
            break;
        }
        if (n > 0) {
            if (items[3].revents & ZMQ_POLLIN) /* a release is done: publish it first */
                collector_release_poll(c);
            if (items[2].revents & ZMQ_POLLIN)
                collector_status(c);
            if (items[1].revents & ZMQ_POLLIN)
                collector_subscriptions(c);
            for (int i = 0; i < 64 && (items[0].revents & ZMQ_POLLIN) && !collector_stop; i++)
                if (!collector_ingest(c))
                    break;
        }
        net_monitor_poll(&c->ingest.pull_mon, 0);
        collector_ingest_watch(c);
        /* Silent producers' credit comes back, but only once the PULL queue
           was found empty: after this loop was blocked (waiting for the
           last epoch's release while the next one is full), the batches
           queued meanwhile are taken first and make their producers heard. */
        if (n >= 0 && !(items[0].revents & ZMQ_POLLIN) && net_now_ms() - c->ingest.credit_swept_ms >= 1000) {
            c->ingest.credit_swept_ms = net_now_ms();
            credit_reclaim(&c->ingest.credit, c->ingest.credit_swept_ms, CREDIT_SILENCE_MS);
            credit_stalled(&c->ingest.credit, c->ingest.credit_swept_ms);
        }
        if (c->o.epoch_seconds > 0 && net_now_ms() - c->epoch_started_ms >= (uint64_t)(c->o.epoch_seconds * 1000)) {
            dps_estimator_stats es;
            dps_estimator_get_stats(c->est, &es);
            if (es.rows_in_epoch > 0) {
                if (!dps_estimator_release_pending(c->est)) /* else at a later turn: the loop never waits here */
                    collector_seal(c);
            } else
                c->epoch_started_ms = net_now_ms();
        }
        if (c->o.exit_after && c->pub.published >= c->o.exit_after) {
            log_info("published %" PRIu64 " snapshots as asked (--exit-after); stopping", c->pub.published);
            break;
        }
    }
    collector_release_stop(c); /* an epoch already sealed is charged: release and publish it */
    dps_estimator_stats es;
    dps_estimator_get_stats(c->est, &es);
    if (es.rows_in_epoch)
        log_info("stopping: the open epoch's %" PRIu64 " rows are discarded (no budget was spent on them)",
                 es.rows_in_epoch);
    else
        log_info("stopping");
    log_info("stopped: %" PRIu64 " rows accepted, %" PRIu64 " snapshots published this run", es.rows_accepted,
             c->pub.published);
    log_info("ingest stalls: the longest a batch took in the estimator was %.2f ms (its rows and a seal, "
             "backpressure apart; %.2f ms from the third epoch on), the longest publish %.2f ms; backpressure (the "
             "next epoch full while the last one releases): the longest wait %.2f ms, %.1f ms in all",
             c->stall.batch_ms, c->stall.warm_ms, c->stall.publish_ms, c->stall.waited_max_ms, c->stall.waited_total_ms);
    if (c->ledger.failed) {
        collector_log_state_failed(c);
        return 3;
    }
    if (c->ingest.connections_dropped || c->ingest.producers.total_gaps)
        log_error("batches were LOST in transit this run: %" PRIu64 " producer connections dropped with the batches "
                  "in flight on them, %" PRIu64 " batches missing from producers' sequences (see the warnings above)",
                  c->ingest.connections_dropped, c->ingest.producers.total_gaps);
    if (c->ingest.batches_cut_short)
        log_error("rows were LOST this run: %" PRIu64 " batches could not be taken whole for want of memory (see the "
                  "errors above)", c->ingest.batches_cut_short);
    if (c->ingest.connections_dropped || c->ingest.producers.total_gaps || c->ingest.batches_cut_short)
        return 4;
    return 0;
}
/* The state directory created, locked and read back; 0, or -1 (said why). */
static int s_open_state(collector *c)
{
    char err[8192];
    if (mkdir(c->o.state_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "dps-collector: cannot create --state-dir %s: %s\n", c->o.state_dir, strerror(errno));
        return -1;
    }
    if (s_lock_state(c->o.state_dir, err, sizeof err) < 0 || s_restore(c, err, sizeof err) != 0) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return -1;
    }
    return 0;
}

/* --sharded: every rank of mpirun runs this; rank 0 alone opens the state
   (src/mpi/collector_sharded.c). */
static int s_main_sharded(collector *c, dps_config *cfg, const dps_keypair *kp, int *argc, char ***argv)
{
    char err[512];
    int rank = 0, size = 1;
    if (collector_sharded_start(argc, argv, &rank, &size, err, sizeof err) != 0) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return 2;
    }
    int rc = rank == 0 && s_open_state(c) != 0 ? 3 : 0;
    int code = collector_sharded_agree(rc);
    if (code && rank != 0)
        fprintf(stderr, "dps-collector: rank %d: rank 0 could not open the state directory: stopping\n", rank);
    if (!code)
        code = collector_sharded_serve(c, cfg, kp, rank, size);
    s_teardown(c);
    collector_sharded_end();
    return code;
}

/* main's after the configuration: the keys, then the sharded or the one-process serve. */
static int s_run(collector *c, dps_config *cfg, int *argc, char ***argv)
{
    dps_keypair kp;
    if (!c->o.insecure_plaintext) {
        int rc = dps_keypair_load(&kp, c->o.server_key);
        if (rc) {
            fprintf(stderr, "dps-collector: --server-key %s: %s (it must be a .key_secret made by dps-keygen)\n",
                    c->o.server_key, dps_strerror(rc));
            return 2;
        }
        struct stat st;
        if (stat(c->o.authorized_keys, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "dps-collector: --authorized-keys %s is not a directory\n", c->o.authorized_keys);
            return 2;
        }
    }
    if (c->o.sharded)
        return s_main_sharded(c, cfg, &kp, argc, argv);
    if (s_open_state(c) != 0) {
        s_teardown(c);
        return 3;
    }
    int code = s_serve(c, cfg, &kp);
    s_teardown(c);
    return code;
}

int main(int argc, char **argv)
{
    collector c;
    memset(&c, 0, sizeof c);
    c.ledger.led.fd = -1;
    options_defaults(&c.o);
    char err[8192];
    c.argc = argc;
    c.argv = argv;
    if (options_parse(&c.o, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return 2;
    }
    if (cli_version_given()) {
        cli_print_version();
        return 0;
    }
    if (c.o.help) {
        options_usage(stdout);
        return 0;
    }
    if (options_finish(&c.o, err, sizeof err) != 0) {
        fprintf(stderr, "dps-collector: %s\n", err);
        return 2;
    }
    log_set_level(c.o.quiet ? LOGLEVEL_QUIET : c.o.verbose ? LOGLEVEL_DEBUG : LOGLEVEL_INFO);
    log_set_sink_name(c.o.log[0] ? c.o.log : "stderr"); /* checked by options_finish */
    if (cli_former_used())
        log_warn("%s is the former name of %s: read as it (rename it in the configuration)", cli_former_used()->alias,
                 cli_former_used()->name);
    if (!isnan(c.o.former_split[0]) || !isnan(c.o.former_split[1]) || !isnan(c.o.former_split[2]))
        log_warn("split-search, split-count and split-mean are the former names of one split = S:C:M: read as "
                 "split = %s", c.o.split);
    if (c.o.insecure_plaintext && (c.o.server_key[0] || c.o.authorized_keys[0]))
        log_warn("--insecure-plaintext: server-key and authorized-keys are not used (no encryption, no "
                 "authentication)");
    dps_config *cfg = NULL;
    if (dps_config_new(&cfg, c.o.d, c.o.k) != DPS_OK) {
        fprintf(stderr, "dps-collector: out of memory\n");
        return 1;
    }
    const char *why = "";
    ledger dummy;
    memset(&dummy, 0, sizeof dummy);
    collector_config(&c.o, &dummy, cfg);
    if (dps_config_check(cfg, &why) != DPS_OK) {
        fprintf(stderr, "dps-collector: %s\n", why);
        dps_config_destroy(&cfg);
        return 2;
    }
    int code = s_run(&c, cfg, &argc, &argv);
    dps_config_destroy(&cfg);
    return code;
}
