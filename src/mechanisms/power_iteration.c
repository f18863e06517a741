/* power_iteration.c - one noisy power iteration in O(b d) memory (see
   power_iteration.h).  Its BLAS/LAPACK calls are its own, as in
   analyze_gauss.c: tall-skinny d x b kernels that linalg.h does not have.

   Layout: X and Y are d x b column-major (ld d), i.e. b contiguous columns
   of d floats, which is also the k x d row layout of a basis.

   THE NORM GUARD.  The caller's sensitivity bound needs ||X||_2 <= 1 for the
   X that the rows are multiplied by.  Householder QR in float gives
   orthonormal columns to about b 2^-24, a little above 1 or below.  So after
   every orthonormalisation X is scaled by (1 - mu) / sqrt(g), g the
   Gershgorin bound (largest absolute row sum) of X^T X computed in double,
   whenever g > 1 - 2^-30, with mu = 2^-20 + sqrt(b) 2^-23: the factor and
   each scaled entry are rounded to float (relative error <= 2^-23 in all),
   which moves X by at most 2^-23 ||X||_F <= 2^-23 sqrt(b) in spectral norm,
   inside mu, so ||X||_2 <= 1 - mu + 2^-23 sqrt(b) < 1 up to the double
   rounding of the Gram (1e-16 d relative, inside the 2^-20).

   THE SUM IN DOUBLE.  The sensitivity sqrt 2 (epoch_power.c) is tight, so
   rounding must not add a data-dependent term that grows with the block:
   summed in float, Y_{j+1} = fl(Y_j + Z_j) over the N/T/32 flushes of a block
   rounds differently on neighbouring inputs once their Y_j differ, up to
   2^-23 ||Y|| per flush (in the worst case as large as the sensitivity at
   20 000 rows).  So each flush's Z = B^T (B X) (32 rows) is formed in
   float with beta 0 and added into Yd in double: flushes without the
   replaced row compute bit-identical Z on both inputs, and the double sum
   adds at most 2^-52 ||Y|| per flush.  What stays in float is the one
   flush that holds the replaced row (its inner products over d, the usual
   float caveat of rng.c, as for the released values themselves).  Under
   ADDING a row (SubspaceEstimator.rho_add_remove's adjacency) every later
   flush of the step holds other rows and rounds differently: that caveat
   then covers every later flush, not one (issue 13's stop note).  Forming
   the flushes' products in double would remove it; double BLAS runs at
   half of float's peak here (tools/bench/bench-gradmech). */
#include "power_iteration.h"
#include "internal.h"
#include "linalg.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

enum { POWER_BLOCK_ROWS = 32 }; /* rows per sgemm block: enough for BLAS 3, and
                                  32 d floats whatever b is */

static size_t s_block_rows(size_t b)
{
    (void)b;
    return POWER_BLOCK_ROWS;
}

/* LAPACK workspaces as power_bytes counts them (power_init takes the larger
   of these and LAPACK's own query). */
static size_t s_lwork_est(size_t b) { return 256 * b; }
static size_t s_ldwork_est(size_t b) { return 8 * b * b + 64 * b; }

size_t power_bytes(size_t d, size_t k, size_t b)
{
    (void)k;
    size_t nb = s_block_rows(b);
    size_t floats = 2 * b * d + nb * d + b * nb + b + s_lwork_est(b) + b * b;
    size_t doubles = b * d + 2 * b * b + b + s_ldwork_est(b) + b * b + b * (size_t)LA_CHUNK;
    return floats * sizeof(float) + doubles * sizeof(double);
}

void power_free(power_iteration *p)
{
    free(p->X);
    free(p->Y);
    free(p->Yd);
    free(p->B);
    free(p->P);
    free(p->tau);
    free(p->work);
    free(p->Uf);
    free(p->R);
    free(p->U);
    free(p->sv);
    free(p->dwork);
    free(p->G);
    free(p->gbuf);
    memset(p, 0, sizeof *p);
}

int power_init(power_iteration *p, size_t d, size_t k, size_t b)
{
    memset(p, 0, sizeof *p);
    if (k < 1 || b < k || b > d || d > (size_t)INT32_MAX || b > SIZE_MAX / sizeof(float) / d)
        return DPS_EINVAL;
    dps_blas_init_once();
    p->d = d;
    p->k = k;
    p->b = b;
    p->nb = s_block_rows(b);
    /* LAPACK's workspace queries (sgeqrf, sorgqr on d x b; dgesvd on b x b) */
    float qf = 0, qo = 0;
    double qd = 0;
    lapack_int n = (lapack_int)d, m = (lapack_int)b;
    LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, n, m, NULL, n, NULL, &qf, -1);
    LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, n, m, m, NULL, n, NULL, &qo, -1);
    LAPACKE_dgesvd_work(LAPACK_COL_MAJOR, 'A', 'N', m, m, NULL, m, NULL, NULL, m, NULL, 1, &qd, -1);
    p->lwork = DPS_MAX(s_lwork_est(b), (size_t)DPS_MAX(qf, qo) + 1);
    p->ldwork = DPS_MAX(s_ldwork_est(b), (size_t)qd + 1);
    p->X = dps_aligned_calloc(b * d, sizeof(float));
    p->Y = dps_aligned_calloc(b * d, sizeof(float));
    p->Yd = dps_aligned_calloc(b * d, sizeof(double));
    p->B = dps_aligned_alloc(p->nb * d, sizeof(float));
    p->P = dps_aligned_alloc(b * p->nb, sizeof(float));
    p->tau = malloc(b * sizeof *p->tau);
    p->work = malloc(p->lwork * sizeof *p->work);
    p->Uf = malloc(b * b * sizeof *p->Uf);
    p->R = malloc(b * b * sizeof *p->R);
    p->U = malloc(b * b * sizeof *p->U);
    p->sv = calloc(b, sizeof *p->sv);
    p->dwork = malloc(p->ldwork * sizeof *p->dwork);
    p->G = malloc(b * b * sizeof *p->G);
    p->gbuf = malloc(b * (size_t)LA_CHUNK * sizeof *p->gbuf);
    if (!p->X || !p->Y || !p->Yd || !p->B || !p->P || !p->tau || !p->work || !p->Uf || !p->R || !p->U || !p->sv ||
        !p->dwork || !p->G || !p->gbuf) {
        power_free(p);
        return DPS_ENOMEM;
    }
    return DPS_OK;
}

/* The norm guard (top of the file). */
static void s_guard(power_iteration *p)
{
    size_t b = p->b, d = p->d;
    memset(p->G, 0, b * b * sizeof *p->G);
    for (size_t c0 = 0; c0 < d; c0 += LA_CHUNK)
        la_gram_add(p->X, b, d, c0, DPS_MIN(d, c0 + LA_CHUNK), p->G, p->gbuf);
    /* one triangle is filled, the other stays 0: entry (i, j) is the sum of
       its two slots, whichever convention the triangle follows */
    double g = 0;
    for (size_t i = 0; i < b; i++) {
        double row = 0;
        for (size_t j = 0; j < b; j++)
            row += i == j ? fabs(p->G[i * b + i]) : fabs(p->G[i * b + j] + p->G[j * b + i]);
        g = fmax(g, row);
    }
    if (g > 1.0 - 0x1p-30) { /* a margin for the Gram's own double rounding */
        double mu = 0x1p-20 + sqrt((double)b) * 0x1p-23;
        float f = (float)((1.0 - mu) / sqrt(g));
        for (size_t j = 0; j < b; j++)
            cblas_sscal((int)d, f, p->X + j * d, 1);
    }
}

/* Y (d x b) = Q of its Householder QR, R (b x b, double, column-major) its
   triangle. */
static int s_qr(power_iteration *p, int want_r)
{
    lapack_int n = (lapack_int)p->d, m = (lapack_int)p->b;
    if (LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, n, m, p->Y, n, p->tau, p->work, (lapack_int)p->lwork) != 0)
        return DPS_ENUMERIC;
    if (want_r)
        for (size_t j = 0; j < p->b; j++)
            for (size_t i = 0; i < p->b; i++)
                p->R[j * p->b + i] = i <= j ? (double)p->Y[j * p->d + i] : 0.0;
    if (LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, n, m, m, p->Y, n, p->tau, p->work, (lapack_int)p->lwork) != 0)
        return DPS_ENUMERIC;
    return DPS_OK;
}

int power_start(power_iteration *p, const float *warm, dps_rng *pub)
{
    size_t d = p->d, b = p->b;
    /* all b columns are drawn whether or not warm replaces k of them: the
       public stream's use does not depend on the history */
    dps_rng_gaussian_fill_f(pub, 1.0, p->Y, b * d);
    if (warm)
        memcpy(p->Y, warm, p->k * d * sizeof *p->Y);
    int rc = s_qr(p, 0);
    if (rc)
        return rc;
    memcpy(p->X, p->Y, b * d * sizeof *p->X);
    s_guard(p);
    memset(p->Y, 0, b * d * sizeof *p->Y);
    memset(p->Yd, 0, b * d * sizeof *p->Yd);
    p->pending = 0;
    p->steps = 0;
    memset(p->sv, 0, b * sizeof *p->sv);
    return DPS_OK;
}

/* Yd += B^T (B X) for the pending rows (formed in Y, summed in double). */
static void s_flush(power_iteration *p)
{
    if (!p->pending)
        return;
    int d = (int)p->d, b = (int)p->b, nb = (int)p->pending;
    /* P (nb x b, ld nb) = B X: B is d x nb column-major (each row contiguous) */
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, nb, b, d, 1.0f, p->B, d, p->X, d, 0.0f, p->P, nb);
    /* Y (d x b) = B^T P, then Yd += Y */
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, d, b, nb, 1.0f, p->B, d, p->P, nb, 0.0f, p->Y, d);
    for (size_t i = 0; i < (size_t)b * (size_t)d; i++)
        p->Yd[i] += (double)p->Y[i];
    p->pending = 0;
}

void power_add(power_iteration *p, const float *row)
{
    memcpy(p->B + p->pending * p->d, row, p->d * sizeof *row);
    if (++p->pending == p->nb)
        s_flush(p);
}

int power_step(power_iteration *p, double s, dps_rng *noise)
{
    size_t d = p->d, b = p->b;
    s_flush(p);
    /* every entry gets its draw, in a fixed order, whatever the rows; the sum
       is formed in double and rounded to float (post-processing) */
    for (size_t i = 0; i < b * d; i++)
        p->Y[i] = (float)(p->Yd[i] + dps_rng_gaussian(noise, s));
    memset(p->Yd, 0, b * d * sizeof *p->Yd);
    int rc = s_qr(p, 1);
    if (rc)
        return rc;
    /* R = U_r S W^T, so Y = (Q U_r) S W^T: X = Q U_r, largest first */
    lapack_int m = (lapack_int)b;
    double vt_dummy = 0;
    if (LAPACKE_dgesvd_work(LAPACK_COL_MAJOR, 'A', 'N', m, m, p->R, m, p->sv, p->U, m, &vt_dummy, 1, p->dwork,
                            (lapack_int)p->ldwork) != 0)
        return DPS_ENUMERIC;
    for (size_t i = 0; i < b * b; i++)
        p->Uf[i] = (float)p->U[i];
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)b, (int)b, 1.0f, p->Y, (int)d, p->Uf,
                (int)b, 0.0f, p->X, (int)d);
    s_guard(p);
    memset(p->Y, 0, b * d * sizeof *p->Y);
    p->steps++;
    return DPS_OK;
}

int power_basis(const power_iteration *p, float *basis, double *sv)
{
    if (!p->steps)
        return DPS_EINVAL;
    size_t d = p->d;
    for (size_t j = 0; j < p->k; j++) {
        const float *x = p->X + j * d;
        double nrm = sqrt(la_dot_self(x, d)); /* about 1: undo the guard's scale */
        for (size_t i = 0; i < d; i++)
            basis[j * d + i] = (float)(x[i] / nrm);
        if (sv)
            sv[j] = p->sv[j];
    }
    return DPS_OK;
}
