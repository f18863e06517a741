/* struct_layout.c - the layout of the public structs, for bindings that
   cannot read C: each struct's size and its fields in declaration order,
   with their type, array length and offset as this compiler laid them out.
   The Python package builds its ctypes structures from it and so mirrors
   none; a field added here reaches it with no edit there.

   Who owns what: static tables; every string returned is static. */
#include "dpsubspace.h"
#include "dpsubspace_cov.h"
#include "dpsubspace_ss.h"

#include <stddef.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *type; /* "f64", "u64", "size", "int", "str", "size*", or a listed struct's name */
    size_t count;     /* array length; 1 for a scalar */
    size_t offset;
} s_field;

typedef struct {
    const char *name;
    size_t size;
    const s_field *fields;
    size_t n;
} s_struct;

#define F(S, f, type) { #f, type, 1, offsetof(S, f) }
#define A(S, f, type, count) { #f, type, count, offsetof(S, f) }
#define N(x) (sizeof(x) / sizeof((x)[0]))

/* enums are laid out as int: the library is built with no -fshort-enums */
_Static_assert(sizeof(dps_snapshot_status) == sizeof(int) && sizeof(dps_aggregator) == sizeof(int)
                   && sizeof(dps_eps_split) == sizeof(int),
               "enums are ints");

static const s_field s_zcdp[] = { F(dps_zcdp, rho, "f64"), F(dps_zcdp, delta, "f64") };
static const s_field s_budget[] = { F(dps_budget, rho_cap, "f64"), F(dps_budget, eps_cap, "f64"),
                                    F(dps_budget, delta_target, "f64") };
static const s_field s_plan[] = {
    F(dps_plan, rows, "u64"), F(dps_plan, memory, "size"), F(dps_plan, cost, "dps_zcdp"),
    F(dps_plan, groups, "size"), A(dps_plan, method, "str", DPS_MAX_GROUPS),
    A(dps_plan, floor, "f64", DPS_MAX_GROUPS),
};
static const s_field s_info[] = {
    F(dps_snapshot_info, epoch, "u64"), F(dps_snapshot_info, d, "size"), F(dps_snapshot_info, k, "size"),
    F(dps_snapshot_info, status, "int"), F(dps_snapshot_info, aggregator, "int"),
    F(dps_snapshot_info, rows_used, "u64"), F(dps_snapshot_info, buckets_used, "size"),
    F(dps_snapshot_info, radius, "f64"), F(dps_snapshot_info, radius_unrelated, "f64"),
    F(dps_snapshot_info, w_hat, "f64"), F(dps_snapshot_info, epoch_cost, "dps_zcdp"),
    F(dps_snapshot_info, total, "dps_zcdp"), F(dps_snapshot_info, eps_total, "f64"),
    F(dps_snapshot_info, delta_target, "f64"), F(dps_snapshot_info, seeded, "int"),
    F(dps_snapshot_info, public_seed, "u64"), F(dps_snapshot_info, reason, "str"),
    F(dps_snapshot_info, seq, "u64"), F(dps_snapshot_info, time_unix_ms, "u64"),
    F(dps_snapshot_info, budget_left, "f64"), F(dps_snapshot_info, budget_unit, "str"),
    F(dps_snapshot_info, groups, "size"), F(dps_snapshot_info, group_d, "size*"),
    F(dps_snapshot_info, group_k, "size*"), F(dps_snapshot_info, noise_level, "f64"),
};
static const s_field s_stats[] = {
    F(dps_estimator_stats, epoch, "u64"), F(dps_estimator_stats, rows_accepted, "u64"),
    F(dps_estimator_stats, rows_nan, "u64"), F(dps_estimator_stats, rows_inf, "u64"),
    F(dps_estimator_stats, rows_zero, "u64"), F(dps_estimator_stats, rows_discarded, "u64"),
    F(dps_estimator_stats, batches_dim, "u64"), F(dps_estimator_stats, batches_empty, "u64"),
    F(dps_estimator_stats, buckets_completed, "u64"), F(dps_estimator_stats, rows_in_epoch, "u64"),
    F(dps_estimator_stats, buckets_done_epoch, "size"), F(dps_estimator_stats, epochs_closed, "u64"),
    F(dps_estimator_stats, epochs_internal_error, "u64"),
};
static const s_field s_iterative[] = {
    F(dps_iterative_params, k, "size"), F(dps_iterative_params, eps, "f64"),
    F(dps_iterative_params, eps_values, "f64"), F(dps_iterative_params, split, "int"),
};
static const s_field s_exact[] = {
    F(dps_exact_stats, candidates, "size"), F(dps_exact_stats, bound, "f64"),
    F(dps_exact_stats, delta_sampling, "f64"), F(dps_exact_stats, delta_total, "f64"),
    F(dps_exact_stats, cost, "dps_zcdp"), F(dps_exact_stats, primes, "size"),
    F(dps_exact_stats, score, "f64"), F(dps_exact_stats, members, "size"), F(dps_exact_stats, scored, "size"),
};

static const s_struct s_structs[] = {
    { "dps_zcdp", sizeof(dps_zcdp), s_zcdp, N(s_zcdp) },
    { "dps_budget", sizeof(dps_budget), s_budget, N(s_budget) },
    { "dps_plan", sizeof(dps_plan), s_plan, N(s_plan) },
    { "dps_snapshot_info", sizeof(dps_snapshot_info), s_info, N(s_info) },
    { "dps_estimator_stats", sizeof(dps_estimator_stats), s_stats, N(s_stats) },
    { "dps_iterative_params", sizeof(dps_iterative_params), s_iterative, N(s_iterative) },
    { "dps_exact_stats", sizeof(dps_exact_stats), s_exact, N(s_exact) },
};

static const s_struct *s_find(const char *name)
{
    for (size_t i = 0; name && i < N(s_structs); i++)
        if (strcmp(s_structs[i].name, name) == 0)
            return &s_structs[i];
    return NULL;
}

const char *dps_struct_name(size_t i)
{
    return i < N(s_structs) ? s_structs[i].name : NULL;
}

size_t dps_struct_size(const char *name)
{
    const s_struct *s = s_find(name);
    return s ? s->size : 0;
}

int dps_struct_field(const char *name, size_t i, const char **field, const char **type, size_t *count,
                     size_t *offset)
{
    const s_struct *s = s_find(name);
    if (!s || i >= s->n)
        return DPS_EINVAL;
    const s_field *f = &s->fields[i];
    if (field)
        *field = f->name;
    if (type)
        *type = f->type;
    if (count)
        *count = f->count;
    if (offset)
        *offset = f->offset;
    return DPS_OK;
}
