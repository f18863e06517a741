/* est_cov.h - dps-estimate's covariance methods (est_cov.c): iterative
   eigenvector sampling (pure eps-DP, Amin et al. 2019), and the Laplace
   (pure eps-DP) and Gaussian ((eps, delta)-DP) covariance baselines.  The
   types and help text live here so that estimate.h and estimate.c need only
   a few lines; the functions are declared at the end of estimate.h (they
   take its types). */
#ifndef DPS_CLI_EST_COV_H
#define DPS_CLI_EST_COV_H

#include "dpsubspace.h"

/* What the command line asked of a covariance method. */
typedef struct {
    double eps;               /* --eps (total)                                 */
    const char *eps_values;   /* --eps-values as given ("X" or "P%"), or NULL */
    const char *split;        /* --split for iterative, or NULL                */
    const char *cov_out;      /* --cov-out FILE, or NULL                       */
    double eps_values_abs;    /* resolved: eps spent on the eigenvalues        */
    dps_eps_split split_v;    /* resolved                                      */
} est_cov_settings;

/* What a covariance run did (in est_result; est_result_free). */
typedef struct {
    int ran;
    double eps, delta;        /* the DP guarantee (delta NaN: pure)            */
    double eps_values;        /* iterative: spent on the eigenvalues           */
    double noise;             /* Laplace scale / Gaussian sd (NaN: iterative)  */
    uint64_t proposals, proposals_max;
    size_t draws;
    double *eps_step;         /* k values (owned) or NULL                      */
    double *lambda;           /* k values (owned) or NULL                      */
    const char *cov_written;  /* --cov-out if written                          */
} est_cov_result;

#define EST_COV_HELP_METHODS                                                          \
    "  iterative      pure eps-DP covariance / top-k subspace by iterative\n"          \
    "                 eigenvector sampling (Amin et al. 2019, Alg. 1): k directions\n"\
    "                 drawn one after another from exp(eps_i/2 u'C u) on the sphere\n" \
    "                 of the complement of the earlier ones (exact Bingham sampler),\n"\
    "                 eigenvalues + Laplace(2/eps_values) clipped to [0, n].  eps-DP\n"\
    "                 under replace-one with rows clipped to norm 1 (score\n"          \
    "                 sensitivity 1, eigenvalue l1 sensitivity 2).  1 <= k <= d.\n"   \
    "  cov-laplace    pure eps-DP: C + symmetric Laplace((d+1)/eps) noise (l1\n"      \
    "                 sensitivity of the upper triangle <= d+1), spectrum clipped to\n"\
    "                 [0, n]; --out is its top-k eigenvectors.\n"                     \
    "  cov-gaussian   (eps, delta)-DP for every eps: C + symmetric Gaussian noise,\n"  \
    "                 sd s off the diagonal and sqrt(2) s on it, s from the analytic\n"\
    "                 Gaussian mechanism (Balle-Wang 2018) for ||xx'-yy'||_F <= sqrt 2;\n"\
    "                 spectrum clipped to [0, n]; --out is its top-k eigenvectors.\n" \
    "  The covariance methods take --eps (not --rho) and count in the run's zCDP\n"  \
    "  total as eps^2/2 (pure) or delta-approximate eps^2/2 (Gaussian).\n"

#define EST_COV_HELP_JSON                                                              \
    "Covariance methods add \"dp\": {guarantee (\"pure eps-DP\" or \"(eps, delta)-DP\"),\n"\
    "eps, delta (null if pure), eps_values, split, eps_step [eps of each draw;\n"       \
    "the last of k = d is 0: a draw on S^0 is free], lambda [noisy eigenvalues],\n"   \
    "draws, proposals, proposals_max (Bingham sampler), noise (Laplace scale or\n"     \
    "Gaussian sd), cov_out}; their progress line is\n"                               \
    "  iterative  released  rows N  eps E pure (values V, split S)  draws D proposals P\n"\
    "  ... as zCDP: rho R  total rho R  eps E' at delta D'\n"                       \
    "where rho = eps^2/2 is what enters the zCDP total (and \"privacy\"); E' is\n"  \
    "that total converted back, looser than the single release's own eps.\n"

#endif
