/* moment_groups.c - the second-moment mechanisms group by group (see
   moment_groups.h): each parameter group releases its top-k_g basis either
   densely (epoch_gaussian.c: C_g + E_g), by the noisy power iteration
   (epoch_power.c: one step per disjoint block of the epoch's rows), or by
   its Kronecker factors (epoch_kron.c, kron_moment.h).
   Owned by the mechanisms module: the gaussian, power and kron table
   entries are this file's hooks.

   THE RELEASE.  The row is x = (x_1, ..., x_G), group g of d_g public
   columns (one group, the whole row, without groups).  Dense groups add
   every row of the epoch to C_g = sum x_g x_g^T and release the upper
   triangle of C_g plus iid N(0, s^2).  Power groups split the epoch's
   N = t m rows into T = min(power_blocks, N) blocks (by default 3 cold, 1 warm) by index (public) and
   release, per block i, Y_{g,i} = C_{g,i} X_{g,i-1} + G_{g,i}, G iid
   N(0, s^2) (d_g x b_g), X_{g,i} = orth(Y_{g,i}), X_{g,0} public (the last
   released basis of the group completed with public directions).  The basis
   is post-processing of these: group g's top-k_g eigenvectors of its noisy
   C_g, or the top-k_g left singular vectors of its last Y, written into its
   own block of the group-wise k x d basis (zero elsewhere).  Kron groups
   (the kron aggregator's groups with a shape r_g x c_g, r_g c_g = d_g)
   read x_g as the r_g x c_g matrix X_g (row-major) and release the upper
   triangles of C_in,g = sum X_g^T X_g (c_g x c_g) and C_out,g = sum X_g X_g^T
   (r_g x r_g), each plus iid N(0, s^2); their basis is k_g products of the
   two noisy matrices' top eigenvectors (kron_moment.h).

   GUARANTEE.  rho_epoch-zCDP per epoch under replacing one row, charged
   (rho_epoch, 0), with s = 1/sqrt(rho) for every group, dense or power,
   when no group is kron, and s = sqrt(2/rho) for every group (dense, power
   and kron alike) when one is.

   ARGUMENT.  Fix neighbours that differ in row x -> y (norms <= 1), in
   block j, and let D = y y^T - x x^T, D_gg its diagonal block of group g:
   sum_g ||D_gg||_F^2 <= ||D||_F^2 = ||x||^4 + ||y||^4 - 2 (x.y)^2 <= 2.
   - Dense group g: its released vector, the upper triangle of C_g, moves by
     ||u(D_gg)||_2 <= ||D_gg||_F (each off-diagonal pair counted once).
   - Power group g: the blocks i != j have the same law on both inputs given
     the earlier outputs.  In block j, X_{g,j-1} has ||X||_2 <= 1
     (power_iteration.h), so Y_{g,j} moves by ||D_gg X_{g,j-1}||_F
     <= ||D_gg||_F ||X_{g,j-1}||_2 <= ||D_gg||_F, whatever the earlier
     outputs were.
   Each release is a Gaussian mechanism with noise s whose move, given the
   earlier outputs, is bounded by a quantity of this pair alone; the chain
   rule of Renyi divergence (adaptive composition of zCDP, Bun-Steinke 2016,
   Lemma 2.3, applied to this pair) adds them:
   sum_g ||D_gg||_F^2 / (2 s^2) <= 2 / (2 s^2) = 1 / s^2 = rho for
   s = 1/sqrt(rho).  The same chain is a composition of Gaussian mechanisms
   of mu_g = ||D_gg||_F / s given the earlier outputs, so the pair's
   trade-off is at least the Gaussian one of mu = sqrt(sum_g mu_g^2)
   <= sqrt 2 / s = sqrt(2 rho) (Dong-Roth-Su 2022, Thm. 3.2 and Cor. 3.3,
   whose composition holds pair by pair): the release is
   sqrt(2 rho_epoch)-GDP, charged DPS_CHARGE_GAUSSIAN
   (moment_groups.h), and a total of such releases is stated by the exact
   Gaussian profile (src/core/accountant.c).
   The bases are post-processing.
   KRON GROUPS.  For PSD A, B, <A, B>_F = tr(A B) >= 0, so
   ||B - A||_F^2 = ||A||_F^2 + ||B||_F^2 - 2 <A, B>_F <= ||A||_F^2
   + ||B||_F^2; and ||X^T X||_F^2 = sum_i sigma_i(X)^4 <= (sum_i
   sigma_i(X)^2)^2 = ||X||_F^4 = ||x_g||^4.  So, with X, Y group g's r x c
   blocks of x and y, the released C_in,g moves by D_in = Y^T Y - X^T X with
   ||D_in||_F^2 <= ||x_g||^4 + ||y_g||^4, and C_out,g by D_out = Y Y^T - X X^T
   with the same bound: together 2 (||x_g||^4 + ||y_g||^4).  A dense or
   power group's move is at most ||D_gg||_F (above), and ||D_gg||_F^2 =
   ||x_g||^4 + ||y_g||^4 - 2 (x_g.y_g)^2 <= ||x_g||^4 + ||y_g||^4.  The
   squared moves of everything released then add up to at most
       2 sum_g (||x_g||^4 + ||y_g||^4) <= 2 ((sum_g ||x_g||^2)^2
           + (sum_g ||y_g||^2)^2) = 2 (||x||^4 + ||y||^4) <= 4,
   reached (a test checks it) by x, y unit with all their mass in one kron
   group, X = u1 v1^T, Y = u2 v2^T, u1 _|_ u2, v1 _|_ v2: ||D_in||_F^2 =
   ||D_out||_F^2 = 2.  The same chain of Gaussian mechanisms with noise s
   then gives sum of squared moves / (2 s^2) <= 4 / (2 s^2) = rho for
   s = sqrt(2/rho), and mu = sqrt(sum of squared moves) / s <= 2 / s
   = sqrt(2 rho): rho-zCDP and sqrt(2 rho)-GDP, charged DPS_CHARGE_GAUSSIAN
   as without kron groups.  Every group's noise, dense and power too, is
   then sqrt(2/rho): the bound 4 is of the sum over all groups, and a
   dense group holding the whole pair moves by up to sqrt 2, a kron group
   by up to 2; one s for all keeps the argument a single sum.  (Without a
   kron group the sum is at most ||D||_F^2 <= 2, the bound above, and s
   stays 1/sqrt(rho).)  Every entry's
   noise is drawn whatever the data; a power group's noise is drawn at the
   end of each block, before the charge, and nothing of it leaves before the
   release (an epoch not released publishes nothing, and the warm start
   takes only released bases).

   MEMORY.  Dense groups: C_g and a block of rows (second_moment.h), and one
   noisy copy of the widest dense group with its eigenvectors.  Power
   groups: power_bytes(d_g, k_g, b_g).  Kron groups: kron_bytes(r_g, c_g,
   k_g) (both sums, their noisy copies, eigenpairs, a block of rows), and
   the eigensolver's copy, which shares the dense groups' (the widest side
   or dense group, squared).  The last released basis (k d floats) when a
   group is power (its warm start), and a k_g x d_g slice. */
#include "moment_groups.h"

#include "epoch_power.h"
#include "gaussian_cov.h"
#include "internal.h"
#include "linalg.h"
#include "noise_level.h"
#include "power_iteration.h"
#include "second_moment.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct epoch_state {
    const dps_config *cfg;
    dps_pool *pool; /* the estimator's workers (borrowed): the dense groups' sums and eigensolver */
    size_t groups;
    group_kind kind[DPS_MAX_GROUPS];
    second_moment sm[DPS_MAX_GROUPS];   /* dense groups: sum x_g x_g^T        */
    power_iteration pi[DPS_MAX_GROUPS]; /* power groups                       */
    kron_moment km[DPS_MAX_GROUPS];     /* kron groups                        */
    float *Af;          /* dense release: C_g + E_g in float (the eigensolver's) */
    gauss_noise_ws nws; /* ... its draws on the workers (gaussian_cov.h)     */
    double *A;          /* a kron group's side moment, the eigensolver's copy */
    double *w;          /* a dense group's top-k_g eigenvalues               */
    double trace;       /* the dense release's tr(C_g + E_g) (its level)      */
    double *sv;         /* a power group's top-k_g noisy singular values     */
    float *slice;       /* k_g x d_g: a warm start, or a power group's basis  */
    float *prev;        /* k x d: the last released basis (power groups only) */
    int has_prev;
    dps_rng *noise;     /* the stream's, from begin until the release         */
    uint64_t n, blocks; /* N = t m and T = min(power_blocks, N) (public)      */
    uint64_t rows, block, block_end; /* the open epoch's rows, its block, that
                                        block's first row index past it       */
    uint64_t block_first; /* the row count at the last step (the open block's
                             first row)                                       */
    int caller_cut;     /* a block of this epoch was ended by the caller
                           (moment_end_block): its row counts are the
                           caller's, not public, and are not used          */
    int err;            /* a LAPACK error of a step, returned by the release  */
};

static size_t s_dense_max(const dps_config *c) { return c->dense_max_d ? c->dense_max_d : DPS_DENSE_MAX_D; }

group_kind moment_group_kind(const dps_config *c, size_t g)
{
    if (epoch_group_k(c, g) == 0)
        return GROUP_NONE;
    if (c->aggregator == DPS_AGG_KRON && epoch_group_rows(c, g))
        return GROUP_KRON;
    int dense_ok = c->aggregator == DPS_AGG_GAUSSIAN || c->aggregator == DPS_AGG_KRON;
    return dense_ok && epoch_group_d(c, g) <= s_dense_max(c) ? GROUP_DENSE : GROUP_POWER;
}

static int s_any(const dps_config *c, group_kind kind)
{
    for (size_t g = 0; g < epoch_groups(c); g++)
        if (moment_group_kind(c, g) == kind)
            return 1;
    return 0;
}

static int s_any_power(const dps_config *c) { return s_any(c, GROUP_POWER); }

int moment_warm(const dps_config *c) { return s_any_power(c); }

/* ARGUMENT above: squared moves add up to 2 without a kron group, 4 with. */
double moment_noise_sd(const dps_config *c)
{
    return s_any(c, GROUP_KRON) ? sqrt(2.0 / c->rho_epoch) : power_noise_sd(c->rho_epoch);
}

/* A kron group's sides: r_g and c_g = d_g / r_g. */
static void s_shape(const dps_config *c, size_t g, size_t *r, size_t *cols)
{
    *r = epoch_group_rows(c, g);
    *cols = *r ? epoch_group_d(c, g) / *r : 0;
}

/* T: power_blocks, or by default (0) 3 blocks while no epoch has been
   released and 1 after.  Public: whether an epoch was released is.  Cold,
   the first step sees the signal through a random start, about sqrt(b/d)
   of it, and later steps sharpen it; warm, one step on every row is best
   (measured on the logreg gradients: cold 0.12 of the top-10 with T = 1,
   0.46 with T = 3; warm steady state 0.94 with T = 1, 0.88 with T = 2;
   tools/experiments/README.md). */
static size_t s_blocks(const dps_config *c, int warm)
{
    return c->power_blocks ? c->power_blocks : (warm ? 1 : 3);
}

/* b_g = min(k_g + p, d_g): the columns a power group iterates. */
static size_t s_columns(const dps_config *c, size_t g)
{
    size_t b = epoch_group_k(c, g) + c->power_oversample, d = epoch_group_d(c, g);
    return b < d ? b : d;
}

/* The widest dense group (its noisy copy, in float), the widest kron side
   (its eigensolver's copy, in double), the most eigenvalues of a dense
   group or kron side, the largest k_g d_g of any group. */
static void s_largest(const dps_config *c, size_t *d_dense, size_t *d_kron, size_t *k_max, size_t *kd_any)
{
    *d_dense = *d_kron = *k_max = *kd_any = 0;
    for (size_t g = 0; g < epoch_groups(c); g++) {
        size_t dg = epoch_group_d(c, g), kg = epoch_group_k(c, g), r, cols;
        *kd_any = DPS_MAX(*kd_any, kg * dg);
        if (moment_group_kind(c, g) == GROUP_KRON) {
            s_shape(c, g, &r, &cols);
            *d_kron = DPS_MAX(*d_kron, DPS_MAX(r, cols));
            *k_max = DPS_MAX(*k_max, DPS_MIN(kg, DPS_MAX(r, cols)));
        }
        if (moment_group_kind(c, g) != GROUP_DENSE)
            continue;
        *d_dense = DPS_MAX(*d_dense, dg);
        *k_max = DPS_MAX(*k_max, kg);
    }
}

int moment_check(const dps_config *c, const char **why)
{
    if (c->power_blocks > POWER_MAX_BLOCKS) {
        *why = "power_blocks must be in 1..1024 (or 0: 3 blocks until an epoch is released, then 1)";
        return DPS_EINVAL;
    }
    if (c->power_oversample > c->d) {
        *why = "power_oversample must be at most d (k + power_oversample is capped at d)";
        return DPS_EINVAL;
    }
    if (c->dense_max_d > GAUSS_COV_MAX_D) {
        *why = "dense_max_d is above 16384: two d x d matrices of that size do not fit the machines this runs on";
        return DPS_ELIMIT;
    }
    int kron = 0;
    for (size_t g = 0; g < epoch_groups(c); g++) {
        size_t dg = epoch_group_d(c, g), r, cols;
        if (moment_group_kind(c, g) == GROUP_POWER &&
            (dg > (size_t)INT32_MAX || s_columns(c, g) > SIZE_MAX / sizeof(float) / 4 / dg)) {
            *why = "a group (or d) is too large for the power iteration's BLAS calls";
            return DPS_ELIMIT;
        }
        if (moment_group_kind(c, g) != GROUP_KRON)
            continue;
        kron = 1;
        s_shape(c, g, &r, &cols);
        if (r > s_dense_max(c) || cols > s_dense_max(c)) {
            static __thread char msg[200];
            snprintf(msg, sizeof msg, "group %zu's shape %zux%zu has a side above the dense limit %zu (dense_max_d): "
                     "its side moment would not fit", g + 1, r, cols, s_dense_max(c));
            *why = msg;
            return DPS_ELIMIT;
        }
    }
    if (c->aggregator == DPS_AGG_KRON && !kron) {
        *why = "--aggregator kron needs a group with a shape RxC and a rank above 0 (--param-groups 128x784,...; "
               "group_rows in dps_config)";
        return DPS_EINVAL;
    }
    return DPS_OK;
}

size_t moment_memory(const dps_config *c)
{
    size_t d_dense, d_kron, k_max, kd_any, sum = 0;
    s_largest(c, &d_dense, &d_kron, &k_max, &kd_any);
    for (size_t g = 0; g < epoch_groups(c); g++) {
        size_t dg = epoch_group_d(c, g);
        if (moment_group_kind(c, g) == GROUP_DENSE)
            sum += second_moment_bytes(dg);
        else if (moment_group_kind(c, g) == GROUP_POWER)
            sum += power_bytes(dg, epoch_group_k(c, g), s_columns(c, g)) + power_pool_bytes(dg, s_columns(c, g));
        else if (moment_group_kind(c, g) == GROUP_KRON) {
            size_t r, cols;
            s_shape(c, g, &r, &cols);
            sum += kron_bytes(r, cols, epoch_group_k(c, g));
        }
    }
    sum += (d_kron * d_kron + k_max) * sizeof(double) + (d_dense * d_dense + kd_any) * sizeof(float);
    if (d_dense)
        sum += gauss_noise_ws_bytes(d_dense, c->workers);
    if (d_dense || d_kron)
        sum += la_sym_topk_bytes(DPS_MAX(d_dense, d_kron), k_max); /* the eigensolver's Krylov scratch */
    return sum + (s_any_power(c) ? c->k * c->d * sizeof(float) : 0);
}

void moment_destroy(epoch_state **pst)
{
    if (!pst || !*pst)
        return;
    epoch_state *st = *pst;
    for (size_t g = 0; g < st->groups; g++) {
        second_moment_free(&st->sm[g]);
        power_free(&st->pi[g]);
        kron_free(&st->km[g]);
    }
    free(st->Af);
    gauss_noise_ws_free(&st->nws);
    free(st->A);
    free(st->w);
    free(st->slice);
    free(st->sv);
    free(st->prev);
    free(st);
    *pst = NULL;
}

/* Everything the epochs and the release need is allocated here, once. */
int moment_create(epoch_state **out, const dps_config *c, dps_pool *pool)
{
    epoch_state *st = calloc(1, sizeof *st);
    *out = NULL;
    if (!st)
        return DPS_ENOMEM;
    st->cfg = c;
    st->pool = pool;
    st->groups = epoch_groups(c);
    st->n = (uint64_t)c->t * c->m;
    int rc = DPS_OK;
    for (size_t g = 0; g < st->groups && !rc; g++) {
        st->kind[g] = moment_group_kind(c, g);
        if (st->kind[g] == GROUP_DENSE)
            rc = second_moment_init(&st->sm[g], epoch_group_d(c, g), pool);
        else if (st->kind[g] == GROUP_POWER) {
            rc = power_init(&st->pi[g], epoch_group_d(c, g), epoch_group_k(c, g), s_columns(c, g));
            if (!rc)
                rc = power_use_pool(&st->pi[g], pool);
        } else if (st->kind[g] == GROUP_KRON) {
            size_t r, cols;
            s_shape(c, g, &r, &cols);
            rc = kron_init(&st->km[g], r, cols, epoch_group_k(c, g));
        }
    }
    size_t d_dense, d_kron, k_max, kd_any;
    s_largest(c, &d_dense, &d_kron, &k_max, &kd_any);
    int ok = !rc;
    if (ok && d_dense)
        ok = (st->Af = malloc(d_dense * d_dense * sizeof *st->Af)) != NULL &&
             gauss_noise_ws_init(&st->nws, d_dense, pool) == DPS_OK;
    if (ok && d_kron)
        ok = (st->A = malloc(d_kron * d_kron * sizeof *st->A)) != NULL;
    if (ok && (d_dense || d_kron))
        ok = (st->w = malloc(DPS_MAX(k_max, 1) * sizeof *st->w)) != NULL;
    if (ok)
        ok = (st->slice = malloc(kd_any * sizeof *st->slice)) != NULL &&
             (st->sv = malloc(DPS_MAX(c->k, 1) * sizeof *st->sv)) != NULL;
    if (ok && s_any_power(c))
        ok = (st->prev = malloc(c->k * c->d * sizeof *st->prev)) != NULL;
    if (!ok) {
        moment_destroy(&st);
        return rc ? rc : DPS_ENOMEM;
    }
    *out = st;
    return DPS_OK;
}

/* Group g's block of a group-wise k x d basis <-> a k_g x d_g matrix. */
static void s_block_get(const dps_config *c, size_t g, const float *basis, float *slice)
{
    size_t col0, dg, row0, kg;
    dps_snapshot_info in = {.d = c->d, .k = c->k, .groups = c->groups > 1 ? c->groups : 0,
                            .group_d = c->group_d, .group_k = c->group_k};
    dps_snapshot_group(&in, g, &col0, &dg, &row0, &kg);
    for (size_t j = 0; j < kg; j++)
        memcpy(slice + j * dg, basis + (row0 + j) * c->d + col0, dg * sizeof *slice);
}

static void s_block_put(const dps_config *c, size_t g, const float *slice, float *basis)
{
    size_t col0, dg, row0, kg;
    dps_snapshot_info in = {.d = c->d, .k = c->k, .groups = c->groups > 1 ? c->groups : 0,
                            .group_d = c->group_d, .group_k = c->group_k};
    dps_snapshot_group(&in, g, &col0, &dg, &row0, &kg);
    for (size_t j = 0; j < kg; j++)
        memcpy(basis + (row0 + j) * c->d + col0, slice + j * dg, dg * sizeof *slice);
}

/* Each epoch's rows are used once: dense sums start empty; power groups
   start from public facts only (their last released basis and the public
   generator of this epoch). */
int moment_begin(epoch_state *st, uint64_t epoch, dps_rng *noise)
{
    const dps_config *c = st->cfg;
    st->noise = noise;
    st->rows = 0;
    st->block = 0;
    st->block_first = 0;
    st->caller_cut = 0;
    st->blocks = moment_blocks(c, st); /* 0 without a power group: no step is counted */
    st->block_end = st->blocks ? power_block_start(st->n, st->blocks, 1) : UINT64_MAX;
    st->err = DPS_OK;
    dps_rng *pub = NULL;
    int rc = s_any_power(c) ? dps_rng_new_labelled(&pub, c->public_seed, "power", epoch) : DPS_OK;
    for (size_t g = 0; g < st->groups && !rc; g++) {
        if (st->kind[g] == GROUP_DENSE)
            second_moment_reset(&st->sm[g]);
        if (st->kind[g] == GROUP_KRON)
            kron_reset(&st->km[g]);
        if (st->kind[g] != GROUP_POWER)
            continue;
        if (st->has_prev)
            s_block_get(c, g, st->prev, st->slice);
        rc = power_start(&st->pi[g], st->has_prev ? st->slice : NULL, pub);
    }
    dps_rng_destroy(&pub);
    return rc;
}

/* One noisy step of every power group at the end of each block. */
static void s_end_block(epoch_state *st)
{
    double s = moment_noise_sd(st->cfg);
    for (size_t g = 0; g < st->groups; g++) {
        if (st->kind[g] != GROUP_POWER)
            continue;
        int rc = power_step(&st->pi[g], s, st->noise);
        if (rc && !st->err)
            st->err = rc;
    }
    st->block++;
    st->block_first = st->rows;
    st->block_end = st->blocks ? power_block_start(st->n, st->blocks, st->block + 1) : UINT64_MAX;
}

/* A block cut by the caller (dps_estimator_end_block): every power group's
   step on the rows since the last, however many (none: a step on the noise
   alone), so that the number of steps is the caller's number of cuts and
   does not depend on how many rows each block held.  The index cuts go on
   counting rows (a caller that cuts its own blocks runs with T = 1 over an
   epoch longer than its input, so that none falls). */
int moment_end_block(epoch_state *st)
{
    if (!s_any_power(st->cfg))
        return DPS_EINVAL;
    st->caller_cut = 1;
    s_end_block(st);
    return DPS_OK;
}

uint64_t moment_blocks(const dps_config *c, const epoch_state *st)
{
    uint64_t n = (uint64_t)c->t * c->m;
    return s_any_power(c) ? DPS_MIN((uint64_t)s_blocks(c, st && st->has_prev), n) : 0;
}

/* Each group's slice of the row into its own sum or iteration. */
void moment_take_row(epoch_state *st, const float *row)
{
    const dps_config *c = st->cfg;
    for (size_t g = 0, col = 0; g < st->groups; col += epoch_group_d(c, g), g++) {
        if (st->kind[g] == GROUP_DENSE)
            second_moment_add(&st->sm[g], row + col);
        else if (st->kind[g] == GROUP_POWER)
            power_add(&st->pi[g], row + col);
        else if (st->kind[g] == GROUP_KRON)
            kron_add(&st->km[g], row + col);
    }
    if (++st->rows == st->block_end && st->block < st->blocks)
        s_end_block(st);
}

/* A row's slot in the one power group's block, when the row is that group
   (a row cut into several groups has no one slot). */
float *moment_row_slot(epoch_state *st)
{
    return st->groups == 1 && st->kind[0] == GROUP_POWER ? power_slot(&st->pi[0]) : NULL;
}

/* One dense group: top-k_g eigenvectors of C_g + E_g into st->slice (the
   Krylov scratch is allocated here, after the charge: out of memory then is
   published as FAILED, as any error after the charge). */
static int s_dense_basis(epoch_state *st, size_t g, double s)
{
    size_t dg = epoch_group_d(st->cfg, g), kg = epoch_group_k(st->cfg, g);
    second_moment *sm = &st->sm[g];
    second_moment_flush(sm); /* its upper triangle is all the noise step reads */
    st->trace = gauss_cov_noisy_float(sm->C, dg, s, st->noise, &st->nws, st->pool, st->Af);
    if (isnan(st->trace))
        return DPS_EINVAL;
    return la_sym_topk_on(st->Af, dg, kg, NULL, st->slice, st->w, NULL, st->pool); /* a public start */
}

const power_iteration *moment_group_power(const epoch_state *st, size_t g)
{
    return st && g < st->groups && st->kind[g] == GROUP_POWER ? &st->pi[g] : NULL;
}

const kron_moment *moment_group_kron(const epoch_state *st, size_t g)
{
    return st && g < st->groups && st->kind[g] == GROUP_KRON ? &st->km[g] : NULL;
}

/* The epoch's rows over the last power block's: a power group's noisy
   singular values measure one block's C_i X, this factor puts them in the
   epoch's units, those of a dense group's eigenvalues (public: the blocks
   are fixed by index and the row count is).  Blocks cut by the caller: the
   number of steps, which is public where their row counts need not be (a
   random assignment's blocks hold about 1/T of the rows each). */
static double s_epoch_over_last_block(const epoch_state *st)
{
    if (st->block == 0)
        return 1;
    if (st->caller_cut)
        return (double)st->block;
    uint64_t first = power_block_start(st->n, st->blocks, st->block - 1);
    uint64_t end = DPS_MIN(st->rows, power_block_start(st->n, st->blocks, st->block));
    return end > first ? (double)st->rows / (double)(end - first) : 1;
}

/* The margin by which the Wigner edge of an n x n noise passes a top
   eigenvalue w1, at least 1. */
static double s_edge_margin(double w1, size_t n, double s)
{
    return w1 > 0 ? DPS_MAX(1.0, 2 * s * sqrt((double)n) / w1) : 1.0;
}

/* The level of a group none of whose directions cleared its detection
   level: the margin by which the noise's edge passes its top eigenvalue, at
   least 1 (dense: st->w holds group g's eigenvalues); 1 (power).  A kron
   group with a side none of whose used directions cleared: that side's
   margin (the larger of the two when neither did). */
static double s_margin(const epoch_state *st, size_t g, double s, const int *side_seen)
{
    if (st->kind[g] == GROUP_KRON) {
        const kron_moment *km = &st->km[g];
        double m = 1.0;
        if (!side_seen[0])
            m = DPS_MAX(m, s_edge_margin(km->wout[0], km->r, s));
        if (!side_seen[1])
            m = DPS_MAX(m, s_edge_margin(km->win[0], km->c, s));
        return m;
    }
    if (st->kind[g] != GROUP_DENSE)
        return 1.0;
    return s_edge_margin(st->w[0], epoch_group_d(st->cfg, g), s);
}

/* THE OVERALL LEVEL.  What a group-wise basis keeps is a sum over the
   groups: the captured energy of group g's part of a row on its own block,
   against the group-wise reference's sum_g E_g (E_g: the energy of C_g's
   top k_g directions); one minus the squared level predicts the share kept
   (noise_level.c).  So each group enters with the energy it can hold and
   the part of it that is lost:
   - a group with a direction that cleared the detection level (`seen`):
     its own sums (noise_level.c: de-biased eigenvalues, T_g for each of its
     directions that did not clear), lost_g of total_g;
   - a group that spans its whole columns (k_g = d_g): nothing is lost,
     whatever the noise (level 0), but its basis is its identity whatever
     the data, so it says nothing of how far the data-chosen part is from
     noise, and it does not enter: what bounds its energy is only T_g per
     direction, an upper bound, and entering lossless with an upper bound
     would hide the other groups' noise (the tanh CNN's four biases, whole
     at k_g >= 10, read 0.34 over four weight groups at levels 1.0-1.4, a
     basis keeping 0.10 of the held-out energy).  A release of whole groups
     only has level 0;
   - a dense group with none: k_g T_g, all lost but what a random basis
     keeps (noise_level.c: k_g / d_g of it).  By the spiked Wigner threshold
     a direction of C_g above T_g = s sqrt(d_g) would have cleared it,
     whatever the data, so T_g bounds what each holds; a kron group whose
     sides did not both clear enters the same way with its own sums
     (kron_noise_parts: each side's directions bounded by its T and by
     what its trace leaves);
   - a power group with none: no such bound.  Its last step sees C_g X, and
     from a cold X a direction of eigenvalue lambda shows through about
     sqrt(b_g / d_g) of it, so a wide group can hold most of the rows'
     energy and show nothing (the MLP's first layer, 100 352 columns:
     tools/experiments/README.md, "Noise level per group").  What bounds it:
     every row has norm <= 1, so the groups' traces add up to at most the
     epoch's rows, of which the seen groups claim their total_g; these
     groups together hold at most the rest, N - sum_seen total_g, and enter
     with it (at least their own k_g T_g in the epoch's units), lost in the
     share their own sums say (all but k_g / d_g).  N is the configuration's
     t m, used only when the epoch holds exactly that many rows cut by index
     (the collector's epochs): a count that is public whatever the
     neighbouring inputs.  An epoch that is partial, cut by the caller or
     one of a whole input (dps-estimate --method, fit(), dpsubspace.torch,
     whose samples' sizes are private under adding or removing a row) has
     no such count, and there the dead power groups enter with k_g T_g in
     the epoch's units: with T cold steps that is T k_g s sqrt(d_g), which
     measured about right at rho 1 on the MLP's and CNN's 20 000 rows and
     toward noise below it, but it does not grow with the rows
     (tools/experiments/README.md, "Noise level per group").
   The level is sqrt(sum lost / sum weight) over the groups.  N - claimed is
   an upper bound on the dead groups' E_g (their trace, and the seen groups'
   energy beyond their top k_g, are in it), so with a dead power group the
   level errs toward noise: it predicts the kept share over N rather than
   over sum_g E_g.  With no group seen or whole: the largest group level
   (each >= 1).  Every input is released (the noisy eigenvalues and singular
   values) or public (s, the groups' d_g, k_g, b_g, the blocks' cuts, t m):
   post-processing. */
static double s_overall_level(const epoch_state *st, const double *lost, const double *total, const int *seen,
                              const double *level)
{
    const dps_config *c = st->cfg;
    double L = 0, W = 0, claimed = 0, pool = 0, pool_lost = 0, worst = 0;
    int any = 0, dead_power = 0, chosen = 0;
    for (size_t g = 0; g < st->groups; g++) {
        size_t kg = epoch_group_k(c, g);
        if (st->kind[g] == GROUP_NONE || kg >= epoch_group_d(c, g))
            continue; /* no basis, or its identity (level 0, not weighed) */
        chosen = 1;
        worst = DPS_MAX(worst, level[g]);
        if (seen[g]) {
            L += lost[g];
            W += total[g];
            claimed += total[g];
            any = 1;
        } else if (st->kind[g] == GROUP_DENSE || st->kind[g] == GROUP_KRON) {
            L += lost[g];
            W += total[g];
        } else {
            pool += total[g];
            pool_lost += lost[g];
            dead_power = 1;
        }
    }
    if (!chosen)
        return 0;
    if (!any)
        return worst;
    if (dead_power && !st->caller_cut && st->rows == st->n && (double)st->n - claimed > pool) {
        pool_lost *= ((double)st->n - claimed) / pool;
        pool = (double)st->n - claimed;
    }
    return sqrt((L + pool_lost) / (W + pool));
}

/* After the charge: the only errors are LAPACK's (DPS_ENUMERIC), which the
   stream publishes as FAILED (and then the warm start is not updated).
   Each group's level (noise_level.c's energy-weighted sine over its own
   directions, from its released noisy eigenvalues, or its last step's
   singular values in the epoch's units, and the public noise scale) goes
   to out->group_level; the release's, weighing the groups, to
   out->noise_level (s_overall_level). */
int moment_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    (void)in;  /* the noise is the stream's generator given to begin */
    const dps_config *c = st->cfg; /* no FAIL of its own, no radius */
    if (s_any_power(c) && st->rows > st->block_first)
        s_end_block(st); /* the last block (partial, or the rows after the caller's last cut) */
    out->steps = st->block;
    if (st->err)
        return st->err;
    double s = moment_noise_sd(c), lost[DPS_MAX_GROUPS], total[DPS_MAX_GROUPS];
    int seen[DPS_MAX_GROUPS], side_seen[2] = {1, 1};
    memset(basis, 0, c->k * c->d * sizeof *basis);
    for (size_t g = 0; g < st->groups; g++) {
        size_t dg = epoch_group_d(c, g), kg = epoch_group_k(c, g);
        int rc = DPS_OK;
        lost[g] = total[g] = 0;
        seen[g] = 0;
        out->group_level[g] = NAN;
        if (st->kind[g] == GROUP_DENSE) {
            rc = s_dense_basis(st, g, s);
            seen[g] = !rc && gauss_noise_parts(st->w, kg, dg, s, st->trace, &lost[g], &total[g]);
        } else if (st->kind[g] == GROUP_POWER) {
            rc = power_basis(&st->pi[g], st->slice, st->sv);
            double units = s_epoch_over_last_block(st); /* a power group in the epoch's units */
            seen[g] = !rc && power_noise_parts(st->sv, kg, dg, st->pi[g].b, s, &lost[g], &total[g]);
            lost[g] *= units;
            total[g] *= units;
        } else if (st->kind[g] == GROUP_KRON) {
            rc = kron_release(&st->km[g], s, st->noise, st->A, st->slice);
            seen[g] = !rc && kron_noise_parts(&st->km[g], s, &lost[g], &total[g], side_seen);
        } else {
            continue;
        }
        if (rc)
            return rc;
        out->group_level[g] = kg >= dg ? 0 : seen[g] ? sqrt(lost[g] / total[g]) : s_margin(st, g, s, side_seen);
        s_block_put(c, g, st->slice, basis);
    }
    out->groups = st->groups;
    out->noise_level = s_overall_level(st, lost, total, seen, out->group_level);
    if (st->prev) {
        memcpy(st->prev, basis, c->k * c->d * sizeof *st->prev);
        st->has_prev = 1;
    }
    return DPS_OK;
}

const char *moment_group_method(const dps_config *c, size_t g)
{
    static __thread char kron[DPS_MAX_GROUPS][64]; /* the calling thread's, until its next call for g */
    size_t r, cols;
    switch (moment_group_kind(c, g)) {
    case GROUP_KRON:
        s_shape(c, g, &r, &cols);
        snprintf(kron[g], sizeof kron[g], "kron %zux%zu (Kronecker factors, Gaussian noise)", r, cols);
        return kron[g];
    case GROUP_DENSE: return "dense covariance (Gaussian noise, top-k eigenvectors)";
    case GROUP_POWER: return "noisy power iteration (O(k d) memory)";
    default: return "none (rank 0)";
    }
}

/* The noise's spectral norm, the eigenvalue below which a direction is not
   told apart from it: 2 s sqrt(d_g) for a dense group (the Wigner
   semicircle's edge); 2 s sqrt(max(r_g, c_g)) for a kron group (the wider
   side's edge: an eigenvalue of C_in or C_out below it is lost on that
   side, and a product needs both sides); s (sqrt d_g + sqrt b_g) per block
   of N/T rows for a power group, i.e. T times that in the epoch's units (T
   of a cold start). */
double moment_noise_floor(const dps_config *c, size_t g)
{
    double s = moment_noise_sd(c), dg = (double)epoch_group_d(c, g);
    if (moment_group_kind(c, g) == GROUP_DENSE)
        return 2.0 * s * sqrt(dg);
    if (moment_group_kind(c, g) == GROUP_KRON) {
        size_t r, cols;
        s_shape(c, g, &r, &cols);
        return 2.0 * s * sqrt((double)DPS_MAX(r, cols));
    }
    double blocks = (double)DPS_MIN((uint64_t)s_blocks(c, 0), (uint64_t)c->t * c->m);
    return blocks * s * (sqrt(dg) + sqrt((double)s_columns(c, g)));
}
