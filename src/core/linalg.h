/* linalg.h - every BLAS/LAPACK call of the library goes through this module.
   Matrices are row-major float32 unless named otherwise; LAPACK sees them as
   column-major transposes (no copies).  Nothing here forms a d x d matrix
   except la_sym_topk, whose input is one. */
#ifndef DPS_LINALG_H
#define DPS_LINALG_H

#include "dpsubspace.h"
#include <stddef.h>

/* Columns converted to double per chunk by the mixed-precision routines. */
#define LA_CHUNK 2048

/* Per-thread workspace for la_topk_rows (sized once, reused: no allocation on
   the bucket hot path). */
typedef struct la_ws la_ws;
la_ws *la_ws_new(size_t m_max, size_t k_max);
void la_ws_free(la_ws **ws);

/* Which path la_topk_rows took (for tests and benchmarks). */
enum { LA_PATH_FLOAT_GRAM = 0, LA_PATH_DOUBLE_GRAM = 1 };

/* Top-k right singular basis of X (m x d): V (k x d) orthonormal rows spanning
   the top-k right singular subspace.  Float Gram X X^T (ssyrk) + dsyevr for the
   top eigenpairs + sgemm; when lambda_k < 1e-3 lambda_1 or the gap
   lambda_k - lambda_{k+1} < 1e-3 lambda_1 the float Gram cannot be trusted and
   the Gram is recomputed in double.  *rank = number of directions with
   lambda_i > 1e-10 lambda_1 (<= k); rows rank..k-1 of V are left zero for the
   caller to complete.  sv (may be NULL) gets min(m, k+1) singular values.
   *path (may be NULL) says which path was taken. */
int la_topk_rows(la_ws *ws, const float *X, size_t m, size_t d, size_t k, float *V,
                 double *sv, size_t *rank, int *path);

/* Fill rows r..k-1 of V (k x d; rows 0..r-1 orthonormal) with unit vectors
   orthogonal to all earlier rows, drawn from rng. */
void la_complete_basis(float *V, size_t r, size_t k, size_t d, dps_rng *rng);

/* Orthonormalise the k rows of V in place (Householder QR).  k <= d. */
int la_orthonormalize_rows(float *V, size_t k, size_t d);

/* G (n x n, upper triangle, column-major) += A[:, c0:c1] A[:, c0:c1]^T for the
   n rows of A (row stride lda), in double precision.  buf: n*(c1-c0) doubles. */
void la_gram_add(const float *A, size_t n, size_t lda, size_t c0, size_t c1, double *G, double *buf);

/* C (n x (c1-c0), row stride ldc, double) = B^T A[:, c0:c1] where B is r x n
   double row-major (so B^T is n x r) and A has r rows (stride lda), in double.
   buf: r*(c1-c0) doubles. */
void la_combine_rows(const double *B, size_t r, size_t n, const float *A, size_t lda,
                     size_t c0, size_t c1, double *C, size_t ldc, double *buf);

/* Top kk eigenpairs of a symmetric n x n double matrix (upper triangle used,
   destroyed): w descending, Z (n x kk, column-major) matching. */
int la_syevr_top(double *A, size_t n, size_t kk, double *w, double *Z);

/* Top-k eigenvectors (largest algebraic eigenvalues) of a symmetric n x n float
   matrix S (full storage): V (k x n) orthonormal rows.  Dense dsyevr for
   n <= 512, else restarted block Krylov with Rayleigh-Ritz until every
   residual ||S u - theta u|| <= max(1e-4, 20 sqrt(n) eps_f) |theta|_max (then
   the angle error is at most that over the eigengap), at most 40 restarts.
   w (may be NULL): the k values; converged (may be NULL): 0 if the restarts ran
   out (the best Ritz vectors are returned). */
int la_sym_topk(const float *S, size_t n, size_t k, dps_rng *rng, float *V, double *w, int *converged);


/* A (k x q, float, row-major) = V P^T for V (k x d) and reference points P
   (q x d).  Rounding in A is harmless: the aggregator's items are defined as
   A_j^T V_j with the stored A_j, and their distances are evaluated exactly
   for those values (aggregate.c). */
void la_project_reference(const float *V, size_t k, size_t d, const float *P, size_t q, float *A);

/* sum x_i^2 accumulated in double (NaN/Inf propagate). */
double la_dot_self(const float *x, size_t n);

/* M (d x d, row-major, upper triangle) = B^T B for B (n x d, double). */
void la_syrk_rows_double(const double *B, size_t n, size_t d, double *M);
/* M (d x d, row-major, upper triangle) += B^T B for B (n x d, double). */
void la_syrk_rows_add_double(const double *B, size_t n, size_t d, double *M);

/* Top-r singular triplets of a dense m x n double matrix A (row-major,
   destroyed): U (m x r, row-major, orthonormal columns), s (r values,
   descending), V (n x r, row-major, orthonormal columns), so that
   A ~ U diag(s) V^T.  r <= min(m, n).  One dgesvd on the column-major view
   (A^T), whose left vectors are A's right ones.  Allocates O(mn) scratch:
   for the small d1 x d2 matrices of trace regression, not for row data. */
int la_svd_top(double *A, size_t m, size_t n, size_t r, double *U, double *s, double *V);

#endif
