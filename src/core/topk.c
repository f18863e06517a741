/* topk.c - the non-private top-k right singular basis of a data matrix
   (dps_topk_basis): a baseline, and the "truth" of the evaluations.  NOT
   PRIVATE. */
#include "internal.h"
#include "linalg.h"

int dps_topk_basis(const float *X, size_t n, size_t d, size_t k, float *V, double *sv)
{
    if (!X || !V || n == 0 || k == 0 || k >= d)
        return DPS_EINVAL;
    la_ws *ws = la_ws_new(n, d, k);
    if (!ws)
        return DPS_ENOMEM;
    size_t rank = 0;
    int rc = la_topk_rows(ws, X, n, d, k, V, sv, &rank, NULL);
    la_ws_free(&ws);
    if (!rc && rank < k) {
        dps_rng *pub = NULL;
        rc = dps_rng_new_labelled(&pub, 0, "topk-completion", 0);
        if (!rc)
            la_complete_basis(V, rank, k, d, pub);
        dps_rng_destroy(&pub);
    }
    return rc;
}
