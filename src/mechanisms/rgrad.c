/* rgrad.c - DP low-rank trace regression: private spectral initialization and
   DP Riemannian gradient descent (DESIGN 3.7; the paper
   dp-low-rank-trace-regression-dp-rgrad, Algorithms 1 and 2).

   Unit of privacy: one observation (X_i, y_i); neighbours replace one
   observation; n, d1, d2, r and the configuration are public.  The paper's
   sensitivities hold only with high probability under Gaussian design; here
   every per-observation quantity is clipped, so the guarantee below holds for
   EVERY input (a non-finite observation contributes zero, like a NaN row of
   the estimator).

   Partition.  One uniformly random permutation pi of 0..n-1 is drawn from the
   noise generator (it does not look at the data).  The init's groups and, in
   streaming mode, the batches are consecutive blocks of pi: groups g = 0..t-1
   of the init batch (sizes differ by at most one), then batch l of nb =
   floor((n - n0)/iters) observations for iteration l (the remainder is not
   used).  The permutation makes the groups exchangeable whatever the order of
   the input; privacy needs only that the partition is data-independent.

   1. Initialization (rho_init = rho_U + rho_V + rho_S, delta): two
      reference-point aggregations of the groups' top-r subspaces and a
      clipped Gaussian Sigma~ (rgrad_init.c has the mechanism and its
      argument).

   2. Iterations (rho_iter each): the private gradient in the tangent space
      of the rank-r manifold at the current L_l, then a rank-r SVD step
      (rgrad_gradient.c has the mechanism and its argument).

   3. Accounting.  Batch mode (every part reads all n): adaptive composition,
      rho = rho_init + iters rho_iter, delta (the two aggregations' delta/2).
      Streaming mode (init batch + one disjoint batch per iteration): replacing
      observation i changes exactly one block of the public partition, read by
      exactly one part (the init, or iteration l).  Every other part, given the
      earlier outputs, has the same output distribution on both neighbours
      because it does not read observation i; by the chain rule of the Renyi
      divergence the divergence of the whole transcript is that of the one
      part that reads i (conditioned on the same history).  So the fit is
      delta-approximate max(rho_init, rho_iter)-zCDP (the delta only when i is
      in the init batch, and delta is the worst case).  This is parallel
      composition under replace-one neighbours; it needs the partition to be
      data-independent (it is: a permutation from the noise generator and
      block sizes from public n, iters, init_obs).  */
#include "internal.h"
#include "linalg.h"
#include "rgrad_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------- fit */
int dps_rgrad_fit(const float *X, const float *y, size_t n, const dps_rgrad_config *cfg, dps_rng *rng, float *L,
                  dps_rgrad_stats *st)
{
    dps_rgrad_stats dummy;
    if (!st) {
        memset(&dummy, 0, sizeof dummy);
        st = &dummy;
    }
    double delta_target = st->delta_target > 0 ? st->delta_target : 1e-5;
    double *grad_norm = st->grad_norm;
    memset(st, 0, sizeof *st);
    st->delta_target = delta_target;
    st->grad_norm = grad_norm;
    st->reason = "";
    if (!X || !y || !cfg || !rng || !L)
        return DPS_EINVAL;
    int rc = dps_rgrad_config_check(cfg, n, NULL);
    if (rc)
        return rc;
    dps_blas_init_once();
    const dps_rgrad_config *c = cfg;
    size_t d1 = c->d1, d2 = c->d2, r = c->r, D = d1 * d2, t = dps_rgrad_groups(c), n0, nb;
    rgrad_batches(c, n, &n0, &nb);
    st->groups = t;
    st->init_obs = n0;
    st->batch_obs = c->iters ? nb : 0;
    memset(L, 0, D * sizeof *L);

    size_t *perm = malloc(n * sizeof *perm);
    float *Bl = dps_aligned_alloc(t * r * d1, sizeof(float)), *Br = dps_aligned_alloc(t * r * d2, sizeof(float));
    float *Ub = dps_aligned_alloc(r * d1, sizeof(float)), *Vb = dps_aligned_alloc(r * d2, sizeof(float));
    double *S = malloc(r * r * sizeof *S), *Ld = malloc(D * sizeof *Ld), *G = malloc(D * sizeof *G);
    double *U = malloc(d1 * r * sizeof *U), *V = malloc(d2 * r * sizeof *V), *sv = malloc(r * sizeof *sv);
    rc = (perm && Bl && Br && Ub && Vb && S && Ld && G && U && V && sv) ? DPS_OK : DPS_ENOMEM;
    if (rc)
        goto done;

    /* The data-independent partition: a uniform permutation (Fisher-Yates). */
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)dps_rng_below(rng, i);
        size_t tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }

    /* 1. Initialization. */
    rgrad_init_bufs bufs = {Bl, Br, Ub, Vb, S};
    rc = rgrad_init(X, y, perm, n0, t, c, rng, &bufs, st);
    if (rc || st->init_failed)
        goto done;
    /* L_0 = Ub^T S Vb, then its rank-r factors. */
    for (size_t a = 0; a < d1; a++)
        for (size_t b = 0; b < d2; b++) {
            double v = 0;
            for (size_t s = 0; s < r; s++)
                for (size_t u = 0; u < r; u++)
                    v += (double)Ub[s * d1 + a] * S[s * r + u] * (double)Vb[u * d2 + b];
            Ld[a * d2 + b] = v;
        }
    rc = la_svd_top(Ld, d1, d2, r, U, sv, V);

    /* 2. Iterations. */
    st->sd_iter = c->iters ? dps_rgrad_sigma(c->clip_grad, nb, c->rho_iter) : 0;
    for (size_t l = 0; !rc && l < c->iters; l++) {
        const size_t *idx = c->streaming ? perm + n0 + l * nb : NULL;
        uint64_t clipped = 0;
        rc = rgrad_gradient(X, y, idx, nb, d1, d2, r, U, sv, V, c->clip_grad, st->sd_iter, rng, G, &clipped);
        if (rc)
            break;
        st->nonprivate_clipped_grad += clipped;
        if (c->streaming)
            st->spent.rho = fmax(st->spent.rho, c->rho_iter);
        else
            st->spent.rho += c->rho_iter;
        if (st->grad_norm)
            st->grad_norm[l] = sqrt(rgrad_norm2(G, D));
        for (size_t a = 0; a < d1; a++)
            for (size_t b = 0; b < d2; b++) {
                double v = 0;
                for (size_t s = 0; s < r; s++)
                    v += U[a * r + s] * sv[s] * V[b * r + s];
                Ld[a * d2 + b] = v - c->eta * G[a * d2 + b];
            }
        rc = la_svd_top(Ld, d1, d2, r, U, sv, V);
    }
    if (!rc)
        for (size_t a = 0; a < d1; a++)
            for (size_t b = 0; b < d2; b++) {
                double v = 0;
                for (size_t s = 0; s < r; s++)
                    v += U[a * r + s] * sv[s] * V[b * r + s];
                L[a * d2 + b] = (float)v;
            }

done:
    st->eps = dps_zcdp_eps_total(st->spent, st->delta_target);
    free(perm); free(Bl); free(Br); free(Ub); free(Vb); free(S); free(Ld); free(G); free(U); free(V); free(sv);
    if (rc)
        memset(L, 0, D * sizeof *L);
    return rc;
}
