/* kron_moment.c - a Kronecker-factored group's side moments and basis (see
   kron_moment.h).
   Owned by the mechanisms module: moment_groups.c holds one per kron group. */
#include "kron_moment.h"

#include "gaussian_cov.h"
#include "internal.h"
#include "linalg.h"
#include "noise_level.h"

#include <math.h>
#include <string.h>

/* A block of rows is at most this many doubles (16 MB) and 64 rows: the
   MLP's first layer (100 352 columns) flushes every 20 rows. */
enum { KRON_BLOCK_DOUBLES = 1 << 21, KRON_BLOCK_MAX = 64 };

static size_t s_block_rows(size_t d)
{
    size_t b = KRON_BLOCK_DOUBLES / d;
    return b < 1 ? 1 : b > KRON_BLOCK_MAX ? KRON_BLOCK_MAX : b;
}

size_t kron_bytes(size_t r, size_t c, size_t k)
{
    size_t kout = DPS_MIN(k, r), kin = DPS_MIN(k, c);
    size_t doubles = 2 * (r * r + c * c) + s_block_rows(r * c) * r * c + kout * (r + 3) + kin * (c + 3);
    return doubles * sizeof(double) + (2 * k + kout) * sizeof(size_t);
}

void kron_free(kron_moment *km)
{
    free(km->Cin);
    free(km->Cout);
    free(km->block);
    free(km->Nin);
    free(km->Nout);
    free(km->win);
    free(km->wout);
    free(km->Zin);
    free(km->Zout);
    free(km->pi);
    free(km->pj);
    free(km->next);
    free(km->side);
    memset(km, 0, sizeof *km);
}

int kron_init(kron_moment *km, size_t r, size_t c, size_t k)
{
    memset(km, 0, sizeof *km);
    km->r = r;
    km->c = c;
    km->k = k;
    km->kout = DPS_MIN(k, r);
    km->kin = DPS_MIN(k, c);
    km->block_rows = s_block_rows(r * c);
    km->Cin = calloc(c * c, sizeof *km->Cin);
    km->Cout = calloc(r * r, sizeof *km->Cout);
    km->block = malloc(km->block_rows * r * c * sizeof *km->block);
    km->Nin = malloc(c * c * sizeof *km->Nin);
    km->Nout = malloc(r * r * sizeof *km->Nout);
    km->win = malloc(km->kin * sizeof *km->win);
    km->wout = malloc(km->kout * sizeof *km->wout);
    km->Zin = malloc(km->kin * c * sizeof *km->Zin);
    km->Zout = malloc(km->kout * r * sizeof *km->Zout);
    km->pi = malloc(k * sizeof *km->pi);
    km->pj = malloc(k * sizeof *km->pj);
    km->next = malloc(km->kout * sizeof *km->next);
    km->side = malloc(2 * (km->kout + km->kin) * sizeof *km->side);
    if (!km->Cin || !km->Cout || !km->block || !km->Nin || !km->Nout || !km->win || !km->wout || !km->Zin ||
        !km->Zout || !km->pi || !km->pj || !km->next || !km->side) {
        kron_free(km);
        return DPS_ENOMEM;
    }
    return DPS_OK;
}

void kron_reset(kron_moment *km)
{
    memset(km->Cin, 0, km->c * km->c * sizeof *km->Cin);
    memset(km->Cout, 0, km->r * km->r * sizeof *km->Cout);
    km->pending = 0;
}

/* C_in += the (B r) x c block's Gram of columns (one syrk); C_out += each
   row's r x c G G^T (B syrks). */
static void s_flush(kron_moment *km)
{
    size_t r = km->r, c = km->c;
    if (km->pending == 0)
        return;
    la_syrk_rows_add_double(km->block, km->pending * r, c, km->Cin);
    for (size_t i = 0; i < km->pending; i++)
        la_syrk_gram_add_double(km->block + i * r * c, r, c, c, km->Cout);
    km->pending = 0;
}

void kron_add(kron_moment *km, const float *x)
{
    size_t d = km->r * km->c;
    double *dst = km->block + km->pending * d;
    for (size_t i = 0; i < d; i++)
        dst[i] = x[i];
    if (++km->pending == km->block_rows)
        s_flush(km);
}

static void s_mirror(double *A, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            A[j * n + i] = A[i * n + j];
}

void kron_finish(kron_moment *km)
{
    s_flush(km);
    s_mirror(km->Cin, km->c);
    s_mirror(km->Cout, km->r);
}

/* The frontier: next[i] is the first j not yet taken with u_i, and the
   next pair in the order is the frontier's largest product (ties: smaller
   i).  The first k pairs of the order form a down-set, so every pair's
   predecessors in it are taken before it, and it is on the frontier when
   its turn comes. */
void kron_pairs(const double *w_out, size_t kout, const double *w_in, size_t kin, size_t k, size_t *pi,
                size_t *pj, size_t *next)
{
    for (size_t i = 0; i < kout; i++)
        next[i] = 0;
    for (size_t p = 0; p < k; p++) {
        size_t best = kout;
        double best_v = -1;
        for (size_t i = 0; i < kout; i++) {
            if (next[i] >= kin)
                continue;
            double v = DPS_MAX(w_out[i], 0.0) * DPS_MAX(w_in[next[i]], 0.0);
            if (v > best_v) {
                best_v = v;
                best = i;
            }
            if (next[i] == 0)
                break; /* rows past i are untouched: their products are at most row i's first */
        }
        pi[p] = best;
        pj[p] = next[best]++;
    }
}

int kron_release(kron_moment *km, double s, dps_rng *noise, double *scratch, float *slice)
{
    size_t r = km->r, c = km->c, d = r * c;
    kron_finish(km);
    memcpy(km->Nout, km->Cout, r * r * sizeof *km->Nout);
    gauss_cov_add_noise(km->Nout, r, s, noise);
    memcpy(km->Nin, km->Cin, c * c * sizeof *km->Nin);
    gauss_cov_add_noise(km->Nin, c, s, noise);
    km->tr_out = km->tr_in = 0;
    for (size_t a = 0; a < r; a++)
        km->tr_out += km->Nout[a * r + a];
    for (size_t b = 0; b < c; b++)
        km->tr_in += km->Nin[b * c + b];
    memcpy(scratch, km->Nout, r * r * sizeof *scratch);
    int rc = la_sym_topk_d(scratch, r, km->kout, NULL, km->wout, km->Zout, NULL); /* a public start */
    if (rc)
        return rc;
    memcpy(scratch, km->Nin, c * c * sizeof *scratch);
    rc = la_sym_topk_d(scratch, c, km->kin, NULL, km->win, km->Zin, NULL);
    if (rc)
        return rc;
    kron_pairs(km->wout, km->kout, km->win, km->kin, km->k, km->pi, km->pj, km->next);
    km->used_out = km->used_in = 0;
    for (size_t p = 0; p < km->k; p++) {
        const double *u = km->Zout + km->pi[p] * r, *v = km->Zin + km->pj[p] * c;
        km->used_out = DPS_MAX(km->used_out, km->pi[p] + 1);
        km->used_in = DPS_MAX(km->used_in, km->pj[p] + 1);
        for (size_t a = 0; a < r; a++)
            for (size_t b = 0; b < c; b++)
                slice[p * d + a * c + b] = (float)(u[a] * v[b]);
    }
    return DPS_OK;
}

/* A KRON GROUP'S LEVEL.  Each side is a Gaussian covariance of its own
   (noise_level.c): each used direction has an energy lambda (de-biased where
   it cleared the detection level) and a predicted kept share (cos^2 of its
   eigenvector, or the random share).  A product u (x) v keeps, of a block
   X = a b^T, (u.a)^2 (v.b)^2: the product of what each side keeps; and under
   a separable model of the rows (the energy on pair (i, j) proportional to
   lambda_out_i lambda_in_j) the group keeps the pairs' kept shares
   weighted by those products:
       kept = sum_p lo_i li_j ko_i ki_j / sum_p lo_i li_j,
   which weighs a side direction by the pairs that use it: at large k most
   pairs couple one strong direction with a weak one, and those carry
   little.  The energy of a used direction that did not clear: at most T =
   s sqrt(dim), and together at most what the side's trace leaves
   (gauss_noise_weak).  The group's energy (its
   weight in the release's level) is the smaller side's sum of lambdas over
   the used directions: the rows' energy on the chosen pairs is at most each
   side's.  Seen: both sides have a used direction that cleared; otherwise
   the side with none is at random level and moment_groups.c gives the group
   its margin.  What this level measures is the distance of the released
   basis from the same mechanism's noise-free one: how far the rows are from
   Kronecker-structured is not in it.  Inputs: released eigenvalues and
   traces, public s, r, c, k_g: post-processing. */
static double s_side(const double *w, size_t used, size_t dim, double s, double tr, double *lambda, double *keep,
                     int *seen)
{
    size_t m = gauss_noise_cleared(w, used, dim, s);
    double weak = gauss_noise_weak(w, used, dim, s, m, tr), sum = 0;
    for (size_t i = 0; i < used; i++) {
        gauss_noise_dir(w[i], m, used, dim, s, &lambda[i], &keep[i]);
        if (i >= m)
            lambda[i] = weak;
        sum += lambda[i];
    }
    *seen = m > 0;
    return sum;
}

int kron_noise_parts(kron_moment *km, double s, double *lost, double *total, int side_seen[2])
{
    double *lo = km->side, *ko = lo + km->kout, *li = ko + km->kout, *ki = li + km->kin;
    double to = s_side(km->wout, km->used_out, km->r, s, km->tr_out, lo, ko, &side_seen[0]);
    double ti = s_side(km->win, km->used_in, km->c, s, km->tr_in, li, ki, &side_seen[1]);
    double num = 0, den = 0;
    for (size_t p = 0; p < km->k; p++) {
        double w = lo[km->pi[p]] * li[km->pj[p]];
        num += w * ko[km->pi[p]] * ki[km->pj[p]];
        den += w;
    }
    double kept = den > 0 ? num / den : 0;
    double t = DPS_MIN(to, ti);
    *total += t;
    *lost += t * (1 - kept);
    return side_seen[0] && side_seen[1];
}
