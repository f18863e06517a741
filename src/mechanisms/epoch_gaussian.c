/* epoch_gaussian.c - the Gaussian covariance epoch mechanism
   (DPS_AGG_GAUSSIAN, DESIGN 7.1: Analyze Gauss of Dwork-Talwar-Thakurta-Zhang
   2014 without its gap test): no buckets, intake EPOCH_ROWS.

   THE MECHANISM.  Every row the epoch takes (unit norm, or zero: row_unit)
   is added to C = sum x x^T (second_moment.h: d x d double, blocks of rows
   through dsyrk).  The release adds E, symmetric, whose
   upper triangle (diagonal included) is iid N(0, s^2) with s = 1/sqrt(rho),
   and publishes the top-k eigenvectors of C + E (post-processing).

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

   MEMORY.  C, its noisy copy for the eigensolver and the k eigenvectors:
   2 d^2 + k d doubles, a block of rows, and the block Krylov eigensolver's
   scratch (la_sym_topk_bytes: about 240 d + 3 (k + 10) d doubles). */
#include "epoch_mechanism.h"
#include "gaussian_cov.h"
#include "internal.h"
#include "linalg.h"
#include "second_moment.h"

#include <math.h>
#include <string.h>

struct epoch_state {
    const dps_config *cfg;
    second_moment sm; /* the epoch's sum x x^T */
    double *A;        /* C + E, destroyed by the eigensolver */
    double *Z, *w;    /* top-k eigenvectors (d x k, column-major) and values */
};

void gauss_cov_add_noise(double *A, size_t d, double rho, dps_rng *rng)
{
    double s = 1.0 / sqrt(rho);
    for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++) {
            A[i * d + j] += dps_rng_gaussian(rng, s);
            A[j * d + i] = A[i * d + j];
        }
}

static int s_check(const dps_config *c, const char **why)
{
    if (c->d > GAUSS_COV_MAX_D) {
        *why = "the Gaussian covariance mechanism keeps two d x d matrices: d above 16384 is refused";
        return DPS_ELIMIT;
    }
    return DPS_OK;
}

static size_t s_memory(const dps_config *c)
{
    /* C and A; the eigensolver's vectors and values; the row block; the
       eigensolver's scratch */
    return (c->d * c->d + c->k * c->d + c->k) * sizeof(double) + second_moment_bytes(c->d) +
           la_sym_topk_bytes(c->d, c->k);
}

static void s_destroy(epoch_state **pst)
{
    if (!pst || !*pst)
        return;
    second_moment_free(&(*pst)->sm);
    free((*pst)->A);
    free((*pst)->Z);
    free((*pst)->w);
    free(*pst);
    *pst = NULL;
}

/* Everything the release needs is allocated here, once: the release
   allocates nothing after the charge. */
static int s_create(epoch_state **out, const dps_config *c, dps_pool *pool)
{
    (void)pool;
    epoch_state *st = calloc(1, sizeof *st);
    if (!st)
        return DPS_ENOMEM;
    st->cfg = c;
    int rc = second_moment_init(&st->sm, c->d);
    st->A = malloc(c->d * c->d * sizeof *st->A);
    st->Z = malloc(c->d * c->k * sizeof *st->Z);
    st->w = malloc(c->k * sizeof *st->w);
    if (rc || !st->A || !st->Z || !st->w)
        s_destroy(&st);
    *out = st;
    return st ? DPS_OK : DPS_ENOMEM;
}

/* Each epoch's rows are used once: C starts empty. */
static int s_begin(epoch_state *st, uint64_t epoch)
{
    (void)epoch;
    second_moment_reset(&st->sm);
    return DPS_OK;
}

static void s_take_row(epoch_state *st, const float *row) { second_moment_add(&st->sm, row); }

/* After the charge: the only error left is LAPACK's non-convergence
   (DPS_ENUMERIC), which the stream publishes as FAILED. */
static int s_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    (void)out; /* no FAIL of its own, no radius */
    const dps_config *c = st->cfg;
    size_t d = c->d, k = c->k;
    second_moment_finish(&st->sm);
    memcpy(st->A, st->sm.C, d * d * sizeof *st->A);
    gauss_cov_add_noise(st->A, d, c->rho_epoch, in->noise);
    int rc = la_sym_topk_d(st->A, d, k, NULL, st->w, st->Z, NULL); /* a public start: no noise draws */
    if (rc)
        return rc;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < d; i++)
            basis[j * d + i] = (float)st->Z[j * d + i];
    return DPS_OK;
}

const epoch_mechanism epoch_gaussian = {
    .id = DPS_AGG_GAUSSIAN, .name = "gaussian", .intake = EPOCH_ROWS, .uses = 0,
    .check = s_check, .min_buckets = epoch_rows_min_buckets, .memory = s_memory, .cost = epoch_rows_cost,
    .radius_unrelated = epoch_rows_radius_unrelated,
    .create = s_create, .destroy = s_destroy,
    .begin = s_begin, .take_row = s_take_row, .release = s_release,
};
