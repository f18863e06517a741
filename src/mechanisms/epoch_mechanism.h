/* epoch_mechanism.h - the one interface of an epoch's private release
   (DESIGN 3.3); not installed.

   The stream (src/stream) gathers an epoch's rows; a mechanism turns them
   into one snapshot, privately.  Each mechanism is one file,
   epoch_<name>.c, that starts with its guarantee (or a pointer to its
   proof), plus one entry in the table of epoch_mechanisms.c, keyed by its
   dps_aggregator value.  Nothing else names a mechanism: the stream and the
   configuration check reach them through the table.

   INTAKE.  A mechanism takes its epoch in one of two forms:
   - EPOCH_BUCKETS: the stream partitions the epoch's t*m rows into t buckets
     of m rows (at random, independently of the rows: src/stream/buckets.c),
     computes each full bucket's top-k basis V_j (k x d, finite, orthonormal
     rows) on a worker thread and hands it to take_bucket there.  The release
     gets the completed buckets' bases.  Replacing one row changes one bucket,
     so a mechanism private in its items (bases) is private in the rows.
   - EPOCH_ROWS: no buckets; the stream hands every admitted row to take_row.
   Every row reaching a mechanism, alone or in a bucket, went through
   row_unit (src/core/rows.h): finite with norm <= 1, or the zero vector.

   WHEN EACH HOOK IS CALLED.
   - check, min_buckets, memory, cost, radius_unrelated: pure functions of the
     configuration, called by dps_config_check, dps_config_min_buckets,
     dps_estimator_memory_bound and at every close.  min_buckets and memory
     may see any configuration; check sees one that passed the common checks
     of dps_config_check (src/stream/config.c); cost and radius_unrelated see
     valid ones only.
   - create once, at dps_estimator_new, for a configuration that passed
     dps_config_check; destroy once, after the workers have stopped.
   - per epoch, on each state (the stream may hold two states of a mechanism
     without `warm`, one taking an epoch's rows while the other releases the
     epoch before, on another thread): begin at the epoch's first row,
     before any take_* (it gets
     the stream's noise generator: see begin below); then
     take_bucket (BUCKETS) or take_row (ROWS) for its input; then, at the
     close, release, only if enough came in (BUCKETS: at least
     min_buckets(c) completed buckets; ROWS: at least one row), the cost fits
     the budget cap, and the charge of cost(c) was made durable (the commit
     hook) and entered in the accountant.  An epoch closed without a release
     (too little input, refused, the commit failed) just ends: the next row
     calls begin again.
   - take_bucket runs on a worker thread, concurrently with other buckets'
     calls: it may write only bucket `bucket`'s part of the state.  begin and
     take_row run on the thread that pushes; release on the thread that
     releases, while no other hook runs on the same state.

   WHO OWNS WHAT.  The mechanism owns its state: create allocates all it needs
   from epoch to epoch, sized by the (public) configuration; begin and take_*
   do not allocate (but for a labelled generator of public randomness that
   begin frees before it returns).  The stream owns the configuration and the
   pool (both outlive the state), the rows, the stacked bases V, the
   generators, the snapshot and the basis the release writes to.

   WHAT THE RELEASE MUST GUARANTEE.  In the rows of the epoch, under replacing
   one row, the basis together with out->failed, out->radius and out->w_hat
   (out->noise_level is a function of these and the configuration) is delta-approximate rho-zCDP for (rho, delta) = cost(c) (what the stream
   charged).  It runs after the charge, so it returns DPS_OK with *out filled
   (out->failed = 1 with a reason for the mechanism's own FAIL, a DP output;
   the basis is then withheld), or an error that no row can cause: every size
   it allocates is a function of the public configuration and the public
   input counts, and its inputs are finite.  The stream publishes an error as
   a FAILED snapshot with the budget spent (the list of the errors that can
   arrive and why is in src/stream/estimator.c, at the one place that
   handles them); out->radius and out->w_hat are published as they are, even
   then. */
#ifndef DPS_EPOCH_MECHANISM_H
#define DPS_EPOCH_MECHANISM_H

#include "config_internal.h"
#include "dpsubspace.h"
#include "pool.h"

#include <string.h>

typedef enum {
    EPOCH_BUCKETS, /* bucket bases, through take_bucket (worker threads) */
    EPOCH_ROWS     /* every row, through take_row (pushing thread)       */
} epoch_intake;

/* The mechanism-specific fields of dps_config a mechanism reads: with
   EPOCH_USES_Q, q must be at least k; without EPOCH_USES_HIST_WIDTH a
   hist_width > 0 is refused, without EPOCH_USES_GROUPS two or more groups,
   without EPOCH_USES_SHAPES a group shape (group_rows) (dps_config_check);
   EPOCH_USES_POWER: power_blocks and power_oversample (a power iteration,
   of the whole row or of groups wider than dense_max_d), EPOCH_USES_DENSE:
   dense_max_d.  dps_param_applies reads these flags. */
enum {
    EPOCH_USES_Q = 1,
    EPOCH_USES_HIST_WIDTH = 2,
    EPOCH_USES_GROUPS = 4,
    EPOCH_USES_SHAPES = 8,
    EPOCH_USES_POWER = 16,
    EPOCH_USES_DENSE = 32
};

/* The configuration's parameter groups (DESIGN 7.2), checked by
   dps_config_check: groups 0 or 1 is one group, the whole row. */
static inline size_t epoch_groups(const dps_config *c) { return c->groups > 1 ? c->groups : 1; }
static inline size_t epoch_group_d(const dps_config *c, size_t g) { return c->groups > 1 ? c->group_d[g] : c->d; }
static inline size_t epoch_group_k(const dps_config *c, size_t g) { return c->groups > 1 ? c->group_k[g] : c->k; }
/* Group g's shape r_g (its block is r_g x d_g / r_g, row-major), 0 for none;
   without groups group_rows[0] is the whole row's. */
static inline size_t epoch_group_rows(const dps_config *c, size_t g) { return c->group_rows[g]; }

/* A mechanism's state: each mechanism file defines struct epoch_state (the
   three that aggregate bucket bases share one, epoch_aggregate.h). */
typedef struct epoch_state epoch_state;

/* What the release gets from the stream. */
typedef struct {
    uint64_t epoch;
    float *V;                  /* BUCKETS: the completed buckets' bases, packed
                                  in bucket order (buckets x k x d); the
                                  stream's, the release may overwrite them   */
    const unsigned char *done; /* BUCKETS: t flags, 1 = bucket j completed, to
                                  pack per-bucket state like V (epoch_pack)  */
    size_t buckets;            /* BUCKETS: completed buckets (public)         */
    uint64_t rows;             /* ROWS: rows taken by the epoch (public)      */
    dps_rng *noise;            /* the mechanism's noise (the one begin got)   */
    dps_rng *pub;              /* public randomness, labelled ("aggregate", epoch) */
} epoch_input;

/* What the release says besides the basis (zeroed by the stream). */
typedef struct {
    int failed;         /* 1: the mechanism's own FAIL (a DP output)          */
    const char *reason; /* when failed: why, for the snapshot (static)        */
    double radius;      /* released: the radius or cell side used (0: none)   */
    double w_hat;       /* released: the noisy count (0: none)                */
    double noise_level; /* how far the basis is from noise, a function of the
                           released output and the public configuration only
                           (post-processing: noise_level.h); 0: not computed */
    uint64_t steps;     /* the noisy power steps the release took (0: none);
                           public: a function of the blocks' public cuts */
    size_t groups;      /* entries of group_level (0: the mechanism gives no
                           level per group; the stream then has noise_level
                           for the one group)                                */
    double group_level[DPS_MAX_GROUPS]; /* each parameter group's own level, on
                           noise_level's scale and from the same released
                           quantities; NAN for a group of rank 0 (no basis) */
} epoch_outcome;

typedef struct {
    dps_aggregator id;
    const char *name;    /* as dps_aggregator_name spells it */
    epoch_intake intake;
    unsigned uses;       /* EPOCH_USES_* */

    /* Configuration.  check: the mechanism's own conditions, after the common
       ones; DPS_OK, or DPS_EINVAL / DPS_ELIMIT with a sentence in *why (never
       NULL).  min_buckets: BUCKETS, the fewest completed buckets with which
       the release can succeed (t below it is refused, a close with fewer does
       not release); ROWS: 2.  memory: the bytes of the state and the
       release's scratch (the stream adds its own).  cost: the charge of one
       release.  radius_unrelated: the radius at which items of unrelated
       subspaces would be friends (the snapshot's weak flag; 0: no radius). */
    int (*check)(const dps_config *c, const char **why);
    size_t (*min_buckets)(const dps_config *c);
    size_t (*memory)(const dps_config *c);
    dps_zcdp (*cost)(const dps_config *c);
    double (*radius_unrelated)(const dps_config *c);
    /* What cost(c) is charged as (dps_charge_kind; 0, the default, is
       DPS_CHARGE_ZCDP): DPS_CHARGE_GAUSSIAN only for a release that is a
       Gaussian mechanism, or an adaptive composition of them, whose squared
       l2 sensitivities over the noise's variance, given the earlier outputs,
       add up to at most 2 cost(c).rho, with cost(c).delta 0; the accountant
       then states a total of such releases by the exact Gaussian profile. */
    dps_charge_kind kind;
    /* Optional (NULL: the mechanism's name, no floor), for dps_config_plan:
       what releases group g's basis, and the eigenvalue of sum x_g x_g^T
       below which a direction is lost in the release's noise (the noise's
       spectral norm), both functions of the configuration. */
    const char *(*group_method)(const dps_config *c, size_t g);
    double (*noise_floor)(const dps_config *c, size_t g);
    /* Optional (NULL: 0): 1 when a release feeds the next epoch's begin (the
       power iteration's warm start from the last released basis).  Such a
       mechanism keeps one state: the next epoch begins only once the
       previous one is released, so a pipelined stream (the estimator's
       seal / release_sealed) waits there; the others get a state per epoch
       in flight and never wait. */
    int (*warm)(const dps_config *c);
    /* Optional (NULL: the mechanism has no blocks), for callers that cut an
       epoch's rows into blocks themselves (dps_estimator_end_block): end the
       open epoch's block now, on the pushing thread between take_row calls
       (the power iteration's noisy step on the rows taken since its last
       one); blocks: the T blocks an epoch begun now on state st would cut
       by index, or a first epoch's when st is NULL (0: no power group). */
    int (*end_block)(epoch_state *st);
    uint64_t (*blocks)(const dps_config *c, const epoch_state *st);

    /* State: DPS_ENOMEM from create leaves *out NULL. */
    int (*create)(epoch_state **out, const dps_config *c, dps_pool *pool);
    void (*destroy)(epoch_state **st);

    /* Epoch.  begin may fail only for want of a resource, before the epoch's
       first row is taken.  take_bucket: V is bucket `bucket`'s basis (k x d,
       valid during the call; it stays in the stream's V for the release).
       take_row: one admitted row (d floats, valid during the call).  Only the
       hook of the mechanism's intake is called; the other may be NULL.
       noise: the stream's noise generator (the one the release gets as
       in->noise), valid from begin until the epoch's release or end.  A
       mechanism whose state evolves within the epoch (power: one noisy step
       per block of rows) may draw from it in take_row, before the charge:
       that is private as long as nothing drawn or computed leaves the
       mechanism before the release (an epoch not released publishes
       nothing) and the release's argument covers every draw.  Others
       ignore it. */
    int (*begin)(epoch_state *st, uint64_t epoch, dps_rng *noise);
    void (*take_bucket)(epoch_state *st, size_t bucket, const float *V);
    void (*take_row)(epoch_state *st, const float *row);
    /* Optional (NULL, or NULL returned: the stream writes the row into its
       own buffer and take_row copies it): where take_row's next row may be
       written (d floats in the mechanism's own block), so that the row is
       brought into the unit ball straight into it; take_row is then called
       with that pointer. */
    float *(*row_slot)(epoch_state *st);
    int (*release)(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out);
} epoch_mechanism;

/* The table (epoch_mechanisms.c): the mechanism of aggregator a, or NULL. */
const epoch_mechanism *epoch_mechanism_for(dps_aggregator a);
/* Every entry, in table order, then NULL (tests walk it). */
extern const epoch_mechanism *const epoch_mechanisms[];

/* Move the items of the completed buckets (done[j] != 0, j < t) to the front,
   in bucket order, each `size` bytes, item j at items + j * size; returns
   their count.  The stream packs V this way; a mechanism packs its own
   per-bucket items (e.g. the reference projections) the same way.  Inline,
   so that the mechanisms depend on the table no more than it on them. */
static inline size_t epoch_pack(void *items, size_t size, const unsigned char *done, size_t t)
{
    unsigned char *base = items;
    size_t n = 0;
    for (size_t j = 0; j < t; j++) {
        if (!done[j])
            continue;
        if (n != j)
            memmove(base + n * size, base + j * size, size);
        n++;
    }
    return n;
}

#endif
