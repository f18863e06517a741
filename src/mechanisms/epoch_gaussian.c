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

   MEMORY.  Each group's C_g (second_moment.h), one noisy copy of the widest
   group's for the eigensolver (dsyevr destroys it), and its eigenvectors:
   sum_g (d_g^2 + a block of rows) + max_g d_g^2 + max_g k_g d_g doubles. */
#include "epoch_mechanism.h"
#include "gaussian_cov.h"
#include "internal.h"
#include "linalg.h"
#include "second_moment.h"

#include <math.h>
#include <string.h>

struct epoch_state {
    const dps_config *cfg;
    second_moment sm[DPS_MAX_GROUPS]; /* each group's sum x_g x_g^T (k_g > 0) */
    double *A;        /* C_g + E_g, destroyed by the eigensolver */
    double *Z, *w;    /* top-k_g eigenvectors (d_g x k_g) and values */
};

/* The widest group with a basis, and the most eigenvector entries. */
static void s_largest(const dps_config *c, size_t *d_max, size_t *kd_max, size_t *k_max)
{
    *d_max = *kd_max = *k_max = 0;
    for (size_t g = 0; g < epoch_groups(c); g++) {
        size_t dg = epoch_group_d(c, g), kg = epoch_group_k(c, g);
        if (kg == 0)
            continue;
        *d_max = dg > *d_max ? dg : *d_max;
        *kd_max = kg * dg > *kd_max ? kg * dg : *kd_max;
        *k_max = kg > *k_max ? kg : *k_max;
    }
}

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
    for (size_t g = 0; g < epoch_groups(c); g++)
        if (epoch_group_k(c, g) > 0 && epoch_group_d(c, g) > GAUSS_COV_MAX_D) {
            *why = "the Gaussian covariance mechanism keeps two d x d matrices per group: a group (or d) above "
                   "16384 columns is refused";
            return DPS_ELIMIT;
        }
    return DPS_OK;
}

static size_t s_memory(const dps_config *c)
{
    /* each group's C_g and row block; A, the eigensolver's vectors and values */
    size_t d_max, kd_max, k_max, sum = 0;
    s_largest(c, &d_max, &kd_max, &k_max);
    for (size_t g = 0; g < epoch_groups(c); g++)
        if (epoch_group_k(c, g) > 0)
            sum += second_moment_bytes(epoch_group_d(c, g));
    return sum + (d_max * d_max + kd_max + k_max) * sizeof(double);
}

static void s_destroy(epoch_state **pst)
{
    if (!pst || !*pst)
        return;
    for (size_t g = 0; g < DPS_MAX_GROUPS; g++)
        second_moment_free(&(*pst)->sm[g]);
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
    int rc = DPS_OK;
    for (size_t g = 0; g < epoch_groups(c) && !rc; g++)
        if (epoch_group_k(c, g) > 0)
            rc = second_moment_init(&st->sm[g], epoch_group_d(c, g));
    size_t d_max, kd_max, k_max;
    s_largest(c, &d_max, &kd_max, &k_max);
    st->A = malloc(d_max * d_max * sizeof *st->A);
    st->Z = malloc(kd_max * sizeof *st->Z);
    st->w = malloc(k_max * sizeof *st->w);
    if (rc || !st->A || !st->Z || !st->w)
        s_destroy(&st);
    *out = st;
    return st ? DPS_OK : DPS_ENOMEM;
}

/* Each epoch's rows are used once: C starts empty. */
static int s_begin(epoch_state *st, uint64_t epoch, dps_rng *noise)
{
    (void)noise;
    (void)epoch;
    for (size_t g = 0; g < epoch_groups(st->cfg); g++)
        if (st->sm[g].C)
            second_moment_reset(&st->sm[g]);
    return DPS_OK;
}

/* Each group's slice of the row into its own sum. */
static void s_take_row(epoch_state *st, const float *row)
{
    const dps_config *c = st->cfg;
    for (size_t g = 0, col = 0; g < epoch_groups(c); col += epoch_group_d(c, g), g++)
        if (st->sm[g].C)
            second_moment_add(&st->sm[g], row + col);
}

/* After the charge: the only error left is LAPACK's non-convergence
   (DPS_ENUMERIC), which the stream publishes as FAILED.  The basis is
   group-wise: zero outside each group's block. */
static int s_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    (void)out; /* no FAIL of its own, no radius */
    const dps_config *c = st->cfg;
    memset(basis, 0, c->k * c->d * sizeof *basis);
    for (size_t g = 0, col = 0, row = 0; g < epoch_groups(c); g++) {
        size_t dg = epoch_group_d(c, g), kg = epoch_group_k(c, g);
        if (kg > 0) {
            second_moment *sm = &st->sm[g];
            second_moment_finish(sm);
            memcpy(st->A, sm->C, dg * dg * sizeof *st->A);
            gauss_cov_add_noise(st->A, dg, c->rho_epoch, in->noise);
            int rc = la_syevr_top(st->A, dg, kg, st->w, st->Z);
            if (rc)
                return rc;
            for (size_t j = 0; j < kg; j++)
                for (size_t i = 0; i < dg; i++)
                    basis[(row + j) * c->d + col + i] = (float)st->Z[j * dg + i];
        }
        col += dg;
        row += kg;
    }
    return DPS_OK;
}

static const char *s_group_method(const dps_config *c, size_t g)
{
    return epoch_group_k(c, g) ? "dense covariance (Gaussian noise, top-k eigenvectors)" : "none (rank 0)";
}

/* ||E_g||_2 is about 2 s sqrt(d_g) (the Wigner semicircle's edge): a
   direction of C_g below it is not told apart from the noise's. */
static double s_noise_floor(const dps_config *c, size_t g)
{
    return 2.0 / sqrt(c->rho_epoch) * sqrt((double)epoch_group_d(c, g));
}

const epoch_mechanism epoch_gaussian = {
    .id = DPS_AGG_GAUSSIAN, .name = "gaussian", .intake = EPOCH_ROWS, .uses = EPOCH_USES_GROUPS,
    .check = s_check, .min_buckets = epoch_rows_min_buckets, .memory = s_memory, .cost = epoch_rows_cost,
    .radius_unrelated = epoch_rows_radius_unrelated,
    .group_method = s_group_method, .noise_floor = s_noise_floor,
    .create = s_create, .destroy = s_destroy,
    .begin = s_begin, .take_row = s_take_row, .release = s_release,
};
