/* power_sharded.c - the noisy power iteration sharded by coordinate over MPI
   ranks (see power_sharded.h for the mechanism, its argument and the norm
   guard).  Layout: X and Y are w x b column-major (ld w): column j's slice
   at j * w; a pending row's slice at i * w of B. */
#include "power_sharded.h"
#include "internal.h"
#include "rows.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Coordinates per named stream of draws: rank boundaries need not fall on
   them (a rank draws a whole block and keeps its part). */
enum { POWER_SHARDED_BLOCK = 1024, POWER_SHARDED_ROWS = 32, POWER_SHARDED_TILE = 1024 };

/* A named stream's index: (epoch, step, column, block) in 21 + 10 + 12 + 21
   bits, so no two draws within 2^21 epochs share a stream: blocks < 2^21
   (d <= 2^31), columns < 2^12 (b <= POWER_SHARDED_MAX_B), steps of an epoch
   < 2^10 (POWER_SHARDED_MAX_STEPS); the epoch is taken mod 2^21, so epochs
   2^21 apart share the public start's directions (public randomness: only
   the start, no privacy role) and, seeded (tests only, not secure), their
   noise. */
static uint64_t s_index(uint64_t epoch, uint64_t step, uint64_t column)
{
    return (epoch & (((uint64_t)1 << 21) - 1)) << 43 | step << 33 | column << 21;
}

void power_sharded_free(power_sharded *p)
{
    free(p->X);
    free(p->Y);
    free(p->B);
    free(p->Bd);
    free(p->P);
    free(p->ss);
    free(p->G);
    free(p->V);
    free(p->l);
    free(p->block);
    dps_rng_destroy(&p->noise);
    memset(p, 0, sizeof *p);
}

int power_sharded_agree(power_sharded *p, int rc) { return shard_agree(p->comm, rc, &p->traffic); }

/* The collective operations on doubles, counting the bytes each moves (the
   benchmark's "bytes moved": what one rank contributes or receives). */
static void s_sum(power_sharded *p, double *buf, size_t n) { shard_sum(p->comm, buf, n, &p->traffic); }
static void s_from_rank0(power_sharded *p, double *buf, size_t n) { shard_from_rank0(p->comm, buf, n, &p->traffic); }

int power_sharded_init(power_sharded *p, MPI_Comm comm, size_t d, size_t k, size_t b, int seeded, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->comm = comm;
    MPI_Comm_rank(comm, &p->rank);
    MPI_Comm_size(comm, &p->size);
    int rc = DPS_OK;
    /* the named streams' index packs (step, column, block) into 64 bits */
    if (k < 1 || b < k || b > d || d < (size_t)p->size || b > POWER_SHARDED_MAX_B || d > (size_t)INT32_MAX ||
        b > SIZE_MAX / sizeof(double) / d)
        rc = DPS_EINVAL;
    if (rc == DPS_OK) {
        dps_blas_init_once();
        p->d = d;
        p->k = k;
        p->b = b;
        p->nb = POWER_SHARDED_ROWS;
        p->seeded = seeded;
        p->seed = seed;
        dps_shard_slice(d, (size_t)p->size, (size_t)p->rank, &p->c0, &p->c1); /* rank r's slice */
        p->w = p->c1 - p->c0;
        p->X = dps_aligned_calloc(b * p->w, sizeof(double));
        p->Y = dps_aligned_calloc(b * p->w, sizeof(double));
        p->B = dps_aligned_alloc(p->nb * p->w, sizeof(float));
        p->Bd = dps_aligned_alloc(p->nb * DPS_MIN(p->w, (size_t)POWER_SHARDED_TILE), sizeof(double));
        p->P = malloc(p->nb * b * sizeof *p->P);
        p->ss = malloc(p->nb * sizeof *p->ss);
        p->G = malloc(b * b * sizeof *p->G);
        p->V = malloc(b * b * sizeof *p->V);
        p->l = malloc(b * sizeof *p->l);
        p->block = malloc(POWER_SHARDED_BLOCK * sizeof *p->block);
        if (!p->X || !p->Y || !p->B || !p->Bd || !p->P || !p->ss || !p->G || !p->V || !p->l || !p->block)
            rc = DPS_ENOMEM;
        else if (!seeded)
            rc = dps_rng_new_secure(&p->noise);
    }
    rc = power_sharded_agree(p, rc);
    if (rc != DPS_OK)
        power_sharded_free(p);
    return rc;
}

/* Add to column j of M (this rank's slice) the draws N(0, s^2) of coordinates
   [c0, c1) of the stream named label, index: block by block of the whole
   column, so that any split of the coordinates draws the same numbers. */
int power_sharded_named_add(size_t d, size_t c0, size_t c1, uint64_t seed, const char *label, uint64_t index,
                            double sd, double *block, double *out)
{
    for (size_t blk = c0 / POWER_SHARDED_BLOCK; blk * POWER_SHARDED_BLOCK < c1; blk++) {
        size_t b0 = blk * POWER_SHARDED_BLOCK, len = DPS_MIN((size_t)POWER_SHARDED_BLOCK, d - b0);
        dps_rng *r = NULL;
        int rc = dps_rng_new_labelled(&r, seed, label, index | (uint64_t)blk);
        if (rc)
            return rc;
        dps_rng_gaussian_fill(r, sd, block, len);
        dps_rng_destroy(&r);
        size_t lo = DPS_MAX(b0, c0), hi = DPS_MIN(b0 + len, c1);
        for (size_t i = lo; i < hi; i++)
            out[i - c0] += block[i - b0];
    }
    return DPS_OK;
}

/* Column col of this rank's slice += the named draws of sd s. */
static int s_add_named(power_sharded *p, double *col, double s, uint64_t seed, const char *label, uint64_t index)
{
    return power_sharded_named_add(p->d, p->c0, p->c1, seed, label, index, s, p->block, col);
}

/* X = the left singular vectors of Y (w x b slices), largest first, through
   the Gram's eigenvectors on rank 0; then the norm guard.  Collective. */
static int s_orthonormalise(power_sharded *p)
{
    size_t b = p->b, w = p->w;
    memset(p->G, 0, b * b * sizeof *p->G);
    cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, (int)b, (int)w, 1.0, p->Y, (int)w, 0.0, p->G, (int)b);
    s_sum(p, p->G, b * b);
    /* rank 0 solves, every rank gets V and l (and rank 0's verdict) */
    double *msg = p->V; /* V (b x b), then l follows in p->l */
    int rc = DPS_OK;
    if (p->rank == 0) {
        memcpy(p->V, p->G, b * b * sizeof *p->V);
        double *asc = p->l;
        if (LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)b, p->V, (lapack_int)b, asc) != 0 ||
            !(asc[b - 1] > 0) || !(asc[0] > asc[b - 1] * 1e-30))
            rc = DPS_ENUMERIC; /* Y (numerically) rank-deficient: no noise, too few rows */
        /* descending, and each eigenvector's largest entry positive */
        for (size_t j = 0; j < b / 2; j++) {
            size_t o = b - 1 - j;
            double t = asc[j];
            asc[j] = asc[o];
            asc[o] = t;
            for (size_t i = 0; i < b; i++) {
                t = p->V[j * b + i];
                p->V[j * b + i] = p->V[o * b + i];
                p->V[o * b + i] = t;
            }
        }
        for (size_t j = 0; j < b; j++) {
            size_t at = 0;
            for (size_t i = 1; i < b; i++)
                if (fabs(p->V[j * b + i]) > fabs(p->V[j * b + at]))
                    at = i;
            if (p->V[j * b + at] < 0)
                for (size_t i = 0; i < b; i++)
                    p->V[j * b + i] = -p->V[j * b + i];
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, p->comm);
    p->traffic.calls++;
    if (rc)
        return rc;
    s_from_rank0(p, msg, b * b);
    s_from_rank0(p, p->l, b);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)w, (int)b, (int)b, 1.0, p->Y, (int)w, p->V,
                (int)b, 0.0, p->X, (int)w);
    for (size_t j = 0; j < b; j++)
        cblas_dscal((int)w, 1.0 / sqrt(p->l[j]), p->X + j * w, 1);
    /* the norm guard (power_sharded.h) */
    memset(p->G, 0, b * b * sizeof *p->G);
    cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, (int)b, (int)w, 1.0, p->X, (int)w, 0.0, p->G, (int)b);
    s_sum(p, p->G, b * b);
    double f = 0;
    if (p->rank == 0) {
        double g = 0, u = 0x1p-53, dd = (double)p->d;
        for (size_t i = 0; i < b; i++) {
            double row = 0;
            for (size_t j = 0; j < b; j++)
                row += fabs(i <= j ? p->G[j * b + i] : p->G[i * b + j]); /* the upper triangle, mirrored */
            g = fmax(g, row);
        }
        /* g up by the rounding of its own b-term sums; e bounds the Gram's
           (power_sharded.h); mu covers the scaling's and f's roundings */
        double gd = dd * u / (1.0 - dd * u), gu = g * (1.0 + (double)(b + 2) * 0x1p-52);
        double e = (double)b * gd * gu / (1.0 - gd), mu = (4.0 * sqrt((double)b) + 8.0) * 0x1p-52;
        f = (1.0 - mu) / sqrt(gu + e);
    }
    s_from_rank0(p, &f, 1);
    for (size_t j = 0; j < b; j++) /* column by column: b w may pass INT_MAX */
        cblas_dscal((int)w, f, p->X + j * w, 1);
    return DPS_OK;
}

int power_sharded_start(power_sharded *p, const float *warm_slice, uint64_t public_seed, uint64_t epoch)
{
    size_t b = p->b, w = p->w;
    int rc = DPS_OK;
    memset(p->Y, 0, b * w * sizeof *p->Y);
    for (size_t j = 0; j < b && !rc; j++) /* every column drawn, warm or not: the public draws' use is fixed */
        rc = s_add_named(p, p->Y + j * w, 1.0, public_seed, "power-start", s_index(epoch, 0, j));
    if (!rc && warm_slice)
        for (size_t j = 0; j < p->k; j++)
            for (size_t i = 0; i < w; i++)
                p->Y[j * w + i] = (double)warm_slice[j * w + i];
    rc = power_sharded_agree(p, rc);
    if (!rc)
        rc = s_orthonormalise(p);
    memset(p->Y, 0, b * w * sizeof *p->Y);
    p->pending = 0;
    p->steps = 0;
    p->epoch = epoch;
    return rc;
}

/* Bd (tw x nb, column-major) = coordinates [c0, c0 + tw) of the pending
   rows, in double. */
static void s_tile(power_sharded *p, size_t c0, size_t tw)
{
    for (size_t i = 0; i < p->pending; i++)
        for (size_t c = 0; c < tw; c++)
            p->Bd[i * tw + c] = (double)p->B[i * p->w + c0 + c];
}

/* Y += B^T (B X) for the pending rows, each normalised first (their sums of
   squares summed over the ranks); B X summed over the ranks. */
static void s_flush(power_sharded *p)
{
    size_t b = p->b, w = p->w, nb = p->pending;
    if (!nb)
        return;
    for (size_t i = 0; i < nb; i++)
        p->ss[i] = row_sum_squares(p->B + i * w, w);
    s_sum(p, p->ss, nb);
    for (size_t i = 0; i < nb; i++) {
        row_kind kind = row_unit_part(p->B + i * w, w, p->ss[i], p->d, ROW_NORMALISE, p->B + i * w);
        p->rows_nan += kind == ROW_NAN;
        p->rows_inf += kind == ROW_INF;
        p->rows_zero += kind == ROW_ZERO;
    }
    /* P = B X over tiles of coordinates (B in double a tile at a time: the
       rows' floats are exact in double), summed over the ranks; then each
       tile of Y += B_tile^T P */
    memset(p->P, 0, nb * b * sizeof *p->P);
    for (size_t c0 = 0; c0 < w; c0 += POWER_SHARDED_TILE) {
        size_t tw = DPS_MIN((size_t)POWER_SHARDED_TILE, w - c0);
        s_tile(p, c0, tw);
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)nb, (int)b, (int)tw, 1.0, p->Bd, (int)tw,
                    p->X + c0, (int)w, 1.0, p->P, (int)nb);
    }
    s_sum(p, p->P, nb * b);
    for (size_t c0 = 0; c0 < w; c0 += POWER_SHARDED_TILE) {
        size_t tw = DPS_MIN((size_t)POWER_SHARDED_TILE, w - c0);
        s_tile(p, c0, tw);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)tw, (int)b, (int)nb, 1.0, p->Bd, (int)tw, p->P,
                    (int)nb, 1.0, p->Y + c0, (int)w);
    }
    p->pending = 0;
}

int power_sharded_add(power_sharded *p, const float *row_slice)
{
    memcpy(p->B + p->pending * p->w, row_slice, p->w * sizeof *row_slice);
    if (++p->pending == p->nb)
        s_flush(p);
    return DPS_OK;
}

int power_sharded_step(power_sharded *p, double s)
{
    size_t b = p->b, w = p->w;
    s_flush(p);
    int rc = p->steps < POWER_SHARDED_MAX_STEPS && isfinite(s) ? DPS_OK : DPS_EINVAL; /* s_index's bits */
    for (size_t j = 0; j < b && !rc && p->seeded; j++) /* the epoch in the name: no epoch repeats another's */
        rc = s_add_named(p, p->Y + j * w, s, p->seed, "power-noise", s_index(p->epoch, p->steps, j));
    if (!rc && !p->seeded)
        dps_rng_gaussian_add(p->noise, s, p->Y, b * w);
    rc = power_sharded_agree(p, rc);
    if (!rc)
        rc = s_orthonormalise(p);
    memset(p->Y, 0, b * w * sizeof *p->Y);
    if (!rc)
        p->steps++;
    return rc;
}

int power_sharded_basis(power_sharded *p, float *basis_slice, double *sv)
{
    if (!p->steps)
        return DPS_EINVAL;
    size_t k = p->k, w = p->w;
    double *nrm = p->P; /* scratch: nb b >= k doubles */
    for (size_t j = 0; j < k; j++)
        nrm[j] = cblas_ddot((int)w, p->X + j * w, 1, p->X + j * w, 1);
    s_sum(p, nrm, k);
    for (size_t j = 0; j < k; j++) { /* about 1: undo the guard's scale */
        double inv = 1.0 / sqrt(nrm[j]);
        for (size_t i = 0; i < w; i++)
            basis_slice[j * w + i] = (float)(p->X[j * w + i] * inv);
        if (sv)
            sv[j] = sqrt(p->l[j]);
    }
    return DPS_OK;
}

int power_sharded_gather(power_sharded *p, float *basis)
{
    if (!p->steps)
        return DPS_EINVAL;
    size_t k = p->k;
    float *mine = malloc(DPS_MAX((size_t)1, k * p->w) * sizeof *mine);
    int rc = power_sharded_agree(p, mine ? DPS_OK : DPS_ENOMEM);
    if (!rc) {
        power_sharded_basis(p, mine, NULL);
        shard_gather_rows(p->comm, k, p->d, mine, basis, &p->traffic);
    }
    free(mine);
    return rc;
}
