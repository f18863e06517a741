/* est_rgrad.h - dps-estimate --method rgrad (est_rgrad.c): DP low-rank trace
   regression.  It reads its own input layout (rows [vec(X_i), y_i]) and writes
   its own JSON, so estimate.c only parses the flags and hands them over.

   Who owns what: the structs borrow strings from argv; est_rgrad_main owns
   everything it allocates and frees it before returning. */
#ifndef DPS_CLI_EST_RGRAD_H
#define DPS_CLI_EST_RGRAD_H

#include "args.h"

#include <stddef.h>
#include <stdint.h>

/* The rgrad-only flags (refused for the other methods). */
typedef struct {
    size_t d1, d2, r, iters, groups, init_obs;
    double eta, clip, clip_init, clip_sigma;
    int streaming;
    const char *truth_matrix;
} est_rgrad_flags;

/* The flags rgrad shares with the other methods. */
typedef struct {
    const char *input, *format, *out, *json;
    size_t dim;
    double rho, delta, delta_target;
    int seeded, quiet;
    uint64_t seed, public_seed;
} est_rgrad_common;

/* The flags only rgrad takes, for estimate.c's refusal of them elsewhere. */
extern const char *const est_rgrad_only_flags[];
extern const size_t est_rgrad_n_only_flags;

/* Check the flags (opts says which were given), read the input, fit, report.
   Returns the exit code (args.h), one line on stderr for any error. */
int est_rgrad_main(const est_rgrad_flags *f, const est_rgrad_common *c, const cli_opt *opts, size_t n_opts);

#endif
