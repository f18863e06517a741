/* watch.c - dps-watch: subscribe to a dps-collector's snapshots
   (dps_subscriber_*) and print one block (or one JSON line) per snapshot:
   status, rows, privacy spent, and the principal angles to the previous
   released snapshot and to a known true basis; optionally save each released
   basis as .npy.

   Who owns what: main owns the settings (strings point into argv), the
   subscriber, each received snapshot until it is printed, the copy of the
   previous released basis and the truth matrix, and frees them before it
   returns.  The angles are computed in angles.c.  Errors: one line on stderr
   naming the program, exit codes of args.h (documented in --help). */
#include "angles.h"
#include "args.h"
#include "io.h"
#include "json.h"
#include "netopts.h"

#include "dpsubspace_net.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char s_synopsis[] =
    "Usage: dps-watch [--connect EP] [security] [--truth basis.npy] [--save-dir DIR]\n"
    "                 [--count N] [--from-epoch E] [--timeout S] [--json]\n"
    "\n"
    "Subscribes to a dps-collector's snapshots (its --publish endpoint) and prints\n"
    "one block per snapshot.  A new subscriber gets the collector's latest\n"
    "snapshot at once, then each new one as its epoch closes.  Everything shown is\n"
    "public: the snapshots are differentially private releases.\n";

static const char s_epilogue[] =
    "Output, one block per snapshot, e.g.\n"
    "  snapshot seq 2  epoch 1  released  SEEDED (not secure)  at 2025-01-01 12:00:00\n"
    "    rows 1000 in 125 buckets  radius 0.0412  aggregator reference  d 200  k 4\n"
    "    noise level 0.0123 (from released quantities: <= 0.1 mostly signal, >= 1 random level)\n"
    "    privacy this epoch  rho 1  delta 1e-06  eps 7.11 at delta 1e-05\n"
    "    privacy total       rho 2  delta 2e-06  eps 10.82 at delta 1e-05\n"
    "    budget left         8 rho under the collector's cap\n"
    "    vs previous (epoch 0)  angles 0.71 1.02 1.63 2.40 deg  sin largest 0.0419\n"
    "    vs truth               angles 0.95 1.48 2.21 3.37 deg  sin largest 0.0588\n"
    "  status           released (a private basis), failed (the mechanism said\n"
    "                   FAIL: budget spent, no basis) or refused (it would pass the\n"
    "                   budget cap: nothing spent); the reason follows\n"
    "  SEEDED           the collector runs with --seed: reproducible noise, NOT\n"
    "                   secure (tests and experiments only)\n"
    "  rows, buckets    rows in the completed buckets that were aggregated (the\n"
    "                   mechanisms that take rows, e.g. power and gaussian: rows only)\n"
    "  noise level      how far the basis is from noise, computed by the mechanism\n"
    "                   from its released output (post-processing); a line WEAK\n"
    "                   follows when it is >= 0.75: the basis is near random level\n"
    "  privacy          zCDP (rho, delta) of this epoch and in total, and as\n"
    "                   (eps, delta)-DP at the collector's --delta-target: the\n"
    "                   exact Gaussian eps of mu = sqrt(2 rho) for an epoch of\n"
    "                   the gaussian or power mechanism, and for the total while\n"
    "                   every epoch charged was one (not after a restart on a\n"
    "                   ledger with charges: it does not say which mechanism\n"
    "                   spent them); else the CKS conversion of rho\n"
    "  budget left      what the collector's cap (--cap-rho or --cap-eps) leaves\n"
    "                   after this epoch, or no cap (--no-cap)\n"
    "  angles           the k principal angles (degrees, smallest first) between\n"
    "                   this basis and the previous released one / the truth:\n"
    "                   acos of the singular values of A B^T; below ~0.03 degrees\n"
    "                   they are at float32 rounding level\n"
    "  sin largest      sin of the largest angle (= ||P_A - P_B||_2; 0 same\n"
    "                   subspace, 1 some direction orthogonal), computed from the\n"
    "                   residual, accurate also for tiny angles\n"
    "--json prints one object per line instead: seq, epoch, status, reason,\n"
    "seeded, time_unix_ms, d, k, aggregator, rows_used, buckets_used, radius,\n"
    "radius_unrelated, noise_level (0: not computed), weak, rho_epoch,\n"
    "delta_epoch, eps_epoch, rho_total, delta_total, eps_total, delta_target,\n"
    "budget_left, budget_unit (rho, eps or none; budget_left null without a cap),\n"
    "prev_epoch, angles_to_prev_deg, sin_to_prev, angles_to_truth_deg,\n"
    "sin_to_truth, saved (null where they do not apply; an infinite eps is null).\n"
    "The names are the same in every program and the Python package\n"
    "(docs/operators.md, \"Names\"); dps-report draws these lines as a PNG.\n"
    "\n"
    "Examples:\n"
    "  dps-watch --insecure-plaintext --connect ipc:///tmp/c.pub --count 2 --truth basis.npy\n"
    "  dps-watch --server-key keys/collector.key --key keys/dash.key_secret \\\n"
    "      --connect tcp://collector.example:7781 --save-dir bases --json\n"
    "\n"
    "Exit codes: 0 --count snapshots received, or stopped by SIGINT/SIGTERM;\n"
    "1 runtime failure (network, memory, numerics, writing --save-dir);\n"
    "2 usage (unknown flag, missing or bad value, plaintext to a non-local\n"
    "endpoint); 3 --truth or a key file unreadable or malformed, or --truth's\n"
    "shape differs from the snapshots'; 6 nothing arrived for --timeout seconds.\n"
    "While nothing answers at --connect (no collector there, or another security\n"
    "setting), one line on standard error says so after 5 s; dps-watch keeps\n"
    "trying.\n";

typedef struct {
    const char *connect, *truth, *save_dir;
    uint64_t count, from_epoch;
    double timeout;
    int json, help;
    cli_net_flags net;
} watch_args;

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What was compared with what, for one snapshot. */
typedef struct {
    int have_prev, have_truth;
    uint64_t prev_epoch;
    double *ang_prev, *ang_truth; /* k each */
    double sin_to_prev, sin_to_truth;
    char saved[4200];
} s_compare;

/* This epoch's cost as eps at the snapshot's delta_target, by its
   mechanism's rule: one gaussian or power release is a Gaussian mechanism
   (exact eps), the others are stated by the CKS conversion.  (The total's eps
   is the collector's, carried by the snapshot.) */
static double s_eps_epoch(const dps_snapshot_info *in)
{
    return dps_zcdp_eps_total_kind(in->epoch_cost, dps_aggregator_charge_kind(in->aggregator), in->delta_target);
}

/* "rho R  delta D  eps E at delta T" for a cost. */
static void s_privacy_text(char *out, size_t n, dps_zcdp c, double eps, double delta_target)
{
    char e[32];
    if (isfinite(eps))
        snprintf(e, sizeof e, "%.4g", eps);
    else
        snprintf(e, sizeof e, "inf");
    snprintf(out, n, "rho %.4g  delta %.3g  eps %s at delta %.3g", c.rho, c.delta, e, delta_target);
}

static void s_angles_text(FILE *f, const double *deg, size_t k, double s)
{
    fputs("angles", f);
    for (size_t i = 0; i < k; i++)
        fprintf(f, " %.3g", deg[i]);
    fprintf(f, " deg  sin largest %.4g\n", s);
}

static void s_print_text(const dps_snapshot_info *in, const s_compare *cmp)
{
    char when[64] = "";
    if (in->time_unix_ms) {
        time_t t = (time_t)(in->time_unix_ms / 1000);
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof when, "  at %Y-%m-%d %H:%M:%S", &tm);
    }
    printf("snapshot seq %" PRIu64 "  epoch %" PRIu64 "  %s%s%s\n", in->seq, in->epoch,
           in->status == DPS_SNAP_RELEASED ? "released" : in->status == DPS_SNAP_FAILED ? "FAILED" : "REFUSED",
           in->seeded ? "  SEEDED (not secure)" : "", when);
    if (in->status != DPS_SNAP_RELEASED)
        printf("  reason: %s\n", in->reason && *in->reason ? in->reason : "(none given)");
    if (in->buckets_used || in->radius > 0)
        printf("  rows %" PRIu64 " in %zu buckets  radius %.4g  aggregator %s  d %zu  k %zu\n", in->rows_used,
               in->buckets_used, in->radius, dps_aggregator_name(in->aggregator), in->d, in->k);
    else /* the mechanisms that take rows, not buckets */
        printf("  rows %" PRIu64 "  aggregator %s  d %zu  k %zu\n", in->rows_used, dps_aggregator_name(in->aggregator),
               in->d, in->k);
    if (in->status == DPS_SNAP_RELEASED && in->noise_level > 0)
        printf("  noise level %.3g (from released quantities: <= 0.1 mostly signal, >= 1 random level)\n",
               in->noise_level);
    if (dps_snapshot_weak(in) && in->noise_level > 0)
        printf("  WEAK: noise level %.3g >= %.2g: the basis is near the random level and carries little\n"
               "        information about the data\n", in->noise_level, DPS_NOISE_LEVEL_WEAK);
    else if (dps_snapshot_weak(in))
        printf("  WEAK: the buckets agreed only at radius %.3g, %.0f%% of the distance between unrelated buckets\n"
               "        (%.3g): this basis carries little information about the data\n",
               in->radius, 100 * in->radius / in->radius_unrelated, in->radius_unrelated);
    char p[160];
    s_privacy_text(p, sizeof p, in->epoch_cost, s_eps_epoch(in), in->delta_target);
    printf("  privacy this epoch  %s\n", p);
    s_privacy_text(p, sizeof p, in->total, in->eps_total, in->delta_target);
    printf("  privacy total       %s\n", p);
    if (strcmp(in->budget_unit, "none") == 0)
        printf("  budget left         no cap: the collector runs with --no-cap\n");
    else if (in->budget_unit[0])
        printf("  budget left         %.4g %s under the collector's cap\n", in->budget_left, in->budget_unit);
    else
        printf("  budget left         not stated by the collector\n");
    if (in->status == DPS_SNAP_RELEASED) {
        if (cmp->have_prev) {
            char lbl[48];
            snprintf(lbl, sizeof lbl, "vs previous (epoch %" PRIu64 ")", cmp->prev_epoch);
            printf("  %-22s ", lbl);
            s_angles_text(stdout, cmp->ang_prev, in->k, cmp->sin_to_prev);
        } else {
            printf("  vs previous            (none: the first released snapshot seen)\n");
        }
        if (cmp->have_truth) {
            printf("  %-22s ", "vs truth");
            s_angles_text(stdout, cmp->ang_truth, in->k, cmp->sin_to_truth);
        }
        if (cmp->saved[0])
            printf("  saved %s\n", cmp->saved);
    }
    printf("\n");
}

static void s_json_angles(cli_json *j, const char *key, int have, const double *deg, size_t k)
{
    if (!have) {
        cli_json_null(j, key);
        return;
    }
    cli_json_array_begin(j, key);
    for (size_t i = 0; i < k; i++)
        cli_json_num(j, NULL, deg[i]);
    cli_json_array_end(j);
}

static void s_print_json(const dps_snapshot_info *in, const s_compare *cmp)
{
    cli_json j;
    cli_json_init_compact(&j, stdout);
    cli_json_object_begin(&j, NULL);
    cli_json_u64(&j, "seq", in->seq);
    cli_json_u64(&j, "epoch", in->epoch);
    cli_json_str(&j, "status", dps_snapshot_status_name(in->status));
    cli_json_str(&j, "reason", in->reason ? in->reason : "");
    cli_json_bool(&j, "seeded", in->seeded);
    cli_json_u64(&j, "time_unix_ms", in->time_unix_ms);
    cli_json_u64(&j, "d", in->d);
    cli_json_u64(&j, "k", in->k);
    cli_json_str(&j, "aggregator", dps_aggregator_name(in->aggregator));
    cli_json_u64(&j, "rows_used", in->rows_used);
    cli_json_u64(&j, "buckets_used", in->buckets_used);
    cli_json_num(&j, "radius", in->radius);
    cli_json_num(&j, "radius_unrelated", in->radius_unrelated);
    cli_json_num(&j, "noise_level", in->noise_level);
    cli_json_bool(&j, "weak", dps_snapshot_weak(in));
    cli_json_num(&j, "rho_epoch", in->epoch_cost.rho);
    cli_json_num(&j, "delta_epoch", in->epoch_cost.delta);
    cli_json_num(&j, "eps_epoch", s_eps_epoch(in));
    cli_json_num(&j, "rho_total", in->total.rho);
    cli_json_num(&j, "delta_total", in->total.delta);
    cli_json_num(&j, "eps_total", in->eps_total);
    cli_json_num(&j, "delta_target", in->delta_target);
    cli_json_num(&j, "budget_left", in->budget_unit[0] ? in->budget_left : NAN);
    cli_json_str(&j, "budget_unit", in->budget_unit[0] ? in->budget_unit : NULL);
    if (cmp->have_prev)
        cli_json_u64(&j, "prev_epoch", cmp->prev_epoch);
    else
        cli_json_null(&j, "prev_epoch");
    s_json_angles(&j, "angles_to_prev_deg", cmp->have_prev, cmp->ang_prev, in->k);
    cli_json_num(&j, "sin_to_prev", cmp->have_prev ? cmp->sin_to_prev : NAN);
    s_json_angles(&j, "angles_to_truth_deg", cmp->have_truth, cmp->ang_truth, in->k);
    cli_json_num(&j, "sin_to_truth", cmp->have_truth ? cmp->sin_to_truth : NAN);
    cli_json_str(&j, "saved", cmp->saved[0] ? cmp->saved : NULL);
    cli_json_object_end(&j);
    cli_json_finish(&j);
}

/* Load --truth: k x d rows whose span is the true subspace (orthonormalised
   here if they are not orthonormal). */
static int s_load_truth(const char *path, float **T, size_t *k, size_t *d)
{
    cli_msg m;
    int rc = cli_read_all(path, CLI_FMT_AUTO, 0, T, k, d, &m);
    if (rc) {
        cli_error("--truth: %s", m.msg);
        return rc;
    }
    if (*k >= *d) {
        cli_error("--truth: '%s' is %zu x %zu; it needs k < d rows (a k x d basis)", path, *k, *d);
        return CLI_EXIT_INPUT;
    }
    if (cli_orthonormality_error(*T, *k, *d) > 1e-4 && cli_orthonormalize_rows(*T, *k, *d) != 0) {
        cli_error("--truth: the %zu rows of '%s' are linearly dependent; give a basis", *k, path);
        return CLI_EXIT_INPUT;
    }
    return 0;
}

/* Compare a released snapshot with the previous one and the truth, save it.
   Returns 0 or an exit code (printed). */
static int s_compare_released(const watch_args *a, const dps_snapshot_info *in, const float *V, const float *prev,
                              const dps_snapshot_info *prev_in, const float *T, size_t tk, size_t td,
                              s_compare *cmp)
{
    if (prev && prev_in->d == in->d && prev_in->k == in->k) {
        if (cli_principal_angles(prev, V, in->k, in->d, cmp->ang_prev, &cmp->sin_to_prev)) {
            cli_error("computing principal angles failed (LAPACK)");
            return CLI_EXIT_RUNTIME;
        }
        cmp->have_prev = 1;
        cmp->prev_epoch = prev_in->epoch;
    }
    if (T) {
        if (tk != in->k || td != in->d) {
            cli_error("--truth is %zu x %zu but the collector's snapshots are k x d = %zu x %zu; give the true "
                      "basis of this stream",
                      tk, td, in->k, in->d);
            return CLI_EXIT_INPUT;
        }
        if (cli_principal_angles(T, V, in->k, in->d, cmp->ang_truth, &cmp->sin_to_truth)) {
            cli_error("computing principal angles failed (LAPACK)");
            return CLI_EXIT_RUNTIME;
        }
        cmp->have_truth = 1;
    }
    if (a->save_dir) {
        cli_msg m;
        snprintf(cmp->saved, sizeof cmp->saved, "%s/epoch-%" PRIu64 ".npy", a->save_dir, in->epoch);
        if (cli_npy_write(cmp->saved, V, in->k, in->d, 0, &m)) {
            cli_error("--save-dir: %s", m.msg);
            return CLI_EXIT_RUNTIME;
        }
    }
    return 0;
}

/* Seconds without a handshake before dps-watch says nothing answers. */
#define WATCH_ABSENT_S 5.0

/* Receive and print until --count, --timeout or a signal.  Returns the exit code. */
static int s_run(const watch_args *a, const cli_net_sec *ns, const float *T, size_t tk, size_t td)
{
    dps_subscriber *sub = NULL;
    int rc = dps_subscriber_new(&sub, a->connect, &ns->sec);
    if (!rc)
        rc = dps_subscriber_set_from_epoch(sub, a->from_epoch);
    if (rc) {
        cli_error("cannot subscribe to %s: %s", a->connect, dps_strerror(rc));
        return cli_net_exit_code(rc);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    float *prev = NULL;
    dps_snapshot_info prev_in;
    memset(&prev_in, 0, sizeof prev_in);
    uint64_t got = 0;
    double last = s_now();
    int code = 0, said_absent = 0;
    while (!s_stop && !code && !(a->count && got >= a->count)) {
        dps_snapshot *snap = NULL;
        rc = dps_subscriber_recv(sub, 250, &snap);
        if (rc == DPS_ETIMEOUT && !said_absent && s_now() - last >= WATCH_ABSENT_S && !dps_subscriber_connected(sub)) {
            said_absent = 1; /* once: the subscriber keeps trying, and says nothing more until something comes */
            cli_error("nothing answers at %s after %g s (still trying): is a collector running with that --publish "
                      "endpoint and the same security (CURVE keys vs --insecure-plaintext)?",
                      a->connect, WATCH_ABSENT_S);
        }
        if (rc == DPS_ETIMEOUT) {
            if (a->timeout > 0 && s_now() - last >= a->timeout) {
                cli_error("no snapshot from %s for %g s (--timeout): is the collector publishing there? an epoch "
                          "is released only when its t*m rows have arrived (dps-status shows how many it has)",
                          a->connect, a->timeout);
                code = CLI_EXIT_TIMEOUT;
            }
            continue;
        }
        if (rc && s_stop)
            break; /* the signal interrupted the wait: a clean stop, exit 0 */
        if (rc == DPS_EPROTO) {
            cli_error("skipped a message from %s that is not a valid snapshot (another protocol version?)",
                      a->connect);
            continue;
        }
        if (rc) {
            cli_error("receiving from %s failed: %s", a->connect, dps_strerror(rc));
            code = cli_net_exit_code(rc);
            break;
        }
        last = s_now();
        got++;
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        s_compare cmp;
        memset(&cmp, 0, sizeof cmp);
        double *ang = malloc(2 * in.k * sizeof *ang);
        if (!ang) {
            cli_error("out of memory");
            dps_snapshot_destroy(&snap);
            code = CLI_EXIT_RUNTIME;
            break;
        }
        cmp.ang_prev = ang;
        cmp.ang_truth = ang + in.k;
        const float *V = dps_snapshot_basis(snap);
        if (in.status == DPS_SNAP_RELEASED && V)
            code = s_compare_released(a, &in, V, prev, &prev_in, T, tk, td, &cmp);
        if (!code) {
            if (a->json)
                s_print_json(&in, &cmp);
            else
                s_print_text(&in, &cmp);
            fflush(stdout);
        }
        free(ang);
        if (!code && in.status == DPS_SNAP_RELEASED && V) { /* keep a copy as the previous basis */
            float *copy = realloc(prev, in.k * in.d * sizeof *copy);
            if (copy) {
                memcpy(copy, V, in.k * in.d * sizeof *copy);
                prev = copy;
                prev_in = in;
                prev_in.reason = NULL; /* points into snap */
            }
        }
        dps_snapshot_destroy(&snap);
    }
    uint64_t received = 0, missed = 0, bad = 0;
    dps_subscriber_counts(sub, &received, &missed, &bad);
    if (missed)
        fprintf(stderr, "dps-watch: note: %" PRIu64 " snapshots were missed (gaps in sequence numbers; a slow "
                        "subscriber loses old snapshots, the collector's state dir keeps them all)\n",
                missed);
    free(prev);
    dps_subscriber_destroy(&sub);
    return code;
}

/* Parse the flags, print --help, or watch; returns the exit code. */
int main(int argc, char **argv)
{
    cli_set_program("dps-watch");
    watch_args a = {.connect = "tcp://127.0.0.1:7781"};
    cli_opt opts[] = {
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Collector:", 0},
        {"--connect", CLI_OPT_STRING, &a.connect, "EP", "tcp://127.0.0.1:7781",
         "the collector's publish endpoint (its --publish)", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Output:", 0},
        {"--truth", CLI_OPT_STRING, &a.truth, "FILE", "none",
         "a known k x d basis of the true subspace (.npy, e.g. dps-gen --basis; CSV/raw by extension): also "
         "print the angles to it (rows need not be orthonormal: their span is used)",
         0},
        {"--save-dir", CLI_OPT_STRING, &a.save_dir, "DIR", "not saved",
         "save each released basis as DIR/epoch-N.npy (k x d float32; replaced if it exists)", 0},
        {"--count", CLI_OPT_U64, &a.count, "N", "0: until stopped",
         "exit (0) after N snapshots (all statuses count; the first may be the collector's latest, sent on "
         "subscribing)",
         0},
        {"--from-epoch", CLI_OPT_U64, &a.from_epoch, "E", "0: all",
         "skip snapshots of epochs before E, the collector's latest sent on subscribing included (it may be "
         "an earlier job's; dps-status shows the open epoch)",
         0},
        {"--timeout", CLI_OPT_DOUBLE, &a.timeout, "S", "0: wait forever",
         "exit 6 when no snapshot arrives for S seconds", 0},
        {"--json", CLI_OPT_FLAG, &a.json, NULL, NULL, "one JSON object per line instead of the text blocks", 0},
        CLI_NET_OPTS(a.net, "our own NAME.key_secret (dps-keygen NAME); if the collector has --subscriber-keys, "
                            "NAME.key must be in that directory"),
        {"--help", CLI_OPT_FLAG, &a.help, NULL, NULL, "print this help and exit", 0},
    };
    size_t n_opts = sizeof opts / sizeof opts[0];
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, NULL, 0, NULL, &a.help, s_synopsis, s_epilogue);
    if (rc >= 0)
        return rc;
    if (cli_opt_find(opts, n_opts, "--timeout")->given && !(a.timeout > 0)) {
        cli_error("--timeout must be a positive number of seconds (got %g)", a.timeout);
        return CLI_EXIT_USAGE;
    }
    cli_net_sec ns;
    cli_msg m;
    const char *eps[1] = {a.connect};
    if ((rc = cli_net_security(&a.net, eps, 1, &ns, &m)) != 0) {
        cli_error("%s", m.msg);
        return rc;
    }
    if (a.save_dir) {
        struct stat st;
        if (stat(a.save_dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(a.save_dir, W_OK) != 0) {
            cli_error("--save-dir: '%s' is not a writable directory; create it first", a.save_dir);
            return CLI_EXIT_USAGE;
        }
    }
    float *T = NULL;
    size_t tk = 0, td = 0;
    if (a.truth && (rc = s_load_truth(a.truth, &T, &tk, &td)) != 0) {
        free(T);
        return rc;
    }
    rc = s_run(&a, &ns, T, tk, td);
    free(T);
    memset(&ns, 0, sizeof ns);
    return rc;
}
