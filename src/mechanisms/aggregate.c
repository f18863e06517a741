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

/* ---------------------------------------------------- the reference items */
size_t agg_refs_bytes(size_t t, size_t k, size_t q, size_t d)
{
    return t * k * q * sizeof(float) + q * d * sizeof(float);
}

int agg_refs_init(agg_refs *r, uint64_t public_seed, size_t t, size_t k, size_t q, size_t d, dps_pool *pool)
{
    *r = (agg_refs){.public_seed = public_seed, .t = t, .k = k, .q = q, .d = d, .pool = pool};
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->drawn, NULL);
    r->A = dps_aligned_alloc(t * k * q, sizeof(float)); /* A_j is written before read */
    r->P = dps_aligned_calloc(q * d, sizeof(float));
    r->f2 = calloc(q, sizeof *r->f2);
    if (!r->A || !r->P || !r->f2) {
        agg_refs_free(r);
        return DPS_ENOMEM;
    }
    return DPS_OK;
}

void agg_refs_free(agg_refs *r)
{
    if (r->f2) { /* initialised: no drawing job may still write P */
        agg_refs_wait(r);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->drawn);
    }
    free(r->A);
    free(r->P);
    free(r->f2);
    r->A = r->P = NULL;
    r->f2 = NULL;
}

/* Point i, and its squared norm. */
static void s_draw_point(agg_refs *r, uint64_t epoch, size_t i)
{
    float *p = r->P + i * r->d;
    agg_reference_point(r->public_seed, epoch, i, r->d, p);
    double f2 = 0;
    for (size_t c = 0; c < r->d; c++)
        f2 += (double)p[c] * p[c];
    r->f2[i] = f2;
}

/* xi_max from the points' squared norms, in point order. */
static void s_xi_max(agg_refs *r)
{
    double f2 = 0;
    for (size_t i = 0; i < r->q; i++)
        f2 += r->f2[i];
    r->xi_max = 2.0 * sqrt(f2); /* ||y^j - y^l|| <= 2 ||P||_F for any bases */
}

/* One drawing job of agg_refs_begin_async: point i (one labelled stream per
   point, so the values do not depend on which worker draws which). */
typedef struct {
    agg_refs *r;
    size_t i;
} point_job;

static void s_point_done(agg_refs *r)
{
    pthread_mutex_lock(&r->mu);
    if (--r->pending == 0) {
        s_xi_max(r);
        pthread_cond_broadcast(&r->drawn);
    }
    pthread_mutex_unlock(&r->mu);
}

static void s_point_job(void *arg, int worker)
{
    (void)worker;
    point_job *j = arg;
    agg_refs *r = j->r;
    s_draw_point(r, r->epoch, j->i);
    free(j);
    s_point_done(r);
}

void agg_refs_begin_async(agg_refs *r, uint64_t epoch)
{
    agg_refs_wait(r);
    r->epoch = epoch;
    pthread_mutex_lock(&r->mu);
    r->pending = r->q;
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < r->q; i++) {
        point_job *j = malloc(sizeof *j);
        if (j) {
            *j = (point_job){r, i};
            if (pool_submit(r->pool, s_point_job, j) == DPS_OK)
                continue;
            free(j);
        }
        s_draw_point(r, epoch, i); /* no memory for a job: here (public values, the same bits either way) */
        s_point_done(r);
    }
}

void agg_refs_begin(agg_refs *r, uint64_t epoch)
{
    agg_refs_begin_async(r, epoch);
    agg_refs_wait(r);
}

void agg_refs_wait(agg_refs *r)
{
    pthread_mutex_lock(&r->mu);
    while (r->pending)
        pthread_cond_wait(&r->drawn, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void agg_refs_take(agg_refs *r, size_t j, const float *Vj)
{
    agg_refs_wait(r);
    la_project_reference(Vj, r->k, r->d, r->P, r->q, r->A + j * r->k * r->q);
}

/* -------------------------------------------------------------- workspace */
#define GRAM_CHUNK 512 /* columns converted to double per dsyrk (small scratch) */

struct agg_ws {
    size_t t, k, q, d, n, nchunks;
    int workers, reference;
    double *lanes;    /* AGG_LANES partial Grams, n x n each           */
    double *lane_buf; /* AGG_LANES conversion buffers, n x GRAM_CHUNK   */
    double *G;        /* n x n Gram of the stacked bases                 */
    double *D2;       /* t x t squared distances                         */
    double *w;        /* t weights                                       */
    double *B;        /* n x q stacked (w_j/W) A_j (reference)           */
    float *Z;         /* q x d noisy mean (reference)                    */
    double **wbuf, **wout; /* per worker: n x LA_CHUNK, q x LA_CHUNK     */
    dps_rng **chunk_rng;   /* one per LA_CHUNK columns                   */
    la_ws *top;       /* top-k of Z                                      */
};

size_t agg_ws_bytes(size_t t, size_t k, size_t q, size_t d, int workers, int reference)
{
    workers = workers < 1 ? 1 : workers; /* as agg_ws_new */
    size_t n = t * k, b = AGG_LANES * (n * n + n * GRAM_CHUNK) * sizeof(double);
    b += (n * n + t * t + t) * sizeof(double);
    if (reference)
        b += n * q * sizeof(double) + q * d * sizeof(float) +
             (size_t)workers * (n + q) * LA_CHUNK * sizeof(double);
    return b;
}

void agg_ws_free(agg_ws **pws)
{
    if (!pws || !*pws)
        return;
    agg_ws *ws = *pws;
    for (int i = 0; ws->wbuf && i < ws->workers; i++)
        free(ws->wbuf[i]);
    for (int i = 0; ws->wout && i < ws->workers; i++)
        free(ws->wout[i]);
    free(ws->wbuf); free(ws->wout); free(ws->chunk_rng);
    free(ws->lanes); free(ws->lane_buf); free(ws->G); free(ws->D2); free(ws->w); free(ws->B); free(ws->Z);
    la_ws_free(&ws->top);
    free(ws);
    *pws = NULL;
}

agg_ws *agg_ws_new(size_t t, size_t k, size_t q, size_t d, int workers, int reference)
{
    agg_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    size_t n = t * k;
    *ws = (agg_ws){.t = t, .k = k, .q = q, .d = d, .n = n, .nchunks = (d + LA_CHUNK - 1) / LA_CHUNK,
                   .workers = workers < 1 ? 1 : workers, .reference = reference};
    int ok = (ws->lanes = dps_aligned_alloc(AGG_LANES * n * n, sizeof(double))) &&
             (ws->lane_buf = dps_aligned_alloc(AGG_LANES * n * GRAM_CHUNK, sizeof(double))) &&
             (ws->G = dps_aligned_alloc(n * n, sizeof(double))) && (ws->D2 = dps_aligned_alloc(t * t, sizeof(double))) &&
             (ws->w = dps_aligned_alloc(t, sizeof(double)));
    if (ok && reference) {
        ok = (ws->B = dps_aligned_alloc(n * q, sizeof(double))) && (ws->Z = dps_aligned_alloc(q * d, sizeof(float))) &&
             (ws->wbuf = calloc((size_t)ws->workers, sizeof *ws->wbuf)) &&
             (ws->wout = calloc((size_t)ws->workers, sizeof *ws->wout)) &&
             (ws->chunk_rng = calloc(ws->nchunks, sizeof *ws->chunk_rng)) && (ws->top = la_ws_new(q, d, k));
        for (int i = 0; ok && i < ws->workers; i++)
            ok = (ws->wbuf[i] = dps_aligned_alloc(n * LA_CHUNK, sizeof(double))) &&
                 (ws->wout[i] = dps_aligned_alloc(q * LA_CHUNK, sizeof(double)));
    }
    if (!ok)
        agg_ws_free(&ws);
    return ws;
}

/* ------------------------------------------------------------ parallel Gram */
typedef struct {
    const float *A;
    size_t n, d;
    agg_ws *ws;
} gram_job;

static void s_gram_lane(void *arg, size_t lane, int worker)
{
    (void)worker;
    gram_job *j = arg;
    double *G = j->ws->lanes + lane * j->n * j->n;
    double *buf = j->ws->lane_buf + lane * j->n * GRAM_CHUNK;
    memset(G, 0, j->n * j->n * sizeof *G);
    for (size_t c0 = lane * GRAM_CHUNK; c0 < j->d; c0 += AGG_LANES * GRAM_CHUNK)
        la_gram_add(j->A, j->n, j->d, c0, DPS_MIN(j->d, c0 + GRAM_CHUNK), G, buf);
}

int agg_gram(dps_pool *pool, agg_ws *ws, const float *A, size_t n, size_t d, double *G)
{
    if (n > ws->n)
        return DPS_EINVAL;
    gram_job j = {A, n, d, ws};
    size_t lanes = DPS_MIN((size_t)AGG_LANES, (d + GRAM_CHUNK - 1) / GRAM_CHUNK); /* lanes with columns */
    pool_for(pool, lanes, s_gram_lane, &j);
    for (size_t i = 0; i < n; i++)
        for (size_t l = i; l < n; l++) {
            double s = 0;
            for (size_t lane = 0; lane < lanes; lane++)
                s += ws->lanes[lane * n * n + i * n + l];
            G[i * n + l] = G[l * n + i] = s;
        }
    return DPS_OK;
}

/* ------------------------------------------- certified distance bounds
   WFC's argument (wfc.c (a)) needs: a friend by the computed test is a friend
   by the exact distance.  A computed squared distance can fall below the exact
   one by its rounding, and at the small radii of the search's grid (xi_min =
   1e-6, r^2 = 1e-12) the rounding is not small against r^2: items whose exact
   distance is thousands of times r could pass the test, and the noise, scaled
   to r, would not cover them.  So D2 holds U_jl = max(v_jl, 0) + E_jl, an
   upper bound of the exact squared distance of the stored items, with
       E_jl = 1.01 c (X_j + X_l)^2,   c = g + gamma_4 (1 + g),
   gamma_n = n u / (1 - n u), u = 2^-53 (Higham, Lemma 3.1 and (3.5)):
   - Reference: G and H are sums of products of floats, exact in double, in
     some order: |G^_ab - G_ab| <= gamma_G n_a n_b (n_a = ||V row a||,
     gamma_G = gamma_(2d+8): d terms, the chunks' and lanes' additions) and
     |H^_ab - H_ab| <= gamma_H m_a m_b (m_a = ||A row a||, gamma_H =
     gamma_(2q+8)).  A block sum of k^2 products G^ H^ then errs by at most
     g (sum_a n_ja m_ja)(sum_b n_lb m_lb), g = gamma_G (1 + gamma_H) + gamma_H
     + gamma_(k^2+2) (1 + gamma_G)(1 + gamma_H); so X_j = sum_a n_ja m_ja,
     bounded above from the diagonals: n_a^2 <= G^_aa / (1 - gamma_G).
   - Projection: ||G_jl||_F^2 from G^ errs by at most g (sum_a n_ja^2)
     (sum_b n_lb^2), g = gamma_G (2 + gamma_G) + gamma_(k^2+1) (1 + gamma_G)^2;
     X_j = sum_a n_ja^2.
   - v = s_j + s_l - 2 c_jl adds g (X_j + X_l)^2 from its three terms and
     gamma_2 (1 + g)(X_j + X_l)^2 from its own roundings; gamma_4 also covers
     the final addition, and 1.01 the few roundings in computing E itself.
   U_jl is a function of items j and l alone (every entry of G and H is formed
   by the same operations in the same order whatever the other items hold: the
   BLAS blocking and the lanes depend on shapes and positions, not values), so
   replacing one item changes only its own row of U (wfc.c (b)).  Sizes: E is
   about 1e-12 of (X_j + X_l)^2 at d = 1e4, far below the radii the search
   picks on data that is not exactly low-rank. */
static double s_gamma(double n) { return n * 0x1p-53 / (1.0 - n * 0x1p-53); }

/* gamma of an entry of G (len = d) or H (len = q): 2 len + 8 terms. */
static double s_gamma_dot(size_t len) { return s_gamma(2.0 * (double)len + 8); }

/* c of the reference items' bound (above). */
static double s_bound_reference(size_t k, size_t d, size_t q)
{
    double gG = s_gamma_dot(d), gH = s_gamma_dot(q);
    double g = gG * (1 + gH) + gH + s_gamma((double)(k * k) + 2) * (1 + gG) * (1 + gH);
    return g + s_gamma(4) * (1 + g);
}

/* c of the projection items' bound (above). */
static double s_bound_projection(size_t k, size_t d)
{
    double gG = s_gamma_dot(d);
    double g = gG * (2 + gG) + s_gamma((double)(k * k) + 1) * (1 + gG) * (1 + gG);
    return g + s_gamma(4) * (1 + g);
}

/* U_jl from the computed v_jl (above). */
static double s_upper(double c, double v, double Xj, double Xl)
{
    return (v > 0 ? v : 0) + 1.01 * c * (Xj + Xl) * (Xj + Xl);
}

/* Reference distances.  Item j is y_j = A_j^T V_j (q x d), so
   ||y_j - y_l||_F^2 = s_j + s_l - 2 c_jl with c_jl = <A_j, G_jl A_l>_F =
   sum_ab G_jl[a,b] H_jl[a,b], G = V V^T and H = A A^T the n x n Grams of the
   stacked bases and projections (n = t k; H over q columns, in double like
   G): one dsyrk of n x q instead of t^2 / 2 small products k x k x q (a
   quarter of a small epoch's release at d = 100, k = 4).  Each job sums a
   k x k block; H holds its upper triangle (block (j, l), j < l, lies in it;
   a diagonal block is read symmetrically). */
typedef struct {
    size_t t, k, n;
    const double *G, *H;
    double *D2, *self, *X; /* X: t bounds sum_a n_ja m_ja (above) */
    double c, gG, gH;     /* the bound's c; gamma of G's and H's entries */
} dist_job;

static double s_block_dot(const dist_job *d, size_t j, size_t l)
{
    double s = 0;
    for (size_t a = 0; a < d->k; a++)
        for (size_t b = 0; b < d->k; b++) {
            size_t r = j * d->k + a, c = l * d->k + b;
            s += d->G[r * d->n + c] * (r <= c ? d->H[r * d->n + c] : d->H[c * d->n + r]);
        }
    return s;
}

static void s_self_job(void *arg, size_t j, int worker)
{
    (void)worker;
    dist_job *d = arg;
    d->self[j] = s_block_dot(d, j, j);
    double x = 0;
    for (size_t a = 0; a < d->k; a++) {
        size_t r = j * d->k + a;
        x += sqrt(d->G[r * d->n + r] / (1 - d->gG) * (d->H[r * d->n + r] / (1 - d->gH)));
    }
    d->X[j] = x;
}

/* Row j of D2 right of the diagonal, and its mirror (each cell written by one job). */
static void s_dist_row_job(void *arg, size_t j, int worker)
{
    (void)worker;
    dist_job *d = arg;
    size_t t = d->t;
    d->D2[j * t + j] = 0;
    for (size_t l = j + 1; l < t; l++) {
        double v = d->self[j] + d->self[l] - 2 * s_block_dot(d, j, l);
        d->D2[j * t + l] = d->D2[l * t + j] = s_upper(d->c, v, d->X[j], d->X[l]);
    }
}

/* H (n x n, upper triangle) = A A^T over q columns, converted GRAM_CHUNK
   at a time through buf (n x GRAM_CHUNK doubles); then the distances. */
static int s_distances_reference(const agg_input *in, const double *G, double *D2, dps_pool *pool, double *H,
                                 double *buf)
{
    size_t n = in->t * in->k;
    double *self = malloc(2 * in->t * sizeof(double));
    if (!self)
        return DPS_ENOMEM;
    dist_job d = {in->t, in->k, n, G, H, D2, self, self + in->t, s_bound_reference(in->k, in->d, in->q),
                  s_gamma_dot(in->d), s_gamma_dot(in->q)};
    memset(H, 0, n * n * sizeof *H);
    for (size_t c0 = 0; c0 < in->q; c0 += GRAM_CHUNK)
        la_gram_add(in->A, n, in->q, c0, DPS_MIN(in->q, c0 + GRAM_CHUNK), H, buf);
    pool_for(pool, in->t, s_self_job, &d);
    pool_for(pool, in->t, s_dist_row_job, &d);
    free(self);
    return DPS_OK;
}

int agg_distances_reference(const agg_input *in, const double *G, double *D2, dps_pool *pool)
{
    size_t n = in->t * in->k;
    double *H = malloc(n * n * sizeof *H), *buf = malloc(n * GRAM_CHUNK * sizeof *buf);
    int rc = H && buf ? s_distances_reference(in, G, D2, pool, H, buf) : DPS_ENOMEM;
    free(H);
    free(buf);
    return rc;
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

/* X_j = sum_a n_ja^2, bounded from G's diagonal (see the distance bounds). */
static double s_sum_row_norms2(const double *G, size_t n, size_t j, size_t k, double gG)
{
    double x = 0;
    for (size_t a = 0; a < k; a++)
        x += G[(j * k + a) * n + j * k + a] / (1 - gG);
    return x;
}

int agg_distances_projection(const agg_input *in, const double *G, double *D2)
{
    size_t t = in->t, k = in->k, n = t * k;
    double c = s_bound_projection(k, in->d), gG = s_gamma_dot(in->d);
    double *self = malloc(2 * t * sizeof *self), *X = self + t; /* per item once, not per pair */
    if (!self)
        return DPS_ENOMEM;
    for (size_t j = 0; j < t; j++) {
        self[j] = s_block_fro2(G, n, j, j, k);
        X[j] = s_sum_row_norms2(G, n, j, k, gG);
    }
    for (size_t j = 0; j < t; j++) {
        D2[j * t + j] = 0;
        for (size_t l = j + 1; l < t; l++) {
            double v = self[j] + self[l] - 2 * s_block_fro2(G, n, j, l, k);
            D2[j * t + l] = D2[l * t + j] = s_upper(c, v, X[j], X[l]);
        }
    }
    free(self);
    return DPS_OK;
}

/* Distances, then the WFC weights (or FAIL) into ws->w. */
static int s_weigh(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_pool *pool, int reference,
                   agg_ws *ws, wfc_result *res)
{
    if (in->t > ws->t || in->k != ws->k)
        return DPS_EINVAL;
    int rc = agg_gram(pool, ws, in->V, in->t * in->k, in->d, ws->G);
    if (rc)
        return rc;
    if (reference)
        rc = s_distances_reference(in, ws->G, ws->D2, pool, ws->lanes, ws->lane_buf); /* lanes: free now */
    else
        rc = agg_distances_projection(in, ws->G, ws->D2);
    if (rc)
        return rc;
    wfc_params pp = *p;
    pp.xi_max = in->xi_max;
    return wfc_run(ws->D2, in->t, &pp, noise, ws->w, res);
}

/* ----------------------------------------------------- reference aggregator */
typedef struct {
    const agg_input *in;
    agg_ws *ws;
    double s_mu;
} mean_job;

static void s_mean_chunk(void *arg, size_t chunk, int worker)
{
    mean_job *j = arg;
    const agg_input *in = j->in;
    agg_ws *ws = j->ws;
    size_t c0 = chunk * LA_CHUNK, c1 = DPS_MIN(in->d, c0 + LA_CHUNK), cw = c1 - c0;
    double *out = ws->wout[worker];
    la_combine_rows(ws->B, in->t * in->k, in->q, in->V, in->d, c0, c1, out, cw, ws->wbuf[worker]);
    dps_rng *r = ws->chunk_rng[chunk];
    for (size_t i = 0; i < in->q; i++) {
        dps_rng_gaussian_add(r, j->s_mu, out + i * cw, cw);
        for (size_t c = 0; c < cw; c++)
            ws->Z[i * in->d + c0 + c] = (float)out[i * cw + c];
    }
}

int agg_reference(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_rng *pub, dps_pool *pool,
                  agg_ws *ws, float *basis, wfc_result *res)
{
    size_t t = in->t, k = in->k, q = in->q, d = in->d;
    if (!ws->reference || q != ws->q || d != ws->d || pool_size(pool) > ws->workers)
        return DPS_EINVAL;
    int rc = s_weigh(in, p, noise, pool, 1, ws, res);
    if (rc || res->failed)
        return rc;
    /* One child generator per chunk, forked in chunk order: the noise does not
       depend on which worker runs which chunk. */
    size_t made = 0;
    for (; !rc && made < ws->nchunks; made++)
        rc = dps_rng_fork(noise, &ws->chunk_rng[made]);
    if (!rc) {
        double W = res->W;
        for (size_t b = 0; b < t; b++)
            for (size_t i = 0; i < k * q; i++)
                ws->B[b * k * q + i] = W > 0 ? (ws->w[b] / W) * (double)in->A[b * k * q + i] : 0.0;
        mean_job j = {in, ws, res->s_mu};
        pool_for(pool, ws->nchunks, s_mean_chunk, &j);
        size_t rank = 0;
        rc = la_topk_rows(ws->top, ws->Z, q, d, k, basis, NULL, &rank, NULL);
        if (!rc && rank < k)
            la_complete_basis(basis, rank, k, d, pub);
    }
    for (size_t c = 0; c < made; c++)
        dps_rng_destroy(&ws->chunk_rng[c]);
    return rc;
}

/* ---------------------------------------------------- projection aggregator */
int agg_projection(const agg_input *in, const wfc_params *p, dps_rng *noise, dps_pool *pool, agg_ws *ws,
                   float *basis, wfc_result *res)
{
    size_t t = in->t, k = in->k, d = in->d, n = t * k;
    if (d > DPS_PROJECTION_MAX_D)
        return DPS_ELIMIT;
    int rc = s_weigh(in, p, noise, pool, 0, ws, res);
    if (rc || res->failed)
        return rc;
    const double *w = ws->w;
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
    free(Bs); free(M); free(S);
    return rc;
}
