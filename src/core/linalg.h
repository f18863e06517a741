/* linalg.h - every BLAS/LAPACK call of the library goes through this module.
   Matrices are row-major float32 unless named otherwise; LAPACK sees them as
   column-major transposes (no copies).  The only square matrices formed
   here are min(m, d) Grams (la_topk_rows) and the inputs of the symmetric
   eigensolvers: never an m x m Gram of m > d rows. */
#ifndef DPS_LINALG_H
#define DPS_LINALG_H

#include "dpsubspace.h"
#include <stddef.h>

/* Columns converted to double per chunk by the mixed-precision routines. */
#define LA_CHUNK 2048

/* Per-thread workspace for la_topk_rows (sized once, reused: no allocation on
   the bucket hot path, where m <= 512 rows).  For calls with m <= m_max rows
   of dimension d <= d_max; its Grams are min(m_max, d_max) square, never
   larger: la_ws_bytes(m_max, d_max, k_max) bytes, with s = min(m_max, d_max),
   = s^2 (4 + 8) + 8 (s + 1 + s (2 k_max + 1)) + 4 s k_max
     + 8 (s + k_max) LA_CHUNK. */
typedef struct la_ws la_ws;
la_ws *la_ws_new(size_t m_max, size_t d_max, size_t k_max);
size_t la_ws_bytes(size_t m_max, size_t d_max, size_t k_max);
void la_ws_free(la_ws **ws);

/* Which path la_topk_rows took (for tests and benchmarks). */
enum { LA_PATH_FLOAT_GRAM = 0, LA_PATH_DOUBLE_GRAM = 1 };

/* Top-k right singular basis of X (m x d): V (k x d) orthonormal rows spanning
   the top-k right singular subspace, from the smaller Gram: m <= d, X X^T
   (m x m) and V = its eigenvectors mapped through X^T (sgemm); m > d, X^T X
   (d x d, its eigenvectors are V).  Float Gram (ssyrk) + la_sym_topk_d for
   the top k+1 eigenpairs; when lambda_k < 1e-3 lambda_1 or the gap
   lambda_k - lambda_{k+1} < 1e-3 lambda_1 the float Gram cannot be trusted and
   the Gram is recomputed in double (column or row blocks of LA_CHUNK: no
   m x d double copy).  *rank = number of directions with
   lambda_i > 1e-10 lambda_1 (<= k); rows rank..k-1 of V are left zero for the
   caller to complete.  sv (may be NULL) gets min(m, d, k+1) singular values.
   *path (may be NULL) says which path was taken.  Besides ws it allocates
   only la_sym_topk_d's Krylov scratch, when min(m, d) > 512. */
int la_topk_rows(la_ws *ws, const float *X, size_t m, size_t d, size_t k, float *V,
                 double *sv, size_t *rank, int *path);

/* Top-k of a d x d Gram G = X^T X already formed (double, full storage,
   destroyed), e.g. of rows clipped block by block: V, sv (min(d, k+1)
   values) and *rank as la_topk_rows; its eigenpairs by la_sym_topk_d. */
int la_topk_gram(double *G, size_t d, size_t k, float *V, double *sv, size_t *rank);

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

/* Top kk eigenpairs (largest algebraic eigenvalues) of a symmetric n x n
   double matrix A (full storage, both triangles; may be destroyed, as by
   la_syevr_top): w descending, Z (n x kk, column-major: vector i at Z + i n)
   matching; the contract of la_syevr_top without its full tridiagonalisation.
   Dense dsyevr for n <= 512 or kk > n / 8; else restarted block Krylov with
   Rayleigh-Ritz (symtopk.c: block kk + 10, Krylov dimension <= 240, stop
   when every residual ||A z_i - w_i z_i|| <= 1e-6 ||A||), falling back to
   la_syevr_top when the restarts run out.  rng (may be NULL: a fixed public
   start) draws the starting block.  converged (may be NULL): the number of
   restarts the Krylov iteration took (1 for the dense path), 0 if it fell
   back.  Allocates O(n (kk + 10) + 240 n) doubles of scratch. */
int la_sym_topk_d(double *A, size_t n, size_t kk, dps_rng *rng, double *w, double *Z, int *converged);

/* Upper bound of the scratch la_sym_topk_d / la_sym_topk allocate for
   (n, kk) on the Krylov path (not the dense path or fallback, which
   allocate what dsyevr needs: about 8 n^2 bytes for the float matrix's copy). */
size_t la_sym_topk_bytes(size_t n, size_t kk);
/* Tests only: > 0 caps the Krylov restarts (to exercise the fallback). */
extern size_t la_sym_topk_restart_cap;

/* The same for a float matrix S (full storage, not modified): V (k x n)
   orthonormal rows, w (may be NULL) the k values.  Products in float, so the
   residual tolerance is max(1e-6, 20 sqrt(n) eps_f); the dense path and the
   fallback use a double copy (8 n^2 bytes). */
int la_sym_topk(const float *S, size_t n, size_t k, dps_rng *rng, float *V, double *w, int *converged);
/* The same with the products S X cut by rows among pool's workers (NULL:
   the calling thread): each entry is one call's sum, so the result is the
   same for a given number of workers (and, with OpenBLAS, whose sum for an
   entry does not depend on the rows' cut, for any number). */
typedef struct dps_pool dps_pool;
int la_sym_topk_on(const float *S, size_t n, size_t k, dps_rng *rng, float *V, double *w, int *converged,
                   dps_pool *pool);

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
/* The same for columns [j0, j1) of M's upper triangle only (rows 0..j1-1
   of them): disjoint column ranges can be updated by different threads,
   and the ranges [0, j1), [j1, j2), ... together make the whole update. */
void la_syrk_rows_add_double_cols(const double *B, size_t n, size_t d, size_t j0, size_t j1, double *M);
/* Where to cut the columns of a d x d upper triangle into `parts` ranges of
   equal area: columns [0, j) hold about j^2 / 2, so cut w (0 <= w <= parts)
   is d sqrt(w / parts), rounded (cut parts is d). */
size_t la_triangle_cut(size_t d, size_t parts, size_t w);
/* M (n x n, row-major, upper triangle) += B B^T for B (n x d, double,
   row-major, row stride ld >= d): the Gram of B's rows. */
void la_syrk_gram_add_double(const double *B, size_t n, size_t d, size_t ld, double *M);

/* Top-r singular triplets of a dense m x n double matrix A (row-major,
   destroyed): U (m x r, row-major, orthonormal columns), s (r values,
   descending), V (n x r, row-major, orthonormal columns), so that
   A ~ U diag(s) V^T.  r <= min(m, n).  One dgesvd on the column-major view
   (A^T), whose left vectors are A's right ones.  Allocates O(mn) scratch:
   for the small d1 x d2 matrices of trace regression, not for row data. */
int la_svd_top(double *A, size_t m, size_t n, size_t r, double *U, double *s, double *V);

#endif
