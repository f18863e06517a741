/* linalg.c - the library's BLAS/LAPACK module (see linalg.h). */
#include "linalg.h"
#include "internal.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

void *dps_aligned_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    size_t bytes = n * size;
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes == 0)
        bytes = 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

void *dps_aligned_alloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    size_t bytes = ((n * size) + 63) & ~(size_t)63;
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
}

double la_dot_self(const float *x, size_t n) { return cblas_dsdot((int)n, x, 1, x, 1); }

struct la_ws {
    size_t m_max, k_max;
    float *G;      /* m x m float Gram                  */
    double *Gd;    /* m x m double Gram (destroyed)     */
    double *w;     /* eigenvalues, descending           */
    double *Z;     /* eigenvectors, m x (k+1) col-major */
    float *Zs;     /* m x k scaled, row-major (float)   */
    double *Zd;    /* m x k scaled, row-major (double)  */
    double *buf;   /* m x LA_CHUNK conversion buffer    */
    double *cbuf;  /* k x LA_CHUNK output buffer        */
};

la_ws *la_ws_new(size_t m_max, size_t k_max)
{
    la_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    size_t kk = k_max + 1;
    ws->m_max = m_max;
    ws->k_max = k_max;
    ws->G = dps_aligned_calloc(m_max * m_max, sizeof(float));
    ws->Gd = dps_aligned_calloc(m_max * m_max, sizeof(double));
    ws->w = dps_aligned_calloc(m_max + 1, sizeof(double));
    ws->Z = dps_aligned_calloc(m_max * kk, sizeof(double));
    ws->Zs = dps_aligned_calloc(m_max * k_max, sizeof(float));
    ws->Zd = dps_aligned_calloc(m_max * k_max, sizeof(double));
    ws->buf = dps_aligned_calloc(m_max * LA_CHUNK, sizeof(double));
    ws->cbuf = dps_aligned_calloc(k_max * LA_CHUNK, sizeof(double));
    if (!ws->G || !ws->Gd || !ws->w || !ws->Z || !ws->Zs || !ws->Zd || !ws->buf || !ws->cbuf)
        la_ws_free(&ws);
    return ws;
}

void la_ws_free(la_ws **ws)
{
    if (!ws || !*ws)
        return;
    la_ws *w = *ws;
    free(w->G); free(w->Gd); free(w->w); free(w->Z);
    free(w->Zs); free(w->Zd); free(w->buf); free(w->cbuf);
    free(w);
    *ws = NULL;
}

int la_syevr_top(double *A, size_t n, size_t kk, double *w, double *Z)
{
    if (kk == 0 || kk > n)
        return DPS_EINVAL;
    double *wt = malloc(n * sizeof *wt);
    double *zt = malloc(n * kk * sizeof *zt);
    lapack_int *isuppz = malloc(2 * kk * sizeof *isuppz);
    if (!wt || !zt || !isuppz) {
        free(wt); free(zt); free(isuppz);
        return DPS_ENOMEM;
    }
    lapack_int found = 0;
    lapack_int info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'I', 'U', (lapack_int)n, A, (lapack_int)n,
                                     0.0, 0.0, (lapack_int)(n - kk + 1), (lapack_int)n,
                                     LAPACKE_dlamch('S'), &found, wt, zt, (lapack_int)n, isuppz);
    int rc = DPS_OK;
    if (info != 0 || (size_t)found != kk) {
        rc = DPS_ENUMERIC;
    } else {
        for (size_t i = 0; i < kk; i++) { /* ascending -> descending */
            w[i] = wt[kk - 1 - i];
            memcpy(Z + i * n, zt + (kk - 1 - i) * n, n * sizeof *Z);
        }
    }
    free(wt); free(zt); free(isuppz);
    return rc;
}

/* Copy the upper triangle of a row-major n x n matrix to the lower one. */
static void s_symmetrize(double *G, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            G[j * n + i] = G[i * n + j];
}

/* buf (rows x cw, row-major double) = columns c0..c0+cw-1 of the rows of A. */
static void s_columns_to_double(const float *A, size_t rows, size_t lda, size_t c0, size_t cw, double *buf)
{
    for (size_t j = 0; j < rows; j++) {
        const float *src = A + j * lda + c0;
        double *dst = buf + j * cw;
        for (size_t c = 0; c < cw; c++)
            dst[c] = src[c];
    }
}

void la_gram_add(const float *A, size_t n, size_t lda, size_t c0, size_t c1, double *G, double *buf)
{
    size_t cw = c1 - c0;
    if (cw == 0 || n == 0)
        return;
    s_columns_to_double(A, n, lda, c0, cw, buf);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)n, (int)cw, 1.0, buf, (int)cw, 1.0, G, (int)n);
}

void la_combine_rows(const double *B, size_t r, size_t n, const float *A, size_t lda,
                     size_t c0, size_t c1, double *C, size_t ldc, double *buf)
{
    size_t cw = c1 - c0;
    if (cw == 0 || n == 0)
        return;
    s_columns_to_double(A, r, lda, c0, cw, buf);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)cw, (int)r, 1.0, B, (int)n, buf,
                (int)cw, 0.0, C, (int)ldc);
}

/* Householder QR of the column-major d x k view, then Q in place; the _work
   entry points skip LAPACKE's NaN scan and allocation. */
static int s_householder(float *V, size_t k, size_t d)
{
    size_t lwork = 64 * k + 64;
    float *work = malloc((lwork + k) * sizeof *work);
    if (!work)
        return DPS_ENOMEM;
    float *tau = work + lwork;
    int rc = DPS_OK;
    if (LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, (lapack_int)d, (lapack_int)k, V, (lapack_int)d, tau, work,
                            (lapack_int)lwork) != 0 ||
        LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, (lapack_int)d, (lapack_int)k, (lapack_int)k, V, (lapack_int)d, tau,
                            work, (lapack_int)lwork) != 0)
        rc = DPS_ENUMERIC;
    free(work);
    return rc;
}

/* One Cholesky-QR step: G = V V^T (in double), G = L L^T, V <- L^{-1} V.
   Returns -1 if G is not numerically positive definite. */
static int s_cholqr_step(float *V, size_t k, size_t d)
{
    double G[k * k];
    float Lf[k * k];
    memset(G, 0, sizeof G);
    double buf[k * 256];
    for (size_t c0 = 0; c0 < d; c0 += 256)
        la_gram_add(V, k, d, c0, DPS_MIN(d, c0 + 256), G, buf);
    if (LAPACKE_dpotrf_work(LAPACK_ROW_MAJOR, 'U', (lapack_int)k, G, (lapack_int)k) != 0)
        return -1;
    for (size_t i = 0; i < k; i++) { /* G = U^T U, U upper: V <- U^{-T} V */
        if (!(G[i * k + i] > 1e-6))
            return -1;
        for (size_t j = 0; j < k; j++)
            Lf[i * k + j] = j >= i ? (float)G[i * k + j] : 0.0f;
    }
    cblas_strsm(CblasRowMajor, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, (int)k, (int)d, 1.0f, Lf, (int)k,
                V, (int)d);
    return 0;
}

int la_orthonormalize_rows(float *V, size_t k, size_t d)
{
    if (k == 0)
        return DPS_OK;
    if (k > d)
        return DPS_EINVAL;
    dps_blas_init_once();
    /* CholQR2 (two Cholesky-QR passes): BLAS3 and exact to rounding for the
       nearly orthonormal rows it is given here; Householder when the rows are
       too far from independent for Cholesky. */
    if (k <= 256 && s_cholqr_step(V, k, d) == 0 && s_cholqr_step(V, k, d) == 0)
        return DPS_OK;
    return s_householder(V, k, d);
}

void la_complete_basis(float *V, size_t r, size_t k, size_t d, dps_rng *rng)
{
    for (size_t i = r; i < k; i++) {
        float *v = V + i * d;
        for (;;) {
            dps_rng_gaussian_fill_f(rng, 1.0, v, d);
            double before = cblas_snrm2((int)d, v, 1);
            for (int pass = 0; pass < 2; pass++)
                for (size_t j = 0; j < i; j++) {
                    const float *u = V + j * d;
                    double c = cblas_dsdot((int)d, u, 1, v, 1);
                    cblas_saxpy((int)d, (float)-c, u, 1, v, 1);
                }
            double nrm = cblas_snrm2((int)d, v, 1);
            if (nrm > 1e-3 * before) {
                cblas_sscal((int)d, (float)(1.0 / nrm), v, 1);
                break;
            }
        }
    }
}

int la_topk_rows(la_ws *ws, const float *X, size_t m, size_t d, size_t k, float *V, double *sv,
                 size_t *rank, int *path)
{
    if (!ws || m == 0 || k == 0 || k > d || m > ws->m_max || k > ws->k_max)
        return DPS_EINVAL;
    dps_blas_init_once();
    size_t kk = DPS_MIN(k + 1, m); /* eigenpairs wanted: top k and the next one */
    size_t keig = DPS_MIN(k, m);   /* at most m directions exist */
    int which = LA_PATH_FLOAT_GRAM;

    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)m, (int)d, 1.0f, X, (int)d, 0.0f, ws->G, (int)m);
    for (size_t i = 0; i < m; i++)
        for (size_t j = i; j < m; j++)
            ws->Gd[i * m + j] = ws->Gd[j * m + i] = ws->G[i * m + j];
    int rc = la_syevr_top(ws->Gd, m, kk, ws->w, ws->Z);
    if (rc)
        return rc;
    double l1 = ws->w[0];
    double lk = ws->w[keig - 1];
    double lnext = kk > keig ? ws->w[keig] : 0.0;
    if (l1 > 0 && (lk < 1e-3 * l1 || lk - lnext < 1e-3 * l1)) {
        /* Too small to trust in single precision: the Gram again in double. */
        which = LA_PATH_DOUBLE_GRAM;
        memset(ws->Gd, 0, m * m * sizeof(double));
        for (size_t c0 = 0; c0 < d; c0 += LA_CHUNK)
            la_gram_add(X, m, d, c0, DPS_MIN(d, c0 + LA_CHUNK), ws->Gd, ws->buf);
        s_symmetrize(ws->Gd, m);
        rc = la_syevr_top(ws->Gd, m, kk, ws->w, ws->Z);
        if (rc)
            return rc;
        l1 = ws->w[0];
    }
    size_t r = 0;
    while (r < keig && ws->w[r] > 1e-10 * l1 && ws->w[r] > 0)
        r++;
    if (!(l1 > 1e-300))
        r = 0;
    if (sv)
        for (size_t i = 0; i < kk; i++)
            sv[i] = sqrt(DPS_MAX(0.0, ws->w[i]));
    memset(V + r * d, 0, (k - r) * d * sizeof *V); /* rows 0..r-1 are written below */
    if (r > 0) {
        if (which == LA_PATH_FLOAT_GRAM) {
            for (size_t j = 0; j < m; j++)
                for (size_t i = 0; i < r; i++)
                    ws->Zs[j * r + i] = (float)(ws->Z[i * m + j] / sqrt(ws->w[i]));
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r, (int)d, (int)m, 1.0f, ws->Zs, (int)r,
                        X, (int)d, 0.0f, V, (int)d);
        } else {
            for (size_t j = 0; j < m; j++)
                for (size_t i = 0; i < r; i++)
                    ws->Zd[j * r + i] = ws->Z[i * m + j] / sqrt(ws->w[i]);
            for (size_t c0 = 0; c0 < d; c0 += LA_CHUNK) {
                size_t c1 = DPS_MIN(d, c0 + LA_CHUNK), cw = c1 - c0;
                la_combine_rows(ws->Zd, m, r, X, d, c0, c1, ws->cbuf, cw, ws->buf);
                for (size_t i = 0; i < r; i++)
                    for (size_t c = 0; c < cw; c++)
                        V[i * d + c0 + c] = (float)ws->cbuf[i * cw + c];
            }
        }
        rc = la_orthonormalize_rows(V, r, d); /* clean up rounding */
        if (rc)
            return rc;
    }
    if (rank)
        *rank = r;
    if (path)
        *path = which;
    return DPS_OK;
}

/* ---------------------------------------------------------- symmetric top-k */

/* Orthogonalise column y (length n) against the first c columns of K
   (column-major, ld n) twice (CGS2); returns the norm ratio after/before. */
static double s_orth_column(const float *K, size_t n, size_t c, float *y, float *h)
{
    double before = cblas_snrm2((int)n, y, 1);
    if (c > 0)
        for (int pass = 0; pass < 2; pass++) {
            cblas_sgemv(CblasColMajor, CblasTrans, (int)n, (int)c, 1.0f, K, (int)n, y, 1, 0.0f, h, 1);
            cblas_sgemv(CblasColMajor, CblasNoTrans, (int)n, (int)c, -1.0f, K, (int)n, h, 1, 1.0f, y, 1);
        }
    double after = cblas_snrm2((int)n, y, 1);
    return before > 0 ? after / before : 0.0;
}

/* Append column y to K at position c as a unit vector orthogonal to K[:, :c];
   a column that is (numerically) in the span is replaced by a random one. */
static void s_append(float *K, size_t n, size_t c, float *y, float *h, dps_rng *rng)
{
    for (int tries = 0; tries < 8; tries++) {
        double ratio = s_orth_column(K, n, c, y, h);
        double nrm = cblas_snrm2((int)n, y, 1);
        if (ratio > 1e-4 && nrm > 0) {
            cblas_sscal((int)n, (float)(1.0 / nrm), y, 1);
            memcpy(K + c * n, y, n * sizeof *y);
            return;
        }
        dps_rng_gaussian_fill_f(rng, 1.0, y, n);
    }
    memcpy(K + c * n, y, n * sizeof *y); /* unreachable in practice */
}

int la_sym_topk(const float *S, size_t n, size_t k, dps_rng *rng, float *V, double *w, int *converged)
{
    if (k == 0 || k > n)
        return DPS_EINVAL;
    if (converged)
        *converged = 1;
    dps_blas_init_once();
    if (n <= 512) {
        double *A = malloc(n * n * sizeof *A), *Z = malloc(n * k * sizeof *Z), *ww = malloc(k * sizeof *ww);
        int rc = (A && Z && ww) ? DPS_OK : DPS_ENOMEM;
        if (!rc) {
            for (size_t i = 0; i < n * n; i++)
                A[i] = S[i];
            rc = la_syevr_top(A, n, k, ww, Z);
        }
        if (!rc) {
            for (size_t i = 0; i < k; i++) {
                for (size_t j = 0; j < n; j++)
                    V[i * n + j] = (float)Z[i * n + j];
                if (w)
                    w[i] = ww[i];
            }
        }
        free(A); free(Z); free(ww);
        return rc;
    }
    size_t b = DPS_MIN(n, k + 8);
    size_t depth = DPS_MAX((size_t)2, DPS_MIN((size_t)12, 160 / b));
    size_t kdim = DPS_MIN(n, b * (depth + 1));
    float *K = dps_aligned_calloc(n * kdim, sizeof(float));
    float *SK = dps_aligned_calloc(n * kdim, sizeof(float));
    float *y = dps_aligned_calloc(n, sizeof(float));
    float *h = dps_aligned_calloc(kdim, sizeof(float));
    double *T = dps_aligned_calloc(kdim * kdim, sizeof(double));
    double *theta = dps_aligned_calloc(kdim, sizeof(double));
    double *Y = dps_aligned_calloc(kdim * kdim, sizeof(double));
    float *Yf = dps_aligned_calloc(kdim * b, sizeof(float));
    float *U = dps_aligned_calloc(n * b, sizeof(float));
    float *R = dps_aligned_calloc(n * b, sizeof(float));
    int rc = (K && SK && y && h && T && theta && Y && Yf && U && R) ? DPS_OK : DPS_ENOMEM;
    float *start = U; /* the b starting columns (random, then Ritz vectors) */
    if (!rc)
        dps_rng_gaussian_fill_f(rng, 1.0, start, n * b);
    for (int restart = 0; !rc && restart < 40; restart++) {
        size_t c = 0;
        for (size_t j = 0; j < b; j++, c++) {
            memcpy(y, start + j * n, n * sizeof *y);
            s_append(K, n, c, y, h, rng);
        }
        while (c < kdim) { /* next Krylov block: S times the previous block */
            size_t from = c - b;
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)b, (int)n, 1.0f, S, (int)n,
                        K + from * n, (int)n, 0.0f, R, (int)n);
            for (size_t j = 0; j < b && c < kdim; j++, c++) {
                memcpy(y, R + j * n, n * sizeof *y);
                s_append(K, n, c, y, h, rng);
            }
        }
        /* Rayleigh-Ritz on span(K). */
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)kdim, (int)n, 1.0f, S, (int)n, K,
                    (int)n, 0.0f, SK, (int)n);
        for (size_t i = 0; i < kdim; i++)
            for (size_t j = i; j < kdim; j++) {
                double v = 0.5 * (cblas_dsdot((int)n, K + i * n, 1, SK + j * n, 1) +
                                  cblas_dsdot((int)n, K + j * n, 1, SK + i * n, 1));
                T[i * kdim + j] = T[j * kdim + i] = v;
            }
        rc = la_syevr_top(T, kdim, kdim, theta, Y);
        if (rc)
            break;
        double scale = DPS_MAX(fabs(theta[0]), fabs(theta[kdim - 1]));
        for (size_t i = 0; i < b; i++)
            for (size_t j = 0; j < kdim; j++)
                Yf[i * kdim + j] = (float)Y[i * kdim + j];
        /* U = K Y[:, :b];  R = SK Y[:, :b] - U diag(theta). */
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)b, (int)kdim, 1.0f, K, (int)n, Yf,
                    (int)kdim, 0.0f, U, (int)n);
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)b, (int)kdim, 1.0f, SK, (int)n, Yf,
                    (int)kdim, 0.0f, R, (int)n);
        double worst = 0;
        for (size_t i = 0; i < k; i++) {
            cblas_saxpy((int)n, (float)-theta[i], U + i * n, 1, R + i * n, 1);
            worst = DPS_MAX(worst, cblas_snrm2((int)n, R + i * n, 1));
        }
        /* Float32 products carry ~sqrt(n) eps_f ||S|| of rounding in each
           residual: asking for less never converges. */
        double tol = DPS_MAX(1e-4, 20.0 * sqrt((double)n) * 6e-8) * scale;
        if (worst <= tol || restart == 39 || scale == 0) {
            if (converged)
                *converged = worst <= tol || scale == 0;
            for (size_t i = 0; i < k; i++) {
                for (size_t j = 0; j < n; j++)
                    V[i * n + j] = U[i * n + j];
                if (w)
                    w[i] = theta[i];
            }
            rc = la_orthonormalize_rows(V, k, n);
            break;
        }
        /* restart from the b best Ritz vectors (already in U = start) */
    }
    free(K); free(SK); free(y); free(h); free(T); free(theta); free(Y); free(Yf); free(U); free(R);
    return rc;
}

void la_project_reference(const float *V, size_t k, size_t d, const float *P, size_t q, float *A)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)k, (int)q, (int)d, 1.0f, V, (int)d, P, (int)d, 0.0f,
                A, (int)q);
}

void la_syrk_rows_double(const double *B, size_t n, size_t d, double *M)
{
    dps_blas_init_once();
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)n, 1.0, B, (int)d, 0.0, M, (int)d);
}

int la_svd_top(double *A, size_t m, size_t n, size_t r, double *U, double *s, double *V)
{
    size_t mn = DPS_MIN(m, n);
    if (!A || !U || !s || !V || r == 0 || r > mn)
        return DPS_EINVAL;
    dps_blas_init_once();
    /* Column-major view: At is n x m (lda n); At = U' S VT', so A = VT'^T S U'^T:
       A's left vectors are the rows of VT' (mn x m), its right ones U'
       (n x mn) columns. */
    double *Up = malloc(n * mn * sizeof *Up), *VTp = malloc(mn * m * sizeof *VTp);
    double *sv = malloc(mn * sizeof *sv), *superb = malloc((mn > 1 ? mn - 1 : 1) * sizeof *superb);
    int rc = (Up && VTp && sv && superb) ? DPS_OK : DPS_ENOMEM;
    if (!rc) {
        lapack_int info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'S', 'S', (lapack_int)n, (lapack_int)m, A,
                                         (lapack_int)n, sv, Up, (lapack_int)n, VTp, (lapack_int)mn, superb);
        rc = info == 0 ? DPS_OK : DPS_ENUMERIC;
    }
    if (!rc) {
        for (size_t c = 0; c < r; c++) {
            s[c] = sv[c];
            for (size_t j = 0; j < m; j++)
                U[j * r + c] = VTp[c + j * mn];
            for (size_t i = 0; i < n; i++)
                V[i * r + c] = Up[i + c * n];
        }
    }
    free(Up); free(VTp); free(sv); free(superb);
    return rc;
}

void la_syrk_rows_add_double(const double *B, size_t n, size_t d, double *M)
{
    dps_blas_init_once();
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)n, 1.0, B, (int)d, 1.0, M, (int)d);
}
