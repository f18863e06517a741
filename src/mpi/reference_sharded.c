/* reference_sharded.c - the reference aggregator sharded by coordinate (see
   reference_sharded.h for the guarantee and why it is epoch_reference.c's
   mechanism). */
#include "reference_sharded.h"
#include "aggregate.h"
#include "buckets.h"
#include "epoch_aggregate.h"
#include "internal.h"
#include "linalg.h"
#include "noise_level.h"
#include "power_sharded.h"
#include "rows.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { REF_TILE = 1024, REF_BATCH = 16 }; /* columns converted to double at a time; buckets whose products wait */

/* The named streams' index: (epoch mod 2^21) << 42 | item << 21 | block
   (power_sharded_named_add fills the low 21 bits); item < 2^21. */
static uint64_t s_index(uint64_t epoch, uint64_t item)
{
    return ((epoch & ((1u << 21) - 1)) << 42) | (item << 21);
}

/* The collective steps (shard_comm.h), counted in this rank's traffic. */
static void s_reduce(ref_sharded *s, double *buf, size_t n) { shard_sum_to_rank0(s->comm, buf, n, &s->traffic); }
static void s_allsum(ref_sharded *s, double *buf, size_t n) { shard_sum(s->comm, buf, n, &s->traffic); }
static void s_from_rank0(ref_sharded *s, double *buf, size_t n) { shard_from_rank0(s->comm, buf, n, &s->traffic); }
static int s_agree(ref_sharded *s, int rc) { return shard_agree(s->comm, rc, &s->traffic); }

/* ------------------------------------------------------------- set-up */
size_t ref_sharded_bytes(const dps_config *c, size_t w)
{
    /* what grows with w: the bases V, the points P, the mean Z, the open
       buckets' rows; the rest is the close's n x n and n x q (n = t k)
       matrices (rank 0 also forms G, H and the distances) and tiles */
    size_t n = c->t * c->k, win = buckets_window(c), big = DPS_MAX(c->m, c->q);
    size_t floats = (c->t * c->k + 2 * c->q) * w + win * c->m * w + n * c->q;
    size_t doubles = n * (n + 1) / 2 + n * c->q + 1 /* acc */ + (n + c->q + REF_BATCH * c->k) * REF_TILE +
                     REF_BATCH * c->k * (n + c->q) /* stack, blk */ +
                     2 * n * n + 2 * n * c->q /* rank 0: G, H; B */ + big * REF_TILE + 2 * big * big +
                     c->t * (c->t + 2);
    return floats * sizeof(float) + doubles * sizeof(double);
}

void ref_sharded_free(ref_sharded *s)
{
    dps_rng_destroy(&s->noise);
    dps_rng_destroy(&s->part);
    free(s->V);
    free(s->done);
    free(s->rows);
    free(s->open_id);
    free(s->filled);
    free(s->slots);
    free(s->P);
    free(s->Pd);
    free(s->block);
    free(s->acc);
    free(s->stack);
    free(s->blk);
    free(s->pending);
    free(s->ids);
    free(s->flags);
    free(s->ss);
    free(s->B);
    free(s->Z);
    memset(s, 0, sizeof *s);
}

int ref_sharded_init(ref_sharded *s, MPI_Comm comm, const dps_config *c, int seeded, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->comm = comm;
    MPI_Comm_rank(comm, &s->rank);
    MPI_Comm_size(comm, &s->size);
    s->cfg = c;
    s->d = c->d, s->k = c->k, s->t = c->t, s->m = c->m, s->q = c->q;
    s->win = buckets_window(c);
    s->seeded = seeded;
    s->seed = seed;
    int rc = DPS_OK;
    /* the named completions' item (epoch's (t + 1) k of them) fits 21 bits; the
       Grams' sizes fit an int */
    if (c->k < 1 || c->m < c->k || c->m > c->d || c->q < 1 || c->q >= ((size_t)1 << 21) || c->t < 1 ||
        (c->t + 1) * c->k >= ((size_t)1 << 21) || c->d < (size_t)s->size || c->d > (size_t)INT32_MAX ||
        (c->t * c->k) * (c->t * c->k + 1) / 2 + c->t * c->k * c->q >= (size_t)INT32_MAX ||
        c->m * c->m > (size_t)INT32_MAX || c->q * c->q > (size_t)INT32_MAX)
        rc = DPS_EINVAL;
    if (!rc) {
        dps_shard_slice(c->d, (size_t)s->size, (size_t)s->rank, &s->c0, &s->c1);
        s->w = s->c1 - s->c0;
        size_t w = s->w;
        s->V = dps_aligned_alloc(s->t * s->k * w, sizeof(float));
        s->done = calloc(s->t, 1);
        s->rows = dps_aligned_alloc(s->win * s->m * w, sizeof(float));
        s->open_id = calloc(s->win, sizeof *s->open_id);
        s->filled = calloc(s->win, sizeof *s->filled);
        s->slots = calloc(s->win * s->m, sizeof *s->slots);
        s->P = dps_aligned_alloc(s->q * w, sizeof(float));
        s->Pd = malloc(w * sizeof *s->Pd);
        s->block = malloc(1024 * sizeof *s->block);
        size_t n = s->t * s->k;
        s->acc = malloc((n * (n + 1) / 2 + n * s->q + 1) * sizeof *s->acc);
        s->stack = malloc((n + s->q + REF_BATCH * s->k) * REF_TILE * sizeof *s->stack); /* + the pending rows */
        s->blk = malloc(REF_BATCH * s->k * (n + s->q) * sizeof *s->blk);
        s->pending = malloc(s->t * sizeof *s->pending);
        s->ids = malloc(s->t * sizeof *s->ids);
        s->flags = malloc(s->t);
        s->ss = malloc(s->m * sizeof *s->ss);
        s->B = malloc((4 + n * s->q) * sizeof *s->B);
        s->Z = malloc(s->q * w * sizeof *s->Z);
        if (!s->V || !s->done || !s->rows || !s->open_id || !s->filled || !s->slots || !s->P || !s->Pd || !s->block ||
            !s->acc || !s->stack || !s->blk || !s->pending || !s->ids || !s->flags || !s->ss || !s->B ||
            !s->Z)
            rc = DPS_ENOMEM;
        else if (!seeded && dps_rng_new_secure(&s->noise) != DPS_OK)
            rc = DPS_ERANDOM;
    }
    rc = s_agree(s, rc);
    if (rc)
        ref_sharded_free(s);
    return rc;
}

/* ------------------------------------------------------------- epochs */
static void s_open(ref_sharded *s, size_t oi)
{
    s->open_id[oi] = s->next_bucket++;
    s->filled[oi] = 0;
    for (size_t i = 0; i < s->m; i++)
        s->slots[s->nfree++] = oi;
}

int ref_sharded_begin(ref_sharded *s, uint64_t epoch)
{
    s->epoch = epoch;
    dps_rng_destroy(&s->part);
    if (dps_rng_new_labelled(&s->part, s->cfg->public_seed, "partition-sharded", epoch) != DPS_OK)
        return DPS_ERANDOM;
    /* the reference points: public N(0, 1) entries, any split of the
       coordinates the same numbers */
    for (size_t i = 0; i < s->q; i++) {
        memset(s->Pd, 0, s->w * sizeof *s->Pd);
        int rc = power_sharded_named_add(s->d, s->c0, s->c1, s->cfg->public_seed, "reference-points-sharded",
                                         s_index(epoch, i), 1.0, s->block, s->Pd);
        if (rc)
            return rc;
        for (size_t c = 0; c < s->w; c++)
            s->P[i * s->w + c] = (float)s->Pd[c];
    }
    s->f2 = 0;
    for (size_t i = 0; i < s->q * s->w; i++)
        s->f2 += (double)s->P[i] * s->P[i];
    size_t n = s->t * s->k;
    memset(s->acc, 0, (n * (n + 1) / 2 + n * s->q + 1) * sizeof *s->acc);
    memset(s->done, 0, s->t);
    s->completed = 0;
    s->npending = 0;
    s->next_bucket = 0;
    s->nfree = 0;
    s->n_open = s->win;
    for (size_t i = 0; i < s->win; i++)
        s_open(s, i);
    return DPS_OK;
}

/* Collective.  Rows rank..k-1 of V (k x w slices; rows 0..rank-1
   orthonormal over the ranks) completed by unit vectors orthogonal to the
   earlier rows, from public streams named by (epoch, item, row): two passes
   of Gram-Schmidt (dot products summed over the ranks). */
static void s_complete(ref_sharded *s, float *V, size_t rank, size_t item)
{
    size_t k = s->k, w = s->w;
    double dots[k + 1];
    for (size_t r = rank; r < k; r++) {
        memset(s->Pd, 0, w * sizeof *s->Pd);
        if (power_sharded_named_add(s->d, s->c0, s->c1, s->cfg->public_seed, "completion-sharded",
                                    s_index(s->epoch, item * k + r), 1.0, s->block, s->Pd) != DPS_OK)
            memset(s->Pd, 0, w * sizeof *s->Pd); /* the same failure on every rank: public streams */
        for (int pass = 0; pass < 2; pass++) {
            for (size_t a = 0; a < r; a++) {
                double x = 0;
                for (size_t c = 0; c < w; c++)
                    x += (double)V[a * w + c] * s->Pd[c];
                dots[a] = x;
            }
            s_allsum(s, dots, r);
            for (size_t a = 0; a < r; a++)
                for (size_t c = 0; c < w; c++)
                    s->Pd[c] -= dots[a] * V[a * w + c];
        }
        double nn = 0;
        for (size_t c = 0; c < w; c++)
            nn += s->Pd[c] * s->Pd[c];
        s_allsum(s, &nn, 1);
        double f = nn > 0 ? 1.0 / sqrt(nn) : 0.0;
        for (size_t c = 0; c < w; c++)
            V[r * w + c] = (float)(s->Pd[c] * f);
    }
}

/* Collective.  V (k x w) = this rank's slice of the top-k right singular
   basis of the nr x d matrix whose slices are X (nr x w): the nr x nr Gram
   summed on rank 0, its top eigenpairs sent to every rank, each maps its
   slice (V's row i = u_i^T X / sqrt(l_i)).  Directions with l_i <= 1e-10
   l_1 (la_topk_rows's rule) are completed (s_complete, item).  DPS_ENUMERIC
   on every rank if the eigensolver fails; DPS_ENOMEM likewise. */
static int s_topk(ref_sharded *s, const float *X, size_t nr, float *V, size_t item)
{
    size_t k = s->k, w = s->w, kk = DPS_MIN(k, nr);
    double *G = calloc(nr * nr, sizeof *G), *buf = malloc(nr * DPS_MIN(w, (size_t)REF_TILE) * sizeof *buf);
    double *msg = malloc((nr * kk + kk + 1) * sizeof *msg), *out = malloc(kk * REF_TILE * sizeof *out);
    double *Bm = malloc(nr * kk * sizeof *Bm);
    int rc = G && buf && msg && out && Bm ? DPS_OK : DPS_ENOMEM;
    rc = s_agree(s, rc);
    if (!rc) {
        for (size_t c0 = 0; c0 < w; c0 += REF_TILE)
            la_gram_add(X, nr, w, c0, DPS_MIN(w, c0 + REF_TILE), G, buf);
        s_reduce(s, G, nr * nr);
        /* msg: the eigenvectors (nr x kk, column-major), the values, the rank */
        if (s->rank == 0) {
            for (size_t i = 0; i < nr; i++)
                for (size_t j = i + 1; j < nr; j++)
                    G[j * nr + i] = G[i * nr + j] = G[i * nr + j] + G[j * nr + i]; /* one triangle was filled */
            double *l = msg + nr * kk;
            size_t r = 0;
            if (la_syevr_top(G, nr, kk, l, msg) == DPS_OK && l[0] > 0)
                while (r < kk && l[r] > 1e-10 * l[0])
                    r++;
            else
                r = (size_t)-1;
            l[kk] = r == (size_t)-1 ? -1.0 : (double)r;
        }
        s_from_rank0(s, msg, nr * kk + kk + 1);
        double got = msg[nr * kk + kk];
        if (got < 0) {
            rc = DPS_ENUMERIC;
        } else {
            size_t r = (size_t)got;
            const double *U = msg, *l = msg + nr * kk;
            for (size_t a = 0; a < nr; a++)
                for (size_t i = 0; i < r; i++)
                    Bm[a * r + i] = U[i * nr + a] / sqrt(l[i]);
            for (size_t c0 = 0; c0 < w && r; c0 += REF_TILE) {
                size_t c1 = DPS_MIN(w, c0 + REF_TILE), cw = c1 - c0;
                la_combine_rows(Bm, nr, r, X, w, c0, c1, out, cw, buf);
                for (size_t i = 0; i < r; i++)
                    for (size_t c = 0; c < cw; c++)
                        V[i * w + c0 + c] = (float)out[i * cw + c];
            }
            s_complete(s, V, r, item);
        }
    }
    free(G);
    free(buf);
    free(msg);
    free(out);
    free(Bm);
    return rc;
}

/* Where entry (i, j >= i) of an n x n upper triangle lies once packed by rows. */
static size_t s_packed(size_t n, size_t i, size_t j) { return i * n - (i * (i + 1)) / 2 + j; }

/* Local: the pending buckets' products with every completed bucket (the
   pending included) and with the points, added to acc: V_j V_l^T into V
   V^T's packed upper triangle (an entry (r, c) at its (min, max) place; a
   pair of pending buckets once, from the one of smaller id), V_j P^T into
   its rows of V P^T.  Buckets wait in groups of REF_BATCH, so that the
   completed rows are converted to double once per group, not per bucket.
   Each entry is a sum of the products of this rank's w coordinates (exact
   in double: products of floats) in some order; the reduce adds the
   ranks' -- aggregate.c's rounding bound holds for any order of a dot
   product's additions, and entry (r, c) is formed from buckets r / k and
   c / k alone, whatever the others hold. */
static void s_accumulate(ref_sharded *s)
{
    size_t k = s->k, q = s->q, w = s->w, nmax = s->t * s->k, tri = nmax * (nmax + 1) / 2, np = s->npending;
    if (!np)
        return;
    size_t *ids = s->ids, nd = 0;
    unsigned char *pend = s->flags;
    memset(pend, 0, s->t);
    for (size_t i = 0; i < np; i++)
        pend[s->pending[i]] = 1;
    for (size_t l = 0; l < s->t; l++)
        if (s->done[l])
            ids[nd++] = l;
    size_t cols = nd * k + q; /* the done buckets' rows, then the points */
    for (size_t c0 = 0; c0 < w; c0 += REF_TILE) {
        size_t cw = DPS_MIN((size_t)REF_TILE, w - c0);
        double *vj = s->stack + cols * cw; /* after the stack's rows: the pending buckets' */
        for (size_t li = 0; li < nd; li++)
            for (size_t b = 0; b < k; b++)
                for (size_t c = 0; c < cw; c++)
                    s->stack[(li * k + b) * cw + c] = s->V[(ids[li] * k + b) * w + c0 + c];
        for (size_t i = 0; i < q; i++)
            for (size_t c = 0; c < cw; c++)
                s->stack[(nd * k + i) * cw + c] = s->P[i * w + c0 + c];
        for (size_t pi = 0; pi < np; pi++)
            for (size_t a = 0; a < k; a++)
                for (size_t c = 0; c < cw; c++)
                    vj[(pi * k + a) * cw + c] = s->V[(s->pending[pi] * k + a) * w + c0 + c];
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(np * k), (int)cols, (int)cw, 1.0, vj, (int)cw,
                    s->stack, (int)cw, 0.0, s->blk, (int)cols);
        for (size_t pi = 0; pi < np; pi++) {
            size_t j = s->pending[pi];
            for (size_t a = 0; a < k; a++) {
                const double *row = s->blk + (pi * k + a) * cols;
                for (size_t li = 0; li < nd; li++) {
                    size_t l = ids[li];
                    if (pend[l] && l < j)
                        continue; /* a pending pair: taken from bucket l's rows */
                    for (size_t b = l == j ? a : 0; b < k; b++) { /* the diagonal block: its upper half */
                        size_t r = j * k + a, c = l * k + b;
                        s->acc[s_packed(nmax, DPS_MIN(r, c), DPS_MAX(r, c))] += row[li * k + b];
                    }
                }
                for (size_t i = 0; i < q; i++)
                    s->acc[tri + (j * k + a) * q + i] += row[nd * k + i];
            }
        }
    }
    s->npending = 0;
}

/* Local, at the close: acc's products of the nb completed buckets only, in
   bucket order, then ||P slice||_F^2; returns the doubles to reduce.  In
   place: every entry moves to a lower index (the packed position grows with
   n, r and c), so in order nothing is overwritten before it is read. */
static size_t s_compact(ref_sharded *s, size_t nb)
{
    size_t k = s->k, q = s->q, nmax = s->t * k, n = nb * k, trimax = nmax * (nmax + 1) / 2, tri = n * (n + 1) / 2;
    size_t *map = s->ids, j = 0; /* bucket id -> its place among the completed */
    for (size_t l = 0; l < s->t; l++)
        map[l] = s->done[l] ? j++ : (size_t)-1;
    if (nb < s->t) {
        for (size_t r = 0; r < nmax; r++) {
            if (map[r / k] == (size_t)-1)
                continue;
            for (size_t c = r; c < nmax; c++)
                if (map[c / k] != (size_t)-1)
                    s->acc[s_packed(n, map[r / k] * k + r % k, map[c / k] * k + c % k)] = s->acc[s_packed(nmax, r, c)];
        }
        for (size_t l = 0; l < s->t; l++)
            if (map[l] != (size_t)-1)
                memmove(s->acc + tri + map[l] * k * q, s->acc + trimax + l * k * q, k * q * sizeof *s->acc);
    }
    s->acc[tri + n * q] = s->f2;
    return tri + n * q + 1;
}

/* Collective: bucket oi is full: its rows normalised (row_unit's rule over
   the ranks' slices), its basis slice into V. */
static int s_bucket(ref_sharded *s, size_t oi)
{
    size_t m = s->m, w = s->w, id = s->open_id[oi];
    float *X = s->rows + oi * m * w;
    double *ss = s->ss;
    for (size_t i = 0; i < m; i++)
        ss[i] = row_sum_squares(X + i * w, w);
    s_allsum(s, ss, m);
    for (size_t i = 0; i < m; i++) {
        row_kind kind = row_unit_part(X + i * w, w, ss[i], s->d, ROW_NORMALISE, X + i * w);
        s->rows_nan += kind == ROW_NAN;
        s->rows_inf += kind == ROW_INF;
        s->rows_zero += kind == ROW_ZERO;
    }
    int rc = s_topk(s, X, m, s->V + id * s->k * w, id);
    if (rc == DPS_ENUMERIC) { /* a numerical failure: the bucket is a public random outlier (buckets.c's rule) */
        s_complete(s, s->V + id * s->k * w, 0, id);
        rc = DPS_OK;
    }
    if (!rc) {
        s->done[id] = 1;
        s->completed++;
        s->pending[s->npending++] = id;
        if (s->npending == REF_BATCH)
            s_accumulate(s);
    }
    return rc;
}

int ref_sharded_add(ref_sharded *s, const float *row_slice)
{
    if (!s->nfree)
        return DPS_ESTATE; /* t m rows already: the caller closes first */
    size_t pick = (size_t)dps_rng_below(s->part, s->nfree);
    size_t oi = s->slots[pick];
    s->slots[pick] = s->slots[--s->nfree];
    memcpy(s->rows + (oi * s->m + s->filled[oi]) * s->w, row_slice, s->w * sizeof *row_slice);
    if (++s->filled[oi] < s->m)
        return DPS_OK;
    int rc = s_bucket(s, oi);
    if (s->next_bucket < s->t)
        s_open(s, oi);
    return rc;
}

size_t ref_sharded_seal(ref_sharded *s)
{
    for (size_t i = 0; i < s->n_open; i++)
        if (s->filled[i] < s->m)
            s->rows_discarded += s->filled[i];
    s->nfree = 0;
    s->n_open = 0;
    return s->completed;
}

/* ------------------------------------------------------------ release */

/* Rank 0: WFC on the reduced Gram and projections (msg: G's upper triangle
   packed by rows, n x q A, ||P||_F^2); into hdr (failed, s_mu, radius, W^)
   and Bm (n x q, stacked (w_j/W) A_j).  rc. */
static int s_weigh(ref_sharded *s, size_t nb, const double *msg, double *hdr, double *Bm)
{
    size_t k = s->k, q = s->q, n = nb * k, tri = n * (n + 1) / 2;
    const double *G0 = msg, *A0 = msg + tri;
    double xi_max = 2.0 * sqrt(msg[tri + n * q]);
    double *G = malloc(n * n * sizeof *G), *D2 = malloc(nb * nb * sizeof *D2), *wts = malloc(nb * sizeof *wts);
    float *A = malloc(n * q * sizeof *A);
    dps_rng *rng = s->noise;
    int rc = G && D2 && wts && A ? DPS_OK : DPS_ENOMEM;
    if (!rc && s->seeded)
        rc = dps_rng_new_labelled(&rng, s->seed, "wfc-sharded", s->epoch);
    if (!rc) {
        for (size_t i = 0; i < n; i++) /* the packed triangle: both, full */
            for (size_t j = i; j < n; j++)
                G[i * n + j] = G[j * n + i] = G0[s_packed(n, i, j)];
        for (size_t i = 0; i < n * q; i++)
            A[i] = (float)A0[i]; /* item j's A_j (reference_sharded.h, (2)) */
        agg_input in = {NULL, A, nb, k, s->d, q, xi_max};
        rc = agg_distances_reference(&in, G, D2, NULL);
    }
    wfc_result res = {0};
    if (!rc) {
        wfc_params p = epoch_agg_wfc_params(s->cfg, xi_max);
        rc = wfc_run(D2, nb, &p, rng, wts, &res);
    }
    if (!rc) {
        hdr[0] = res.failed, hdr[1] = res.s_mu, hdr[2] = res.radius, hdr[3] = res.W_hat;
        for (size_t b = 0; b < nb; b++)
            for (size_t i = 0; i < k * q; i++)
                Bm[b * k * q + i] = !res.failed && res.W > 0 ? (wts[b] / res.W) * (double)A[b * k * q + i] : 0.0;
    }
    if (s->seeded && rng)
        dps_rng_destroy(&rng);
    free(G);
    free(D2);
    free(wts);
    free(A);
    return rc;
}

/* This rank's slice of the noisy mean: Z = Bm^T V + N(0, s_mu^2) (q x w,
   float), a tile of columns at a time (no q x w doubles).  Seeded, each
   tile's draws are those of its coordinates in the named streams (a block
   straddling two tiles is drawn for each: the same numbers). */
static int s_mean(ref_sharded *s, size_t nb, const double *Bm, double s_mu, float *Z, double *buf)
{
    size_t n = nb * s->k, q = s->q, w = s->w;
    double *tile = buf + n * REF_TILE; /* buf: n x REF_TILE for the conversion, then q x REF_TILE */
    int rc = DPS_OK;
    for (size_t c0 = 0; c0 < w && !rc; c0 += REF_TILE) {
        size_t c1 = DPS_MIN(w, c0 + REF_TILE), cw = c1 - c0;
        la_combine_rows(Bm, n, q, s->V, w, c0, c1, tile, cw, buf);
        for (size_t i = 0; i < q && !rc; i++) {
            if (s->seeded)
                rc = power_sharded_named_add(s->d, s->c0 + c0, s->c0 + c1, s->seed, "reference-mean-sharded",
                                             s_index(s->epoch, i), s_mu, s->block, tile + i * cw);
            else
                dps_rng_gaussian_add(s->noise, s_mu, tile + i * cw, cw);
            for (size_t c = 0; c < cw; c++)
                Z[i * w + c0 + c] = (float)tile[i * cw + c];
        }
    }
    return rc;
}

int ref_sharded_release(ref_sharded *s, float *basis_slice, ref_sharded_outcome *out)
{
    memset(out, 0, sizeof *out);
    size_t k = s->k, q = s->q, w = s->w;
    size_t nb = s->completed, n = nb * k;
    out->buckets = nb;
    double *Bm = s->B, *buf = s->stack; /* 4 + n x q; (t k + q) x REF_TILE */
    float *Z = s->Z;
    int rc = nb >= 2 ? DPS_OK : DPS_EINVAL;
    rc = s_agree(s, rc);
    if (!rc) {
        s_accumulate(s); /* the last group */
        s_reduce(s, s->acc, s_compact(s, nb));
        epoch_pack(s->V, k * w * sizeof(float), s->done, s->t); /* the bases in the same order */
        if (s->rank == 0)
            rc = s_weigh(s, nb, s->acc, Bm, Bm + 4);
        rc = s_agree(s, rc);
    }
    if (!rc) {
        s_from_rank0(s, Bm, 4 + n * q);
        out->failed = Bm[0] != 0;
        out->radius = Bm[2];
        out->w_hat = Bm[3];
        out->s_mu = Bm[1];
        if (!out->failed) {
            out->noise_level = noise_level_rect(Bm[1], q, s->d);
            rc = s_agree(s, s_mean(s, nb, Bm + 4, Bm[1], Z, buf));
            if (!rc)
                rc = s_topk(s, Z, q, basis_slice, s->t); /* item t: the release's completions */
        }
    }
    return rc;
}
