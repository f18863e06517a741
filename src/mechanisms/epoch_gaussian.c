/* epoch_gaussian.c - the Gaussian covariance epoch mechanism
   (DPS_AGG_GAUSSIAN, DESIGN 7.1: Analyze Gauss of Dwork-Talwar-Thakurta-Zhang
   2014 without its gap test): no buckets, intake EPOCH_ROWS.

   THE MECHANISM.  Every row the epoch takes (unit norm, or zero: row_unit)
   is added to C = sum x x^T (second_moment.h: d x d double, blocks of rows
   through dsyrk, on the estimator's workers).  The release adds E,
   symmetric, whose upper triangle (diagonal included) is iid N(0, s^2) with
   s = 1/sqrt(rho), and publishes the top-k eigenvectors of C + E
   (post-processing).  The draws are made on the workers
   (gauss_cov_noisy_float: each range of rows from its own fork of the
   release's stream, a ChaCha20 keystream keyed from it, so the draws are
   as secure as the stream and do not depend on the number of workers), and
   C + E is rounded to float after the noise, for the eigensolver: rounding
   a released value is post-processing.

   GUARANTEE.  rho_epoch-zCDP per epoch under replacing one row (pure zCDP:
   charged (rho_epoch, 0)).

   ARGUMENT.  Replacing x by y (norms <= 1) changes C by D = y y^T - x x^T,
   ||D||_F^2 = ||x||^4 + ||y||^4 - 2 (x.y)^2 <= 2.  The release is the upper
   triangle u(C) (diagonal included) plus iid N(0, s^2); ||u(D)||_2^2 =
   sum_{i <= j} D_ij^2 <= ||D||_F^2 <= 2, so the Gaussian mechanism with l2
   sensitivity sqrt 2 and noise s is (sqrt 2)^2 / (2 s^2) = 1/s^2 = rho-zCDP
   (Bun-Steinke 2016, Prop. 1.6).  Mirroring the triangle and the
   eigendecomposition are post-processing.  The noise is drawn for every
   entry whatever the data (the same draws on neighbouring inputs).

   ACCURACY (what to expect).  E is a Wigner matrix: ||E||_2 is about
   2 s sqrt(d).  With rows near a k-dim subspace the k-th eigengap of C is
   about n lambda_k (lambda_k the k-th eigenvalue of the rows' second moment),
   so by Davis-Kahan sin(theta) <= 2 ||E|| / gap ~ 4 sqrt(d / rho) / (n lambda_k).

   PARAMETER GROUPS (DESIGN 7.2).  With G >= 2 public groups (the row is
   the concatenation x = (x_1, ..., x_G), group g of d_g columns) the release
   is, for every group, the top-k_g eigenvectors of C_g + E_g, C_g = sum
   x_g x_g^T, E_g as above with the same s: still rho_epoch-zCDP, charged
   once.  The released vector is the upper triangles of the diagonal blocks
   C_g of C, a sub-vector of u(C), so under replacing one row it moves by at
   most ||u(D)||_2 <= sqrt 2 as above: the same Gaussian mechanism on fewer
   coordinates.  A group with k_g = 0 releases nothing (its C_g is not even
   formed).  The basis is group-wise (dps_snapshot_group): group g's k_g
   rows are zero outside its columns.

   GROUPS TOO WIDE FOR d_g^2 (DESIGN 7.3).  A group wider than dense_max_d
   (default DPS_DENSE_MAX_D) is released by the noisy power iteration of
   epoch_power.c instead, in O(k_g d_g) memory, with the same s = 1/sqrt(rho)
   for every group, and the release is still rho-zCDP: the
   argument for such a mixed release is in moment_groups.c, which holds the
   code of both this table entry and the power aggregator's.

   MEMORY.  Each dense group's C_g (second_moment.h), one noisy copy of the
   widest dense group's in float for the eigensolver (restarted block
   Krylov, la_sym_topk_on, its products on the workers), a row of draws per
   worker and the Krylov scratch: sum_g (d_g^2 + a block of rows) doubles
   + max_g d_g^2 floats + gauss_noise_ws_bytes + la_sym_topk_bytes; a power
   group's as epoch_power.c says. */
#include "epoch_mechanism.h"
#include "gaussian_cov.h"
#include "internal.h"
#include "moment_groups.h"
#include "second_moment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gauss_cov_add_noise(double *A, size_t d, double s, dps_rng *rng)
{
    for (size_t i = 0; i < d; i++) {
        dps_rng_gaussian_add(rng, s, A + i * d + i, d - i);
        for (size_t j = i + 1; j < d; j++)
            A[j * d + i] = A[i * d + j];
    }
}

int gauss_noise_ws_init(gauss_noise_ws *ws, size_t d, dps_pool *pool)
{
    memset(ws, 0, sizeof *ws);
    ws->d = d;
    ws->workers = pool ? pool_size(pool) : 1;
    ws->row = malloc((size_t)ws->workers * DPS_MAX(d, (size_t)1) * sizeof *ws->row);
    int rc = ws->row ? rng_forks_new(ws->stream, GAUSS_NOISE_CHUNKS) : DPS_ENOMEM;
    if (rc)
        gauss_noise_ws_free(ws);
    return rc;
}

void gauss_noise_ws_free(gauss_noise_ws *ws)
{
    rng_forks_destroy(ws->stream, GAUSS_NOISE_CHUNKS);
    free(ws->row);
    ws->row = NULL;
}

size_t gauss_noise_ws_bytes(size_t d, int workers)
{
    return (size_t)workers * d * sizeof(double) + GAUSS_NOISE_CHUNKS * rng_bytes();
}

typedef struct {
    const double *C;
    size_t d;
    double s;
    gauss_noise_ws *ws;
    float *Af;
} noisy_job;

static void s_noisy_range(void *arg, size_t c, int worker)
{
    const noisy_job *j = arg;
    size_t d = j->d;
    double *e = j->ws->row + (size_t)worker * d, trace = 0;
    for (size_t i = j->ws->cut[c]; i < j->ws->cut[c + 1]; i++) {
        dps_rng_gaussian_fill(j->ws->stream[c], j->s, e, d - i);
        const double *Ci = j->C + i * d;
        trace += Ci[i] + e[0];
        j->Af[i * d + i] = (float)(Ci[i] + e[0]);
        for (size_t k = i + 1; k < d; k++) {
            float v = (float)(Ci[k] + e[k - i]);
            j->Af[i * d + k] = v;
            j->Af[k * d + i] = v;
        }
    }
    j->ws->trace[c] = trace;
}

double gauss_cov_noisy_float(const double *C, size_t d, double s, dps_rng *rng, gauss_noise_ws *ws, dps_pool *pool,
                             float *Af)
{
    if (d > ws->d) /* not reached: the callers' d is at most the workspace's */
        return NAN;
    /* equal areas: rows 0 .. r - 1 of the upper triangle hold about d^2 / 2 - (d - r)^2 / 2 (the
       draws' ranges: a seeded release depends on these exact cuts) */
    for (size_t c = 0; c <= GAUSS_NOISE_CHUNKS; c++)
        ws->cut[c] = c == GAUSS_NOISE_CHUNKS
                         ? d
                         : (size_t)llround((double)d * (1.0 - sqrt(1.0 - (double)c / GAUSS_NOISE_CHUNKS)));
    rng_forks_key(ws->stream, GAUSS_NOISE_CHUNKS, rng);
    noisy_job j = {C, d, s, ws, Af};
    pool_for(pool, GAUSS_NOISE_CHUNKS, s_noisy_range, &j);
    double trace = 0;
    for (size_t c = 0; c < GAUSS_NOISE_CHUNKS; c++)
        trace += ws->trace[c];
    return trace;
}

const epoch_mechanism epoch_gaussian = {.id = DPS_AGG_GAUSSIAN, .name = "gaussian", .uses = EPOCH_USES_GROUPS | EPOCH_USES_POWER | EPOCH_USES_DENSE,
                                       MOMENT_GROUP_HOOKS};
