/* mpi_estimate.c - dps-mpi-estimate: the power mechanism's epochs on a file
   of rows, sharded by coordinate over MPI ranks: run it under
   mpirun.  Every rank reads the rows one at a time and keeps its columns;
   rank 0 writes the basis and the report.  The first sharded program: the
   collector's sharded mode (ingest per rank, the ledger on rank 0) builds on
   the same epoch_power_sharded.

   Who owns what: main owns everything; rank 0 alone writes files. */
#include "args.h"
#include "est_flags.h"
#include "epoch_power_sharded.h"
#include "io.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static const char s_synopsis[] =
    "Usage: mpirun -np R dps-mpi-estimate --k K [--rho R] [--epoch-rows N] [--out basis.npy] INPUT\n"
    "\n"
    "Runs the power mechanism (dps-estimate --aggregator power) on the rows\n"
    "of INPUT (.npy float32/float64, or raw float32 with --dim), sharded by coordinate\n"
    "over the MPI ranks: rank r holds its d / R columns (in order) of every row and of\n"
    "the iterate, so each needs about 1/R of the memory, and only b x b and 32 x b\n"
    "matrices cross the network.  The rows are cut into epochs of --epoch-rows (default:\n"
    "all of them, one epoch); each epoch is one release, warm-started from the last.\n"
    "\n"
    "Privacy: each epoch is rho-zCDP under replacing one row (charged (rho, 0)), every\n"
    "row normalised to unit norm; epochs of disjoint rows, so the run is --rho-zCDP in\n"
    "every row as well (each row is in one epoch); the report also states the\n"
    "sequential total.  The same mechanism as on one process (src/mpi/power_sharded.h):\n"
    "a seeded run gives the same basis on any number of ranks.\n";

static const char s_epilogue[] =
    "\nOutput: rank 0 prints one report (--json: one object) with the rows, d, k, the\n"
    "ranks and their slices, each epoch's time, the bytes one rank moved through\n"
    "MPI (allreduces and broadcasts), the peak memory (RSS) of every rank, and the\n"
    "privacy; --out writes the last basis (k x d float32 .npy).\n"
    "\n"
    "Example:\n"
    "  mpirun -np 4 dps-mpi-estimate --k 10 --rho 1 --out basis.npy gradients.npy\n"
    "  (as root add --allow-run-as-root; more ranks than cores: --oversubscribe)\n"
    "\n"
    "Exit codes: 0 released; 1 runtime failure; 2 usage; 3 input unreadable;\n"
    "4 the mechanism failed (numerics).\n";

typedef struct {
    cli_reader *in;        /* the file, or NULL: synthetic rows            */
    float *row;            /* one whole row of the file                    */
    size_t d, c0, w, k;
    uint64_t next;         /* synthetic: the next row's index              */
    float *U;              /* synthetic: k x w, this rank's slice of U     */
    double *block, *tmp;   /* synthetic: one block of draws; a slice in double */
    double seconds;        /* spent reading or making rows (not the mechanism) */
    cli_msg err;           /* the reader's last error                      */
} s_rows;

enum { SYNTH_BLOCK = 1024 }; /* the scratch power_sharded_named_add needs */

/* Coordinates [c0, c0 + w) of the Gaussian vector named (label, index) of
   length d, drawn as the sharded noise is (power_sharded_named_add): any
   split of the coordinates gives the same numbers. */
static void s_named_slice(s_rows *r, const char *label, uint64_t index, double sd, float *out)
{
    memset(r->tmp, 0, r->w * sizeof *r->tmp);
    if (power_sharded_named_add(r->d, r->c0, r->c0 + r->w, 0, label, index << 24, sd, r->block, r->tmp)) {
        fprintf(stderr, "dps-mpi-estimate: the random generator could not start\n"); /* only without libsodium */
        MPI_Abort(MPI_COMM_WORLD, CLI_EXIT_RUNTIME);
    }
    for (size_t i = 0; i < r->w; i++)
        out[i] = (float)r->tmp[i];
}

/* The next row, this rank's columns: from the file, or
   synthetic: row i = sum_j z_ij U_j + g_i, U's k rows N(0, 1/d) per entry
   (norm about 1, nearly orthogonal), z_i N(0, 1), g_i N(0, 0.09/d) (norm
   about 0.3), every part named by its index (public test data, the same on
   any number of ranks; only this rank's columns are made). */
static int s_next_timed(s_rows *r, float *slice)
{
    if (!r->in) {
        uint64_t i = r->next++;
        dps_rng *g = NULL;
        dps_rng_new_labelled(&g, 0, "synthetic-z", i);
        s_named_slice(r, "synthetic-noise", i, 0.3 / sqrt((double)r->d), slice);
        for (size_t j = 0; j < r->k; j++) {
            float z = (float)dps_rng_gaussian(g, 1.0);
            for (size_t c = 0; c < r->w; c++)
                slice[c] += z * r->U[j * r->w + c];
        }
        dps_rng_destroy(&g);
        return DPS_OK;
    }
    size_t got = 0;
    if (cli_reader_next(r->in, r->row, 1, &got, &r->err))
        return DPS_EIO;
    if (got != 1) {
        snprintf(r->err.msg, sizeof r->err.msg, "the input ended before its header's row count");
        return DPS_EIO;
    }
    memcpy(slice, r->row + r->c0, r->w * sizeof *slice);
    return DPS_OK;
}

/* sharded_next_row, timing what making or reading the rows takes. */
static int s_next(void *ctx, float *slice)
{
    s_rows *r = ctx;
    double t0 = MPI_Wtime();
    int rc = s_next_timed(r, slice);
    r->seconds += MPI_Wtime() - t0;
    return rc;
}

/* "A:B" into two positive whole numbers: 0, or -1. */
static int s_parse_pair(const char *s, uint64_t *a, uint64_t *b)
{
    const char *colon = strchr(s, ':');
    char first[32];
    size_t len = colon ? (size_t)(colon - s) : 0;
    if (!colon || len == 0 || len >= sizeof first)
        return -1;
    memcpy(first, s, len);
    first[len] = 0;
    return cli_parse_u64(first, a) || cli_parse_u64(colon + 1, b) || !*a || !*b ? -1 : 0;
}

static double s_peak_rss_mb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0; /* kB on Linux */
}

/* Rank 0's report of a finished run: text, or one JSON object.  The privacy:
   each epoch's release is rho-zCDP in its rows; the epochs' rows are
   disjoint, so each row is in one epoch and the run is rho-zCDP in every
   row (parallel composition); the sum over epochs (what a ledger would
   count) is stated too.  A seeded run's noise is not secret: no privacy. */
static void s_report(const power_sharded *p, const s_rows *rows, int json, int synthetic, int seeded, uint64_t n,
                     uint64_t epochs, double rho, const double *times, const double *all_rss, const char *out,
                     const double *sv)
{
    dps_zcdp row = {rho, 0}, seq = {rho * (double)epochs, 0};
    double max_rss = 0, t = -rows->seconds; /* the mechanism's time: rank 0's, the rows apart */
    for (int r = 0; r < p->size; r++)
        max_rss = fmax(max_rss, all_rss[r]);
    for (uint64_t e = 0; e < epochs; e++)
        t += times[e];
    t /= (double)epochs;
    uint64_t zero = p->rows_nan + p->rows_inf + p->rows_zero;
    /* the power mechanism's releases are Gaussian mechanisms: the exact Gaussian eps */
    double eps_row = dps_zcdp_eps_total_kind(row, DPS_CHARGE_GAUSSIAN, 1e-5),
           eps_seq = dps_zcdp_eps_total_kind(seq, DPS_CHARGE_GAUSSIAN, 1e-5);
    if (json) {
        printf("{\"program\": \"dps-mpi-estimate\", \"ranks\": %d, \"rows\": %" PRIu64 ", \"d\": %zu, \"k\": %zu, "
               "\"b\": %zu, \"epochs\": %" PRIu64 ", \"seconds_per_epoch\": %.6g, \"seconds_rows_per_epoch\": %.6g, "
               "\"collectives\": %" PRIu64 ", \"bytes_moved_per_rank\": %" PRIu64 ", \"peak_rss_mb_max\": %.1f, "
               "\"peak_rss_mb_rank0\": %.1f, \"rows_zero\": %" PRIu64 ", \"rho_epoch\": %.17g, \"rho_per_row\": %.17g, "
               "\"eps_per_row\": %.6g, \"rho_total\": %.17g, \"eps_total\": %.6g, \"delta_target\": 1e-05, "
               "\"seeded\": %s, \"sv\": [",
               p->size, n, p->d, p->k, p->b, epochs, t, rows->seconds / (double)epochs, p->traffic.calls,
               p->traffic.bytes, max_rss, all_rss[0], zero, rho, rho, eps_row, seq.rho, eps_seq,
               seeded ? "true" : "false");
        for (size_t j = 0; sv && j < p->k; j++)
            printf("%s%.6g", j ? ", " : "", sv[j]);
        printf("]}\n");
        return;
    }
    printf("dps-mpi-estimate: %" PRIu64 " rows of d %zu in %" PRIu64 " epoch(s), k %zu (b %zu), %d rank(s) of about "
           "%zu columns each%s\n", n, p->d, epochs, p->k, p->b, p->size, p->d / (size_t)p->size,
           seeded ? "  SEEDED: the noise is not secret, NO privacy" : "");
    printf("  time per epoch      %.3f s in the mechanism, %.3f s %s the rows (rank 0, mean of %" PRIu64 ")\n", t,
           rows->seconds / (double)epochs, synthetic ? "making" : "reading", epochs);
    printf("  moved through MPI   %.3f MB per rank in %" PRIu64 " collective calls\n", (double)p->traffic.bytes / 1e6,
           p->traffic.calls);
    printf("  peak memory (RSS)   %.1f MB the largest rank, %.1f MB rank 0\n", max_rss, all_rss[0]);
    printf("  rows as zero        %" PRIu64 " (NaN, Inf or zero norm; a count of the data, not private)\n", zero);
    printf("  privacy             rho %g per epoch; each row is in one epoch: rho %g in every row, eps %.4g at delta "
           "1e-5 (summed over the epochs, as a ledger counts: rho %g, eps %.4g)\n", rho, rho, eps_row, seq.rho,
           eps_seq);
    if (out)
        printf("  basis               %s (%zu x %zu float32)\n", out, p->k, p->d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cli_set_program("dps-mpi-estimate");
    dps_config *lib = NULL; /* the defaults are the library's */
    if (dps_config_new(&lib, 2, 1) != DPS_OK) {
        cli_error("out of memory");
        MPI_Finalize();
        return CLI_EXIT_RUNTIME;
    }
    size_t k = 0, dim = 0, oversample = (size_t)dps_config_int(lib, DPS_PARAM_POWER_OVERSAMPLE);
    double rho = dps_config_real(lib, DPS_PARAM_RHO_EPOCH);
    dps_config_destroy(&lib);
    uint64_t epoch_rows = 0, blocks = 0, seed = 0, public_seed = 0;
    const char *out = NULL, *in = NULL, *pos[1], *synthetic = NULL;
    int help = 0, json = 0;
    size_t n_pos = 0;
    /* the estimator's settings: names, help and defaults from the one table (src/args/est_flags.h) */
#define EST_FLAG(flag, kind, dest) \
    {"--" flag, kind, dest, est_flag_metavar(flag), est_flag_default(flag), est_flag_help(flag), 0}
    cli_opt opts[] = {
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Options:", 0},
        EST_FLAG("k", CLI_OPT_SIZE, &k),
        EST_FLAG("rho", CLI_OPT_DOUBLE, &rho),
        {"--epoch-rows", CLI_OPT_U64, &epoch_rows, "N", "all rows", "rows per epoch (the last one may be shorter)", 0},
        EST_FLAG("power-blocks", CLI_OPT_U64, &blocks),
        EST_FLAG("power-oversample", CLI_OPT_SIZE, &oversample),
        {"--dim", CLI_OPT_SIZE, &dim, "D", "from the file", "row length (required for raw input)", 0},
        {"--synthetic", CLI_OPT_STRING, &synthetic, "N:D", "none",
         "instead of INPUT: N public synthetic rows of dimension D near a k-dimensional subspace, each rank "
         "making only its columns (benchmarks, and d beyond one machine's memory)", 0},
        EST_FLAG("seed", CLI_OPT_U64, &seed),
        EST_FLAG("public-seed", CLI_OPT_U64, &public_seed),
        {"--out", CLI_OPT_STRING, &out, "FILE", "not written", "the last basis, k x d float32 .npy (rank 0)", 0},
        {"--json", CLI_OPT_FLAG, &json, NULL, NULL, "one JSON object instead of the text report", 0},
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    static const cli_alias aliases[] = {{"--k", "--n-components", 1}};
    cli_set_aliases(aliases, 1);
    size_t n_opts = sizeof opts / sizeof *opts;
    if (rank != 0)
        cli_set_silent(1); /* one rank says it */
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, pos, 1, &n_pos, &help, rank == 0 ? s_synopsis : "",
                               rank == 0 ? s_epilogue : "");
    if (rc >= 0) {
        MPI_Finalize();
        return rc;
    }
    in = n_pos ? pos[0] : NULL;
    int seeded = cli_opt_given(opts, n_opts, "--seed");
    s_rows rows = {0};
    uint64_t n = 0, syn_d = 0;
    /* the checks every rank makes alike (usage: rank 0 says it) */
    int exit_code = 0;
    if (!k || !in == !synthetic) {
        cli_error("give --k and one INPUT file or --synthetic N:D (see --help)");
        exit_code = CLI_EXIT_USAGE;
    } else if (!(rho > 0 && isfinite(rho))) {
        cli_error("--rho must be a positive number");
        exit_code = CLI_EXIT_USAGE;
    } else if (blocks > POWER_SHARDED_MAX_STEPS) {
        cli_error("--power-blocks must be at most %d", POWER_SHARDED_MAX_STEPS);
        exit_code = CLI_EXIT_USAGE;
    } else if (synthetic && s_parse_pair(synthetic, &n, &syn_d)) {
        cli_error("--synthetic: '%s' is not N:D (rows, dimension, both positive), e.g. 2000:100000", synthetic);
        exit_code = CLI_EXIT_USAGE;
    }
    /* the file: every rank opens it; one that cannot says so with its rank */
    int mine = 0;
    if (!exit_code && !synthetic) {
        if (cli_reader_open(&rows.in, in, CLI_FMT_AUTO, dim, &rows.err)) {
            cli_error("%s", rows.err.msg);
            mine = CLI_EXIT_INPUT;
        } else if (!cli_reader_rows(rows.in, &n)) {
            cli_error("%s: the row count must be known from the file (a .npy, or raw float32 in a regular file)", in);
            mine = CLI_EXIT_INPUT;
        }
    }
    int rank0 = mine;
    MPI_Bcast(&rank0, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank != 0 && mine && !rank0)
        fprintf(stderr, "dps-mpi-estimate: rank %d: %s\n", rank, cli_last_error());
    uint64_t shape[2] = {n, exit_code || mine ? 0 : synthetic ? syn_d : cli_reader_dim(rows.in)}, shape0[2];
    memcpy(shape0, shape, sizeof shape);
    MPI_Bcast(shape0, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (!exit_code && !mine && (shape[0] != shape0[0] || shape[1] != shape0[1])) {
        fprintf(stderr, "dps-mpi-estimate: rank %d: %s is %" PRIu64 " x %" PRIu64 " here but %" PRIu64 " x %" PRIu64
                " on rank 0: every rank must read the same file\n", rank, in, shape[0], shape[1], shape0[0], shape0[1]);
        mine = CLI_EXIT_INPUT;
    }
    exit_code = exit_code ? exit_code : mine;
    MPI_Allreduce(MPI_IN_PLACE, &exit_code, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    size_t d = (size_t)shape0[1], b = k + oversample < d ? k + oversample : d;
    if (!exit_code && (k >= d || n == 0 || d < (size_t)size || b > POWER_SHARDED_MAX_B || d > (size_t)INT32_MAX)) {
        cli_error("need 1 <= k < d (k %zu, d %zu), rows (%" PRIu64 "), d >= the ranks (%d), k + --power-oversample <= %d "
                  "and d <= %d", k, d, n, size, POWER_SHARDED_MAX_B, INT32_MAX);
        exit_code = CLI_EXIT_USAGE;
    }
    power_sharded p;
    memset(&p, 0, sizeof p);
    rc = exit_code ? DPS_OK : power_sharded_init(&p, MPI_COMM_WORLD, d, k, b, seeded, seed);
    if (rc) {
        cli_error("cannot set up the sharded iteration (d %zu over %d ranks, k %zu, b %zu): %s%s", d, size, k, b,
                  dps_strerror(rc), rc == DPS_ENOMEM ? " (more ranks need less memory each)" : "");
        exit_code = CLI_EXIT_RUNTIME;
    }
    if (exit_code) {
        cli_reader_close(&rows.in);
        MPI_Finalize();
        return exit_code;
    }
    rows.d = d;
    rows.c0 = p.c0;
    rows.w = p.w;
    rows.k = k;
    uint64_t per = epoch_rows ? epoch_rows : n, epochs = (n + per - 1) / per;
    float *basis = malloc(k * p.w * sizeof *basis), *full = rank == 0 && out ? malloc(k * d * sizeof *full) : NULL;
    double *times = calloc(epochs, sizeof *times), sv[64];
    rc = basis && times && (rank != 0 || !out || full) ? DPS_OK : DPS_ENOMEM;
    if (synthetic) { /* U's slice: k rows of N(0, 1/d), each named */
        rows.block = malloc(SYNTH_BLOCK * sizeof *rows.block);
        rows.tmp = malloc(p.w * sizeof *rows.tmp);
        rows.U = malloc(k * p.w * sizeof *rows.U);
        if (!rows.block || !rows.tmp || !rows.U)
            rc = DPS_ENOMEM;
        for (size_t j = 0; j < k && !rc; j++)
            s_named_slice(&rows, "synthetic-basis", j, 1.0 / sqrt((double)d), rows.U + j * p.w);
    } else if (!(rows.row = malloc(d * sizeof *rows.row))) {
        rc = DPS_ENOMEM;
    }
    rc = power_sharded_agree(&p, rc);
    int released = 0;
    for (uint64_t e = 0; e < epochs && !rc; e++) {
        sharded_epoch ep = {.n = (e + 1) * per <= n ? per : n - e * per, .blocks = blocks, .rho = rho, .epoch = e,
                            .public_seed = public_seed, .warm_slice = released ? basis : NULL};
        double t0 = MPI_Wtime();
        rc = epoch_power_sharded(&p, &ep, s_next, &rows, basis, k <= 64 ? sv : NULL);
        times[e] = MPI_Wtime() - t0;
        if (rc)
            cli_error("epoch %" PRIu64 ": %s", e, rc == DPS_EIO && rows.err.msg[0] ? rows.err.msg : dps_strerror(rc));
        released = !rc;
    }
    if (!rc && out)
        rc = power_sharded_gather(&p, full);
    exit_code = !rc ? 0 : rc == DPS_EIO ? CLI_EXIT_INPUT : rc == DPS_ENUMERIC ? CLI_EXIT_PRIVACY : rc == DPS_EINVAL
                    ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
    if (rc == DPS_ENOMEM)
        cli_error("out of memory (more ranks need less memory each)");
    double rss = s_peak_rss_mb(), *all_rss = rank == 0 ? malloc((size_t)size * sizeof *all_rss) : NULL;
    MPI_Gather(&rss, 1, MPI_DOUBLE, all_rss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0 && !exit_code && out && cli_npy_write(out, full, k, d, 0, &rows.err)) {
        cli_error("--out: %s", rows.err.msg);
        exit_code = CLI_EXIT_RUNTIME;
    }
    if (rank == 0 && !exit_code)
        s_report(&p, &rows, json, synthetic != NULL, seeded, n, epochs, rho, times, all_rss, out, k <= 64 ? sv : NULL);
    MPI_Bcast(&exit_code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    power_sharded_free(&p);
    cli_reader_close(&rows.in);
    free(rows.row);
    free(rows.U);
    free(rows.block);
    free(rows.tmp);
    free(basis);
    free(full);
    free(times);
    free(all_rss);
    MPI_Finalize();
    return exit_code;
}
