/*  dpsubspace.h - differentially private subspace snapshots from a stream of rows.

    One public header for the numerical core (no sockets, files or clocks in it).
    Conventions:
    - every function returns an int from dps_err (0 = DPS_OK) unless it is a plain
      accessor; dps_strerror() names the code;
    - x_new(&out, ...) creates, x_destroy(&p) frees and sets *p = NULL;
    - "the caller owns" means the caller must destroy the returned object;
    - matrices are row-major float32: a k x d basis is k rows of length d.

    Privacy model (docs/design.md, section 2): one row is one unit of privacy, rows are
    normalised to unit L2 norm on arrival, neighbouring streams differ by replacing
    one row, accounting is approximate zCDP (rho, delta).  Each mechanism states its
    guarantee next to its code in src/.

    Threads: the estimator runs its own worker threads.  OpenBLAS's thread count is
    process-wide; the library sets it to 1 the first time it is used (workers give
    the parallelism) unless dps_blas_set_threads() was called before.            */
#ifndef DPSUBSPACE_H
#define DPSUBSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "dpsubspace_export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DPS_VERSION_MAJOR 0
#define DPS_VERSION_MINOR 4
#define DPS_VERSION_PATCH 0

/* ------------------------------------------------------------------ errors */
typedef enum {
    DPS_OK = 0,
    DPS_EINVAL,   /* an argument is out of range or inconsistent            */
    DPS_ENOMEM,   /* an allocation failed                                   */
    DPS_EDIM,     /* a batch's dimension differs from the configured d       */
    DPS_EEMPTY,   /* an empty batch (no rows)                               */
    DPS_EFULL,    /* the epoch is full: close it before pushing more rows   */
    DPS_ENUMERIC, /* LAPACK reported a failure                              */
    DPS_ERANDOM,  /* the secure random generator could not be initialised   */
    DPS_ELIMIT,   /* the problem is above this algorithm's documented limit */
    DPS_EBUDGET,  /* the charge would pass the privacy budget cap           */
    DPS_ECOMMIT,  /* the ledger commit hook refused; nothing was released   */
    DPS_ESTATE,   /* the call is not valid in the object's current state    */
    DPS_ENET,     /* a ZeroMQ call failed (bad endpoint, address in use...)  */
    DPS_EPROTO,   /* a message is malformed or of another protocol version  */
    DPS_EAUTH,    /* the peer refused our credentials (CURVE/ZAP)           */
    DPS_EKEY,     /* a key file is missing, unreadable or malformed         */
    DPS_EIO,      /* a file could not be read, written or synced            */
    DPS_ETIMEOUT, /* nothing arrived in time                                */
    DPS_ECANCELED, /* the caller's cancel flag ended a wait (dps_producer_set_cancel) */
    DPS_EGONE,    /* the collector went silent for the collector timeout (dps_producer_set_collector_timeout) */
    DPS_ERR_COUNT_
} dps_err;

/* A static English sentence for an error code; never NULL. */
DPS_EXPORT const char *dps_strerror(int err);
/* The reason of this thread's last error where the library has one more
   precise than the code (never NULL; "" if none): dps_estimator_new and
   dps_estimator_new_resumed set the rule of dps_config_check that failed;
   their successful calls set "". */
DPS_EXPORT const char *dps_last_error(void);

/* Library version as "MAJOR.MINOR.PATCH"; static string. */
DPS_EXPORT const char *dps_version(void);

/* The layout of the public structs, for a binding that cannot read C (the
   Python package builds its ctypes structures from it): dps_struct_name(i)
   lists them (NULL past the last), dps_struct_size gives sizeof (0 for a
   name not listed), and dps_struct_field the i-th field in declaration
   order (DPS_EINVAL past the last): its name, type ("f64", "u64", "size",
   "int" (enums too), "str" (const char *), "size*", or a listed struct's
   name), array length (1 for a scalar) and offset.  Static strings. */
DPS_EXPORT const char *dps_struct_name(size_t i);
DPS_EXPORT size_t dps_struct_size(const char *name);
DPS_EXPORT int dps_struct_field(const char *name, size_t i, const char **field, const char **type, size_t *count,
                                size_t *offset);

/* Set OpenBLAS's process-wide thread count once, on purpose.  n >= 1. */
DPS_EXPORT void dps_blas_set_threads(int n);
/* OpenBLAS's name for the CPU kernel it uses (e.g. "Haswell"); static string. */
DPS_EXPORT const char *dps_blas_corename(void);

/* ------------------------------------------------------------- randomness */
/* A random source.  Secure mode: a ChaCha20 stream keyed from the operating
   system's entropy through libsodium (cryptographically secure).  Seeded mode:
   the same stream keyed from a 64-bit seed, reproducible, for tests and
   experiments only; every snapshot made with it says so.
   Not thread-safe: one source per thread (see dps_rng_fork). */
typedef struct dps_rng dps_rng;

DPS_EXPORT int  dps_rng_new_secure(dps_rng **out);                 /* DPS_ERANDOM if no entropy */
DPS_EXPORT int  dps_rng_new_seeded(dps_rng **out, uint64_t seed);
/* A seeded stream for a named purpose: key = BLAKE2b(seed, label, index).
   Used for public randomness (reference points) that anyone can recompute. */
DPS_EXPORT int  dps_rng_new_labelled(dps_rng **out, uint64_t seed, const char *label, uint64_t index);
/* An independent child stream keyed by 32 bytes drawn from parent; the child is
   seeded iff the parent is.  The caller owns *out. */
DPS_EXPORT int  dps_rng_fork(dps_rng *parent, dps_rng **out);
DPS_EXPORT void dps_rng_destroy(dps_rng **rng);
DPS_EXPORT int  dps_rng_is_seeded(const dps_rng *rng);

DPS_EXPORT uint64_t dps_rng_u64(dps_rng *rng);
/* Uniform on (0, 1) with 53 random bits; never returns 0 or 1. */
DPS_EXPORT double dps_rng_uniform(dps_rng *rng);
/* Uniform integer in [0, n), unbiased (rejection).  n >= 1. */
DPS_EXPORT uint64_t dps_rng_below(dps_rng *rng, uint64_t n);
/* N(0, sigma^2) by Box-Muller on 53-bit uniforms. */
DPS_EXPORT double dps_rng_gaussian(dps_rng *rng, double sigma);
/* Laplace(0, b): density exp(-|x|/b)/(2b). */
DPS_EXPORT double dps_rng_laplace(dps_rng *rng, double b);
/* The draws of n calls of dps_rng_gaussian, in order (the same bits), faster:
   fill writes them to out, add adds them to x. */
DPS_EXPORT void dps_rng_gaussian_fill(dps_rng *rng, double sigma, double *out, size_t n);
DPS_EXPORT void dps_rng_gaussian_fill_f(dps_rng *rng, double sigma, float *out, size_t n);
DPS_EXPORT void dps_rng_gaussian_add(dps_rng *rng, double sigma, double *x, size_t n);

/* ------------------------------------------------------ privacy accounting */
/* Approximate zCDP cost: a mechanism is delta-approximately rho-zCDP. */
typedef struct { double rho; double delta; } dps_zcdp;

/* (eps, delta)-DP enters as delta-approximate eps^2/2-zCDP; pure eps-DP as
   eps^2/2-zCDP (Bun-Steinke 2016, Prop. 1.4). */
DPS_EXPORT dps_zcdp dps_zcdp_from_dp(double eps, double delta);
DPS_EXPORT dps_zcdp dps_zcdp_from_pure(double eps);

/* Tight conversion of rho-zCDP to (eps, delta)-DP (Canonne-Kamath-Steinke 2020):
   delta(eps) = min_{a>1} exp((a-1)(a rho - eps) + a ln(1 - 1/a)) / (a - 1). */
DPS_EXPORT double dps_zcdp_delta_at(double rho, double eps);
/* The smallest eps with delta(eps) <= delta_conv (the minimum over orders of
   the above solved for eps); 0 for rho <= 0 or delta_conv >= 1, INFINITY for
   delta_conv <= 0. */
DPS_EXPORT double dps_zcdp_eps_at(double rho, double delta_conv);
/* eps of a spent (rho, delta_mech) shown at total delta_total: the conversion
   gets delta_total - delta_mech; INFINITY when delta_mech >= delta_total.
   Valid for any mechanisms; for Gaussian ones alone see
   dps_zcdp_eps_total_kind. */
DPS_EXPORT double dps_zcdp_eps_total(dps_zcdp spent, double delta_total);

/* The exact privacy profile of the Gaussian mechanism whose l2 sensitivity
   over its noise's standard deviation is mu (mu-GDP, Dong-Roth-Su 2022),
   under the adjacency the sensitivity is taken over (the library's: replacing
   one row):
       delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
   (Balle-Wang 2018, Thm. 8): the mechanism is (eps, delta(eps))-DP for every
   eps >= 0, and no smaller delta holds for neighbours that attain the
   sensitivity.  Such a mechanism is mu^2/2-zCDP,
   and an adaptive composition of Gaussian mechanisms of mu_i is one of
   mu = sqrt(sum mu_i^2): a total rho charged by Gaussian mechanisms alone
   is the Gaussian mechanism of mu = sqrt(2 rho), whose eps at delta is below
   the CKS conversion's of that rho (rho 1, delta 1e-5: 6.57, not 7.08).
   Computed in log space: no overflow for any eps or mu.
   delta_at: delta(max(eps, 0)); 0 for mu 0, 1 for mu INFINITY, NAN for mu
   or eps NaN or mu < 0. */
DPS_EXPORT double dps_gaussian_delta_at(double mu, double eps);
/* The smallest eps >= 0 with delta(eps) <= delta (to 1e-13 relative, from
   above: delta at the eps returned is <= delta); 0 for mu 0 or delta >= 1,
   INFINITY for delta <= 0 (no finite eps reaches it for mu > 0) or mu
   INFINITY, NAN for mu NaN or mu < 0. */
DPS_EXPORT double dps_gaussian_eps_at(double mu, double delta);

/* What a charge is, for the eps stated of a total (the charges' rho and delta
   add whatever their kind). */
typedef enum {
    DPS_CHARGE_ZCDP = 0,    /* any delta-approximate rho-zCDP mechanism (pure or
                               (eps, delta)-DP ones entered by dps_zcdp_from_dp,
                               the sample-and-aggregate and histogram
                               aggregators, ...): a total with one of them is
                               stated by the CKS conversion                 */
    DPS_CHARGE_GAUSSIAN = 1 /* a Gaussian mechanism, or an adaptive composition
                               of them, charged (rho, 0) with rho = sum of
                               (l2 sensitivity / noise sd)^2 / 2 (given the
                               earlier outputs): the gaussian and power
                               aggregators.  A total of these alone is stated
                               by dps_gaussian_eps_at(sqrt(2 rho), delta)   */
} dps_charge_kind;
/* eps of spent at total delta_total: for kind DPS_CHARGE_GAUSSIAN and
   spent.delta 0, dps_gaussian_eps_at(sqrt(2 spent.rho), delta_total); else
   (a kind out of range too) dps_zcdp_eps_total(spent, delta_total). */
DPS_EXPORT double dps_zcdp_eps_total_kind(dps_zcdp spent, dps_charge_kind kind, double delta_total);

/* A budget cap.  Either rho_cap > 0 (spent rho must stay <= rho_cap and spent
   delta <= delta_target), or eps_cap > 0 (the eps of the spent total at
   delta_target, by the accountant's rule (dps_accountant_eps), must stay
   <= eps_cap), or both zero: no cap. */
typedef struct { double rho_cap; double eps_cap; double delta_target; } dps_budget;
/* The delta_target a total is stated at when the cap gives none. */
#define DPS_DELTA_TARGET_DEFAULT 1e-5

/* Composes charges: their rho and delta add.  It keeps whether every charge
   with a non-zero cost was DPS_CHARGE_GAUSSIAN (dps_accountant_kind); the eps
   it states (dps_accountant_eps, dps_accountant_left, the eps cap) is then
   the exact Gaussian one, else the CKS conversion's. */
typedef struct dps_accountant dps_accountant;
/* cap may be NULL (no cap); spent_before resumes a ledger (may be NULL),
   taken as DPS_CHARGE_ZCDP unless it is zero. */
DPS_EXPORT int  dps_accountant_new(dps_accountant **out, const dps_budget *cap,
                                   const dps_zcdp *spent_before);
/* The same with the kind of the charges spent_before holds: GAUSSIAN only if
   every one of them was a Gaussian mechanism (then its delta must be 0).
   DPS_EINVAL for a kind out of range, a Gaussian spent_before with a delta,
   and what dps_accountant_new refuses. */
DPS_EXPORT int  dps_accountant_new_resumed(dps_accountant **out, const dps_budget *cap,
                                           const dps_zcdp *spent_before, dps_charge_kind spent_kind);
DPS_EXPORT void dps_accountant_destroy(dps_accountant **acc);
/* 1 if an accountant can take cost as a charge of kind kind: finite and
   non-negative, a kind in range, no delta for a Gaussian one. */
DPS_EXPORT int  dps_charge_valid(dps_zcdp cost, dps_charge_kind kind);
/* 1 if charging cost of kind DPS_CHARGE_ZCDP keeps the total within the cap,
   else 0 (also for a cost charge would refuse: negative, NaN or infinite). */
DPS_EXPORT int  dps_accountant_fits(const dps_accountant *acc, dps_zcdp cost);
/* The same for a charge of kind kind (0 also for a kind out of range, or a
   Gaussian one with a delta). */
DPS_EXPORT int  dps_accountant_fits_kind(const dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind);
/* Add cost as a DPS_CHARGE_ZCDP charge; DPS_EBUDGET (and no change) if it
   would pass the cap. */
DPS_EXPORT int  dps_accountant_charge(dps_accountant *acc, dps_zcdp cost);
/* Add cost as a charge of kind kind; DPS_EBUDGET as above, DPS_EINVAL (no
   change) for a negative, NaN or infinite cost, a kind out of range or a
   Gaussian cost with a delta. */
DPS_EXPORT int  dps_accountant_charge_kind(dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind);
/* Replace the cap (NULL: none); what was spent stays.  DPS_EINVAL for a cap
   out of range, as in dps_accountant_new, and then nothing changes. */
DPS_EXPORT int  dps_accountant_set_cap(dps_accountant *acc, const dps_budget *cap);
DPS_EXPORT dps_zcdp dps_accountant_spent(const dps_accountant *acc);
/* DPS_CHARGE_GAUSSIAN while every charge with a non-zero cost (and the
   resumed spent_before) was Gaussian, also when nothing was spent; else
   DPS_CHARGE_ZCDP. */
DPS_EXPORT dps_charge_kind dps_accountant_kind(const dps_accountant *acc);
/* eps spent at delta_total (at the cap's delta_target if delta_total <= 0):
   dps_zcdp_eps_total_kind(spent, dps_accountant_kind, delta). */
DPS_EXPORT double dps_accountant_eps(const dps_accountant *acc, double delta_total);
/* What is left: rho (if rho-capped) or eps (if eps-capped, by the rule of
   dps_accountant_eps); INFINITY if no cap. */
DPS_EXPORT double dps_accountant_left(const dps_accountant *acc);
/* The unit dps_accountant_left counts in for cap: "rho", "eps", or "none"
   (no cap, or cap NULL).  A static string. */
DPS_EXPORT const char *dps_budget_unit(const dps_budget *cap);

/* --------------------------------------------------------------- snapshot */
typedef enum {
    DPS_SNAP_RELEASED = 0, /* a private basis                                  */
    DPS_SNAP_FAILED   = 1, /* the mechanism said FAIL (a DP output; budget spent),
                              or fewer than 2 buckets completed so it did not run
                              (nothing spent): epoch_cost tells which          */
    DPS_SNAP_REFUSED  = 2  /* not run: it would pass the budget cap (nothing spent) */
} dps_snapshot_status;

typedef enum {
    DPS_AGG_REFERENCE  = 0, /* SS_Agg: projected reference points (default) */
    DPS_AGG_PROJECTION = 1, /* Naive_Agg: projection matrices in R^{d^2}       */
    DPS_AGG_HISTOGRAM  = 2, /* SS21 DPASE: stability histogram over cells of the
                               reference-point items ((eps, delta)-DP)           */
    DPS_AGG_COVARIANCE = 3, /* no buckets: the epoch's C = sum x x^T and iterative
                               eigenvector sampling (Amin et al. Alg. 1), pure
                               eps-DP with eps = sqrt(2 rho_epoch), delta 0;
                               d <= DPS_COV_MAX_D (dpsubspace_cov.h)            */
    DPS_AGG_GAUSSIAN = 4,   /* no buckets: the epoch's C = sum x x^T plus a
                               symmetric Gaussian noise of sd 1/sqrt(rho_epoch),
                               its top-k eigenvectors; rho_epoch-zCDP, delta 0;
                               d <= 16384 (DESIGN 7.1)                          */
    DPS_AGG_POWER = 5,      /* no buckets: noisy power iteration, one step per
                               disjoint block of the epoch's rows (power_blocks),
                               b = k + power_oversample columns, warm-started
                               from the last released basis; rho_epoch-zCDP,
                               delta 0; memory O(b d), no d x d (DESIGN 7.3)    */
    DPS_AGG_KRON = 6        /* no buckets: as gaussian, but each parameter group
                               with a shape r x c (group_rows) releases
                               C_in = sum G^T G and C_out = sum G G^T of its
                               r x c block G plus symmetric Gaussian noise of
                               sd sqrt(2/rho_epoch) (every group's noise, then),
                               and its basis is the k_g products u_i (x) v_j of
                               their top eigenvectors; rho_epoch-zCDP, delta 0;
                               memory r^2 + c^2 per such group (DESIGN 7.6)     */
} dps_aggregator;

DPS_EXPORT const char *dps_snapshot_status_name(dps_snapshot_status s);
/* Former names (0.1), kept for callers written against them: dps_status was
   the snapshot's status, dps_stats the estimator's counters. */
typedef dps_snapshot_status dps_status __attribute__((deprecated("dps_status is now dps_snapshot_status")));
DPS_EXPORT const char *dps_status_name(dps_snapshot_status s)
    __attribute__((deprecated("dps_status_name is now dps_snapshot_status_name")));
DPS_EXPORT const char *dps_aggregator_name(dps_aggregator a);
/* The aggregator named name (as dps_aggregator_name spells it) into *out;
   DPS_EINVAL for another name. */
DPS_EXPORT int dps_aggregator_from_name(const char *name, dps_aggregator *out);
/* What one release of aggregator a is charged as: DPS_CHARGE_GAUSSIAN for
   gaussian, power and kron, with or without parameter groups (each release a
   composition of Gaussian mechanisms whose squared sensitivities over the
   noise's variance add up to 2 rho_epoch: src/mechanisms/moment_groups.c);
   DPS_CHARGE_ZCDP for the others (reference, projection and histogram carry
   a delta, covariance is pure eps-DP) and for a value that names none. */
DPS_EXPORT dps_charge_kind dps_aggregator_charge_kind(dps_aggregator a);
/* 1 if aggregator a releases from sums over the epoch's rows and takes
   parameter groups (gaussian, power, kron), else 0 (a value that names none
   too).  The aggregators are the values 0, 1, ... up to the first whose
   dps_aggregator_name is "unknown". */
DPS_EXPORT int dps_aggregator_takes_groups(dps_aggregator a);

typedef struct dps_snapshot dps_snapshot;

/* The widest group the gaussian aggregator releases densely by default
   (dps_config.dense_max_d): two 8192 x 8192 double matrices, 1 GB. */
#define DPS_DENSE_MAX_D 8192
/* The widest it may be set to (dps_config.dense_max_d): two 16384 x 16384
   double matrices, 4.3 GB. */
#define DPS_DENSE_MAX_D_LIMIT 16384

/* The most parameter groups a configuration or a snapshot has (DESIGN 7.2). */
#define DPS_MAX_GROUPS 256

/* Everything about a snapshot but its basis. */
typedef struct {
    uint64_t epoch;
    size_t d, k;
    dps_snapshot_status status;
    dps_aggregator aggregator;
    uint64_t rows_used;      /* rows in the completed buckets aggregated       */
    size_t buckets_used;     /* completed buckets (public)                     */
    double radius;           /* radius chosen by the private search (0 if none);
                                histogram aggregator: the cell side l          */
    double radius_unrelated; /* public: the distance between the items of two
                                buckets with orthogonal subspaces (sqrt(2kq) for
                                the reference aggregator, sqrt(2k) projection,
                                sqrt(2k/d) per coordinate for the histogram).
                                radius / radius_unrelated near 1 means the
                                buckets did not agree: a basis of little use  */
    double w_hat;            /* noisy friend weight (0 if not run)             */
    dps_zcdp epoch_cost;     /* spent by this epoch (0 if refused)             */
    dps_zcdp total;          /* spent so far including this epoch              */
    double eps_total;        /* total as eps at delta_target, by the rule of
                                dps_accountant_eps (exact Gaussian while every
                                charge was Gaussian, else the CKS conversion) */
    double delta_target;     /* the delta at which eps_total is stated         */
    int seeded;              /* 1 if made with a seeded (non-secure) generator  */
    uint64_t public_seed;    /* seed of the public randomness (reference points) */
    const char *reason;      /* a sentence for failed/refused; "" otherwise     */
    uint64_t seq;            /* publication sequence number (0: not published) */
    uint64_t time_unix_ms;   /* when it was published (0: not published)       */
    double budget_left;      /* what the cap leaves after this epoch, in
                                budget_unit (dps_accountant_left); INFINITY
                                without a cap                                  */
    const char *budget_unit; /* "rho", "eps", "none" (no cap), or "" (not known:
                                a snapshot from before budgets were carried);
                                dps_snapshot_new keeps these static strings    */
    size_t groups;           /* parameter groups (DESIGN 7.2): 0 = one group,
                                the whole row; else the basis is group-wise:
                                group g's group_k[g] rows come after those of
                                groups < g and are zero outside its group_d[g]
                                columns (dps_snapshot_group).  <= DPS_MAX_GROUPS */
    const size_t *group_d;   /* groups widths, summing to d (NULL if groups 0) */
    const size_t *group_k;   /* groups ranks, summing to k (NULL if groups 0);
                                dps_snapshot_new copies both                   */
    double noise_level;      /* how far the basis is from noise, computed by the
                                mechanism from its released output and public
                                quantities only (post-processing, no privacy
                                spent): about the sine of the angle between the
                                basis and the noise-free one of the mechanism's
                                input.  About <= 0.1: mostly signal; >= 1: the
                                noise is past the level at which the signal can
                                be told from it (random level).  Reference and
                                histogram aggregators: the spiked-matrix margin
                                s_mu (d/q)^(1/4) of the noisy q x d mean (s_mu
                                from the released radius and w_hat), made an
                                angle below 1; projection: s_mu sqrt(d/2);
                                gaussian: the top-k noisy eigenvalues against
                                the noise's spectral norm 2 sqrt(d / rho);
                                power: the last step's singular values against
                                its noise edge; with parameter groups, the
                                groups' (dps_snapshot_group_noise_level)
                                weighed by the energy each can hold;
                                covariance (no eigenvalue released): the floor
                                sqrt(k (d-1) / (eps n)) that the best data would
                                reach.  0: not computed (failed, refused, or
                                a snapshot from before it was carried)        */
} dps_snapshot_info;

DPS_EXPORT void dps_snapshot_get_info(const dps_snapshot *s, dps_snapshot_info *out);
/* The noise_level at and above which a released snapshot, or one of its
   parameter groups, is WEAK.  Measured (tools/experiments/README.md, "Noise
   level" and "Noise level per group"), the share of the non-private top-k's
   held-out energy that a basis keeps is about 1 - noise_level^2: 0.75 is
   about 0.44, midway between a good basis (>= 0.6 kept: level <= 0.63) and a
   random-level one (<= 0.2: level >= 0.89).  THE RULE THAT HOLDS on every
   release measured (logistic-regression gradients and the paper's generator;
   the MLP's and the CNN's parameter groups at rho 0.1 to 4, per group and
   overall): kept < 0.2 is WEAK; kept >= 0.65 is not.  Between 0.2 and 0.65
   either may happen (a release of the logistic-regression gradients kept
   0.629 at level 0.753, WEAK).  Per group, "kept" counts
   above what a random basis of the group's k_g of d_g columns keeps,
   (kept - r) / (1 - r), r = k_g / d_g of the group's energy over its top
   k_g's: a group of 10 of 32 columns at random level kept 0.65 of its top
   10 (r = 0.35) and is WEAK; every group measured with 0.6 or more above r
   was not WEAK, every one below 0.2 was.
   dps_snapshot_group_weak reads the group's own level; the snapshot's flag
   (dps_snapshot_weak) reads the release's, which weighs the groups by the
   energy they can hold: a release may be WEAK in a group and not overall (a
   dead small group), or WEAK overall with its small groups clean (a dead
   wide group). */
#define DPS_NOISE_LEVEL_WEAK 0.75
/* For a released snapshot: 1 if noise_level >= DPS_NOISE_LEVEL_WEAK (the
   basis is at or near the random level: little information about the data);
   for one without a noise_level (0: from an older collector), 1 if
   radius >= radius_unrelated / 2, i.e. the buckets agreed only at distances
   comparable to unrelated subspaces. */
DPS_EXPORT int dps_snapshot_weak(const dps_snapshot_info *info);
/* Group g's own noise level (g < info.groups; with groups 0, g = 0 is the
   whole row and this is noise_level): on noise_level's scale, from the
   group's own released values (the gaussian and power aggregators: the
   group's noisy eigenvalues or last power step's singular values against
   its noise edge); 0 for a group whose rank is its width (its basis spans
   its columns: nothing is lost).  NAN when there is none: a group of rank
   0, g out of range, a snapshot not released, or one with groups whose
   levels were not carried (made by another mechanism, or read from disk or
   the wire: the store and the wire carry noise_level only). */
DPS_EXPORT double dps_snapshot_group_noise_level(const dps_snapshot *s, size_t g);
/* 1 if group g's level is >= DPS_NOISE_LEVEL_WEAK; with one group,
   dps_snapshot_weak of the snapshot; 0 when the group has no level. */
DPS_EXPORT int dps_snapshot_group_weak(const dps_snapshot *s, size_t g);
/* Where group g (< info->groups; with groups 0, g = 0 is the whole row)
   lives in a group-wise basis: its k_g rows start at row *row0, its d_g
   columns at column *col0; the rest of those rows is zero, so projecting a
   row on the basis projects each group on its own basis.  DPS_EINVAL for a
   g out of range.  Any pointer may be NULL. */
DPS_EXPORT int dps_snapshot_group(const dps_snapshot_info *info, size_t g, size_t *col0, size_t *d_g,
                                  size_t *row0, size_t *k_g);
/* k x d orthonormal rows; NULL unless status == DPS_SNAP_RELEASED.
   Owned by the snapshot. */
DPS_EXPORT const float *dps_snapshot_basis(const dps_snapshot *s);
/* The noisy power steps the release took (the power aggregator, and the
   gaussian aggregator's groups wider than dense_max_d): one per block of the
   epoch's rows that held a row, plus the caller's cuts
   (dps_estimator_end_block); 0 for the other mechanisms, for a snapshot
   that was not made by this process's estimator (read from disk or the
   wire), and for one not released. */
DPS_EXPORT uint64_t dps_snapshot_power_steps(const dps_snapshot *s);
/* A snapshot from its parts (e.g. one read from disk or the wire); basis is
   copied and may be NULL for failed/refused.  info->reason is copied. */
DPS_EXPORT int  dps_snapshot_new(dps_snapshot **out, const dps_snapshot_info *info, const float *basis);
DPS_EXPORT void dps_snapshot_destroy(dps_snapshot **s);

/* ------------------------------------------------------ streaming estimator */
/* Called once per epoch with the epoch's cost, after the cap check and before
   the mechanism runs: it must make the charge durable (write and fsync the
   ledger).  A non-zero return aborts the epoch: nothing is released and
   dps_estimator_close_epoch returns DPS_ECOMMIT. */
typedef int (*dps_commit_fn)(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp total_after);

/* The end of a release, in its privacy order, written once
   (src/stream/epoch_close.c).  Every release of a subspace ends through it:
   the streaming estimator's epochs, the sharded collector's, dps-estimate's
   central methods (and its mean) and the Python package's.  (dps-estimate's
   choose-k and rgrad charge inside dps_choose_k and dps_rgrad_fit.)
   1. dps_release_decide(acc, cost, kind, too_little, hooks, info): the
      decision, from public quantities only (the cost, the cap, the counts):
      - a cost the accountant cannot take (negative, NaN, infinite, or a
        Gaussian one with a delta: a caller's error) -> info FAILED,
        DPS_RELEASE_NOT_RUN, nothing spent, no hook called;
      - too_little != NULL (the input cannot make a release: a public count)
        -> info FAILED with that reason, DPS_RELEASE_NOT_RUN, nothing spent;
      - the cost does not fit the cap -> info REFUSED, DPS_RELEASE_NOT_RUN;
      - hooks->reserve fails (what the release needs that could fail for
        want of memory) -> DPS_RELEASE_NO_MEMORY, nothing spent;
      - hooks->commit refuses (the charge made durable) ->
        DPS_RELEASE_UNCOMMITTED: nothing charged, nothing may be released;
      - else the charge: info->epoch_cost = cost, DPS_RELEASE_RUN.
   2. The mechanism, only after DPS_RELEASE_RUN: its noise is drawn after the
      charge is recorded.
   3. dps_release_outcome(info, rc, failed, fail_reason, who, buf, len): the
      status after the charge.  An error rc the mechanism returned is
      published as FAILED, budget spent, like a FAIL of the mechanism
      (failed != 0 with fail_reason): the outcome differs from a run without
      the error only in the basis being withheld.  The errors that can still
      come after the charge, none of which the rows can cause (every row a
      mechanism sees is finite with norm <= 1, src/core/rows.c):
      - DPS_ENOMEM: scratch whose size is a function of the public
        configuration and counts;
      - DPS_EINVAL / DPS_ELIMIT: a mechanism's argument checks, on
        arguments its caller checks before the charge (the configuration:
        dps_config_check; the central methods' sizes and budgets);
      - DPS_ENUMERIC: LAPACK's non-convergence on a finite matrix of data
        plus noise, or the Bingham sampler's proposal cap.  The residual
        risk: in principle data-dependent, no input is known to cause it,
        its probability is not in delta.
   4. dps_release_totals(acc, cap, info): what is spent and left after it
      (total, eps_total at delta_target, budget_left, budget_unit), for
      every outcome, run or not.
   info->epoch is the one given to hooks->commit; the caller fills the
   release's other facts (counts, levels). */
typedef struct {
    /* NULL, or: reserve what the release needs that could fail for want of
       memory; 0 = done (else it keeps nothing). */
    int (*reserve)(void *arg);
    dps_commit_fn commit; /* NULL, or the durable record of the charge          */
    void *arg;            /* for reserve and commit                             */
    const char *refused;  /* NULL, or the reason of a refusal by the cap (a
                             string the caller keeps until info is used)       */
} dps_release_hooks;
typedef enum {
    DPS_RELEASE_RUN = 0,        /* charged: run the mechanism, then dps_release_outcome */
    DPS_RELEASE_NOT_RUN = 1,    /* too little input or past the cap: info says why */
    DPS_RELEASE_NO_MEMORY = 2,  /* hooks->reserve failed: nothing spent */
    DPS_RELEASE_UNCOMMITTED = 3 /* hooks->commit refused: nothing charged or released */
} dps_release_decision;
/* hooks may be NULL.  Sets info->epoch_cost (the cost if RUN, else 0) and,
   for NOT_RUN, info->status and reason; DPS_RELEASE_NOT_RUN with nothing
   done for a NULL acc or info. */
DPS_EXPORT dps_release_decision dps_release_decide(dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind,
                                                   const char *too_little, const dps_release_hooks *hooks,
                                                   dps_snapshot_info *info);
/* rc: the mechanism's return; failed, fail_reason: its own FAIL (NULL: "the
   mechanism said FAIL: budget spent"); who names the mechanism in the reason
   of an error ("the mechanism", "Analyze Gauss"), written into buf (len
   bytes, kept by the caller). */
DPS_EXPORT void dps_release_outcome(dps_snapshot_info *info, int rc, int failed, const char *fail_reason,
                                    const char *who, char *buf, size_t len);
/* cap: the one acc was made with (NULL: none); delta_target is the cap's,
   1e-5 when it gives none. */
DPS_EXPORT void dps_release_totals(const dps_accountant *acc, const dps_budget *cap, dps_snapshot_info *info);

/* The streaming estimator's configuration: an opaque handle (dps_config_new,
   dps_config_destroy), its settings set and read by parameter
   (dps_config_set_int / _real, dps_config_get_*, dps_config_set_group,
   dps_config_set_commit; each dps_param is named as below).  Its parameters,
   with their defaults (dps_config_init):
         size_t d;            ( row dimension                                   )
         size_t k;            ( subspace dimension, 1 <= k < d                  )
         size_t t;            ( buckets per epoch (default 125)                 )
         size_t m;            ( rows per bucket (default 2k), m >= k            )
         size_t window;       ( W: open buckets at once, W <= t; 0 (default): t,
                                 whatever t is set to after dps_config_init     )
         size_t q;            ( reference points (default 10k)                  )
         dps_aggregator aggregator;
         double rho_epoch;    ( per-epoch zCDP rho (default 1)                  )
         double delta_epoch;  ( per-epoch delta (default 1e-8: deltas add up, and
                                 1000 epochs then fit under delta_target 1e-5)    )
         double alpha;        ( WFC slope (default 1/2)                         )
         double tau;          ( radius search target fraction of t (default 1/2) )
         double split_search, split_count, split_mean; ( rho split (0.2, 0.1, 0.7) )
         double xi_min;       ( smallest radius on the grid (default 1e-6)      )
         double hist_width;   ( histogram aggregator: cell side l of the grid over
                                 R^{q d} (0: default 0.25 sqrt(k/d), a fraction of
                                 an item's per-coordinate scale).  The histogram
                                 aggregator is (eps, delta)-DP with
                                 eps = sqrt(2 rho_epoch), delta = delta_epoch, which
                                 dps_zcdp_from_dp charges as (rho_epoch,
                                 delta_epoch); its snapshot's radius is l and
                                 radius_unrelated sqrt(2k/d) (the per-coordinate
                                 distance of items of orthogonal subspaces), w_hat
                                 the released cell's noisy count; q*d <= 2^23.  )
         size_t groups;       ( parameter groups (DESIGN 7.2; the gaussian, kron and
                                 power aggregators only): 0 (default) or 1 = one group,
                                 the whole row; G >= 2: the row is G public
                                 groups (a model's parameter tensors), group g of
                                 group_d[g] columns in row order, with its own
                                 rank group_k[g]; sum group_d = d, sum group_k = k,
                                 0 <= group_k[g] <= group_d[g].  One release
                                 gives every group its own basis for the cost of
                                 one (the argument: src/mechanisms/epoch_gaussian.c) )
         size_t group_d[DPS_MAX_GROUPS];
         size_t group_k[DPS_MAX_GROUPS];
         size_t power_blocks; ( power aggregator: T, disjoint blocks of the epoch's
                                 t*m rows by index, one noisy power step each
                                 (1..1024; min(T, t*m) blocks run); 0 (default):
                                 3 while no epoch has been released (a cold
                                 start needs steps), then 1 (a warm start is
                                 best with every row in one step): public     )
         size_t power_oversample; ( power aggregator: p, the columns iterated
                                 beyond k, b = min(k + p, d) (default 10)        )
         size_t dense_max_d;  ( gaussian aggregator: the widest group (or d) that
                                 gets the dense d_g x d_g covariance; wider ones
                                 get the noisy power iteration (power_blocks,
                                 power_oversample) in O(k_g d_g) memory, and then
                                 every group's noise is that of the power
                                 aggregator (DESIGN 7.3).  0: DPS_DENSE_MAX_D;
                                 at most 16384                                   )
         dps_budget cap;      ( cap over all epochs (default: none; eps shown at
                                 cap.delta_target, default 1e-5)                  )
         uint64_t public_seed;( seed of public randomness (default 0)           )
         int seeded;          ( 1: noise from a seeded generator (tests only)   )
         uint64_t seed;       ( its seed                                        )
         int workers;         ( worker threads (default: online CPUs, >= 1)     )
         uint64_t first_epoch;( epoch number to start at (resume; default 0)    )
         dps_zcdp spent_before; ( budget already spent (resume; default 0)      )
         dps_commit_fn commit;  ( ledger hook (may be NULL)                     )
         void *commit_arg;
         size_t group_rows[DPS_MAX_GROUPS]; ( kron aggregator only (refused with
                                 another): group g's shape, its block of the row
                                 read as a group_rows[g] x (group_d[g] /
                                 group_rows[g]) matrix in row-major order (as torch
                                 flattens a Linear weight (out, in), or a Conv
                                 weight (out, in, kh, kw) as out x in*kh*kw); it
                                 must divide the group's width, and both sides be
                                 at most dense_max_d.  0 (default): no shape (the
                                 group is released as the gaussian aggregator
                                 does).  Without groups (groups 0 or 1),
                                 group_rows[0] is the whole row's shape        )
   The parameters cap_rho, cap_eps and delta_target are cap's fields;
   spent_rho and spent_delta are spent_before's. */
typedef struct dps_config dps_config;

/* The fewest completed buckets with which WFC's noisy count can succeed even
   if every bucket agrees: 1 + s_W (sqrt(2 ln(1/delta_epoch)) + 2), s_W =
   (1/alpha + 1)/sqrt(2 rho_count); for the histogram aggregator floor(T) + 1,
   T = 1 + (2/eps) ln(1/(2 delta_epoch)), eps = sqrt(2 rho_epoch) (the largest
   cell must hold more than T buckets).  Below it an epoch is not run (nothing
   is spent: the bucket count is public); dps_config_check refuses t below it. */
DPS_EXPORT size_t dps_config_min_buckets(const dps_config *cfg);
/* What one released epoch is charged: (rho_epoch, delta_epoch), or
   (rho_epoch, 0) for the covariance, Gaussian and power mechanisms; of kind
   dps_aggregator_charge_kind of its aggregator. */
DPS_EXPORT dps_zcdp dps_config_epoch_cost(const dps_config *cfg);
/* 1 if the aggregator works on buckets of m rows (reference, projection,
   histogram), 0 if every row of the epoch goes to it (covariance, Gaussian,
   power). */
DPS_EXPORT int dps_config_uses_buckets(const dps_config *cfg);

/* What an epoch of a configuration will do, from public facts only (the
   configuration: rows per epoch, d, the groups, k, rho): dps-estimate
   --plan and the collector's start-up line print it. */
typedef struct {
    uint64_t rows;       /* rows per epoch, t * m                              */
    size_t memory;       /* bytes an epoch holds (dps_estimator_memory_bound)  */
    dps_zcdp cost;       /* one release (dps_config_epoch_cost)                */
    size_t groups;       /* parameter groups: 1 without                        */
    const char *method[DPS_MAX_GROUPS]; /* per group: what releases its basis
                                           (static strings; a kron group's,
                                           "kron RxC", is the calling thread's
                                           until its next dps_config_plan)     */
    double floor[DPS_MAX_GROUPS]; /* per group: the noise floor as a share of
                            the epoch's energy: a direction whose energy
                            (its eigenvalue of sum x_g x_g^T) is below
                            floor * rows is lost in the release's noise;
                            from the noise's spectral norm.  0: the
                            mechanism has no such rule (the bucket
                            aggregators: DESIGN 7 and the README)           */
} dps_plan;
/* Fill *out for a configuration that passes dps_config_check; DPS_EINVAL
   (with nothing filled) otherwise. */
DPS_EXPORT int dps_config_plan(const dps_config *cfg, dps_plan *out);

/* Fill cfg with the defaults above for dimension d and rank k; change any
   setting after (window 0 follows t). */
DPS_EXPORT void dps_config_init(dps_config *cfg, size_t d, size_t k);
/* DPS_OK or DPS_EINVAL / DPS_ELIMIT with a sentence in why (may be NULL). */
DPS_EXPORT int  dps_config_check(const dps_config *cfg, const char **why);

/* A configuration by parameter (src/stream/config_params.c): a handle made
   with the defaults of dps_config_init, each setting set and read by its
   parameter, so that a caller (a program's flags, the Python package) needs
   no field of the struct.  The defaults live in dps_config_init only: a new
   handle's getters read them.  The setters check a value's type and range
   of storage; whether the settings go together is dps_config_check's. */
typedef enum {
    DPS_PARAM_D = 0, DPS_PARAM_K, DPS_PARAM_T, DPS_PARAM_M, DPS_PARAM_WINDOW, DPS_PARAM_Q, DPS_PARAM_AGGREGATOR,
    DPS_PARAM_RHO_EPOCH, DPS_PARAM_DELTA_EPOCH, DPS_PARAM_ALPHA, DPS_PARAM_TAU, DPS_PARAM_SPLIT_SEARCH,
    DPS_PARAM_SPLIT_COUNT, DPS_PARAM_SPLIT_MEAN, DPS_PARAM_XI_MIN, DPS_PARAM_HIST_WIDTH, DPS_PARAM_GROUPS,
    DPS_PARAM_POWER_BLOCKS, DPS_PARAM_POWER_OVERSAMPLE, DPS_PARAM_DENSE_MAX_D, DPS_PARAM_CAP_RHO, DPS_PARAM_CAP_EPS,
    DPS_PARAM_DELTA_TARGET, DPS_PARAM_PUBLIC_SEED, DPS_PARAM_SEEDED, DPS_PARAM_SEED, DPS_PARAM_WORKERS,
    DPS_PARAM_FIRST_EPOCH, DPS_PARAM_SPENT_RHO, DPS_PARAM_SPENT_DELTA,
    DPS_PARAM_COUNT
} dps_param;
/* A heap configuration with dps_config_init(d, k)'s defaults; destroy sets
   *cfg to NULL. */
DPS_EXPORT int  dps_config_new(dps_config **out, size_t d, size_t k);
DPS_EXPORT void dps_config_destroy(dps_config **cfg);
/* The parameter's name (the struct field's, "cap_rho" for cap.rho_cap,
   "spent_rho" for spent_before.rho; NULL out of range), and back
   (DPS_EINVAL for an unknown name). */
DPS_EXPORT const char *dps_param_name(dps_param p);
DPS_EXPORT int dps_param_from_name(const char *name, dps_param *out);
/* 1 if the parameter is real-valued (dps_config_set_real), 0 if integer
   (dps_config_set_int; the aggregator is its dps_aggregator value). */
DPS_EXPORT int dps_param_is_real(dps_param p);
/* For the mechanism-specific parameters, whether aggregator a reads p (0:
   setting it changes nothing, or dps_config_check refuses it): q for the
   reference and histogram aggregators, hist_width for the histogram, groups
   for gaussian, power and kron, power_blocks and power_oversample for those
   with a power iteration (power, and gaussian's and kron's unshaped groups
   wider than dense_max_d), dense_max_d for gaussian and kron.  1 for every
   other parameter, also where an aggregator ignores it (the weighted
   FriendlyCore settings alpha, tau, split_*, xi_min and delta_epoch matter
   to the bucket aggregators only); 0 for a p or an a out of range. */
DPS_EXPORT int dps_param_applies(dps_param p, dps_aggregator a);
/* DPS_EINVAL for a parameter out of range or of the other type, or a value
   its field cannot hold (nothing changes then). */
DPS_EXPORT int dps_config_set_int(dps_config *cfg, dps_param p, uint64_t value);
DPS_EXPORT int dps_config_set_real(dps_config *cfg, dps_param p, double value);
DPS_EXPORT int dps_config_get_int(const dps_config *cfg, dps_param p, uint64_t *value);
DPS_EXPORT int dps_config_get_real(const dps_config *cfg, dps_param p, double *value);
/* The same as a value: 0 for a parameter out of range or of the other type
   (for callers that know the parameter, e.g. reading a default). */
DPS_EXPORT uint64_t dps_config_int(const dps_config *cfg, dps_param p);
DPS_EXPORT double dps_config_real(const dps_config *cfg, dps_param p);
/* Group g (< DPS_MAX_GROUPS) of the parameter groups: its width, rank and
   shape's rows (0: none); DPS_EINVAL for g out of range.  The count is
   DPS_PARAM_GROUPS. */
DPS_EXPORT int dps_config_set_group(dps_config *cfg, size_t g, size_t d_g, size_t k_g, size_t rows_g);
DPS_EXPORT int dps_config_get_group(const dps_config *cfg, size_t g, size_t *d_g, size_t *k_g, size_t *rows_g);
/* The ledger hook (NULL: none). */
DPS_EXPORT int dps_config_set_commit(dps_config *cfg, dps_commit_fn commit, void *arg);

/* Counters; "rows_*" count rows, "batches_*" whole batches refused. */
typedef struct {
    uint64_t epoch;            /* current (open) epoch                    */
    uint64_t rows_accepted;    /* rows that took a slot, all epochs       */
    uint64_t rows_nan;         /* took a slot as the zero vector: had NaN  */
    uint64_t rows_inf;         /* ... had +-Inf (and no NaN)              */
    uint64_t rows_zero;        /* ... had zero norm                       */
    uint64_t rows_discarded;   /* in buckets left incomplete at a close   */
    uint64_t batches_dim;      /* refused: wrong dimension                */
    uint64_t batches_empty;    /* refused: no rows                        */
    uint64_t buckets_completed;/* all epochs                              */
    uint64_t rows_in_epoch;    /* rows taken by the open epoch            */
    size_t buckets_done_epoch; /* completed buckets in the open epoch     */
    uint64_t epochs_closed;
    uint64_t epochs_internal_error; /* published FAILED because a mechanism
                                       returned an error after the charge  */
} dps_estimator_stats;
typedef dps_estimator_stats dps_stats __attribute__((deprecated("dps_stats is now dps_estimator_stats")));

typedef struct dps_estimator dps_estimator;

/* The caller owns *out.  Copies cfg.  A configuration that dps_config_check
   refuses gets its code (DPS_EINVAL or DPS_ELIMIT), and nothing is made:
   dps_config_check(cfg, &why), and dps_last_error, name the rule.  Each
   release is charged with its aggregator's kind (dps_aggregator_charge_kind);
   the configuration's spent_before (spent_rho, spent_delta), if not zero, is
   taken as DPS_CHARGE_ZCDP. */
DPS_EXPORT int  dps_estimator_new(dps_estimator **out, const dps_config *cfg);
/* The same with the kind of the charges its spent_before holds (a ledger
   resumed: DPS_CHARGE_GAUSSIAN only if every one of them was a Gaussian
   mechanism, and then spent_before.delta is 0); DPS_EINVAL otherwise, as
   dps_accountant_new_resumed. */
DPS_EXPORT int  dps_estimator_new_resumed(dps_estimator **out, const dps_config *cfg,
                                          dps_charge_kind spent_before_kind);
/* Waits for the workers and frees everything; pending rows are discarded. */
DPS_EXPORT void dps_estimator_destroy(dps_estimator **est);
/* Push n_rows rows of dimension dim (row-major).  Rows are validated (NaN, Inf,
   zero norm enter their slot as the zero vector and are counted) and normalised.
   Takes rows until the epoch is full; *n_taken (may be NULL) says how many.
   Returns DPS_OK when all were taken (the epoch may be exactly full now:
   check dps_estimator_epoch_full), DPS_EFULL when the epoch filled before all
   were taken (close it, then push the rest), DPS_EDIM / DPS_EEMPTY for a refused batch
   (counted, nothing taken).  May block while workers catch up (memory bound).
   DPS_ESTATE (nothing taken) when the epoch would begin while the one before
   is sealed and not yet released and the mechanism's release feeds the next
   epoch (the power iteration's warm start), or there is no memory for a
   second epoch's state or its buckets' buffers: release first (the epoch
   then begins in the released one's place).  DPS_ENOMEM (nothing taken)
   when no epoch is sealed and the open one's first buckets cannot have
   their buffers; once begun, no refused buffer stops an epoch (a bucket
   that fills waits for a buffer a worker gives back).
   Push, seal and close from one thread (the pushing thread). */
DPS_EXPORT int  dps_estimator_push(dps_estimator *est, const float *rows, size_t n_rows,
                                   size_t dim, size_t *n_taken);
/* dps_estimator_push with the rows as bytes: n_rows * dim little-endian
   float32 at any alignment (a received message's payload, read where it
   lies: the collector's ingest).  The same rows, results and returns as
   dps_estimator_push of those floats, without a copy on a little-endian
   host. */
DPS_EXPORT int  dps_estimator_push_le(dps_estimator *est, const unsigned char *rows, size_t n_rows,
                                      size_t dim, size_t *n_taken);
/* 1 when the open epoch has t*m rows. */
DPS_EXPORT int  dps_estimator_epoch_full(const dps_estimator *est);
/* Blocks cut by the caller (the power aggregator, and the gaussian
   aggregator with a group wider than dense_max_d): end the open epoch's
   block of rows now -- every power group takes its noisy step on the rows
   pushed since its last step (none: a step on the noise alone) -- starting
   the epoch if no row came yet.  The release then steps once more only if
   rows came after the last cut.  The guarantee is the epoch's (rho_epoch
   under replacing one row) for any cuts that do not depend on the rows'
   values: each row is still in one block.  A caller that cuts its own
   blocks sets power_blocks = 1 and t m above its input, so that no index
   cut falls, and ends its last block too, so that the number of steps does
   not depend on how many rows its blocks held.  DPS_EINVAL when no group
   is a power iteration; DPS_ESTATE while a sealed epoch of a warm
   mechanism is not released. */
DPS_EXPORT int  dps_estimator_end_block(dps_estimator *est);
/* T: the blocks by index of the open epoch, or of the next one if none is
   open (power_blocks, or 3 before any release and 1 after when 0; at most
   t m); 0 when no group is a power iteration. */
DPS_EXPORT uint64_t dps_estimator_power_blocks(const dps_estimator *est);
/* The same for a first epoch of a configuration (no estimator needed: what
   dps-estimate --plan prints); 0 for one that fails dps_config_check. */
DPS_EXPORT uint64_t dps_config_power_blocks(const dps_config *cfg);
/* floor(i n / T): the first row of block i of n rows cut into T blocks by
   index (block i is [start(i), start(i + 1))), as the power aggregator cuts
   an epoch of n = t m rows.  T >= 1. */
DPS_EXPORT uint64_t dps_power_block_start(uint64_t n, uint64_t T, uint64_t i);
/* Close the open epoch: wait for its buckets, aggregate the completed ones
   privately, charge the accountant, and return the snapshot (the caller owns
   it).  A refusal or a FAIL is a snapshot too (see dps_snapshot_status).  Rows of
   buckets left incomplete are discarded (each row is used in one epoch only).
   Once the commit hook has made the charge durable, every outcome is a
   snapshot and the return is DPS_OK: an error of the mechanism gives a FAILED
   snapshot whose reason names it (and counts in epochs_internal_error), never
   a gap (the snapshot is allocated before the charge).
   Returns DPS_ECOMMIT if the commit hook failed (no snapshot, no charge kept,
   the epoch's rows dropped), or DPS_ENOMEM before the charge (nothing spent,
   the epoch stays sealed and the next close releases it).
   close_epoch is dps_estimator_seal then dps_estimator_release_sealed. */
DPS_EXPORT int  dps_estimator_close_epoch(dps_estimator *est, dps_snapshot **out);
/* The pipeline: release an epoch on another thread while the next one fills.
   seal (pushing thread) ends the open epoch's input: drops the rows of
   buckets left open (its full buckets' bases go on being computed; the
   release waits for them); the next row begins the next epoch.
   DPS_ESTATE if an epoch is still sealed (at most one: seal again once it is
   released).  release_sealed (any ONE thread at a time, concurrently with
   push and seal) is the rest of close_epoch for the sealed epoch, same
   returns; DPS_ESTATE if none is sealed.  Snapshots come in epoch order (one
   sealed at a time); a seeded estimator gives the same snapshots either way
   (each epoch draws from its own generator, forked in epoch order).  Memory:
   a second epoch's state (dps_estimator_memory_bound each) is made the first
   time an epoch begins while the one before is still sealed. */
DPS_EXPORT int  dps_estimator_seal(dps_estimator *est);
DPS_EXPORT int  dps_estimator_release_sealed(dps_estimator *est, dps_snapshot **out);
/* Make that second epoch's state now, from the pushing thread (e.g. at
   start-up), instead of in the push that begins the first overlapping epoch
   (about 20 ms there at d = 1e4, k = 4: its allocations and first touches).
   For a caller that always releases on another thread, as dps-collector does;
   it then holds two epochs' memory from the start.  DPS_OK (also when it
   exists already, or for a mechanism with a warm start, which keeps one
   state), DPS_ENOMEM (nothing kept), DPS_EINVAL for NULL. */
DPS_EXPORT int  dps_estimator_prepare_overlap(dps_estimator *est);
/* 1 while an epoch is sealed and not yet released (any thread). */
DPS_EXPORT int  dps_estimator_release_pending(const dps_estimator *est);
/* From the pushing thread (dps_estimator_spent: any thread). */
DPS_EXPORT void dps_estimator_get_stats(const dps_estimator *est, dps_estimator_stats *out);
DPS_EXPORT dps_zcdp dps_estimator_spent(const dps_estimator *est);
/* eps of dps_estimator_spent at delta_total (at its delta_target if
   delta_total <= 0), by its accountant's rule (dps_accountant_eps): the exact
   Gaussian one while every charge was Gaussian.  Any thread. */
DPS_EXPORT double dps_estimator_eps(const dps_estimator *est, double delta_total);
/* The kind of dps_estimator_spent (dps_accountant_kind), for a caller that
   goes on charging it elsewhere (dps_accountant_new_resumed).  Any thread. */
DPS_EXPORT dps_charge_kind dps_estimator_spent_kind(const dps_estimator *est);
/* Replace the budget cap (cap_rho, cap_eps, delta_target), e.g. when a
   collector reloads its configuration: the next close checks against it; what was spent stays, and
   a cap below it refuses every later epoch.  DPS_EINVAL for a cap out of range
   (as dps_config_check says), and then nothing changes.  Any thread. */
DPS_EXPORT int dps_estimator_set_cap(dps_estimator *est, const dps_budget *cap);
/* Upper bound on the bytes an epoch holds (rows, bases, reference points). */
DPS_EXPORT size_t dps_estimator_memory_bound(const dps_config *cfg);
/* The same while one epoch is released and the next fills (seal /
   release_sealed, the collector): twice the epoch's, or once for a
   mechanism whose next epoch waits for the release (a warm start). */
DPS_EXPORT size_t dps_estimator_memory_bound_pipelined(const dps_config *cfg);

/* ------------------------------------------------- central (whole-data) tools */
/* Non-private top-k right singular basis of an n x d matrix (finite rows);
   V is k x d.
   sv (may be NULL) receives min(n, k+1) singular values, largest first.
   Scratch: a min(n, d)-square Gram in float and double (never n x n when
   n > d: 0.9 GB at d = 7 850 whatever n). */
DPS_EXPORT int dps_topk_basis(const float *X, size_t n, size_t d, size_t k, float *V, double *sv);

/* Analyze Gauss, zCDP variant (DESIGN 3.5, Tsfadia sec. 3.8.4, DTTZ14): rows are
   clipped to unit norm; spends (2 rho, delta) - call it with half the budget you
   mean to spend.  *released = 0 means FAIL (V untouched).  Forms a d x d matrix:
   refuses d > DPS_ANALYZE_GAUSS_MAX_D with DPS_ELIMIT. */
#define DPS_ANALYZE_GAUSS_MAX_D 20000 /* 1.6 GB float d x d; minutes of Krylov */
DPS_EXPORT int dps_analyze_gauss(const float *X, size_t n, size_t d, size_t k, double rho,
                                 double delta, dps_rng *rng, float *V, int *released);

/* Gaussian mechanism for the mean of n rows clipped to unit norm: rho-zCDP,
   sigma = (2/n) / sqrt(2 rho) per coordinate (replace-one sensitivity 2/n). */
DPS_EXPORT int dps_gaussian_mean(const float *X, size_t n, size_t d, double rho, dps_rng *rng,
                                 double *out);
/* Project x (length d) onto span of V's k orthonormal rows: out = V^T V x. */
DPS_EXPORT void dps_project(const float *V, size_t k, size_t d, const double *x, double *out);

/* Private choice of k (Tsfadia sec. 2.1, the remark on unknown k), pure
   eps-DP (proof in src/mechanisms/choose_k.c): s_i = sigma_i^2 + Lap(2/eps) for the
   squared singular values of the rows (clipped to unit norm; sigma_i = 0
   beyond min(n, d)), i = 1..k_max+1; *k_out = the number of leading s_i >= T,
   T = (4/eps) ln((k_max+1)/beta) (dps_choose_k_threshold).  With probability
   >= 1 - beta it is the k with sigma_k^2 >= 1.5 T and sigma_{k+1}^2 < T/2.
   0 means no direction stands above the noise; k_max means k_max may be too
   small.  noisy_sq (may be NULL): the k_max+1 released s_i.  Forms a
   min(n, d)-square Gram: DPS_ELIMIT for n <= d above DPS_CHOOSE_K_MAX_DIM
   rows, for n > d above DPS_COV_MAX_D columns.
   1 <= k_max < d, eps > 0, 0 < beta < 1, else DPS_EINVAL. */
DPS_EXPORT double dps_choose_k_threshold(size_t k_max, double eps, double beta);
#define DPS_CHOOSE_K_MAX_DIM 20000
DPS_EXPORT int dps_choose_k(const float *X, size_t n, size_t d, size_t k_max, double eps, double beta,
                            dps_rng *rng, size_t *k_out, double *noisy_sq);

/* ----------------------------------------------------------- evaluation aids */
/* The paper's generator (Tsfadia sec. 6, DESIGN 4): b_1..b_k uniform in
   {-1,1}^d; each row (u + nu)/||u + nu|| with u a uniform unit vector of
   span(b) and nu uniform in {-1/tau, 1/tau}^d.  rows: n x d; basis (may be
   NULL): k x d orthonormal basis of span(b). */
DPS_EXPORT int dps_synth_paper(dps_rng *rng, size_t n, size_t d, size_t k, double tau,
                               float *rows, float *basis);

/* The reference points of an epoch (q x d, N(0, 1) entries) as the reference
   aggregator draws them from public_seed: public randomness anyone can
   recompute to check a snapshot.  q < 2^24. */
DPS_EXPORT int dps_reference_points(uint64_t public_seed, uint64_t epoch, size_t q, size_t d, float *P);

/* Distance between the spans of A (k x d) and B (k x d), both orthonormal rows:
   sin of the largest principal angle (= ||P_A - P_B||_2) and, if fro != NULL,
   ||P_A - P_B||_F. */
DPS_EXPORT double dps_subspace_sin(const float *A, const float *B, size_t k, size_t d, double *fro);

/* Shard `shard` of rows of d coordinates split over `shards` ranks of a
   sharded collector (dps-collector --sharded): coordinates
   [*c0, *c1), as even as can be (the first d % shards shards one more).
   A producer splits its rows with it; each collector rank holds its slice. */
DPS_EXPORT void dps_shard_slice(size_t d, size_t shards, size_t shard, size_t *c0, size_t *c1);

#ifdef __cplusplus
}
#endif

/* The other mechanisms of the papers, one header each (all included here, so
   dpsubspace.h stays the one header a program needs):
     dpsubspace_cov.h    pure eps-DP covariance and subspace: iterative
                         eigenvector sampling with a Bingham sampler, and the
                         Laplace / Gaussian covariance baselines (Amin et al.);
     dpsubspace_ss.h     the exact-case subspace estimator (Singhal-Steinke
                         Algorithm 1);
     dpsubspace_rgrad.h  DP low-rank trace regression (DP-RGrad);
   and the private choice of k below. */
#include "dpsubspace_cov.h"
#include "dpsubspace_ss.h"
#include "dpsubspace_rgrad.h"

#endif
