/* test_power_sharded - the noisy power iteration sharded over MPI ranks
   (src/mpi/power_sharded.h), run by tests/mpi/test_mpi.sh under mpirun with
   1, 2 and 3 ranks.  Every rank makes the same rows (a seeded planted
   subspace) and adds its slice of each.  Rank 0 checks, in this run:
   - the released basis is orthonormal, and within the noise's reach of the
     planted subspace (the bound below);
   - the norm guard: every iterate X has ||X||_2 <= 1 (the Gershgorin bound
     of its Gram, summed in long double on each rank);
   - bad sizes are refused on every rank together;
   and writes the k x d basis (raw float32) to argv[1], which the driver
   compares between the runs (1 rank against R ranks: the same snapshot up
   to floating-point rounding).  argv[2] "secure" runs with the secure
   generator (no file comparison: only the checks above). */
#include "check.h"
#include "planted.h"
#include "dpsubspace.h"
#include "power_sharded.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { D = 2001, K = 4, B = 8, N = 4500, STEPS = 3 };

/* Row i of the planted data: unit(U z + 0.01 g), U a fixed orthonormal
   K x D basis (the first K rows of basis), z and g Gaussian; drawn from
   stream i of seed 11, so every rank makes the same row. */
static void s_row(const float *basis, size_t i, float *row)
{
    dps_rng *r = NULL;
    dps_rng_new_labelled(&r, 11, "test-rows", i);
    double z[K], nrm = 0;
    for (int j = 0; j < K; j++)
        z[j] = dps_rng_gaussian(r, 1.0);
    for (size_t c = 0; c < D; c++) {
        double v = 0.01 * dps_rng_gaussian(r, 1.0);
        for (int j = 0; j < K; j++)
            v += z[j] * basis[j * D + c];
        row[c] = (float)v;
        nrm += v * v;
    }
    for (size_t c = 0; c < D; c++)
        row[c] = (float)(row[c] / sqrt(nrm) * (1.0 - 1e-6)); /* norm <= 1 after float rounding */
    dps_rng_destroy(&r);
}

/* ||X||_2^2 of the iterate, gathered to rank 0 (in long double): the largest
   eigenvalue of X^T X, bounded above by its Gershgorin bound, and below by
   its largest diagonal entry; returns the upper bound (on rank 0). */
static double s_iterate_norm2(power_sharded *p)
{
    size_t b = p->b, w = p->w;
    double *G = calloc(b * b, sizeof *G);
    for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < b; j++) {
            long double s = 0;
            for (size_t c = 0; c < w; c++)
                s += (long double)p->X[i * w + c] * p->X[j * w + c];
            G[i * b + j] = (double)s;
        }
    MPI_Allreduce(MPI_IN_PLACE, G, (int)(b * b), MPI_DOUBLE, MPI_SUM, p->comm);
    double g = 0;
    for (size_t i = 0; i < b; i++) {
        double row = 0;
        for (size_t j = 0; j < b; j++)
            row += fabs(G[i * b + j]);
        g = fmax(g, row);
    }
    free(G);
    return g;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *out = argc > 1 ? argv[1] : NULL; /* "" or none: not written */
    int secure = argc > 2 && strcmp(argv[2], "secure") == 0;

    float *U = malloc(K * D * sizeof *U), *row = malloc(D * sizeof *row), *basis = malloc(K * D * sizeof *basis);
    planted_basis(K, D, U);
    power_sharded p;
    int rc = power_sharded_init(&p, MPI_COMM_WORLD, D, K, B, !secure, 5);
    CHECK(rc == DPS_OK, "init: %s", dps_strerror(rc));
    if (rc == DPS_OK) {
        CHECK(power_sharded_start(&p, NULL, 7, 0) == DPS_OK, "start");
        CHECK(s_iterate_norm2(&p) <= 1.0 || rank != 0, "the start's ||X||_2 <= 1");
        /* STEPS steps, each on its own N / STEPS rows (disjoint blocks, as
           epoch_power.c), noise sd S: at N / STEPS = 1500 rows along K = 4
           directions (the rows' own noise has norm^2 1e-4 D = 0.2 against
           the signal's 4) each direction's energy is about 350, against a
           noise of spectral norm about S (sqrt(D) + sqrt(B)) = 4.8; the cold
           first step sees the signal through the random start, about
           350 sqrt(B / D) = 22 */
        const double S = 0.1;
        for (int t = 0; t < STEPS; t++) {
            for (size_t i = (size_t)t * (N / STEPS); i < (size_t)(t + 1) * (N / STEPS); i++) {
                s_row(U, i, row);
                power_sharded_add(&p, row + p.c0);
            }
            rc = power_sharded_step(&p, S);
            CHECK(rc == DPS_OK, "step %d: %s", t, dps_strerror(rc));
            double g = s_iterate_norm2(&p);
            CHECK(rank != 0 || (g <= 1.0 && g > 0.999), "step %d: the norm guard, ||X||_2^2 <= %.17g", t, g);
        }
        CHECK(power_sharded_gather(&p, rank == 0 ? basis : NULL) == DPS_OK, "gather");
        double sv[K];
        float *slice = malloc(K * p.w * sizeof *slice);
        CHECK(power_sharded_basis(&p, slice, sv) == DPS_OK && sv[0] >= sv[K - 1], "singular values, descending");
        free(slice);
        if (rank == 0) {
            double off = 0;
            for (int i = 0; i < K; i++)
                for (int j = 0; j < K; j++) {
                    double dot = 0;
                    for (size_t c = 0; c < D; c++)
                        dot += (double)basis[i * D + c] * basis[j * D + c];
                    off = fmax(off, fabs(dot - (i == j)));
                }
            CHECK(off < 1e-5, "orthonormal basis: %.3g", off);
            /* Wedin: the residual is at most about sqrt(K) ||noise||_2 / gap,
               2 x 4.8 / 350 = 0.03 (above): below 0.2 with room; a random
               basis gives about sqrt(K) = 2 */
            double res = planted_residual(basis, U, K, D);
            NOTE("%d rank(s)%s: residual to the planted subspace %.4f (random: about 2), top singular values %.1f .. %.1f",
                 size, secure ? ", secure noise" : "", res, sv[0], sv[K - 1]);
            CHECK(res < 0.2, "near the planted subspace: residual %.3f", res);
            if (out && out[0]) {
                FILE *f = fopen(out, "wb");
                CHECK(f && fwrite(basis, sizeof *basis, K * D, f) == K * D, "write %s", out);
                if (f)
                    fclose(f);
            }
        }
        /* the seeded noise is named by its epoch: with no rows Y is the noise
           alone, so a step's basis is the noise's; the same epoch again gives
           the same basis, another epoch another (at k = 4 of d = 2001 two
           independent noise bases have sine about 1; 0.5 leaves room) */
        float *noise_basis[3];
        uint64_t epochs[3] = {5, 5, 6};
        for (int r = 0; r < 3; r++) {
            noise_basis[r] = malloc(K * D * sizeof(float));
            CHECK(power_sharded_start(&p, NULL, 7, epochs[r]) == DPS_OK && power_sharded_step(&p, 1.0) == DPS_OK &&
                      power_sharded_gather(&p, rank == 0 ? noise_basis[r] : NULL) == DPS_OK,
                  "a step of noise alone, epoch %llu", (unsigned long long)epochs[r]);
            /* THE NOISE SCALE: with no rows Y is D x B iid N(0, s^2), s = 1 here;
               its singular values lie in s (sqrt(D) -+ sqrt(B)) -+ s t with
               probability >= 1 - 2 exp(-t^2 / 2) (Davidson-Szarek); t = 4:
               [37.9, 51.5] fails with probability < 7e-4 per draw, and a noise
               of sd sqrt(2) or 1/sqrt(2) (a sensitivity slip) lands outside */
            double nsv[K];
            float *tmp = malloc(K * p.w * sizeof *tmp);
            CHECK(power_sharded_basis(&p, tmp, nsv) == DPS_OK, "noise alone: singular values");
            double lo = sqrt((double)D) - sqrt((double)B) - 4, hi = sqrt((double)D) + sqrt((double)B) + 4;
            CHECK(nsv[0] <= hi && nsv[K - 1] >= lo, "noise of sd 1: singular values %.2f .. %.2f in [%.1f, %.1f]",
                  nsv[0], nsv[K - 1], lo, hi);
            free(tmp);
        }
        if (rank == 0) {
            double same = planted_residual(noise_basis[0], noise_basis[1], K, D);
            double other = planted_residual(noise_basis[0], noise_basis[2], K, D);
            CHECK(secure || same < 1e-5, "seeded: the same epoch draws the same noise (residual %.3g)", same);
            CHECK(other > 0.5, "another epoch draws other noise (residual %.3g)", other);
        }
        for (int r = 0; r < 3; r++)
            free(noise_basis[r]);
        /* a NaN in one rank's part only (the last coordinate): the whole row
           is the zero vector on every rank, counted everywhere */
        CHECK(power_sharded_start(&p, NULL, 7, 9) == DPS_OK, "start for the NaN row");
        uint64_t nan_before = p.rows_nan;
        for (int i = 0; i < 40; i++) { /* more than one flush */
            s_row(U, (size_t)i, row);
            if (i == 3)
                row[D - 1] = NAN;
            power_sharded_add(&p, row + p.c0);
        }
        CHECK(power_sharded_step(&p, 1.0) == DPS_OK, "step with a NaN row");
        long long got = (long long)(p.rows_nan - nan_before), lo = got, hi = got;
        MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        CHECK(lo == 1 && hi == 1, "the NaN row counted once on every rank (%lld..%lld)", lo, hi);
        /* bad input: every rank refuses, together */
        power_sharded q;
        CHECK(power_sharded_init(&q, MPI_COMM_WORLD, D, 9, 8, 1, 5) == DPS_EINVAL, "k > b refused on every rank");
        power_sharded_free(&p);
    }
    free(U);
    free(row);
    free(basis);
    return planted_finish(rank);
}
