/* kron_moment.h - one Kronecker-factored parameter group (DESIGN 7.6): the
   two side moments of its r x c blocks and the basis of products of their
   noisy top eigenvectors.  The kron aggregator's groups (moment_groups.c,
   GROUP_KRON) hold one each; the privacy argument of a release that mixes
   them with dense and power groups is in moment_groups.c.

   THE SUMS.  Group g's slice x_g of a row (d_g = r c floats) is read as the
   r x c matrix G, row-major (G[a][b] = x_g[a c + b]: torch's flattening of
   a Linear weight (out, in), or of a Conv weight (out, in, kh, kw) as
   out x in*kh*kw).  The epoch's rows give
       C_in  = sum G^T G   (c x c),   C_out = sum G G^T   (r x r),
   both in double, B rows at a time through dsyrk: C_in of a block of B rows
   is one syrk of the contiguous (B r) x c matrix of their blocks, C_out B
   syrks of r x c.  Rounding: every product of floats is exact in double and
   the sums are those of second_moment.h, so the rounding of either sum is
   bounded as there (2 n^2 2^-53 relative to the sum of |entries|, in any
   order; 4e-7 at n = 60 000), against a move of sqrt 2 each.

   THE BASIS.  Given the noisy N_out = C_out + E_out and N_in = C_in + E_in
   (E symmetric, upper triangle iid N(0, s^2)), u_1..u_kout and v_1..v_kin
   are their top eigenvectors (kout = min(k, r), kin = min(k, c)) with
   eigenvalues w_out, w_in (descending), clamped at 0.  The k pairs (i, j)
   with the largest products w_out[i] w_in[j] (ties: smaller i, then smaller
   j) give the k rows u_i (x) v_j (entry [a c + b] = u_i[a] v_j[b]), which
   are orthonormal (<u_i (x) v_j, u_i' (x) v_j'> = <u_i, u_i'> <v_j, v_j'>).
   The chosen pairs are a down-set (with (i, j), every (i', j') with
   i' <= i, j' <= j), so each side uses a prefix of its eigenvectors.

   Who owns what: the accumulator owns every buffer; the caller owns the
   scratch and the slice it passes. */
#ifndef DPS_KRON_MOMENT_H
#define DPS_KRON_MOMENT_H

#include "dpsubspace.h"

#include <stddef.h>

typedef struct {
    size_t r, c, k;      /* the block's shape and the group's rank          */
    size_t kout, kin;    /* min(k, r), min(k, c): the eigenpairs computed  */
    size_t block_rows;   /* B: rows per dsyrk flush                          */
    size_t pending;      /* rows in the block                                */
    double *Cin, *Cout;  /* the sums: upper triangles until kron_finish      */
    double *block;       /* B rows: the (B r) x c matrix of their blocks     */
    double *Nin, *Nout;  /* the released noisy matrices (full, symmetric)    */
    double *win, *wout;  /* their top kin, kout eigenvalues, descending      */
    double *Zin, *Zout;  /* their eigenvectors: vector i at Z + i c (i r)    */
    size_t *pi, *pj;     /* the k chosen pairs, in order                     */
    size_t *next;        /* kron_pairs' frontier (kout entries)              */
    size_t used_out, used_in; /* how many u's and v's the pairs use (prefixes) */
    double tr_out, tr_in;     /* the noisy matrices' traces                     */
    double *side;        /* kron_noise_parts' per-direction energies and kept
                            shares: 2 (kout + kin) doubles                      */
} kron_moment;

/* DPS_OK or DPS_ENOMEM (then nothing is held).  r c is the group's width,
   1 <= k <= r c. */
int kron_init(kron_moment *km, size_t r, size_t c, size_t k);
void kron_free(kron_moment *km);
/* What kron_init allocates. */
size_t kron_bytes(size_t r, size_t c, size_t k);
/* Empty sums (each epoch's rows are used once). */
void kron_reset(kron_moment *km);
/* Add one row's slice (r c floats). */
void kron_add(kron_moment *km, const float *x);
/* Add the pending rows and mirror both sums (full and symmetric). */
void kron_finish(kron_moment *km);

/* The release: kron_finish, then N_out = C_out + E_out and N_in = C_in + E_in
   with noise sd s drawn from noise (out's upper triangle, then in's, every
   entry whatever the data), their top eigenpairs (scratch: max(r, c)^2
   doubles, destroyed), the pairs, and the k x (r c) basis into slice.
   DPS_OK or the eigensolver's error. */
int kron_release(kron_moment *km, double s, dps_rng *noise, double *scratch, float *slice);

/* After kron_release: the group's part of the snapshot's level (see
   kron_moment.c), added to *lost and *total as gauss_noise_parts adds a
   dense group's; side_seen[0] (out) and [1] (in): whether a used direction
   of that side cleared its detection level.  Returns 1 if both did.
   Post-processing: released eigenvalues and traces, public s, r, c, k. */
int kron_noise_parts(kron_moment *km, double s, double *lost, double *total, int side_seen[2]);

/* The k pairs with the largest products of the clamped values (the order
   above) into pi, pj; w_out (kout values) and w_in (kin values) descending,
   k <= kout kin; next: kout entries of scratch.  Pure: the tests call it. */
void kron_pairs(const double *w_out, size_t kout, const double *w_in, size_t kin, size_t k, size_t *pi,
                size_t *pj, size_t *next);

#endif
