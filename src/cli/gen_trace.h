/* gen_trace.h - dps-gen --trace-regression (gen_trace.c). */
#ifndef DPS_CLI_GEN_TRACE_H
#define DPS_CLI_GEN_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t n, d1, d2, r;
    double noise;
    int seeded;
    uint64_t seed;
    const char *out, *truth_matrix;
} gen_trace_args;

/* Validate, generate (dps_trace_synth) and write rows [vec(X_i), y_i] as an
   n x (d1*d2 + 1) float32 .npy and M (d1 x d2) to truth_matrix if given.
   Returns the exit code; one line on stderr for an error. */
int gen_trace_run(const gen_trace_args *a);

#endif
