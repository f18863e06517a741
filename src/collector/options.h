/* options.h - dps-collector's settings: one table serves the command line
   (--name value or --name=value) and the config file (name = value lines,
   # comments), both read by the programs' one parser (src/args/args.h).  The
   estimator's defaults are the library's (dps_config_init). */
#ifndef DPS_OPTIONS_H
#define DPS_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    /* estimator */
    uint64_t d, k, t, m, window, q;
    char aggregator[16];
    double rho_epoch, delta_epoch, alpha, tau; /* --rho, --delta (each epoch's), --alpha, --tau */
    char split[128];                           /* --split S:C:M as given ("": the library's) */
    double split_search, split_count, split_mean; /* from --split (options_finish) */
    double former_split[3];                    /* 0.1's --split-search/-count/-mean (NAN: not given) */
    double cap_rho, cap_eps, delta_target;
    int no_cap; /* the operator chose to spend without limit (--no-cap) */
    double hist_width; /* histogram aggregator's cell side (0: default) */
    char param_groups[2048], group_k[1024]; /* parameter groups, as --param-groups/--group-k ("": none) */
    uint64_t k_total; /* the basis' rows: k, or with groups the sum of their ranks (options_finish) */
    uint64_t power_blocks, power_oversample; /* power aggregator (defaults: the library's) */
    uint64_t dense_max_d; /* gaussian: the widest group released densely (0: the library's default) */
    uint64_t public_seed, seed, workers;
    int seeded;
    /* sharded by coordinate over MPI ranks (src/mpi/collector_sharded.c) */
    int sharded;
    double shard_wait;       /* seconds a rank waits for its slice of a batch rank 0 took */
    /* epochs */
    double epoch_seconds;
    uint64_t exit_after;
    /* network */
    char ingest[256], publish[256], status[256];
    char server_key[4096], authorized_keys[4096], subscriber_keys[4096];
    int insecure_plaintext;
    uint64_t max_batch_rows, rcvhwm;
    double ingest_buffer_mb; /* bytes of batches held for the whole collector (NAN: default from d and memory) */
    uint64_t machine_mb;     /* memory the default is sized from: RAM, or less under a cgroup limit */
    /* state */
    char state_dir[4096];
    uint64_t keep_snapshots; /* stored snapshots kept: the newest N (0: all) */
    double keep_days;        /* ... and none older than D days (0: no age limit); the newest always stays */
    int verbose, quiet;
    char log[16];            /* stderr (default), journal or syslog (log.h) */
    int help;
} collector_options;

void options_defaults(collector_options *o);
/* Parse argv then the config file named by --config (command line wins).
   On error: a sentence in err, return -1.  --help sets o->help; --version
   is cli_version_given() (src/args/args.h).  Prints nothing: called again on
   SIGHUP, whose errors go to the log. */
int options_parse(collector_options *o, int argc, char **argv, char *err, size_t errlen);
/* Fill in derived defaults (m = 2k, q = 10k, window = t, the ingest buffer
   and --max-batch-rows) and check; among the checks, a budget cap (--cap-rho
   or --cap-eps) or --no-cap is required. */
int options_finish(collector_options *o, char *err, size_t errlen);
void options_usage(FILE *to);

/* A setting whose value differs between two option sets, as text. */
typedef struct {
    const char *name;
    int live; /* 1: it can change while the collector runs (options_apply_live) */
    char before[96], after[96];
} option_change;
/* The settings that differ between a and b, at most max of them into out;
   returns how many there are. */
size_t options_diff(const collector_options *a, const collector_options *b, option_change *out, size_t max);
/* Copy from src into dst the settings that can change while the collector
   runs (on SIGHUP): the budget cap (or --no-cap) and its delta, --epoch-seconds,
   --exit-after, --verbose, --quiet.  The others need a restart. */
void options_apply_live(collector_options *dst, const collector_options *src);

/* The ingest memory bound of a finished set of options, in bytes (the help
   text's "ingest memory"): a batch message is at most msg_max; each connected
   producer can hold per_producer = (rcvhwm + 2) * msg_max inside libzmq, the
   loop loop = INGEST_LOOP_BATCHES * msg_max; budget = --ingest-buffer-mb
   holds `producers`. */
#define INGEST_LOOP_BATCHES 2 /* the message the loop reads rows from (in place: wire.h), and a sharded
                                 rank's copy of a batch it keeps (made before the message is closed) */
typedef struct {
    uint64_t budget, msg_max, per_producer, loop, producers;
} ingest_plan;
void options_ingest_plan(const collector_options *o, ingest_plan *p);
/* The batches a producer's queue can hold: --rcvhwm (with CURVE one place
   holds the credential ZAP's User-Id makes until the first read, then a
   batch; that is why CURVE needs --rcvhwm >= 2). */
uint64_t options_batch_slots(const collector_options *o);

#endif
