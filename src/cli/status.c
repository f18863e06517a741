/* status.c - dps-status: ask a dps-collector's status endpoint
   (dps_collector_status_query) and print its counters readably, or as JSON.

   Who owns what: everything is on main's stack; strings point into argv.
   Errors: one line on stderr naming the program, exit codes of args.h
   (documented in --help). */
#include "args.h"
#include "json.h"
#include "netopts.h"

#include "dpsubspace_net.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

static const char s_synopsis[] =
    "Usage: dps-status [--status EP] [security] [--producer ID] [--json] [--timeout MS]\n"
    "\n"
    "Asks a dps-collector's status endpoint (its --status) for its counters: the\n"
    "epoch, the rows it took, the privacy budget spent and left, and why it\n"
    "refused what it refused.  The refusal counts describe the data and are\n"
    "operator information: they are NOT differentially private.\n";

static const char s_epilogue[] =
    "JSON (--json): endpoint, d, k, epoch, rows_accepted, rows_in_epoch, epoch_rows,\n"
    "buckets_completed, rho_total, delta_total, eps_total (spent by every charged\n"
    "epoch; eps at delta_target: the exact Gaussian eps of mu = sqrt(2 rho_total)\n"
    "while every epoch charged was gaussian or power and the collector started on\n"
    "an empty ledger, else the CKS conversion of rho), delta_target, budget_unit\n"
    "(rho, eps or none), budget_left (null: no cap), last_snapshot_seq, uptime_s,\n"
    "shards (0: one process; R: sharded over R MPI ranks), refusals {name: count}\n"
    "(batches and requests refused), counters {name: count} (everything else\n"
    "counted) and, with --producer, producer {id, batches, rows, seq_gaps}.  The\n"
    "names are the snapshots' (docs/operators.md, \"Names\").\n"
    "\n"
    "Example:\n"
    "  dps-status --insecure-plaintext --status ipc:///tmp/c.st\n"
    "  dps-status --server-key keys/collector.key --key keys/ops.key_secret --status tcp://collector.example:7782\n"
    "\n"
    "Exit codes: 0 answered; 1 runtime failure (network); 2 usage (unknown flag,\n"
    "missing or bad value, plaintext to a non-local endpoint); 3 a key file that\n"
    "does not load; 5 the collector refused our CURVE key (not in its\n"
    "--authorized-keys); 6 no answer within --timeout (collector down, or another\n"
    "endpoint or security setting).\n";

/* A short explanation of each counter the collector reports. */
static const struct {
    const char *name, *what;
} s_explain[] = {
    {"undecodable", "messages that are not a RowBatch (garbage, truncated, multipart): refused whole"},
    {"bad_version", "batches of another protocol version: refused whole"},
    {"wrong_dim", "batches whose row length is not the collector's d: refused whole"},
    {"count_mismatch", "batches whose row count does not match their data: refused whole"},
    {"empty_batch", "batches with no rows: refused"},
    {"bad_producer_id", "batches whose producer id is too long or not printable: refused whole"},
    {"replayed", "batches whose seq their producer's run had already sent (a replay or a reordering): refused "
                 "whole, so no row enters an epoch twice"},
    {"slice_not_sharded", "a sharded producer's slices sent to a one-process collector: refused whole"},
    {"rows_nan", "rows with a NaN: took their slot as the zero vector"},
    {"rows_inf", "rows with +-Inf (no NaN): took their slot as the zero vector"},
    {"rows_zero", "rows of zero norm: took their slot as the zero vector"},
    {"rows_discarded", "rows in buckets still incomplete when an epoch closed (each row is used once)"},
    {"auth_refused", "CURVE clients refused: their key is not in the authorized keys"},
    {"auth_revoked", "batches and status requests refused because their connection's key has left the "
                     "authorized keys since it connected"},
    {"disconnects", "ingest connections that ended: every producer's exit, and a message above "
                    "--max-batch-rows (dropped with its connection)"},
    {"seq_gaps", "batches missing from a producer's sequence (lost in transit or a producer restarted)"},
    {"connections_dropped", "producer connections dropped while their producer kept running (a batch above "
                            "--max-batch-rows, or no memory for one): the batches in flight on them were lost"},
    {"connections_empty", "producer connections that ended without delivering a batch: a producer that sent "
                          "nothing or whose key was refused, or one whose batches were above --max-batch-rows "
                          "(dropped with the connection; a producer with the status endpoint splits its batches)"},
    {"batches_cut_short", "batches whose rows could not all be taken for want of memory (for a new epoch's "
                          "buckets; a sharded rank: to hold its slice): the rows before were used, the rest dropped, "
                          "the batch counted as refused to its producer"},
    {"epochs_internal_error", "epochs charged whose mechanism then failed (LAPACK, memory): published as FAILED "
                              "with the reason; their budget stays spent"},
    {"credit_grants", "credit requests answered with more batches a producer may send (ingest flow control)"},
    {"credit_waits", "credit requests that got nothing new: the ingest buffer was full, the producer waits"},
    {"credit_reclaimed", "batches of credit taken back unused (a producer done, disconnected or silent 10 s)"},
    {"credit_overruns", "batches a producer sent beyond its credit (an old producer, or a stale grant)"},
    {"credit_stalls", "producers that asked for credit 5 s holding credit for batches that never came, with "
                      "nothing queued: those batches were lost or the credit rules erred; the credit came back "
                      "(each is logged)"},
    {"batches_dropped_slice_missing", "sharded collector: batches dropped on every rank because some rank did not get "
                                      "its slice within --shard-wait, or had no memory to hold it (that rank's "
                                      "batches_cut_short)"},
    {"slices_refused", "sharded collector: batches rank 0 refused (whole rows, another rank's slice, no stream)"},
    {"slices_expired", "sharded collector: slices a rank held that rank 0 never asked for (that rank's count)"},
};

static const char *s_what(const char *name)
{
    for (size_t i = 0; i < sizeof s_explain / sizeof s_explain[0]; i++)
        if (strcmp(s_explain[i].name, name) == 0)
            return s_explain[i].what;
    return "";
}

static int s_max(int a, int b) { return a > b ? a : b; }

/* The help's epilogue: s_epilogue, then every refusal and counter with its
   explanation (the same words as the text output's). */
static void s_epilogue_with_names(char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "%s\nThe refusals and counters, by name:\n", s_epilogue);
    int wide = 22; /* the longest name's width, so that the explanations line up */
    for (size_t i = 0; i < sizeof s_explain / sizeof s_explain[0]; i++)
        wide = s_max(wide, (int)strlen(s_explain[i].name));
    for (size_t i = 0; i < sizeof s_explain / sizeof s_explain[0] && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "  %-*s %s\n", wide, s_explain[i].name, s_explain[i].what);
}

static void s_print_text(const char *ep, const dps_collector_status *st, const char *producer)
{
    printf("collector %s  (d %zu, k %zu, up %" PRIu64 " s)\n", ep, st->d, st->k, st->uptime_s);
    if (st->shards > 1)
        printf("  sharded over %" PRIu32 " MPI ranks: producers send each row split in %" PRIu32 " slices "
               "(dps-produce --shards %" PRIu32 ")\n", st->shards, st->shards, st->shards);
    printf("  epoch               %" PRIu64 " (the open one; numbered from 0)\n", st->epoch);
    printf("  rows accepted       %" PRIu64 " (all epochs)\n", st->rows_accepted);
    printf("  open epoch          %" PRIu64 " of %" PRIu64 " rows (%.1f%%)\n", st->rows_in_epoch, st->epoch_rows,
           st->epoch_rows ? 100.0 * (double)st->rows_in_epoch / (double)st->epoch_rows : 0.0);
    printf("  buckets completed   %" PRIu64 " (all epochs)\n", st->buckets_completed);
    char eps[32];
    if (isfinite(st->eps_total))
        snprintf(eps, sizeof eps, "%.4g", st->eps_total);
    else
        snprintf(eps, sizeof eps, "inf");
    printf("  privacy spent       rho %.4g  delta %.3g  (eps %s at delta %.3g)\n", st->rho_total, st->delta_total,
           eps, st->delta_target);
    if (strcmp(st->budget_unit, "none") == 0 || !isfinite(st->budget_left))
        printf("  budget left         no cap\n");
    else
        printf("  budget left         %.4g %s\n", st->budget_left, st->budget_unit);
    if (st->last_snapshot_seq)
        printf("  last snapshot seq   %" PRIu64 "\n", st->last_snapshot_seq);
    else
        printf("  last snapshot seq   none published yet\n");
    int wide = 21; /* the longest name's width (the sharded collector's are longer) */
    for (size_t i = 0; i < st->n_refusals; i++)
        wide = s_max(wide, (int)strlen(st->refusals[i].name));
    for (size_t i = 0; i < st->n_counters; i++)
        wide = s_max(wide, (int)strlen(st->counters[i].name));
    printf("  refusals (operator information, not differentially private):\n");
    for (size_t i = 0; i < st->n_refusals; i++)
        printf("    %-*s %10" PRIu64 "  %s\n", wide, st->refusals[i].name, st->refusals[i].value,
               s_what(st->refusals[i].name));
    printf("  counters (the same):\n");
    for (size_t i = 0; i < st->n_counters; i++)
        printf("    %-*s %10" PRIu64 "  %s\n", wide, st->counters[i].name, st->counters[i].value,
               s_what(st->counters[i].name));
    if (producer)
        printf("  producer '%s'  batches taken %" PRIu64 "  rows %" PRIu64 "  sequence gaps %" PRIu64 "%s\n",
               producer, st->producer_batches, st->producer_rows, st->producer_seq_gaps,
               st->producer_batches ? "" : "  (unknown id, or nothing taken yet)");
}

static void s_print_json(const char *ep, const dps_collector_status *st, const char *producer)
{
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_object_begin(&j, NULL);
    cli_json_str(&j, "endpoint", ep);
    cli_json_u64(&j, "d", st->d);
    cli_json_u64(&j, "k", st->k);
    cli_json_u64(&j, "epoch", st->epoch);
    cli_json_u64(&j, "rows_accepted", st->rows_accepted);
    cli_json_u64(&j, "rows_in_epoch", st->rows_in_epoch);
    cli_json_u64(&j, "epoch_rows", st->epoch_rows);
    cli_json_u64(&j, "buckets_completed", st->buckets_completed);
    cli_json_num(&j, "rho_total", st->rho_total);
    cli_json_num(&j, "delta_total", st->delta_total);
    cli_json_num(&j, "eps_total", st->eps_total);
    cli_json_num(&j, "delta_target", st->delta_target);
    cli_json_str(&j, "budget_unit", st->budget_unit);
    cli_json_num(&j, "budget_left", st->budget_left);
    cli_json_u64(&j, "last_snapshot_seq", st->last_snapshot_seq);
    cli_json_u64(&j, "uptime_s", st->uptime_s);
    cli_json_u64(&j, "shards", st->shards);
    cli_json_object_begin(&j, "refusals");
    for (size_t i = 0; i < st->n_refusals; i++)
        cli_json_u64(&j, st->refusals[i].name, st->refusals[i].value);
    cli_json_object_end(&j);
    cli_json_object_begin(&j, "counters");
    for (size_t i = 0; i < st->n_counters; i++)
        cli_json_u64(&j, st->counters[i].name, st->counters[i].value);
    cli_json_object_end(&j);
    if (producer) {
        cli_json_object_begin(&j, "producer");
        cli_json_str(&j, "id", producer);
        cli_json_u64(&j, "batches", st->producer_batches);
        cli_json_u64(&j, "rows", st->producer_rows);
        cli_json_u64(&j, "seq_gaps", st->producer_seq_gaps);
        cli_json_object_end(&j);
    }
    cli_json_object_end(&j);
    cli_json_finish(&j);
}

/* One line of --watch: the non-zero counts of list, but the routine ones
   (credit flow control, producers' disconnects), or "none". */
static void s_print_nonzero(const char *title, const dps_named_count *list, size_t n)
{
    int any = 0;
    printf("  %-13s", title);
    for (size_t i = 0; i < n; i++)
        if (list[i].value && strncmp(list[i].name, "credit_", 7) != 0 && strcmp(list[i].name, "disconnects") != 0) {
            printf("%s %s %" PRIu64, any ? "," : "", list[i].name, list[i].value);
            any = 1;
        }
    printf("%s\n", any ? "" : " none");
}

/* One frame of --watch: the figures an operator watches, on one screen.
   rate: rows/s since the last frame (< 0: not known yet). */
static void s_print_frame(const char *ep, const dps_collector_status *st, double rate)
{
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(now, sizeof now, "%H:%M:%S", localtime_r(&t, &tm));
    printf("dps-status --watch  %s  %s  (d %zu, k %zu, up %" PRIu64 " s)\n", ep, now, st->d, st->k, st->uptime_s);
    if (rate >= 0)
        printf("  rows/s        %.0f  (%" PRIu64 " rows in all)\n", rate, st->rows_accepted);
    else
        printf("  rows/s        -  (%" PRIu64 " rows in all; the rate from the next frame on)\n", st->rows_accepted);
    double f = st->epoch_rows ? (double)st->rows_in_epoch / (double)st->epoch_rows : 0;
    char bar[41];
    int full = (int)(f * 40 + 0.5);
    for (int i = 0; i < 40; i++)
        bar[i] = i < full ? '#' : '.';
    bar[40] = 0;
    printf("  epoch %-6" PRIu64 "[%s] %5.1f%%  %" PRIu64 " of %" PRIu64 " rows\n", st->epoch, bar, 100 * f,
           st->rows_in_epoch, st->epoch_rows);
    if (strcmp(st->budget_unit, "none") == 0 || !isfinite(st->budget_left))
        printf("  budget left   no cap (spent rho %.4g, eps %.4g at delta %.3g)\n", st->rho_total, st->eps_total,
               st->delta_target);
    else
        printf("  budget left   %.4g %s (spent rho %.4g, eps %.4g at delta %.3g)\n", st->budget_left,
               st->budget_unit, st->rho_total, st->eps_total, st->delta_target);
    printf("  snapshots     %" PRIu64 " published (the last sequence number)\n", st->last_snapshot_seq);
    s_print_nonzero("refusals", st->refusals, st->n_refusals);
    s_print_nonzero("rows, losses", st->counters, st->n_counters);
}

/* --watch: a frame every interval seconds, redrawn in place on a terminal
   (one after another otherwise), count frames (0: until interrupted); a
   query that fails is shown and retried.  The exit code of the last query. */
static int s_watch(const char *ep, const dps_security *sec, int timeout_ms, double interval, uint64_t count)
{
    int tty = isatty(STDOUT_FILENO), rc = 0;
    double last_t = -1;
    uint64_t last_rows = 0;
    for (uint64_t i = 0; count == 0 || i < count; i++) {
        if (i > 0) {
            struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
            nanosleep(&ts, NULL);
        }
        dps_collector_status st;
        rc = dps_collector_status_query(ep, sec, timeout_ms, &st);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double t = (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
        printf("%s", tty ? "\033[H\033[2J" : (i ? "\n" : ""));
        if (rc) {
            printf("dps-status --watch  %s: no answer (%s); asking again in %g s\n", ep, dps_strerror(rc), interval);
            last_t = -1;
        } else {
            s_print_frame(ep, &st, last_t >= 0 ? (double)(st.rows_accepted - last_rows) / (t - last_t) : -1);
            last_t = t;
            last_rows = st.rows_accepted;
        }
        fflush(stdout);
    }
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_program("dps-status");
    const char *ep = "tcp://127.0.0.1:7782", *producer = NULL;
    uint64_t timeout_ms = 5000, count = 0;
    double interval = 1.0;
    int json = 0, help = 0, watch = 0;
    cli_net_flags net = {0};
    cli_opt opts[] = {
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Options:", 0},
        {"--status", CLI_OPT_STRING, &ep, "EP", "tcp://127.0.0.1:7782",
         "the collector's status endpoint, the --status of dps-collector and dps-produce (--connect is the same "
         "option)", 0},
        {"--producer", CLI_OPT_STRING, &producer, "ID", "none",
         "also show what the collector took from this producer id (dps-produce --id)", 0},
        {"--timeout", CLI_OPT_U64, &timeout_ms, "MS", "5000", "give up (exit 6) after MS milliseconds", 0},
        {"--json", CLI_OPT_FLAG, &json, NULL, NULL, "print JSON instead of text", 0},
        {"--watch", CLI_OPT_FLAG, &watch, NULL, NULL,
         "a live view: rows/s, the open epoch's progress, the budget left and the refusals, redrawn every "
         "--interval seconds (Ctrl-C ends it)", 0},
        {"--interval", CLI_OPT_DOUBLE, &interval, "S", "1", "--watch: seconds between frames (0.1 to 3600)", 0},
        {"--count", CLI_OPT_U64, &count, "N", "0", "--watch: stop after N frames (0: until interrupted)", 0},
        CLI_NET_OPTS(net, "our own NAME.key_secret (dps-keygen NAME); NAME.key must be in the collector's "
                          "--authorized-keys directory"),
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    size_t n_opts = sizeof opts / sizeof opts[0];
    /* --connect, the endpoint flag of dps-watch (and of scripts that call dps-status so), is read as --status */
    static const cli_alias aliases[] = {{"--status", "--connect", 1}};
    cli_set_aliases(aliases, sizeof aliases / sizeof *aliases);
    char epilogue[8192];
    s_epilogue_with_names(epilogue, sizeof epilogue);
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, NULL, 0, NULL, &help, s_synopsis, epilogue);
    if (rc >= 0)
        return rc;
    if (timeout_ms < 1 || timeout_ms > 3600000) {
        cli_error("--timeout must be 1 to 3600000 ms (got %" PRIu64 ")", timeout_ms);
        return CLI_EXIT_USAGE;
    }
    if (!(interval >= 0.1 && interval <= 3600)) {
        cli_error("--interval must be 0.1 to 3600 seconds (got %g)", interval);
        return CLI_EXIT_USAGE;
    }
    if (watch && (json || producer)) {
        cli_error("--watch shows the collector's own figures: without --json and --producer");
        return CLI_EXIT_USAGE;
    }
    if (producer && strlen(producer) > 64) {
        cli_error("--producer: a producer id is at most 64 bytes");
        return CLI_EXIT_USAGE;
    }
    cli_net_sec ns;
    cli_msg m;
    const char *eps[1] = {ep};
    if ((rc = cli_net_security(&net, eps, 1, &ns, &m)) != 0) {
        cli_error("%s", m.msg);
        return rc;
    }
    if (watch) {
        rc = s_watch(ep, &ns.sec, (int)timeout_ms, interval, count);
        memset(&ns, 0, sizeof ns);
        return rc ? cli_net_exit_code(rc) : CLI_EXIT_OK;
    }
    dps_collector_status st;
    rc = dps_collector_status_query_producer(ep, &ns.sec, (int)timeout_ms, producer, &st);
    memset(&ns, 0, sizeof ns);
    if (rc == DPS_ETIMEOUT) {
        cli_error("no answer from %s within %" PRIu64 " ms: is the collector running there (its --status), with "
                  "the same security (CURVE vs --insecure-plaintext)?",
                  ep, timeout_ms);
        return CLI_EXIT_TIMEOUT;
    }
    if (rc == DPS_EAUTH) {
        cli_error("the collector at %s refused our CURVE key: put the public half of --key (its .key file) in the "
                  "collector's --authorized-keys directory", ep);
        return CLI_EXIT_AUTH;
    }
    if (rc) {
        cli_error("status query to %s failed: %s", ep, dps_strerror(rc));
        return cli_net_exit_code(rc);
    }
    if (json)
        s_print_json(ep, &st, producer);
    else
        s_print_text(ep, &st, producer);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
}
