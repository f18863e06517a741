/* power_iteration.c - one noisy power iteration in O(b d) memory (see
   power_iteration.h).  Its BLAS/LAPACK calls are its own, as in
   analyze_gauss.c: tall-skinny d x b kernels that linalg.h does not have.

   Layout: X and Y are d x b column-major (ld d), i.e. b contiguous columns
   of d floats, which is also the k x d row layout of a basis.

   THE NORM GUARD.  The caller's sensitivity bound needs ||X||_2 <= 1 for the
   X that the rows are multiplied by.  Householder QR in float gives
   orthonormal columns to about b 2^-24, a little above 1 or below.  So after
   every orthonormalisation X is scaled by (1 - mu) / sqrt(g + e) whenever
   g + e > 1 - 2^-30: g the Gershgorin bound (largest absolute row sum) of
   X^T X computed in double, e = b gamma_d g a bound on that Gram's rounding
   (each entry is a sum of d exact products, off by at most gamma_d |X_i|^T
   |X_j| <= gamma_d g; b entries a row; gamma_d = d 2^-53 / (1 - d 2^-53)),
   so ||X||_2^2 <= g + e; mu = 2^-20 + sqrt(b) 2^-23: the factor and each
   scaled entry are rounded to float (relative error <= 2^-23 in all), which
   moves X by at most 2^-23 ||X||_F <= 2^-23 sqrt(b) in spectral norm, inside
   mu, so ||X||_2 <= 1 - mu + 2^-23 sqrt(b) < 1.  When g + e <= 1 - 2^-30,
   ||X||_2 < 1 already.  (Before e was counted, d b > 2^23 could leave
   ||X||_2^2 up to b gamma_d above 1 unscaled: 2e-9 at d = 1e6, b = 20.)

   THE SUM IN DOUBLE.  The sensitivity (sqrt 2 replacing a row, 1 adding
   one: epoch_power.c) is tight, so rounding must not add a term that grows
   with the data.  Every product is formed in double: each flush of 32 rows
   converts its rows and X to double a tile of POWER_TILE coordinates at a
   time (exact: floats are doubles) and forms P = B X, then Yd += B^T P,
   through dgemm.  Then whatever the order of the sums, and whichever row is
   replaced, added or removed, the computed sum of a step's n rows is within
   R(n) = n (gamma_n (1 + sqrt(b) gamma_d) + sqrt(b) gamma_d (1 + gamma_n))
   of the exact sum x (x^T X) in Frobenius norm, gamma_m = m 2^-53 / (1 -
   m 2^-53) (Higham, Lemma 3.1 and section 3.5; the two lanes, each a sum
   of its blocks, then added, are one such order): each inner product x^T X_j
   is off by at most gamma_d ||x|| ||X_j|| <= gamma_d (the norm guard), and
   the matrix of sum_x |x_a| |(x^T X)_j| has Frobenius norm at most n (1 +
   sqrt(b) gamma_d) for rows of norm <= 1.  Neighbours' computed sums
   differ from the exact move by at most R(n) + R(n + 1): about 2 n (n +
   sqrt(b) d) 2^-53, 7e-6 at n = 60 000 rows in one step, d = 10^5, b = 20,
   against the sensitivity 1 (power_rounding_bound; tests/mechanisms/test_power_iteration.c
   checks it under replacing and inserting a row).  The noise is not scaled
   for it (as second_moment.h; the Gaussian draws' own floating-point caveat
   is rng.c's).  Why not float: a flush's products formed in float (sgemm)
   round differently on every flush whose rows
   differ, and adding a row shifts every later row to another flush, so
   float's worst case (d 2^-24 relative per inner product) reached every
   flush of the step, far above the sensitivity.  The cost: dgemm runs at
   half of sgemm's peak here (tools/bench/bench-gradmech measures the step). */
#include "power_iteration.h"
#include "internal.h"
#include "linalg.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

/* Rows per flush (enough for BLAS 3, and 32 d floats whatever b is) and
   coordinates converted to double at a time (the tiles of B and X fit in L2).
   Flushes of 64 rows and tiles of 512 or 2048 measured the same within the
   noise (tools/bench/bench-gradmech). */
enum { POWER_BLOCK_ROWS = 32, POWER_TILE = 1024 };

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
    size_t floats = 2 * b * d + nb * d + b + s_lwork_est(b) + b * b;
    size_t doubles = 2 * b * b + b + s_ldwork_est(b) + b * b + b * (size_t)LA_CHUNK +
                     POWER_LANES * (b * d + b * nb + (nb + b) * (size_t)POWER_TILE);
    return floats * sizeof(float) + doubles * sizeof(double) + POWER_NOISE_CHUNKS * rng_bytes();
}

/* Wait for the flushes under way, if any. */
static void s_wait(power_iteration *p)
{
    for (size_t l = 0; l < POWER_LANES; l++)
        pool_task_wait(&p->lane[l].task);
}

void power_free(power_iteration *p)
{
    s_wait(p);
    for (size_t l = 0; l < POWER_LANES; l++) {
        power_lane *ln = &p->lane[l];
        free(ln->full);
        if (ln->Yd != p->Yd)
            free(ln->Yd);
        free(ln->P);
        free(ln->Bt);
        free(ln->Xt);
    }
    free(p->X);
    free(p->Y);
    free(p->Yd);
    free(p->B);
    free(p->tau);
    free(p->work);
    free(p->Uf);
    free(p->R);
    free(p->U);
    free(p->sv);
    free(p->dwork);
    free(p->G);
    free(p->gbuf);
    rng_forks_destroy(p->noise_fork, POWER_NOISE_CHUNKS);
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
    int lanes_ok = 1;
    for (size_t l = 0; l < POWER_LANES; l++) {
        power_lane *ln = &p->lane[l];
        ln->Yd = l == 0 ? p->Yd : dps_aligned_calloc(b * d, sizeof(double));
        ln->P = dps_aligned_alloc(b * p->nb, sizeof(double));
        ln->Bt = dps_aligned_alloc(p->nb * (size_t)POWER_TILE, sizeof(double));
        ln->Xt = dps_aligned_alloc(b * (size_t)POWER_TILE, sizeof(double));
        lanes_ok &= ln->Yd && ln->P && ln->Bt && ln->Xt;
    }
    lanes_ok &= rng_forks_new(p->noise_fork, POWER_NOISE_CHUNKS) == DPS_OK;
    p->tau = malloc(b * sizeof *p->tau);
    p->work = malloc(p->lwork * sizeof *p->work);
    p->Uf = malloc(b * b * sizeof *p->Uf);
    p->R = malloc(b * b * sizeof *p->R);
    p->U = malloc(b * b * sizeof *p->U);
    p->sv = calloc(b, sizeof *p->sv);
    p->dwork = malloc(p->ldwork * sizeof *p->dwork);
    p->G = malloc(b * b * sizeof *p->G);
    p->gbuf = malloc(b * (size_t)LA_CHUNK * sizeof *p->gbuf);
    if (!p->X || !p->Y || !p->Yd || !p->B || !lanes_ok || !p->tau || !p->work || !p->Uf || !p->R || !p->U || !p->sv ||
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
    double u = 0x1p-53, gd = (double)d * u / (1.0 - (double)d * u), e = (double)b * gd * g;
    if (g + e > 1.0 - 0x1p-30) { /* ||X||_2^2 <= g + e: the Gram's own rounding counted */
        double mu = 0x1p-20 + sqrt((double)b) * 0x1p-23;
        float f = (float)((1.0 - mu) / sqrt(g + e));
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
    s_wait(p);
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
    for (size_t l = 0; l < POWER_LANES; l++)
        memset(p->lane[l].Yd, 0, b * d * sizeof *p->Yd);
    p->pending = 0;
    p->blocks = 0;
    p->steps = 0;
    memset(p->sv, 0, b * sizeof *p->sv);
    return DPS_OK;
}

/* dst (w x cols, column-major, ld w) = coordinates [c0, c0 + w) of the cols
   vectors of src (each d contiguous floats), in double. */
static void s_tile(const float *src, size_t cols, size_t d, size_t c0, size_t w, double *dst)
{
    for (size_t j = 0; j < cols; j++) {
        const float *s = src + j * d + c0;
        double *t = dst + j * w;
        size_t i = 0;
        for (; i + 8 <= w; i += 8) /* a fixed count: vectorised at -O2 too */
            for (size_t q = 0; q < 8; q++)
                t[i + q] = (double)s[i + q];
        for (; i < w; i++)
            t[i] = (double)s[i];
    }
}

/* The lane's Yd += B^T (B X) for nb rows B, every product in double (THE
   SUM IN DOUBLE), with the lane's scratch. */
static void s_flush_rows(const power_iteration *p, power_lane *ln, const float *B, size_t nb)
{
    size_t d = p->d, b = p->b;
    /* P (nb x b, ld nb) = B X, summed over the tiles */
    for (size_t c0 = 0; c0 < d; c0 += POWER_TILE) {
        size_t w = DPS_MIN((size_t)POWER_TILE, d - c0);
        s_tile(B, nb, d, c0, w, ln->Bt);
        s_tile(p->X, b, d, c0, w, ln->Xt);
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)nb, (int)b, (int)w, 1.0, ln->Bt, (int)w, ln->Xt,
                    (int)w, c0 ? 1.0 : 0.0, ln->P, (int)nb);
    }
    /* Yd's rows [c0, c0 + w) += B_tile^T P */
    for (size_t c0 = 0; c0 < d; c0 += POWER_TILE) {
        size_t w = DPS_MIN((size_t)POWER_TILE, d - c0);
        s_tile(B, nb, d, c0, w, ln->Bt);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)w, (int)b, (int)nb, 1.0, ln->Bt, (int)w, ln->P,
                    (int)nb, 1.0, ln->Yd + c0, (int)d);
    }
}

/* A worker's flush of its lane's full block (nb rows). */
static void s_flush_job(void *arg, int worker)
{
    (void)worker;
    power_lane *ln = arg;
    const power_iteration *p = ln->owner;
    s_flush_rows(p, ln, ln->full, p->nb);
}

void power_flush(power_iteration *p)
{
    s_wait(p);
    if (p->pending) /* a partial block: in the next lane, as a full one would be */
        s_flush_rows(p, &p->lane[p->blocks++ % POWER_LANES], p->B, p->pending);
    p->pending = 0;
    size_t n = p->b * p->d;
    for (size_t l = 1; l < POWER_LANES; l++) { /* lane 0 + lane 1, in that order */
        double *y = p->lane[l].Yd;
        for (size_t i = 0; i < n; i++)
            p->Yd[i] += y[i];
        memset(y, 0, n * sizeof *y);
    }
}

size_t power_pool_bytes(size_t d, size_t b) { return POWER_LANES * s_block_rows(b) * d * sizeof(float); }

int power_use_pool(power_iteration *p, dps_pool *pool)
{
    if (!pool)
        return DPS_OK;
    for (size_t l = 0; l < POWER_LANES; l++) {
        power_lane *ln = &p->lane[l];
        ln->full = dps_aligned_alloc(p->nb * p->d, sizeof(float));
        if (!ln->full) {
            for (size_t j = 0; j <= l; j++) {
                free(p->lane[j].full);
                p->lane[j].full = NULL;
            }
            return DPS_ENOMEM;
        }
        ln->task = (pool_task){.pool = pool};
    }
    p->pool = pool;
    return DPS_OK;
}

double power_rounding_bound(size_t n, size_t d, size_t b)
{
    double u = 0x1p-53, gn = (double)n * u / (1.0 - (double)n * u), gd = (double)d * u / (1.0 - (double)d * u);
    double rb = sqrt((double)b);
    return (double)n * (gn * (1.0 + rb * gd) + rb * gd * (1.0 + gn));
}

float *power_slot(power_iteration *p) { return p->B + p->pending * p->d; }

void power_add(power_iteration *p, const float *row)
{
    float *slot = power_slot(p);
    if (row != slot) /* else written there already (power_slot) */
        memcpy(slot, row, p->d * sizeof *row);
    if (++p->pending < p->nb)
        return;
    power_lane *ln = &p->lane[p->blocks++ % POWER_LANES];
    p->pending = 0;
    if (!p->pool) {
        s_flush_rows(p, ln, p->B, p->nb);
        return;
    }
    pool_task_wait(&ln->task); /* the lane's last block is flushed: its buffer takes this block's rows */
    float *full = p->B;
    p->B = ln->full;
    ln->full = full;
    ln->owner = p;
    pool_task_start(p->pool, &ln->task, s_flush_job, ln);
}

/* Range c of the step's noise: Yd's entries [lo, hi) get their draws from
   fork c, then are rounded to float into Y (post-processing) and zeroed. */
static void s_noise_range(void *arg, size_t c, int worker)
{
    (void)worker;
    power_iteration *p = arg;
    size_t n = p->b * p->d, lo = c * n / POWER_NOISE_CHUNKS, hi = (c + 1) * n / POWER_NOISE_CHUNKS;
    dps_rng_gaussian_add(p->noise_fork[c], p->noise_s, p->Yd + lo, hi - lo);
    for (size_t i = lo; i < hi; i++)
        p->Y[i] = (float)p->Yd[i];
    memset(p->Yd + lo, 0, (hi - lo) * sizeof *p->Yd);
}

int power_step(power_iteration *p, double s, dps_rng *noise)
{
    size_t d = p->d, b = p->b;
    power_flush(p);
    /* every entry gets its draw, from its range's fork, whatever the rows;
       the sum is formed in double and rounded to float (post-processing) */
    rng_forks_key(p->noise_fork, POWER_NOISE_CHUNKS, noise);
    p->noise_s = s;
    pool_for(p->pool, POWER_NOISE_CHUNKS, s_noise_range, p);
    p->blocks = 0;
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
