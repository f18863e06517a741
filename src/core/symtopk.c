/* symtopk.c - top-k eigenpairs of a dense symmetric matrix without a full
   decomposition (la_sym_topk_d, la_sym_topk; contract in linalg.h).

   METHOD.  Restarted block Krylov with Rayleigh-Ritz, in double:
     K = orth[U, S U, S^2 U, ..., S^(q-1) U]   (n x q b, block Gram-Schmidt)
     T = K^T S K;  T = Y diag(theta) Y^T;  U <- K Y[:, :b]  (the b best Ritz
     vectors start the next restart: a thick restart).
   Block size b = kk + 10.  The Ritz pair i converges at a rate set by the
   gap lambda_i - lambda_(b+1) instead of lambda_i - lambda_(i+1), so an
   oversampling of 10 lets the k-th pair converge even when it sits in a
   cluster of up to 10 eigenvalues (the edge of a Wigner bulk, which is
   what the noisy matrices of the Gaussian mechanisms look like), at a cost
   of 10 more columns per block.
   Krylov dimension q b = the largest multiple of b <= max(4 b, 240), and at
   most n / 2: a polynomial of degree q - 1 >= 3 per restart (Chebyshev-like
   acceleration: the error falls like exp(-2 (q - 1) sqrt(relative gap)) per
   restart instead of (lambda_(b+1)/lambda_i)^q for plain subspace
   iteration), while orthogonalisation (n (q b)^2) stays below the products
   (2 n^2 q b) for n >= 2 q b.  Each restart costs q products S (n x b):
   S K is kept from the Krylov steps, so Rayleigh-Ritz needs only the last
   block's product.
   CONVERGENCE: every residual ||S u_i - theta_i u_i|| (i < kk) <= tol
   ||S||, with ||S|| estimated by the largest |Ritz value| (a lower bound
   that converges first).  tol = 1e-6 in double; for a float matrix the
   products carry ~sqrt(n) eps_f ||S|| of rounding, so tol is at least
   20 sqrt(n) 6e-8 there.  A residual r bounds the eigenvalue error by
   ||r|| (and by ||r||^2 / gap when the gap to the rest of the spectrum is
   known) and the eigenvector angle by ||r|| / gap.  Ritz values never exceed
   the eigenvalues they approximate (Cauchy interlacing), so the captured
   quadratic form sum theta_i is below the exact top-k's by at most about
   sum ||r_i||^2 / gap.
   FALLBACK: when the restarts run out (max(4, min(30, n / (q b))) of them: past
   that dense dsyevr, ~(4/3) n^3 flops, is the cheaper way) the dense
   la_syevr_top answers. */
#include "internal.h"
#include "linalg.h"
#include "pool.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

enum { SYM_OVERSAMPLE = 10, SYM_KRYLOV_DIM = 240, SYM_DENSE_N = 512 };

size_t la_sym_topk_restart_cap = 0;

/* The matrix: double, or float (products in float, blocks converted). */
typedef struct {
    const double *Sd;
    const float *Sf;
    size_t n;
    float *xf, *yf; /* n x b conversion buffers (float matrix only) */
    dps_pool *pool; /* NULL, or the workers a product's rows are cut among */
} sym_op;

/* One product S X, and the rows [r0, r1) of it one call makes. */
typedef struct {
    const sym_op *op;
    const double *X;
    size_t b, parts;
    double *Y;
} sym_product;

static void s_apply_rows(const sym_product *p, size_t r0, size_t r1)
{
    const sym_op *op = p->op;
    int n = (int)op->n, m = (int)(r1 - r0);
    if (m <= 0)
        return;
    if (op->Sd)
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, (int)p->b, n, 1.0, op->Sd + r0, n, p->X, n, 0.0,
                    p->Y + r0, n);
    else
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, (int)p->b, n, 1.0f, op->Sf + r0, n, op->xf, n,
                    0.0f, op->yf + r0, n);
}

static void s_apply_part(void *arg, size_t w, int worker)
{
    (void)worker;
    const sym_product *p = arg;
    size_t n = p->op->n;
    s_apply_rows(p, n * w / p->parts, n * (w + 1) / p->parts);
}

/* Y (n x b, column-major) = S X; with a pool, its rows in equal parts on
   the workers (each entry one call's, the same sum as on one thread). */
static void s_apply(const sym_op *op, const double *X, size_t b, double *Y)
{
    size_t parts = op->pool ? (size_t)pool_size(op->pool) : 1;
    sym_product p = {op, X, b, parts, Y};
    if (op->Sf)
        for (size_t i = 0; i < op->n * b; i++)
            op->xf[i] = (float)X[i];
    if (parts > 1)
        pool_for(op->pool, parts, s_apply_part, &p);
    else
        s_apply_rows(&p, 0, op->n);
    if (op->Sf)
        for (size_t i = 0; i < op->n * b; i++)
            Y[i] = op->yf[i];
}

/* y -= K[:, 0:c] (K[:, 0:c]^T y), twice (CGS2); h: c doubles. */
static void s_orth_col(const double *K, size_t n, size_t c, double *y, double *h)
{
    if (c == 0)
        return;
    for (int pass = 0; pass < 2; pass++) {
        cblas_dgemv(CblasColMajor, CblasTrans, (int)n, (int)c, 1.0, K, (int)n, y, 1, 0.0, h, 1);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)c, -1.0, K, (int)n, h, 1, 1.0, y, 1);
    }
}

/* Append the b columns of Y (n x b, column-major, overwritten) to K after
   its c columns, orthonormal and orthogonal to K[:, :c]: two passes of block
   Gram-Schmidt against K (BLAS3), then column by column within the block; a
   column that is numerically in the span is replaced by a random one.
   H: max(c b, c + b) doubles; nrm0: b doubles (the norms before any
   projection). */
static void s_append(double *K, size_t n, size_t c, double *Y, size_t b, double *H, double *nrm0, dps_rng *rng)
{
    for (size_t j = 0; j < b; j++)
        nrm0[j] = cblas_dnrm2((int)n, Y + j * n, 1);
    if (c > 0)
        for (int pass = 0; pass < 2; pass++) {
            cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)c, (int)b, (int)n, 1.0, K, (int)n, Y, (int)n,
                        0.0, H, (int)c);
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)b, (int)c, -1.0, K, (int)n, H,
                        (int)c, 1.0, Y, (int)n);
        }
    for (size_t j = 0; j < b; j++) {
        double *y = Y + j * n;
        double before = nrm0[j];
        s_orth_col(K + c * n, n, j, y, H); /* the block's earlier columns */
        double nrm = cblas_dnrm2((int)n, y, 1);
        for (int tries = 0; tries < 8 && !(nrm > 1e-3 * before && before > 0); tries++) {
            if (!(nrm > 1e-10 * before && before > 0)) { /* in the span: a random column instead */
                dps_rng_gaussian_fill(rng, 1.0, y, n);
                before = cblas_dnrm2((int)n, y, 1);
            }
            s_orth_col(K, n, c + j, y, H); /* cancellation: against everything */
            nrm = cblas_dnrm2((int)n, y, 1);
        }
        cblas_dscal((int)n, nrm > 0 ? 1.0 / nrm : 0.0, y, 1);
        memcpy(K + (c + j) * n, y, n * sizeof *y);
    }
}

/* The Krylov sizes for (n, kk): block b, dimension kdim. */
static void s_sizes(size_t n, size_t kk, size_t *b, size_t *kdim)
{
    *b = DPS_MIN(n, kk + SYM_OVERSAMPLE);
    size_t nb = DPS_MAX((size_t)4, SYM_KRYLOV_DIM / *b);
    while (nb > 2 && nb * *b > n / 2)
        nb--;
    *kdim = nb * *b;
}

size_t la_sym_topk_bytes(size_t n, size_t kk)
{
    size_t b, kdim;
    s_sizes(n, kk, &b, &kdim);
    /* K, SK; Yb, U, R; H; T, Y, theta; the float path's two blocks; Z, w */
    return (2 * n * kdim + 3 * n * b + kdim * b + kdim + b + 2 * kdim * kdim + kdim) * sizeof(double) +
           2 * n * b * sizeof(float) + (n * kk + kk) * sizeof(double);
}

/* Top kk eigenpairs of op's matrix by restarted block Krylov (see the top of
   the file).  Returns DPS_OK with *conv = 0 when the restarts ran out (w, Z
   then untouched). */
static int s_krylov(const sym_op *op, size_t kk, dps_rng *rng, double tol, double *w, double *Z, int *conv,
                    int *restarts)
{
    size_t n = op->n;
    size_t b, kdim;
    s_sizes(n, kk, &b, &kdim);
    size_t max_restarts = DPS_MAX((size_t)4, DPS_MIN((size_t)30, n / kdim));
    if (la_sym_topk_restart_cap)
        max_restarts = la_sym_topk_restart_cap;
    double *K = dps_aligned_alloc(n * kdim, sizeof(double));
    double *SK = dps_aligned_alloc(n * kdim, sizeof(double));
    double *Yb = dps_aligned_alloc(n * b, sizeof(double));
    double *U = dps_aligned_alloc(n * b, sizeof(double));
    double *R = dps_aligned_alloc(n * b, sizeof(double));
    double *H = dps_aligned_alloc(kdim * b + kdim + b, sizeof(double));
    double *T = dps_aligned_alloc(kdim * kdim, sizeof(double));
    double *Y = dps_aligned_alloc(kdim * kdim, sizeof(double));
    double *theta = dps_aligned_alloc(kdim, sizeof(double));
    int rc = (K && SK && Yb && U && R && H && T && Y && theta) ? DPS_OK : DPS_ENOMEM;
    *conv = 0;
    if (!rc)
        dps_rng_gaussian_fill(rng, 1.0, U, n * b);
    for (size_t restart = 0; !rc && restart < max_restarts; restart++) {
        *restarts = (int)restart + 1;
        memcpy(Yb, U, n * b * sizeof *Yb);
        s_append(K, n, 0, Yb, b, H, H + kdim * b + kdim, rng);
        size_t c = b;
        for (;;) { /* SK[:, c-b:c] = S K[:, c-b:c]; it is also the next block */
            s_apply(op, K + (c - b) * n, b, SK + (c - b) * n);
            if (c + b > kdim)
                break;
            memcpy(Yb, SK + (c - b) * n, n * b * sizeof *Yb);
            s_append(K, n, c, Yb, b, H, H + kdim * b + kdim, rng);
            c += b;
        }
        /* Rayleigh-Ritz: T = K^T S K (symmetrised), all its eigenpairs. */
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)c, (int)c, (int)n, 1.0, K, (int)n, SK, (int)n,
                    0.0, T, (int)c);
        for (size_t i = 0; i < c; i++)
            for (size_t j = i + 1; j < c; j++)
                T[i * c + j] = T[j * c + i] = 0.5 * (T[i * c + j] + T[j * c + i]);
        rc = la_syevr_top(T, c, c, theta, Y);
        if (rc)
            break;
        double scale = DPS_MAX(fabs(theta[0]), fabs(theta[c - 1]));
        /* U = K Y[:, :b] (orthonormal), R = S U - U diag(theta). */
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)b, (int)c, 1.0, K, (int)n, Y, (int)c,
                    0.0, U, (int)n);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)kk, (int)c, 1.0, SK, (int)n, Y,
                    (int)c, 0.0, R, (int)n);
        double worst = 0;
        for (size_t i = 0; i < kk; i++) {
            cblas_daxpy((int)n, -theta[i], U + i * n, 1, R + i * n, 1);
            worst = DPS_MAX(worst, cblas_dnrm2((int)n, R + i * n, 1));
        }
        if (worst <= tol * scale) {
            *conv = 1;
            memcpy(w, theta, kk * sizeof *w);
            memcpy(Z, U, n * kk * sizeof *Z);
            break;
        }
        /* the next restart starts from the b best Ritz vectors, now in U */
    }
    free(K); free(SK); free(Yb); free(U); free(R); free(H); free(T); free(Y); free(theta);
    return rc;
}

/* The generator of the starting block: rng, or a fixed public one. */
static int s_start_rng(dps_rng *rng, dps_rng **own)
{
    *own = NULL;
    return rng ? DPS_OK : dps_rng_new_labelled(own, 0, "la-sym-topk-start", 0);
}

static int s_dense(size_t n, size_t kk) { return n <= SYM_DENSE_N || kk * 8 > n; }

int la_sym_topk_d(double *A, size_t n, size_t kk, dps_rng *rng, double *w, double *Z, int *converged)
{
    if (!A || !w || !Z || kk == 0 || kk > n)
        return DPS_EINVAL;
    dps_blas_init_once();
    int conv = 1, restarts = 1, rc = DPS_OK;
    if (!s_dense(n, kk)) {
        dps_rng *own = NULL;
        rc = s_start_rng(rng, &own);
        sym_op op = {.Sd = A, .n = n};
        if (!rc)
            rc = s_krylov(&op, kk, rng ? rng : own, 1e-6, w, Z, &conv, &restarts);
        dps_rng_destroy(&own);
    }
    if (!rc && (s_dense(n, kk) || !conv))
        rc = la_syevr_top(A, n, kk, w, Z);
    if (converged)
        *converged = conv ? restarts : 0;
    return rc;
}

int la_sym_topk(const float *S, size_t n, size_t k, dps_rng *rng, float *V, double *w, int *converged)
{
    return la_sym_topk_on(S, n, k, rng, V, w, converged, NULL);
}

int la_sym_topk_on(const float *S, size_t n, size_t k, dps_rng *rng, float *V, double *w, int *converged,
                   dps_pool *pool)
{
    if (!S || !V || k == 0 || k > n)
        return DPS_EINVAL;
    dps_blas_init_once();
    double *wk = malloc(k * sizeof *wk), *Z = dps_aligned_alloc(n * k, sizeof(double));
    int conv = 1, restarts = 1, rc = (wk && Z) ? DPS_OK : DPS_ENOMEM;
    if (!rc && !s_dense(n, k)) {
        size_t b = DPS_MIN(n, k + SYM_OVERSAMPLE);
        sym_op op = {.Sf = S, .n = n, .pool = pool};
        op.xf = dps_aligned_alloc(n * b, sizeof(float));
        op.yf = dps_aligned_alloc(n * b, sizeof(float));
        dps_rng *own = NULL;
        rc = (op.xf && op.yf) ? s_start_rng(rng, &own) : DPS_ENOMEM;
        double tol = DPS_MAX(1e-6, 20.0 * sqrt((double)n) * 6e-8);
        if (!rc)
            rc = s_krylov(&op, k, rng ? rng : own, tol, wk, Z, &conv, &restarts);
        dps_rng_destroy(&own);
        free(op.xf);
        free(op.yf);
    }
    int dense = !rc && (s_dense(n, k) || !conv);
    if (dense) { /* small, or the fallback: dsyevr on a double copy */
        double *A = dps_aligned_alloc(n * n, sizeof(double));
        rc = A ? DPS_OK : DPS_ENOMEM;
        for (size_t i = 0; !rc && i < n * n; i++)
            A[i] = S[i];
        if (!rc)
            rc = la_syevr_top(A, n, k, wk, Z);
        free(A);
    }
    if (!rc) {
        for (size_t i = 0; i < k * n; i++)
            V[i] = (float)Z[i];
        if (w)
            memcpy(w, wk, k * sizeof *w);
        rc = la_orthonormalize_rows(V, k, n); /* float rounding of the double vectors */
    }
    if (converged)
        *converged = conv ? restarts : 0;
    free(wk);
    free(Z);
    return rc;
}
