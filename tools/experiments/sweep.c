/* sweep.c - dps-sweep: one epoch of every row of a .npy through the
   streaming estimator at several rho at once, reading the rows ONCE (the
   gradient table's MLP rows are 24 GB: one pass per rho would be hours).
   Bucket aggregators take --m: t = n / m full buckets.
   An experiment driver, not a user tool: each rho's estimator is separate
   (its own noise, seeded), and the releases together would cost the sum of
   the rhos on the same rows - a table of what each rho gives alone, not
   one private run.

   Output: for each rho, OUT_PREFIX<rho>.npy (the basis, k x d) and one JSON
   line on stdout: {"rho", "status", "noise_level", "group_noise_level" (each
   parameter group's, null for a group of rank 0), "weak", "rows",
   "seconds" (the release), "memory_bound"}.  Progress on stderr. */
#include "args.h"
#include "io.h"

#include <dpsubspace.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RHOS 16

typedef struct {
    double v[MAX_RHOS];
    int n;
} s_rhos;

static int s_list(const char *s, void *to)
{
    s_rhos *l = to;
    char *end;
    l->n = 0;
    while (*s) {
        if (l->n == MAX_RHOS)
            return -1;
        double r = strtod(s, &end);
        if (end == s || !(r > 0) || (*end && *end != ','))
            return -1;
        l->v[l->n++] = r;
        s = *end ? end + 1 : end;
    }
    return l->n ? 0 : -1;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char s_synopsis[] =
    "usage: dps-sweep --in X.npy --k K --aggregator NAME [--m M] [--param-groups D1,.. --group-k K1,..]\n"
    "                 [--rhos LIST] [--seed S] --out-prefix P\n"
    "One epoch of every row of X.npy through one estimator per rho, the rows read once.\n"
    "An experiment: the releases together cost the sum of the rhos on the same rows.\n"
    "options:\n";

int main(int argc, char **argv)
{
    cli_set_program("dps-sweep");
    const char *in = NULL, *agg = "gaussian", *groups = NULL, *group_k = NULL, *prefix = NULL;
    size_t k = 0, bucket_m = 0, power_blocks = 0, power_oversample = 10, dense_max_d = 0;
    uint64_t seed = 1;
    int help = 0;
    s_rhos rhos = {{0.01, 0.03, 0.1, 0.25, 1, 4}, 6};
    cli_opt opts[] = {
        {"--in", CLI_OPT_STRING, &in, "X.npy", "required", "the rows (float32 .npy)", 0},
        {"--k", CLI_OPT_SIZE, &k, "K", "required", "subspace dimension (each group's, without --group-k)", 0},
        {"--aggregator", CLI_OPT_STRING, &agg, "NAME", "gaussian", "any aggregator (bucket ones need --m)", 0},
        {"--param-groups", CLI_OPT_STRING, &groups, "D1,D2,...", "one group", "parameter groups", 0},
        {"--group-k", CLI_OPT_STRING, &group_k, "K1,K2,...", "--k each", "each group's rank", 0},
        {"--m", CLI_OPT_SIZE, &bucket_m, "M", "required for bucket aggregators",
         "rows per bucket (reference, projection, histogram: t = n / m buckets, the n mod m last rows unused)", 0},
        {"--power-blocks", CLI_OPT_SIZE, &power_blocks, "T", "0 (3 cold)", "power steps per epoch", 0},
        {"--power-oversample", CLI_OPT_SIZE, &power_oversample, "P", "10", "power columns beyond k", 0},
        {"--dense-max-d", CLI_OPT_SIZE, &dense_max_d, "D", "8192", "widest group released densely", 0},
        {"--rhos", CLI_OPT_PARSE, &(cli_parse_to){s_list, &rhos}, "LIST", "0.01,0.03,0.1,0.25,1,4",
         "rho of each estimator", 0},
        {"--seed", CLI_OPT_U64, &seed, "S", "1", "seed of estimator i's noise: S + i", 0},
        {"--out-prefix", CLI_OPT_STRING, &prefix, "P", "required", "basis files P<rho>.npy", 0},
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    int prc = cli_parse_or_help(argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, NULL, &help, s_synopsis,
                                NULL);
    if (prc >= 0)
        return prc;
    if (!in || !k || !prefix)
        CLI_USAGE("give --in, --k and --out-prefix (see --help)");
    cli_reader *r = NULL;
    cli_msg m;
    if (cli_reader_open(&r, in, CLI_FMT_NPY, 0, &m)) {
        cli_error("%s", m.msg);
        return CLI_EXIT_INPUT;
    }
    size_t d = cli_reader_dim(r);
    uint64_t n = 0;
    if (!cli_reader_rows(r, &n) || n == 0)
        CLI_USAGE("%s: the row count must be in the header", in);
    dps_estimator *est[MAX_RHOS] = {NULL};
    dps_config *cfg[MAX_RHOS] = {NULL};
    for (int i = 0; i < rhos.n; i++) {
        if (dps_config_new(&cfg[i], d, k) != DPS_OK)
            CLI_USAGE("k %zu and d %zu make no configuration", k, d);
        dps_config *c = cfg[i];
        dps_aggregator a;
        if (dps_aggregator_from_name(agg, &a))
            CLI_USAGE("--aggregator: '%s' is not an aggregator", agg);
        dps_config_set_int(c, DPS_PARAM_AGGREGATOR, (uint64_t)a);
        char err[200];
        if (cli_groups_apply(groups, group_k, c, err, sizeof err))
            CLI_USAGE("%s", err);
        if (dps_config_uses_buckets(c)) { /* t full buckets of m rows */
            if (!bucket_m || bucket_m > n)
                CLI_USAGE("--aggregator %s needs --m between 1 and the row count %llu", agg, (unsigned long long)n);
            uint64_t t = n / bucket_m;
            dps_config_set_int(c, DPS_PARAM_M, bucket_m);
            dps_config_set_int(c, DPS_PARAM_T, t);
            dps_config_set_int(c, DPS_PARAM_WINDOW, t < 16 ? t : 16); /* 16 buckets' rows in memory, not t's */
        } else { /* one epoch of every row, as dps-estimate --method NAME: t m above the input, the power
                    blocks cut below at dps-estimate's rows, the partial epoch closed */
            uint64_t m = dps_config_int(c, DPS_PARAM_K);
            dps_config_set_int(c, DPS_PARAM_M, m);
            dps_config_set_int(c, DPS_PARAM_T, ((uint64_t)1 << 38) / m);
            dps_config_set_int(c, DPS_PARAM_WINDOW, ((uint64_t)1 << 38) / m);
        }
        dps_config_set_real(c, DPS_PARAM_RHO_EPOCH, rhos.v[i]);
        dps_config_set_int(c, DPS_PARAM_POWER_BLOCKS, power_blocks);
        dps_config_set_int(c, DPS_PARAM_POWER_OVERSAMPLE, power_oversample);
        dps_config_set_int(c, DPS_PARAM_DENSE_MAX_D, dense_max_d);
        dps_config_set_int(c, DPS_PARAM_SEEDED, 1);
        dps_config_set_int(c, DPS_PARAM_SEED, seed + (uint64_t)i);
        dps_config_set_int(c, DPS_PARAM_WORKERS, 1);
        const char *why = "";
        int rc = dps_config_check(c, &why);
        if (!rc)
            rc = dps_estimator_new(&est[i], c);
        if (rc)
            CLI_USAGE("rho %g: %s (%s)", rhos.v[i], why, dps_strerror(rc));
    }
    /* dps-estimate's blocks for an input of n rows (est_stream.c): T index
       blocks of the n rows, each ended by a cut (T is the same for every rho) */
    uint64_t T = dps_config_uses_buckets(cfg[0]) ? 0 : dps_estimator_power_blocks(est[0]), next = 1;
    T = T < n ? T : n;
    size_t batch = 256, got = 0;
    float *buf = malloc(batch * d * sizeof *buf);
    uint64_t done = 0;
    double t0 = s_now();
    for (;;) {
        size_t want = batch;
        if (next < T && dps_power_block_start(n, T, next) - done < want)
            want = (size_t)(dps_power_block_start(n, T, next) - done);
        if (!buf || cli_reader_next(r, buf, want, &got, &m) || !got)
            break;
        for (int i = 0; i < rhos.n; i++)
            dps_estimator_push(est[i], buf, got, d, NULL);
        done += got;
        for (; next < T && done == dps_power_block_start(n, T, next); next++)
            for (int i = 0; i < rhos.n; i++)
                dps_estimator_end_block(est[i]);
        if (done % (batch * 40) < got)
            fprintf(stderr, "  %llu / %llu rows, %.0f s\n", (unsigned long long)done, (unsigned long long)n,
                    s_now() - t0);
    }
    int code = 0;
    for (int i = 0; i < rhos.n; i++) {
        double t1 = s_now();
        dps_snapshot *s = NULL;
        int rc = dps_estimator_close_epoch(est[i], &s);
        double secs = s_now() - t1;
        dps_snapshot_info info;
        memset(&info, 0, sizeof info);
        if (s)
            dps_snapshot_get_info(s, &info);
        char path[4096];
        snprintf(path, sizeof path, "%s%g.npy", prefix, rhos.v[i]);
        const float *V = s ? dps_snapshot_basis(s) : NULL;
        if (V && cli_npy_write(path, V, info.k, info.d, 0, &m)) {
            cli_error("%s", m.msg);
            code = 1;
        }
        printf("{\"rho\": %g, \"status\": \"%s\", \"noise_level\": %.6g, \"group_noise_level\": [", rhos.v[i],
               rc ? dps_strerror(rc) : dps_snapshot_status_name(info.status), info.noise_level);
        for (size_t g = 0; g < info.groups; g++) { /* NaN (rank 0) as null */
            double lv = dps_snapshot_group_noise_level(s, g);
            if (isfinite(lv))
                printf("%s%.6g", g ? ", " : "", lv);
            else
                printf("%snull", g ? ", " : "");
        }
        printf("], \"weak\": %s, \"rows\": %llu, "
               "\"power_steps\": %llu, \"seconds\": %.2f, \"memory_bound\": %zu, \"basis\": \"%s\"}\n",
               dps_snapshot_weak(&info) ? "true" : "false", (unsigned long long)info.rows_used,
               s ? (unsigned long long)dps_snapshot_power_steps(s) : 0ULL, secs, dps_estimator_memory_bound(cfg[i]),
               V ? path : "");
        fflush(stdout);
        dps_snapshot_destroy(&s);
        dps_estimator_destroy(&est[i]);
        dps_config_destroy(&cfg[i]);
    }
    free(buf);
    cli_reader_close(&r);
    return code;
}
