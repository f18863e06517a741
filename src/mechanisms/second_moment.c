/* second_moment.c - C = sum x x^T as rows arrive (see second_moment.h).

   A block of SM_BLOCK rows is multiplied out in float (sgemm, beta 0, one
   tile of SM_TILE columns at a time, so the float partial is d x SM_TILE,
   never d x d), and each tile's entries are rounded to whole quanta of
   2^-24 and added into C, which counts quanta (integers, in doubles) until
   second_moment_finish scales it by 2^-24.  Float at the speed of ssyrk;
   whole quanta across blocks because a double sum of integers below 2^53
   is exact in any order: the rounding is the replaced row's block's alone
   (second_moment_excess), whatever n up to SECOND_MOMENT_MAX_ROWS.  (A
   plain double sum would add rounding on every later block, a bound that
   grows as n^2 / SM_BLOCK.) */
#include "second_moment.h"
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define SM_SCALE 0x1p24 /* C's quantum is 2^-24 */

enum {
    SM_BLOCK = 256, /* rows per block: the rounding bound grows as SM_BLOCK^2 (0.0078 at 256) */
    SM_TILE = 128   /* columns per float tile (measured: 32, 64, 256 no faster) */
};

int second_moment_init(second_moment *s, size_t d)
{
    s->d = d;
    s->pending = 0;
    s->rows = 0;
    s->C = calloc(d * d, sizeof *s->C);
    s->block = dps_aligned_alloc(SM_BLOCK * d, sizeof *s->block);
    s->tile = dps_aligned_alloc(SM_TILE * d, sizeof *s->tile);
    if (!s->C || !s->block || !s->tile) {
        second_moment_free(s);
        return DPS_ENOMEM;
    }
    return DPS_OK;
}

void second_moment_free(second_moment *s)
{
    free(s->C);
    free(s->block);
    free(s->tile);
    s->C = NULL;
    s->block = s->tile = NULL;
}

void second_moment_reset(second_moment *s)
{
    memset(s->C, 0, s->d * s->d * sizeof *s->C);
    s->pending = 0;
    s->rows = 0;
}

/* C's upper triangle += the pending rows' sum x x^T, tile by tile: tile =
   B[:, 0:c1]^T B[:, c0:c1] (c1 x w floats, rows 0..c1 of columns c0..c1),
   whose entries on or above the diagonal are rounded to whole quanta and
   added into C.  |entry| <= b (unit rows), so entry * 2^24 is exact in
   double and below 2^33; adding and taking away 1.5 2^52 rounds it to the
   nearest integer (ties to even, the default mode), exactly; and C's
   entries stay integers below 2^53 (second_moment_excess), so every += is
   exact. */
static void s_flush(second_moment *s)
{
    size_t d = s->d, n = s->pending;
    if (!n)
        return;
    dps_blas_init_once();
    for (size_t c0 = 0; c0 < d; c0 += SM_TILE) {
        size_t c1 = DPS_MIN(d, c0 + SM_TILE), w = c1 - c0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)c1, (int)w, (int)n, 1.0f, s->block, (int)d,
                    s->block + c0, (int)d, 0.0f, s->tile, (int)w);
        for (size_t i = 0; i < c1; i++) {
            const float *t = s->tile + i * w;
            double *c = s->C + i * d;
            for (size_t j = i > c0 ? i : c0; j < c1; j++) {
                const double magic = 0x1.8p52;
                c[j] += ((double)t[j - c0] * SM_SCALE + magic) - magic;
            }
        }
    }
    s->pending = 0;
}

void second_moment_add(second_moment *s, const float *row)
{
    if (s->rows >= SECOND_MOMENT_MAX_ROWS)
        return; /* the mechanisms refuse such an epoch (their check); C cannot overflow */
    s->rows++;
    memcpy(s->block + s->pending * s->d, row, s->d * sizeof *row);
    if (++s->pending == SM_BLOCK)
        s_flush(s);
}

/* Quanta to values (a power of two: exact), then the mirror. */
void second_moment_finish(second_moment *s)
{
    s_flush(s);
    size_t d = s->d;
    for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++)
            s->C[i * d + j] /= SM_SCALE;
    for (size_t i = 0; i < d; i++)
        for (size_t j = i + 1; j < d; j++)
            s->C[j * d + i] = s->C[i * d + j];
}

size_t second_moment_block_rows(void) { return SM_BLOCK; }

/* The bound (second_moment.h).  Entry (i, j) of a block is a float inner
   product of length b <= SM_BLOCK, computed in some order (sgemm's, FMA or
   not): |fl - exact| <= gamma_b sum_r |x_ri x_rj|, gamma_b = b u / (1 - b u),
   u = 2^-24 (Higham, Accuracy and Stability, 2nd ed., (3.5) and Lemma 3.1).
   The error E of a block (mirrored: the bound is entrywise, so it holds for
   the full symmetric matrix and for its upper triangle) has
   ||E||_F <= gamma_b || sum_r |x_r| |x_r|^T ||_F <= gamma_b sum_r ||x_r||^2
   <= gamma_b b.  Rounding to whole quanta moves each of the d^2 entries by
   at most 2^-25: Frobenius <= d 2^-25.  The sum over blocks is exact:
   every partial sum is a whole number of quanta of magnitude at most
   n (1 + gamma_b) + n / b 2^-25 < 2^29 for n <= SECOND_MOMENT_MAX_ROWS
   = 2^28, i.e. an integer below 2^53 in double.  On neighbouring inputs
   (row x -> y in one block) the other blocks are the same bits, so the
   computed C(D) - C(D') is exactly the difference of that block's rounded
   products: (y y^T - x x^T) plus at most 2 (gamma_b b + d 2^-25).  The
   scaling by 2^-24 at finish is exact. */
double second_moment_excess(size_t d)
{
    const double u = 0x1p-24, b = SM_BLOCK;
    double gb = b * u / (1.0 - b * u), q = (double)d * 0x1p-25;
    return 2.0 * (gb * b + q);
}

size_t second_moment_bytes(size_t d)
{
    return d * d * sizeof(double) + (SM_BLOCK + SM_TILE) * d * sizeof(float);
}

size_t epoch_rows_min_buckets(const dps_config *c)
{
    (void)c;
    return 2; /* no buckets: any epoch with a row can be released */
}

dps_zcdp epoch_rows_cost(const dps_config *c) { return (dps_zcdp){c->rho_epoch, 0.0}; }

double epoch_rows_radius_unrelated(const dps_config *c)
{
    (void)c;
    return 0.0; /* no buckets, no radius */
}
