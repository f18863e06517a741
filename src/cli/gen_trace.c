/* gen_trace.c - dps-gen --trace-regression: trace-regression data with
   Gaussian design (dps_trace_synth; the scaling is in dpsubspace_rgrad.h) for
   dps-estimate --method rgrad.  main owns nothing here: this function
   allocates and frees its buffers. */
#include "gen_trace.h"
#include "args.h"
#include "io.h"

#include "dpsubspace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gen_trace_run(const gen_trace_args *a)
{
    if (a->d1 < 2 || a->d2 < 2 || a->r < 1 || a->r >= a->d1 || a->r >= a->d2) {
        cli_error("--trace-regression needs --d1, --d2 >= 2 and 1 <= --r < min(d1, d2) (got d1 %zu, d2 %zu, r %zu)",
                  a->d1, a->d2, a->r);
        return CLI_EXIT_USAGE;
    }
    if ((double)a->d1 * (double)a->d2 > (double)DPS_RGRAD_MAX_ENTRIES) {
        cli_error("--d1 * --d2 = %zu is above the limit %u of trace regression", a->d1 * a->d2,
                  (unsigned)DPS_RGRAD_MAX_ENTRIES);
        return CLI_EXIT_USAGE;
    }
    if (!(a->noise >= 0) || !isfinite(a->noise)) {
        cli_error("--noise must be a number >= 0 (got %g)", a->noise);
        return CLI_EXIT_USAGE;
    }
    if (a->n < 1) {
        cli_error("--n must be at least 1");
        return CLI_EXIT_USAGE;
    }
    size_t D = a->d1 * a->d2;
    if (a->n > SIZE_MAX / sizeof(float) / (D + 1)) {
        cli_error("--n %zu observations of %zu values are too many to hold in memory", a->n, D + 1);
        return CLI_EXIT_USAGE;
    }
    if (!a->out) {
        cli_error("--out FILE is required; see --help");
        return CLI_EXIT_USAGE;
    }
    if (a->truth_matrix && strcmp(a->truth_matrix, a->out) == 0) {
        cli_error("--truth-matrix and --out name the same file '%s'; give two different files", a->out);
        return CLI_EXIT_USAGE;
    }
    cli_msg m;
    int code = cli_check_writable(a->out, "--out", &m);
    if (!code && a->truth_matrix)
        code = cli_check_writable(a->truth_matrix, "--truth-matrix", &m);
    if (code) {
        cli_error("%s", m.msg);
        return code;
    }
    dps_rng *rng = NULL;
    int rc = a->seeded ? dps_rng_new_seeded(&rng, a->seed) : dps_rng_new_secure(&rng);
    if (rc) {
        cli_error("cannot create the random generator: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    float *X = malloc(a->n * D * sizeof *X), *y = malloc(a->n * sizeof *y), *M = malloc(D * sizeof *M);
    float *rows = malloc(a->n * (D + 1) * sizeof *rows);
    if (!X || !y || !M || !rows) {
        cli_error("cannot allocate %.3g GB for %zu observations; lower --n", 2.0 * a->n * (D + 1) * 4 / 1e9, a->n);
        code = CLI_EXIT_RUNTIME;
    }
    if (!code && (rc = dps_trace_synth(rng, a->n, a->d1, a->d2, a->r, a->noise, X, y, M)) != DPS_OK) {
        cli_error("generating the data failed: %s", dps_strerror(rc));
        code = CLI_EXIT_RUNTIME;
    }
    if (!code) {
        for (size_t i = 0; i < a->n; i++) {
            memcpy(rows + i * (D + 1), X + i * D, D * sizeof *rows);
            rows[i * (D + 1) + D] = y[i];
        }
        if ((code = cli_npy_write(a->out, rows, a->n, D + 1, 0, &m)) != 0)
            cli_error("%s", m.msg);
    }
    if (!code && a->truth_matrix && (code = cli_npy_write(a->truth_matrix, M, a->d1, a->d2, 0, &m)) != 0)
        cli_error("%s", m.msg);
    if (!code) {
        printf("wrote %s: %zu observations [vec(X_i) (%zu x %zu), y_i] as %zu x %zu float32 (r %zu, noise %g, %s", a->out,
               a->n, a->d1, a->d2, a->n, D + 1, a->r, a->noise, a->seeded ? "seeded generator, seed " : "secure generator");
        if (a->seeded)
            printf("%llu", (unsigned long long)a->seed);
        printf(")");
        if (a->truth_matrix)
            printf("; %s: the %zu x %zu rank-%zu M (||M||_F = 1)", a->truth_matrix, a->d1, a->d2, a->r);
        printf("\n");
    }
    free(X); free(y); free(M); free(rows);
    dps_rng_destroy(&rng);
    return code;
}
