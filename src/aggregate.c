/* aggregate.c - the two aggregators of DESIGN 3.3.

   Reference points (SS_Agg, Tsfadia sec. 4.1; Singhal-Steinke Alg. 2): public
   P = [p_1..p_q] ~ N(0, I_d) (q x d here), item j is y^j = Pi_j P^T, a q x d
   matrix with rows Pi_j p_i = A_j^T V_j, A_j = V_j P^T (k x q).  Distances come
   from the Gram G = V V^T of the stacked bases (never from the q x d items):
       <y^j, y^l> = <A_j, G_jl A_l>,   ||y^j - y^l||^2 = a_jj + a_ll - 2 a_jl.
   The items are defined by the stored float V_j and A_j; the identity is
   evaluated in double with G_jj (not I_k, which the rounded V_j only
   approximate), so the distances WFC tests are exactly those of the items it
   averages; in float the cancellation in a_jj + a_ll - 2 a_jl would be of the
   size of the distances themselves.
   The mean z = sum_j w_j y^j / W = B^T V with B = stacked (w_j/W) A_j, plus
   N(0, s_mu^2) on each of its q*d entries (that is WFC's Gaussian release in
   R^{qd}); the snapshot is the top-k right singular subspace of that noisy
   q x d matrix (post-processing).  Memory: t*k*d floats of bases, q*d floats
   of P, q*d floats of z.

   Projection (Naive_Agg): items vec(Pi_j) in R^{d^2},
       ||Pi_j - Pi_l||_F^2 = ||G_jj||_F^2 + ||G_ll||_F^2 - 2 ||G_jl||_F^2;
   the mean sum_j (w_j/W) V_j^T V_j gets N(0, s_mu^2) on all d^2 entries, is
   symmetrised and its top-k eigenvectors are the snapshot (post-processing).
   d x d: refused above DPS_PROJECTION_MAX_D. */
#include "aggregate.h"
#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

void agg_reference_point(uint64_t public_seed, uint64_t epoch, size_t i, size_t d, float *out)
{
    dps_rng *r = NULL;
    if (dps_rng_new_labelled(&r, public_seed, "reference-points", (epoch << 24) | (uint64_t)i) != DPS_OK) {
        memset(out, 0, d * sizeof *out); /* only if libsodium cannot start */
        return;
    }
    dps_rng_gaussian_fill_f(r, 1.0, out, d);
    dps_rng_destroy(&r);
}

int dps_reference_points(uint64_t public_seed, uint64_t epoch, size_t q, size_t d, float *P)
{
    if (!P || q == 0 || d == 0 || q >= ((size_t)1 << 24))
        return DPS_EINVAL;
    for (size_t i = 0; i < q; i++)
        agg_reference_point(public_seed, epoch, i, d, P + i * d);
    return DPS_OK;
}

/* ------------------------------------------------------------ parallel Gram */
#define GRAM_CHUNK 512 /* columns converted to double per dsyrk (small scratch) */
typedef struct {
    const float *A;
    size_t n, d;
    double *G;   /* AGG_LANES partial Grams, n x n each */
    double *buf; /* AGG_LANES conversion buffers, n x GRAM_CHUNK each */
} gram_job;

static void s_gram_lane(void *arg, size_t lane, int worker)
{
    (void)worker;
    gram_job *j = arg;
    double *G = j->G + lane * j->n * j->n;
    double *buf = j->buf + lane * j->n * GRAM_CHUNK;
    for (size_t c0 = lane * GRAM_CHUNK; c0 < j->d; c0 += AGG_LANES * GRAM_CHUNK)
        la_gram_add(j->A, j->n, j->d, c0, DPS_MIN(j->d, c0 + GRAM_CHUNK), G, buf);
}

int agg_gram(dps_pool *pool, const float *A, size_t n, size_t d, double *G)
{
    gram_job j = {A, n, d, NULL, NULL};
    j.G = dps_aligned_calloc(AGG_LANES * n * n, sizeof(double));
    j.buf = dps_aligned_calloc(AGG_LANES * n * GRAM_CHUNK, sizeof(double));
    if (!j.G || !j.buf) {
        free(j.G);
        free(j.buf);
        return DPS_ENOMEM;
    }
    pool_for(pool, AGG_LANES, s_gram_lane, &j);
    for (size_t i = 0; i < n; i++)
        for (size_t l = i; l < n; l++) {
            double s = 0;
            for (size_t lane = 0; lane < AGG_LANES; lane++)
                s += j.G[lane * n * n + i * n + l];
            G[i * n + l] = G[l * n + i] = s;
        }
    free(j.G);
    free(j.buf);
    return DPS_OK;
}

/* <A_j, G_jl A_l> for k x q blocks, G_jl the (j, l) k x k block of G (ld n). */
static double s_bilinear(const double *G, size_t n, size_t j, size_t l, const float *Aj, const float *Al,
                         size_t k, size_t q)
{
    double s = 0;
    for (size_t a = 0; a < k; a++) {
        const double *grow = G + (j * k + a) * n + l * k;
        for (size_t c = 0; c < q; c++) {
            double v = 0;
            for (size_t b = 0; b < k; b++)
                v += grow[b] * (double)Al[b * q + c];
            s += (double)Aj[a * q + c] * v;
        }
    }
    return s;
}

void agg_distances_reference(const agg_input *in, const double *G, double *D2)
{
    size_t t = in->t, k = in->k, q = in->q, n = t * k;
    double *self = malloc(t * sizeof *self);
    for (size_t j = 0; j < t; j++)
        self[j] = s_bilinear(G, n, j, j, in->A + j * k * q, in->A + j * k * q, k, q);
    for (size_t j = 0; j < t; j++) {
        D2[j * t + j] = 0;
        for (size_t l = j + 1; l < t; l++) {
            double cross = s_bilinear(G, n, j, l, in->A + j * k * q, in->A + l * k * q, k, q);
            double v = self[j] + self[l] - 2 * cross;
            D2[j * t + l] = D2[l * t + j] = v > 0 ? v : 0;
        }
    }
    free(self);
}

static double s_block_fro2(const double *G, size_t n, size_t j, size_t l, size_t k)
{
    double s = 0;
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double v = G[(j * k + a) * n + l * k + b];
            s += v * v;
        }
    return s;
}

void agg_distances_projection(const agg_input *in, const double *G, double *D2)
{
    size_t t = in->t, k = in->k, n = t * k;
    for (size_t j = 0; j < t; j++) {
        D2[j * t + j] = 0;
        for (size_t l = j + 1; l < t; l++) {
            double v = s_block_fro2(G, n, j, j, k) + s_block_fro2(G, n, l, l, k) - 2 * s_block_fro2(G, n, j, l, k);
            D2[j * t + l] = D2[l * t + j] = v > 0 ? v : 0;
        }
    }
}

/* Distances, then the WFC weights (or FAIL). */
static int s_weigh(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_pool *pool, int reference,
                   double *w, wfc_result *res)
{
    size_t n = in->t * in->k;
    double *G = dps_aligned_calloc(n * n, sizeof(double));
    double *D2 = dps_aligned_calloc(in->t * in->t, sizeof(double));
    int rc = (G && D2) ? DPS_OK : DPS_ENOMEM;
    if (!rc)
        rc = agg_gram(pool, in->V, n, in->d, G);
    if (!rc) {
        if (reference)
            agg_distances_reference(in, G, D2);
        else
            agg_distances_projection(in, G, D2);
        wfc_params pp = *p;
        pp.xi_max = in->xi_max;
        rc = wfc_run(D2, in->t, &pp, noise, w, res);
    }
    free(G);
    free(D2);
    return rc;
}

/* ----------------------------------------------------- reference aggregator */
typedef struct {
    const agg_input *in;
    const double *B; /* t*k x q: stacked (w_j/W) A_j */
    double s_mu;
    dps_rng **chunk_rng;
    float *Z;        /* q x d noisy mean */
    double **buf, **out; /* per worker */
} mean_job;

static void s_mean_chunk(void *arg, size_t chunk, int worker)
{
    mean_job *j = arg;
    const agg_input *in = j->in;
    size_t c0 = chunk * LA_CHUNK, c1 = DPS_MIN(in->d, c0 + LA_CHUNK), cw = c1 - c0;
    double *out = j->out[worker];
    la_combine_rows(j->B, in->t * in->k, in->q, in->V, in->d, c0, c1, out, cw, j->buf[worker]);
    dps_rng *r = j->chunk_rng[chunk];
    for (size_t i = 0; i < in->q; i++)
        for (size_t c = 0; c < cw; c++)
            j->Z[i * in->d + c0 + c] = (float)(out[i * cw + c] + dps_rng_gaussian(r, j->s_mu));
}

int agg_reference(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_rng *pub, dps_pool *pool,
                  float *basis, wfc_result *res)
{
    size_t t = in->t, k = in->k, q = in->q, d = in->d, n = t * k;
    double *w = malloc(t * sizeof *w);
    if (!w)
        return DPS_ENOMEM;
    int rc = s_weigh(in, p, noise, pool, 1, w, res);
    if (rc || res->failed) {
        free(w);
        return rc;
    }
    size_t nchunks = (d + LA_CHUNK - 1) / LA_CHUNK;
    int nw = pool_size(pool);
    mean_job j = {in, NULL, res->s_mu, NULL, NULL, NULL, NULL};
    double *B = dps_aligned_calloc(n * q, sizeof(double));
    j.chunk_rng = calloc(nchunks, sizeof *j.chunk_rng);
    j.Z = dps_aligned_calloc(q * d, sizeof(float));
    j.buf = calloc((size_t)nw, sizeof *j.buf);
    j.out = calloc((size_t)nw, sizeof *j.out);
    la_ws *ws = la_ws_new(q, k);
    rc = (B && j.chunk_rng && j.Z && j.buf && j.out && ws) ? DPS_OK : DPS_ENOMEM;
    for (int i = 0; !rc && i < nw; i++) {
        j.buf[i] = dps_aligned_calloc(n * LA_CHUNK, sizeof(double));
        j.out[i] = dps_aligned_calloc(q * LA_CHUNK, sizeof(double));
        if (!j.buf[i] || !j.out[i])
            rc = DPS_ENOMEM;
    }
    /* One child generator per chunk, forked in chunk order: the noise does not
       depend on which worker runs which chunk. */
    for (size_t c = 0; !rc && c < nchunks; c++)
        rc = dps_rng_fork(noise, &j.chunk_rng[c]);
    if (!rc) {
        double W = res->W;
        for (size_t b = 0; b < t; b++)
            for (size_t i = 0; i < k * q; i++)
                B[b * k * q + i] = W > 0 ? (w[b] / W) * (double)in->A[b * k * q + i] : 0.0;
        j.B = B;
        pool_for(pool, nchunks, s_mean_chunk, &j);
        size_t rank = 0;
        rc = la_topk_rows(ws, j.Z, q, d, k, basis, NULL, &rank, NULL);
        if (!rc && rank < k)
            la_complete_basis(basis, rank, k, d, pub);
    }
    for (size_t c = 0; j.chunk_rng && c < nchunks; c++)
        dps_rng_destroy(&j.chunk_rng[c]);
    for (int i = 0; i < nw; i++) {
        if (j.buf)
            free(j.buf[i]);
        if (j.out)
            free(j.out[i]);
    }
    la_ws_free(&ws);
    free(j.chunk_rng); free(j.Z); free(j.buf); free(j.out); free(B); free(w);
    return rc;
}

/* ---------------------------------------------------- projection aggregator */
int agg_projection(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_pool *pool, float *basis,
                   wfc_result *res)
{
    size_t t = in->t, k = in->k, d = in->d, n = t * k;
    if (d > DPS_PROJECTION_MAX_D)
        return DPS_ELIMIT;
    double *w = malloc(t * sizeof *w);
    if (!w)
        return DPS_ENOMEM;
    int rc = s_weigh(in, p, noise, pool, 0, w, res);
    if (rc || res->failed) {
        free(w);
        return rc;
    }
    double *Bs = dps_aligned_calloc(n * d, sizeof(double));
    double *M = dps_aligned_calloc(d * d, sizeof(double));
    float *S = dps_aligned_calloc(d * d, sizeof(float));
    rc = (Bs && M && S) ? DPS_OK : DPS_ENOMEM;
    if (!rc) {
        for (size_t b = 0; b < t; b++) {
            double sc = res->W > 0 ? sqrt(w[b] / res->W) : 0.0;
            for (size_t i = 0; i < k * d; i++)
                Bs[b * k * d + i] = sc * in->V[b * k * d + i];
        }
        la_syrk_rows_double(Bs, n, d, M); /* sum_j (w_j/W) V_j^T V_j, upper */
        /* N(0, s_mu^2) on all d^2 entries, then symmetrise (S + S^T)/2. */
        for (size_t i = 0; i < d; i++) {
            S[i * d + i] = (float)(M[i * d + i] + dps_rng_gaussian(noise, res->s_mu));
            for (size_t l = i + 1; l < d; l++) {
                double e = 0.5 * (dps_rng_gaussian(noise, res->s_mu) + dps_rng_gaussian(noise, res->s_mu));
                S[i * d + l] = S[l * d + i] = (float)(M[i * d + l] + e);
            }
        }
        free(M);
        M = NULL;
        rc = la_sym_topk(S, d, k, noise, basis, NULL, NULL);
    }
    free(Bs); free(M); free(S); free(w);
    return rc;
}
