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
    size_t m_max, d_max, k_max;
    size_t s;      /* min(m_max, d_max): the side of the Gram     */
    float *G;      /* s x s float Gram                            */
    double *Gd;    /* s x s double Gram (destroyed)               */
    double *w;     /* eigenvalues, descending                     */
    double *Z;     /* eigenvectors, s x (k+1) col-major           */
    float *Zs;     /* m x k scaled, row-major (float; m <= s)     */
    double *Zd;    /* m x k scaled, row-major (double)            */
    double *buf;   /* s x LA_CHUNK: m rows x LA_CHUNK columns (m <= d) or
                      LA_CHUNK rows x d columns (m > d) in double */
    double *cbuf;  /* k x LA_CHUNK output buffer                  */
};

size_t la_ws_bytes(size_t m_max, size_t d_max, size_t k_max)
{
    size_t s = DPS_MIN(m_max, d_max), kk = k_max + 1;
    return s * s * (sizeof(float) + sizeof(double)) + (s + 1 + s * kk + s * k_max) * sizeof(double) +
           s * k_max * sizeof(float) + (s + k_max) * LA_CHUNK * sizeof(double);
}

la_ws *la_ws_new(size_t m_max, size_t d_max, size_t k_max)
{
    la_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    size_t kk = k_max + 1, s = DPS_MIN(m_max, d_max);
    ws->m_max = m_max;
    ws->d_max = d_max;
    ws->k_max = k_max;
    ws->s = s;
    ws->G = dps_aligned_calloc(s * s, sizeof(float));
    ws->Gd = dps_aligned_calloc(s * s, sizeof(double));
    ws->w = dps_aligned_calloc(s + 1, sizeof(double));
    ws->Z = dps_aligned_calloc(s * kk, sizeof(double));
    ws->Zs = dps_aligned_calloc(s * k_max, sizeof(float));
    ws->Zd = dps_aligned_calloc(s * k_max, sizeof(double));
    ws->buf = dps_aligned_calloc(s * LA_CHUNK, sizeof(double));
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
   *dev = max_i sum_j |G_ij - [i = j]|, the Gershgorin radius of G - I: how
   far V was from orthonormal (G's eigenvalues are within 1 +- *dev).
   Returns -1 if G is not numerically positive definite. */
static int s_cholqr_step(float *V, size_t k, size_t d, double *dev)
{
    double G[k * k];
    float Lf[k * k];
    memset(G, 0, sizeof G);
    double buf[k * 256];
    for (size_t c0 = 0; c0 < d; c0 += 256)
        la_gram_add(V, k, d, c0, DPS_MIN(d, c0 + 256), G, buf);
    *dev = 0;
    for (size_t i = 0; i < k; i++) { /* one triangle is filled, the other is 0 */
        double row = 0;
        for (size_t j = 0; j < k; j++)
            row += i == j ? fabs(G[i * k + i] - 1.0) : fabs(G[i * k + j] + G[j * k + i]);
        *dev = fmax(*dev, row);
    }
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
    /* Cholesky QR, BLAS3: the Gram in double (exact products, so its error is
       d 2^-53 relative) and G = U^T U in double; what is left is U rounded
       to float and the float triangular solve, which leave V U^-1 off
       orthonormal by about 2 sqrt(k) kappa(U) 2^-24.  When G's eigenvalues
       are within 1 +- CHOLQR_ONE_PASS (Gershgorin), kappa(U) <= 1.11 and a
       second pass would only repeat that rounding: one is enough.  The rows
       it is given here (a bucket's basis from its Gram's eigenvectors) are
       that close.  Farther off, a second pass (CholQR2); Householder when
       the rows are too far from independent for Cholesky.  (test_linalg
       7c runs both paths.) */
    enum { CHOLQR_MAX_K = 256 };
    const double CHOLQR_ONE_PASS = 0.1;
    double dev = 0;
    if (k <= CHOLQR_MAX_K && s_cholqr_step(V, k, d, &dev) == 0 &&
        (dev <= CHOLQR_ONE_PASS || s_cholqr_step(V, k, d, &dev) == 0))
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

/* The trust test of the float Gram: lambda_k (or the gap to lambda_{k+1})
   below 1e-3 lambda_1 is too small to trust in single precision. */
static int s_float_untrusted(const double *w, size_t kk, size_t keig)
{
    double l1 = w[0], lk = w[keig - 1], lnext = kk > keig ? w[keig] : 0.0;
    return l1 > 0 && (lk < 1e-3 * l1 || lk - lnext < 1e-3 * l1);
}

/* Gd (d x d, full) = the float Gram G (upper triangle, row-major) in double. */
static void s_gram_to_double(const float *G, size_t d, double *Gd)
{
    for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++)
            Gd[i * d + j] = Gd[j * d + i] = G[i * d + j];
}

/* From the top kk = min(k + 1, d) eigenpairs (w, Z: d x kk column-major) of
   a d x d Gram: V (k x d) = the eigenvectors with w_i > 1e-10 w_1 (*rank of
   them, orthonormalised in float; the other rows zero), sv = sqrt(w). */
static int s_gram_finish(const double *w, const double *Z, size_t d, size_t k, size_t kk, float *V, double *sv,
                         size_t *rank)
{
    double l1 = w[0];
    size_t r = 0;
    while (r < k && w[r] > 1e-10 * l1 && w[r] > 0)
        r++;
    if (!(l1 > 1e-300))
        r = 0;
    if (sv)
        for (size_t i = 0; i < kk; i++)
            sv[i] = sqrt(DPS_MAX(0.0, w[i]));
    memset(V, 0, k * d * sizeof *V);
    for (size_t i = 0; i < r; i++)
        for (size_t c = 0; c < d; c++)
            V[i * d + c] = (float)Z[i * d + c];
    int rc = r > 0 ? la_orthonormalize_rows(V, r, d) : DPS_OK; /* float rounding */
    if (!rc && rank)
        *rank = r;
    return rc;
}

/* m > d: the right singular pairs from the d x d Gram X^T X (never m x m):
   ssyrk over all rows, its top k+1 eigenpairs by la_sym_topk_d; the same
   trust test as the m x m path, and the Gram again in double (dsyrk on
   blocks of LA_CHUNK rows converted to double: no m x d copy) when it fails.
   The eigenvectors are the right singular vectors themselves. */
static int s_topk_tall(la_ws *ws, const float *X, size_t m, size_t d, size_t k, float *V, double *sv,
                       size_t *rank, int *path)
{
    size_t kk = DPS_MIN(k + 1, d), keig = k;
    int which = LA_PATH_FLOAT_GRAM;
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)m, 1.0f, X, (int)d, 0.0f, ws->G, (int)d);
    s_gram_to_double(ws->G, d, ws->Gd);
    int rc = la_sym_topk_d(ws->Gd, d, kk, NULL, ws->w, ws->Z, NULL);
    if (!rc && s_float_untrusted(ws->w, kk, keig)) {
        which = LA_PATH_DOUBLE_GRAM;
        memset(ws->Gd, 0, d * d * sizeof(double));
        for (size_t r0 = 0; r0 < m; r0 += LA_CHUNK) {
            size_t rb = DPS_MIN(m - r0, (size_t)LA_CHUNK);
            s_columns_to_double(X + r0 * d, rb, d, 0, d, ws->buf);
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)rb, 1.0, ws->buf, (int)d, 1.0, ws->Gd,
                        (int)d);
        }
        s_symmetrize(ws->Gd, d);
        rc = la_sym_topk_d(ws->Gd, d, kk, NULL, ws->w, ws->Z, NULL);
    }
    if (rc)
        return rc;
    rc = s_gram_finish(ws->w, ws->Z, d, k, kk, V, sv, rank);
    if (!rc && path)
        *path = which;
    return rc;
}

int la_topk_gram(double *G, size_t d, size_t k, float *V, double *sv, size_t *rank)
{
    if (!G || !V || k == 0 || k > d)
        return DPS_EINVAL;
    size_t kk = DPS_MIN(k + 1, d);
    double *w = malloc(kk * sizeof *w), *Z = dps_aligned_alloc(d * kk, sizeof(double));
    int rc = (w && Z) ? la_sym_topk_d(G, d, kk, NULL, w, Z, NULL) : DPS_ENOMEM;
    if (!rc)
        rc = s_gram_finish(w, Z, d, k, kk, V, sv, rank);
    free(w);
    free(Z);
    return rc;
}

int la_topk_rows(la_ws *ws, const float *X, size_t m, size_t d, size_t k, float *V, double *sv,
                 size_t *rank, int *path)
{
    if (!ws || m == 0 || k == 0 || k > d || m > ws->m_max || d > ws->d_max || k > ws->k_max)
        return DPS_EINVAL;
    dps_blas_init_once();
    if (m > d)
        return s_topk_tall(ws, X, m, d, k, V, sv, rank, path);
    size_t kk = DPS_MIN(k + 1, m); /* eigenpairs wanted: top k and the next one */
    size_t keig = DPS_MIN(k, m);   /* at most m directions exist */
    int which = LA_PATH_FLOAT_GRAM;

    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)m, (int)d, 1.0f, X, (int)d, 0.0f, ws->G, (int)m);
    s_gram_to_double(ws->G, m, ws->Gd);
    int rc = la_sym_topk_d(ws->Gd, m, kk, NULL, ws->w, ws->Z, NULL);
    if (rc)
        return rc;
    double l1 = ws->w[0];
    if (s_float_untrusted(ws->w, kk, keig)) {
        /* Too small to trust in single precision: the Gram again in double. */
        which = LA_PATH_DOUBLE_GRAM;
        memset(ws->Gd, 0, m * m * sizeof(double));
        for (size_t c0 = 0; c0 < d; c0 += LA_CHUNK)
            la_gram_add(X, m, d, c0, DPS_MIN(d, c0 + LA_CHUNK), ws->Gd, ws->buf);
        s_symmetrize(ws->Gd, m);
        rc = la_sym_topk_d(ws->Gd, m, kk, NULL, ws->w, ws->Z, NULL);
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

size_t la_triangle_cut(size_t d, size_t parts, size_t w)
{
    return w >= parts ? d : (size_t)llround((double)d * sqrt((double)w / (double)parts));
}

void la_syrk_rows_add_double_cols(const double *B, size_t n, size_t d, size_t j0, size_t j1, double *M)
{
    dps_blas_init_once();
    if (j1 <= j0 || n == 0)
        return;
    if (j0) /* rows above the diagonal block: M[0:j0, j0:j1] += B[:, 0:j0]^T B[:, j0:j1] */
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)j0, (int)(j1 - j0), (int)n, 1.0, B, (int)d, B + j0,
                    (int)d, 1.0, M + j0, (int)d);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)(j1 - j0), (int)n, 1.0, B + j0, (int)d, 1.0,
                M + j0 * d + j0, (int)d);
}

void la_syrk_gram_add_double(const double *B, size_t n, size_t d, size_t ld, double *M)
{
    dps_blas_init_once();
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)n, (int)d, 1.0, B, (int)ld, 1.0, M, (int)n);
}
