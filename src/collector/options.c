/* options.c - dps-collector's settings table: its flags and its config
   file's keys are one table, parsed by the programs' one parser
   (src/args/args.h); the estimator's defaults are the library's
   (dps_config_init); the help text. */
#include "options.h"

#include "args.h"
#include "est_flags.h"
#include "dpsubspace.h"
#include "wire.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOP_STR_(x) #x
#define LOOP_STR(x) LOOP_STR_(x)
#define LOOP LOOP_STR(INGEST_LOOP_BATCHES) /* in the help's sentences */

typedef enum { OPT_U64, OPT_DOUBLE, OPT_STR, OPT_FLAG, OPT_CONFIG } opt_kind;

typedef struct {
    const char *name;
    opt_kind kind;
    size_t offset, size;
    const char *arg, *help; /* an estimator setting: arg EST, help a note of the collector's or NULL */
} opt_def;

/* The arg of the estimator's settings: their argument name, help and
   default come from the one table of src/args/est_flags.h. */
static const char s_est[] = "(estimator)";
#define EST s_est

#define F(field) offsetof(collector_options, field), sizeof(((collector_options *)0)->field)
static const opt_def s_opts[] = {
    {"d", OPT_U64, F(d), "N", "row dimension (required)"},
    {"k", OPT_U64, F(k), EST, NULL},
    {"t", OPT_U64, F(t), EST, NULL},
    {"m", OPT_U64, F(m), EST, NULL},
    {"window", OPT_U64, F(window), EST, NULL},
    {"q", OPT_U64, F(q), EST, NULL},
    {"aggregator", OPT_STR, F(aggregator), EST, NULL},
    {"power-blocks", OPT_U64, F(power_blocks), EST, NULL},
    {"power-oversample", OPT_U64, F(power_oversample), EST, NULL},
    {"dense-max-d", OPT_U64, F(dense_max_d), EST, NULL},
    {"hist-width", OPT_DOUBLE, F(hist_width), EST, NULL},
    {"param-groups", OPT_STR, F(param_groups), EST, NULL},
    {"group-k", OPT_STR, F(group_k), EST, NULL},
    {"rho", OPT_DOUBLE, F(rho_epoch), EST, NULL},
    {"delta", OPT_DOUBLE, F(delta_epoch), EST, NULL},
    {"cap-rho", OPT_DOUBLE, F(cap_rho), EST, "a cap or --no-cap is required"},
    {"cap-eps", OPT_DOUBLE, F(cap_eps), EST, NULL},
    {"no-cap", OPT_FLAG, F(no_cap), NULL, "no budget cap: spend without limit (a warning at every release)"},
    {"delta-target", OPT_DOUBLE, F(delta_target), EST, NULL},
    {"alpha", OPT_DOUBLE, F(alpha), EST, NULL},
    {"tau", OPT_DOUBLE, F(tau), EST, NULL},
    {"split", OPT_STR, F(split), EST, NULL},
    /* former (0.1) settings, still read, not shown: --split's three parts */
    {"split-search", OPT_DOUBLE, F(former_split[0]), "X", NULL},
    {"split-count", OPT_DOUBLE, F(former_split[1]), "X", NULL},
    {"split-mean", OPT_DOUBLE, F(former_split[2]), "X", NULL},
    {"public-seed", OPT_U64, F(public_seed), EST, NULL},
    {"seed", OPT_U64, F(seed), EST, NULL},
    {"workers", OPT_U64, F(workers), EST, "the bucket bases' workers"},
    {"sharded", OPT_FLAG, F(sharded), NULL, "run as one rank of a collector sharded by coordinate (mpirun -np R"
                                          " dps-collector --sharded ...): rank r holds coordinates of every row"
                                          " and binds --ingest's port + r (or the r-th of a comma-separated list);"
                                          " rank 0 keeps the ledger, the status endpoint and publishes; the"
                                          " reference aggregator (default) or --aggregator power (producers:"
                                          " dps-produce --shards R)"},
    {"shard-wait", OPT_DOUBLE, F(shard_wait), "S", "with --sharded: how long a rank waits for its slice of a batch"
                                                   " rank 0 took before the batch is dropped on every rank (default"
                                                   " 30)"},
    {"epoch-seconds", OPT_DOUBLE, F(epoch_seconds), "S", "also close an epoch after S seconds (default 0: by rows only)"},
    {"exit-after", OPT_U64, F(exit_after), "N", "exit cleanly after publishing N snapshots (default 0: run until signalled)"},
    {"ingest", OPT_STR, F(ingest), "EP", "PULL endpoint for producers (default tcp://127.0.0.1:7780)"},
    {"publish", OPT_STR, F(publish), "EP", "PUB endpoint for snapshots (default tcp://127.0.0.1:7781)"},
    {"status", OPT_STR, F(status), "EP", "REP endpoint for status (default tcp://127.0.0.1:7782)"},
    {"server-key", OPT_STR, F(server_key), "FILE", "the collector's .key_secret (make one with dps-keygen)"},
    {"authorized-keys", OPT_STR, F(authorized_keys), "DIR", "producers' (and operators') .key files"},
    {"subscriber-keys", OPT_STR, F(subscriber_keys), "DIR", "if given, only these may subscribe (default: any CURVE client)"},
    {"insecure-plaintext", OPT_FLAG, F(insecure_plaintext), NULL, "no CURVE: allowed only on loopback tcp and ipc"},
    {"ingest-buffer-mb", OPT_DOUBLE, F(ingest_buffer_mb), "MB", "memory for batches in transit, all producers together"
                                                                 " (MB = 2^20 bytes; default: room for 16 producers' batches"
                                                                 " of 256 rows, 16 (rcvhwm + 2) + " LOOP " batches of"
                                                                 " 1024 d + 1 KiB bytes, at least 64 MB and at most a"
                                                                 " quarter of the machine's memory or cgroup limit); see"
                                                                 " \"ingest memory\" below"},
    {"max-batch-rows", OPT_U64, F(max_batch_rows), "N", "largest batch accepted; sets ZMQ_MAXMSGSIZE (default: the"
                                                        " largest that lets the ingest buffer hold 16 producers,"
                                                        " within 256..4096)"},
    {"rcvhwm", OPT_U64, F(rcvhwm), "N", "batches queued per producer before it blocks (default 1 in plaintext, 2"
                                        " with CURVE, at least 2 there: libzmq keeps one place of each queue for"
                                        " the key's credential; more lets the buffer hold fewer producers)"},
    {"state-dir", OPT_STR, F(state_dir), "DIR", "ledger and snapshots (required)"},
    {"keep-snapshots", OPT_U64, F(keep_snapshots), "N", "keep only the newest N stored snapshots (default 0: all); the"
                                                      " ledger is never pruned"},
    {"keep-days", OPT_DOUBLE, F(keep_days), "D", "delete stored snapshots older than D days (default 0: none); the"
                                                " newest is always kept"},
    {"config", OPT_CONFIG, 0, 0, "FILE", "read settings from FILE (name = value lines)"},
    {"verbose", OPT_FLAG, F(verbose), NULL, "log every batch refusal"},
    {"quiet", OPT_FLAG, F(quiet), NULL, "log only warnings and errors"},
    {"log", OPT_STR, F(log), "TO", "where the log goes: stderr (default, timestamped lines), journal (stderr with"
                                   " journald's <priority> prefixes: under systemd), syslog (facility daemon)"},
    {"help", OPT_FLAG, F(help), NULL, "this text"},
};
#define N_OPTS (sizeof s_opts / sizeof *s_opts)

/* Other names: sklearn's word for k, and former names still read (config
   files written for an older collector). */
static const cli_alias s_aliases[] = {
    {"--k", "--n-components", 1},
    {"--rho", "--rho-epoch", 0},
    {"--delta", "--delta-epoch", 0},
};

/* A number from the first line of a file (a cgroup limit), or 0. */
static uint64_t s_file_u64(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (f) {
        if (fscanf(f, "%llu", &v) != 1)
            v = 0; /* "max": no limit */
        fclose(f);
    }
    return (uint64_t)v;
}

/* The machine's memory in MB: RAM, or a smaller cgroup limit (v2, v1). */
static uint64_t s_machine_mb(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)1 << 32;
    const char *limits[] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < 2; i++) {
        uint64_t v = s_file_u64(limits[i]);
        if (v > 0 && v < ram)
            ram = v;
    }
    return ram >> 20;
}

void options_defaults(collector_options *o)
{
    memset(o, 0, sizeof *o);
    dps_config *lib = NULL; /* the estimator's defaults are the library's */
    if (dps_config_new(&lib, 0, 0) == DPS_OK) {
        o->t = dps_config_int(lib, DPS_PARAM_T);
        o->power_blocks = dps_config_int(lib, DPS_PARAM_POWER_BLOCKS);
        o->power_oversample = dps_config_int(lib, DPS_PARAM_POWER_OVERSAMPLE);
        snprintf(o->aggregator, sizeof o->aggregator, "%s",
                 dps_aggregator_name((dps_aggregator)dps_config_int(lib, DPS_PARAM_AGGREGATOR)));
        o->rho_epoch = dps_config_real(lib, DPS_PARAM_RHO_EPOCH);
        o->delta_epoch = dps_config_real(lib, DPS_PARAM_DELTA_EPOCH);
        o->delta_target = dps_config_real(lib, DPS_PARAM_DELTA_TARGET);
        o->alpha = dps_config_real(lib, DPS_PARAM_ALPHA);
        o->tau = dps_config_real(lib, DPS_PARAM_TAU);
        o->split_search = dps_config_real(lib, DPS_PARAM_SPLIT_SEARCH); /* --split, if given, in options_finish */
        o->split_count = dps_config_real(lib, DPS_PARAM_SPLIT_COUNT);
        o->split_mean = dps_config_real(lib, DPS_PARAM_SPLIT_MEAN);
        o->workers = dps_config_int(lib, DPS_PARAM_WORKERS);
    }
    dps_config_destroy(&lib);
    o->former_split[0] = o->former_split[1] = o->former_split[2] = NAN;
    o->shard_wait = 30;
    snprintf(o->ingest, sizeof o->ingest, "tcp://127.0.0.1:7780");
    snprintf(o->publish, sizeof o->publish, "tcp://127.0.0.1:7781");
    snprintf(o->status, sizeof o->status, "tcp://127.0.0.1:7782");
    o->max_batch_rows = UINT64_MAX; /* options_finish: from the ingest buffer */
    o->ingest_buffer_mb = NAN;      /* options_finish: from d and the machine */
    o->rcvhwm = 0; /* options_finish: 1 in plaintext, 2 with CURVE */
    o->machine_mb = s_machine_mb();
}

static const opt_def *s_find(const char *name)
{
    for (size_t i = 0; i < N_OPTS; i++)
        if (strcmp(s_opts[i].name, name) == 0)
            return &s_opts[i];
    return NULL;
}

/* The one parser's table over o: "--name" flags whose values go into o's
   fields (strings copied into its arrays), the same names as config keys. */
typedef struct {
    cli_opt opt[N_OPTS];
    cli_text text[N_OPTS];
    char name[N_OPTS][40], deflt[N_OPTS][48], help[N_OPTS][800];
    const char *config;
} s_table;

/* The default shown in --help of a collector setting: the value in def
   when the help text does not explain it already. */
static const char *s_deflt(const opt_def *od, const collector_options *def, char *buf, size_t n)
{
    const char *p = (const char *)def + od->offset;
    char num[32];
    if (!od->help || strstr(od->help, "default"))
        return NULL; /* hidden, or the help says it */
    if (od->kind == OPT_U64 && *(const uint64_t *)(const void *)p)
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)(const void *)p);
    else if (od->kind == OPT_DOUBLE && *(const double *)(const void *)p != 0)
        snprintf(buf, n, "%s", cli_fmt_double(num, *(const double *)(const void *)p));
    else
        return NULL;
    return buf;
}

static void s_table_make(s_table *t, collector_options *o, const collector_options *def)
{
    static const cli_opt_kind kinds[] = {[OPT_U64] = CLI_OPT_U64, [OPT_DOUBLE] = CLI_OPT_DOUBLE,
                                         [OPT_STR] = CLI_OPT_TEXT, [OPT_FLAG] = CLI_OPT_FLAG,
                                         [OPT_CONFIG] = CLI_OPT_CONFIG};
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_def *od = &s_opts[i];
        cli_opt *c = &t->opt[i];
        snprintf(t->name[i], sizeof t->name[i], "--%s", od->name);
        c->name = t->name[i];
        c->kind = kinds[od->kind];
        c->dest = (char *)o + od->offset;
        c->metavar = od->arg == s_est ? est_flag_metavar(od->name) : od->arg;
        c->help = od->arg != s_est ? od->help
                  : od->help ? est_flag_help_noted(od->name, od->help, t->help[i], sizeof t->help[i])
                             : est_flag_help(od->name);
        c->deflt = !def                ? NULL
                   : od->arg == s_est ? est_flag_default(od->name)
                                      : s_deflt(od, def, t->deflt[i], sizeof t->deflt[i]);
        if (od->kind == OPT_STR) {
            t->text[i] = (cli_text){(char *)o + od->offset, od->size};
            c->dest = &t->text[i];
        } else if (od->kind == OPT_CONFIG) {
            c->dest = &t->config;
        }
    }
}

int options_parse(collector_options *o, int argc, char **argv, char *err, size_t errlen)
{
    s_table t;
    s_table_make(&t, o, NULL);
    cli_set_program("dps-collector");
    cli_set_aliases(s_aliases, sizeof s_aliases / sizeof *s_aliases);
    cli_set_silent(1); /* the caller says it: on stderr, or in the log on SIGHUP */
    int rc = cli_parse_args(argc, argv, t.opt, N_OPTS, NULL, 0, NULL);
    if (!rc && t.config && !o->help && !cli_version_given())
        rc = cli_read_config(t.config, t.opt, N_OPTS);
    cli_set_silent(0);
    if (rc) {
        snprintf(err, errlen, "%s", cli_last_error());
        return -1;
    }
    o->seeded = cli_opt_given(t.opt, N_OPTS, "--seed");
    return 0;
}

#define MB ((double)(1u << 20))
#define INGEST_OVERHEAD 1024 /* bytes of a RowBatch besides its floats (id <= 64, varints) */
#define INGEST_DESIGN_PRODUCERS 16 /* the default buffer's room: 16 x (rcvhwm + 2) batches + the loop's */

uint64_t options_batch_slots(const collector_options *o)
{
    /* With CURVE one place holds the credential until the first read, and
       then a batch: counting rcvhwm batches is the bound in both modes. */
    return o->rcvhwm;
}

void options_ingest_plan(const collector_options *o, ingest_plan *p)
{
    p->budget = (uint64_t)(o->ingest_buffer_mb * MB);
    p->msg_max = o->max_batch_rows * o->d * 4 + INGEST_OVERHEAD;
    p->per_producer = (options_batch_slots(o) + 2) * p->msg_max;
    p->loop = INGEST_LOOP_BATCHES * p->msg_max;
    p->producers = p->budget > p->loop ? (p->budget - p->loop) / p->per_producer : 0;
}

/* The ingest buffer and the batch cap: defaults and checks.
   Default buffer: room for 16 producers of 256-row batches, 16 x (slots +
   2) + INGEST_LOOP_BATCHES batches (50 at the default one batch slot),
   within [64 MB, machine / 4].
   Default --max-batch-rows: the largest batch that keeps that room for 16
   producers in the buffer, within [256 (the producers' default), 4096]. */
static int s_ingest_finish(collector_options *o, char *err, size_t errlen)
{
    const double per_row = 4.0 * (double)o->d;
    const double design = (double)INGEST_DESIGN_PRODUCERS * (double)(options_batch_slots(o) + 2) + INGEST_LOOP_BATCHES;
    if (isnan(o->ingest_buffer_mb)) {
        double want = design * (256 * per_row + INGEST_OVERHEAD) / MB;
        o->ingest_buffer_mb = fmin(fmax(want, 64), (double)o->machine_mb / 4);
    }
    if (!(o->ingest_buffer_mb > 0)) {
        snprintf(err, errlen, "--ingest-buffer-mb must be a positive number of megabytes");
        return -1;
    }
    if (o->ingest_buffer_mb > (double)o->machine_mb) {
        snprintf(err, errlen, "--ingest-buffer-mb %g is more than this machine's memory (%" PRIu64 " MB)",
                 o->ingest_buffer_mb, o->machine_mb);
        return -1;
    }
    if (o->max_batch_rows == UINT64_MAX) {
        double rows = floor((o->ingest_buffer_mb * MB / design - INGEST_OVERHEAD) / per_row);
        rows = fmin(fmax(rows, 256), 4096);
        o->max_batch_rows = (uint64_t)fmax(1, fmin(rows, floor((double)WIRE_MAX_FIELD_BYTES / per_row)));
    }
    if ((double)o->max_batch_rows * per_row > (double)WIRE_MAX_FIELD_BYTES) {
        snprintf(err, errlen,
                 "--max-batch-rows %" PRIu64 " at d %" PRIu64 " makes a batch's rows above 2 GiB, the most a "
                 "protocol message carries",
                 o->max_batch_rows, o->d);
        return -1;
    }
    ingest_plan p;
    options_ingest_plan(o, &p);
    if (p.producers < 1) {
        snprintf(err, errlen,
                 "--ingest-buffer-mb %g cannot hold one producer: a batch of --max-batch-rows %" PRIu64
                 " at d %" PRIu64 " is up to %.1f MB and one producer needs %" PRIu64 " of them (batch slots + %d)"
                 ", %.1f MB: raise --ingest-buffer-mb or lower --max-batch-rows",
                 o->ingest_buffer_mb, o->max_batch_rows, o->d, (double)p.msg_max / MB,
                 options_batch_slots(o) + 2 + INGEST_LOOP_BATCHES, 2 + INGEST_LOOP_BATCHES,
                 (double)(p.per_producer + p.loop) / MB);
        return -1;
    }
    return 0;
}

/* The options as est_flag_refuse_unread asks them: a setting is given
   when it differs from its default (the command line and the configuration
   file are merged by then). */
typedef struct {
    const collector_options *o;
    const dps_config *lib; /* the defaults */
} s_given_options;

static int s_given(const char *flag, void *arg)
{
    const s_given_options *g = arg;
    if (!strcmp(flag, "--hist-width"))
        return g->o->hist_width != 0;
    if (!strcmp(flag, "--power-blocks"))
        return g->o->power_blocks != dps_config_int(g->lib, DPS_PARAM_POWER_BLOCKS);
    if (!strcmp(flag, "--power-oversample"))
        return g->o->power_oversample != dps_config_int(g->lib, DPS_PARAM_POWER_OVERSAMPLE);
    if (!strcmp(flag, "--dense-max-d"))
        return g->o->dense_max_d != 0;
    return 0;
}

/* options_finish with lib, a configuration handle of the library's (its
   defaults, then the groups and split applied to it). */
static int s_finish(collector_options *o, dps_config *lib, char *err, size_t errlen)
{
    if (!o->d || !o->k) {
        snprintf(err, errlen, "--d and --k are required (see --help)");
        return -1;
    }
    if (!o->state_dir[0]) {
        snprintf(err, errlen, "--state-dir is required: the privacy ledger lives there");
        return -1;
    }
    dps_config_init(lib, o->d, o->k); /* m and q default to the library's multiples of k */
    if (!o->m)
        o->m = dps_config_int(lib, DPS_PARAM_M);
    if (!o->q)
        o->q = dps_config_int(lib, DPS_PARAM_Q);
    if (!o->window)
        o->window = o->t;
    if (est_flag_aggregator(o->aggregator, NULL, err, errlen))
        return -1;
    if (cli_groups_apply(o->param_groups[0] ? o->param_groups : NULL, o->group_k[0] ? o->group_k : NULL, lib, err,
                         errlen))
        return -1;
    int former = !isnan(o->former_split[0]) || !isnan(o->former_split[1]) || !isnan(o->former_split[2]);
    if (former && o->split[0]) {
        snprintf(err, errlen, "--split and the former --split-search/--split-count/--split-mean: give --split alone");
        return -1;
    }
    if (former) { /* a 0.1 configuration: each part given, the others the defaults */
        snprintf(o->split, sizeof o->split, "%.17g:%.17g:%.17g",
                 isnan(o->former_split[0]) ? dps_config_real(lib, DPS_PARAM_SPLIT_SEARCH) : o->former_split[0],
                 isnan(o->former_split[1]) ? dps_config_real(lib, DPS_PARAM_SPLIT_COUNT) : o->former_split[1],
                 isnan(o->former_split[2]) ? dps_config_real(lib, DPS_PARAM_SPLIT_MEAN) : o->former_split[2]);
    }
    if (o->split[0]) {
        if (cli_split_apply(o->split, lib, err, errlen))
            return -1;
        o->split_search = dps_config_real(lib, DPS_PARAM_SPLIT_SEARCH);
        o->split_count = dps_config_real(lib, DPS_PARAM_SPLIT_COUNT);
        o->split_mean = dps_config_real(lib, DPS_PARAM_SPLIT_MEAN);
    }
    o->k_total = dps_config_int(lib, DPS_PARAM_K);
    s_given_options given = {o, lib};
    if (est_flag_refuse_unread(o->aggregator, s_given, &given, err, errlen))
        return -1;
    if (!o->insecure_plaintext && (!o->server_key[0] || !o->authorized_keys[0])) {
        snprintf(err, errlen,
                 "CURVE needs --server-key and --authorized-keys (make keys with dps-keygen); "
                 "--insecure-plaintext is allowed on loopback/ipc only");
        return -1;
    }
    if (o->rcvhwm == 0) /* ZAP's User-Id (zap.c) takes one place of each CURVE queue */
        o->rcvhwm = o->insecure_plaintext ? 1 : 2;
    if (o->max_batch_rows == 0 || o->rcvhwm > 1000000) {
        snprintf(err, errlen, "--max-batch-rows and --rcvhwm must be positive");
        return -1;
    }
    if (!o->insecure_plaintext && o->rcvhwm < 2) {
        snprintf(err, errlen, "--rcvhwm must be at least 2 with CURVE: libzmq keeps one place of each producer's "
                              "queue for its key's credential, and with 1 no batch would ever arrive");
        return -1;
    }
    if (s_ingest_finish(o, err, errlen) != 0)
        return -1;
    if (o->log[0] && strcmp(o->log, "stderr") != 0 && strcmp(o->log, "journal") != 0 &&
        strcmp(o->log, "syslog") != 0) {
        snprintf(err, errlen, "--log must be stderr, journal or syslog (got '%s')", o->log);
        return -1;
    }
    if (!(o->keep_days >= 0)) {
        snprintf(err, errlen, "--keep-days must be >= 0 (0: no age limit)");
        return -1;
    }
    if (o->sharded && ((strcmp(o->aggregator, "power") && strcmp(o->aggregator, "reference")) ||
                       o->param_groups[0])) {
        snprintf(err, errlen, "--sharded runs the reference aggregator (the default) or the noisy power iteration "
                 "(--aggregator power), without --param-groups (got --aggregator %s%s)", o->aggregator,
                 o->param_groups[0] ? " and --param-groups" : "");
        return -1;
    }
    if (!(o->shard_wait > 0 && o->shard_wait <= 86400)) {
        snprintf(err, errlen, "--shard-wait must be in (0, 86400] seconds (got %g)", o->shard_wait);
        return -1;
    }
    if (o->epoch_seconds < 0) {
        snprintf(err, errlen, "--epoch-seconds must be >= 0");
        return -1;
    }
    /* A privacy budget is spent without limit only when the operator says so. */
    if (o->cap_rho < 0 || o->cap_eps < 0) {
        snprintf(err, errlen, "--cap-rho and --cap-eps must be positive");
        return -1;
    }
    int capped = o->cap_rho > 0 || o->cap_eps > 0;
    if (!capped && !o->no_cap) {
        snprintf(err, errlen,
                 "choose a privacy budget: --cap-rho X (total zCDP rho) or --cap-eps X (total eps at "
                 "--delta-target), after which epochs are refused; or --no-cap to spend without limit");
        return -1;
    }
    if (capped && o->no_cap) {
        snprintf(err, errlen, "--no-cap contradicts --cap-rho/--cap-eps: give one or the other");
        return -1;
    }
    return 0;
}

int options_finish(collector_options *o, char *err, size_t errlen)
{
    dps_config *lib = NULL;
    if (dps_config_new(&lib, 0, 0) != DPS_OK) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = s_finish(o, lib, err, errlen);
    dps_config_destroy(&lib);
    return rc;
}

void options_usage(FILE *to)
{
    fprintf(to,
            "usage: dps-collector --d N --k N --state-dir DIR (--cap-rho X | --cap-eps X | --no-cap) [options]\n"
            "       dps-collector --config FILE\n\n"
            "Collects rows from producers (ZeroMQ PULL, protobuf RowBatch), drops each into a\n"
            "random bucket, computes each full bucket's top-k basis, and at the end of every\n"
            "epoch (t*m rows, or --epoch-seconds) privately aggregates the buckets into a\n"
            "snapshot.  The epoch's privacy cost is written and fsync'ed to STATE/ledger before\n"
            "the snapshot is computed; the snapshot is stored in STATE/snapshots and published\n"
            "(PUB, with sequence numbers; a new subscriber gets the latest at once).  A restart\n"
            "resumes from the ledger.  SIGINT/SIGTERM stop it cleanly (the open epoch's rows\n"
            "are discarded; no budget was spent on them).  SIGHUP reads the key directories\n"
            "and the configuration again: the budget cap, --delta-target, --epoch-seconds,\n"
            "--exit-after, --verbose and --quiet change at once, other settings at the next\n"
            "start.  A key file added, removed or rewritten in --authorized-keys or\n"
            "--subscriber-keys counts without SIGHUP: at the next handshake, and within 1 s\n"
            "for connections made before (their batches are refused from then on).\n\noptions:\n");
    collector_options def; /* the defaults shown are the values options_defaults sets */
    options_defaults(&def);
    s_table t;
    s_table_make(&t, &def, &def);
    cli_set_aliases(s_aliases, sizeof s_aliases / sizeof *s_aliases);
    cli_print_usage(to, "", t.opt, N_OPTS, NULL);
    fprintf(to,
            "\ningest memory: batches in transit are bounded in bytes for all producers together.\n"
            "A batch message is at most --max-batch-rows x 4d bytes + 1 KiB (a larger one is dropped\n"
            "with its connection; the status endpoint names the limit, and producers given it split\n"
            "their batches to fit).  Producers that take credit (dps-produce and the C and Python\n"
            "producers given the status endpoint) send only the batches the collector granted them,\n"
            "and it grants at most (buffer - " LOOP " batches) / batch (one fewer with CURVE) to all of\n"
            "them together, a fair share each: the bound holds whatever their number, and they slow\n"
            "down instead.  A producer that takes no credit (no status endpoint, an older producer)\n"
            "can have slots + 2 batches inside the collector on top of that (its queue, one read\n"
            "while the queue is full, one being decrypted), slots being --rcvhwm (default 1; 2 with\n"
            "CURVE, where one place holds the key's credential until the first read); the buffer\n"
            "holds (buffer - " LOOP " batches) / (slots + 2 batches) of those, the log says how many at\n"
            "start-up and warns when more connect (they are not refused).  The collector's loop\n"
            "holds " LOOP " batches (the one it reads rows from, in place, and a sharded rank's copy of\n"
            "one it keeps).  Nothing is dropped: producers block.  Outside the\n"
            "process the kernel buffers up to 2 MB per tcp producer.  The estimator's memory (t, m,\n"
            "window, q; logged at start-up) comes on top.  A connection that libzmq drops with batches\n"
            "in flight on it (a batch above --max-batch-rows, or no memory for one) is logged and\n"
            "counted (connections_dropped in dps-status, when its producer is heard again;\n"
            "connections_empty when the connection delivered nothing), and so are sequence gaps.\n"
            "While the loop waits for a release it still answers the status endpoint, so producers\n"
            "that ask it tell a slow collector from a dead one.\n");
    fprintf(to, "\nformer names (0.1), still read on the command line and in config files: --rho-epoch and\n"
                "--delta-epoch (now --rho and --delta); --split-search, --split-count, --split-mean (now\n"
                "one --split S:C:M, as in dps-estimate; not together with it).\n");
    fprintf(to, "\nexit codes: 0 clean stop, 1 runtime failure, 2 bad settings, 3 state/ledger problem (at\n"
                "start: a damaged ledger line, another --d; or a write of a ledger line or a snapshot that\n"
                "failed while running, e.g. a full disk: the collector stops, nothing more is written),\n"
                "4 stopped cleanly, but batches were lost this run (connections_dropped, seq_gaps in transit;\n"
                "batches_cut_short for want of memory)\n");
}

/* The settings a running collector can take from a reloaded configuration. */
static const char *const s_live[] = {"cap-rho", "cap-eps", "no-cap", "delta-target", "epoch-seconds",
                                     "exit-after", "verbose", "quiet"};

static int s_is_live(const char *name)
{
    for (size_t i = 0; i < sizeof s_live / sizeof *s_live; i++)
        if (strcmp(s_live[i], name) == 0)
            return 1;
    return 0;
}

static void s_text(const collector_options *o, const opt_def *od, char *buf, size_t n)
{
    const char *base = (const char *)o + od->offset;
    switch (od->kind) {
    case OPT_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)(const void *)base); break;
    case OPT_DOUBLE: snprintf(buf, n, "%.17g", *(const double *)(const void *)base); break;
    case OPT_STR: snprintf(buf, n, "'%s'", base); break;
    case OPT_FLAG: snprintf(buf, n, "%s", *(const int *)(const void *)base ? "true" : "false"); break;
    case OPT_CONFIG: snprintf(buf, n, "-"); break;
    }
}

size_t options_diff(const collector_options *a, const collector_options *b, option_change *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_def *od = &s_opts[i];
        if (od->kind == OPT_CONFIG || strcmp(od->name, "help") == 0)
            continue;
        const char *pa = (const char *)a + od->offset, *pb = (const char *)b + od->offset;
        int same = od->kind == OPT_STR ? strcmp(pa, pb) == 0 : memcmp(pa, pb, od->size) == 0;
        if (same)
            continue;
        if (n < max) {
            out[n].name = od->name;
            out[n].live = s_is_live(od->name);
            s_text(a, od, out[n].before, sizeof out[n].before);
            s_text(b, od, out[n].after, sizeof out[n].after);
        }
        n++;
    }
    return n;
}

void options_apply_live(collector_options *dst, const collector_options *src)
{
    for (size_t i = 0; i < sizeof s_live / sizeof *s_live; i++) {
        const opt_def *od = s_find(s_live[i]);
        if (od)
            memcpy((char *)dst + od->offset, (const char *)src + od->offset, od->size);
    }
}
