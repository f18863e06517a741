/* planted.h - what the MPI tests of the sharded mechanisms share: a planted
   k x d orthonormal basis every rank makes alike, how far another basis is
   from it, and the end of a test program run on every rank.  Static: each
   test program includes it once (after check.h). */
#ifndef DPS_TEST_PLANTED_H
#define DPS_TEST_PLANTED_H

#include "check.h"
#include "dpsubspace.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>

/* U (k x d): Gram-Schmidt of Gaussians from stream (seed 11, "test-basis"). */
static void planted_basis(size_t k, size_t d, float *U)
{
    dps_rng *r = NULL;
    dps_rng_new_labelled(&r, 11, "test-basis", 0);
    double *u = malloc(k * d * sizeof *u);
    for (size_t i = 0; i < k * d; i++)
        u[i] = dps_rng_gaussian(r, 1.0);
    for (size_t j = 0; j < k; j++) {
        for (size_t q = 0; q < j; q++) {
            double dot = 0;
            for (size_t c = 0; c < d; c++)
                dot += u[j * d + c] * u[q * d + c];
            for (size_t c = 0; c < d; c++)
                u[j * d + c] -= dot * u[q * d + c];
        }
        double n = 0;
        for (size_t c = 0; c < d; c++)
            n += u[j * d + c] * u[j * d + c];
        for (size_t c = 0; c < d; c++) {
            u[j * d + c] /= sqrt(n);
            U[j * d + c] = (float)u[j * d + c];
        }
    }
    free(u);
    dps_rng_destroy(&r);
}

/* ||A - A U^T U||_F for k x d orthonormal rows A and U: at least the sine of
   the largest principal angle between their spans (random: about sqrt(k)). */
static double planted_residual(const float *A, const float *U, size_t k, size_t d)
{
    double res = 0, *c = malloc(k * sizeof *c);
    for (size_t j = 0; j < k; j++) {
        for (size_t q = 0; q < k; q++) {
            c[q] = 0;
            for (size_t i = 0; i < d; i++)
                c[q] += (double)A[j * d + i] * U[q * d + i];
        }
        for (size_t i = 0; i < d; i++) {
            double v = A[j * d + i];
            for (size_t q = 0; q < k; q++)
                v -= c[q] * U[q * d + i];
            res += v * v;
        }
    }
    free(c);
    return sqrt(res);
}

/* The end of main on every rank: rank 0 prints the summary line; every rank
   returns 1 if any rank failed a check (then mpirun exits non-zero). */
static int planted_finish(int rank)
{
    int failed = g_fail;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        check_summary();
    MPI_Finalize();
    return failed ? 1 : 0;
}

#endif
