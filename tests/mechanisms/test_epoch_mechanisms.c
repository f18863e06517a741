/* test_epoch_mechanisms - the table of epoch mechanisms
   (src/mechanisms/epoch_mechanism.h): it covers every dps_aggregator value
   once, every entry has every hook its intake needs, the names are those of
   dps_aggregator_name, each mechanism's state can be made and freed and its
   configuration hooks agree with the public functions, the Gaussian charges
   are those of the Gaussian mechanisms alone; and epoch_pack. */
#include "check.h"
#include "dpsubspace.h"
#include "epoch_mechanism.h"

#include <string.h>

/* The last dps_aggregator value (include/dpsubspace.h): update it with a new
   mechanism. */
#define LAST_AGGREGATOR DPS_AGG_KRON

static void s_hooks(const epoch_mechanism *m)
{
    CHECK(m->name && m->name[0], "a name");
    CHECK(m->check && m->min_buckets && m->memory && m->cost && m->radius_unrelated, "%s: configuration hooks",
          m->name);
    CHECK(m->create && m->destroy && m->begin && m->release, "%s: state and epoch hooks", m->name);
    CHECK(m->intake == EPOCH_BUCKETS || m->intake == EPOCH_ROWS, "%s: an intake", m->name);
    CHECK(m->intake == EPOCH_BUCKETS ? m->take_bucket != NULL : m->take_row != NULL, "%s: the intake's hook",
          m->name);
}

/* With a default configuration: the hooks agree with the public functions,
   and the state is made and freed. */
static void s_configured(const epoch_mechanism *m)
{
    dps_config c;
    dps_config_init(&c, 20, 2);
    c.aggregator = m->id;
    c.workers = 1;
    c.t = dps_config_min_buckets(&c) + 1;
    c.window = c.t;
    if (m->uses & EPOCH_USES_SHAPES)
        c.group_rows[0] = 4; /* the row as a 4 x 5 matrix: kron needs a shape */
    const char *why = "";
    CHECK(dps_config_check(&c, &why) == DPS_OK, "%s: default configuration: %s", m->name, why);
    CHECK(m->min_buckets(&c) == dps_config_min_buckets(&c), "%s: min buckets", m->name);
    CHECK(m->memory(&c) > 0 && m->memory(&c) < dps_estimator_memory_bound(&c), "%s: memory within the bound",
          m->name);
    dps_zcdp cost = m->cost(&c);
    CHECK(cost.rho == c.rho_epoch && (cost.delta == c.delta_epoch || cost.delta == 0), "%s: cost %g %g", m->name,
          cost.rho, cost.delta);
    CHECK(m->check(&c, &why) == DPS_OK, "%s: own check", m->name);
    /* Charged DPS_CHARGE_GAUSSIAN (the exact Gaussian eps of a total): the
       gaussian, power and kron releases only, Gaussian mechanisms of mu =
       sqrt(2 rho) with no delta (moment_groups.c); the sample-and-aggregate
       and histogram ones carry a delta, covariance is pure eps-DP, so one
       of theirs in a total makes it a mix (the CKS conversion). */
    int gaussian = m->id == DPS_AGG_GAUSSIAN || m->id == DPS_AGG_POWER || m->id == DPS_AGG_KRON;
    CHECK(m->kind == (gaussian ? DPS_CHARGE_GAUSSIAN : DPS_CHARGE_ZCDP) && dps_aggregator_charge_kind(m->id) == m->kind,
          "%s: charged as %s", m->name, m->kind == DPS_CHARGE_GAUSSIAN ? "Gaussian" : "zCDP");
    CHECK(m->kind != DPS_CHARGE_GAUSSIAN || cost.delta == 0, "%s: a Gaussian charge has no delta", m->name);
    dps_pool *pool = pool_new(1);
    epoch_state *st = NULL;
    CHECK(pool && m->create(&st, &c, pool) == DPS_OK && st, "%s: create", m->name);
    CHECK(st && m->begin(st, 0, NULL) == DPS_OK, "%s: begin", m->name);
    m->destroy(&st);
    CHECK(st == NULL, "%s: destroy clears", m->name);
    m->destroy(&st); /* twice is harmless */
    pool_free(&pool);
}

int main(void)
{
    size_t n = 0;
    while (epoch_mechanisms[n])
        n++;
    CHECK(n == (size_t)LAST_AGGREGATOR + 1, "one entry per aggregator: %zu", n);
    for (int a = 0; a <= (int)LAST_AGGREGATOR; a++) {
        const epoch_mechanism *m = epoch_mechanism_for((dps_aggregator)a);
        CHECK(m && m->id == (dps_aggregator)a, "aggregator %d has its mechanism", a);
        if (!m)
            continue;
        int entries = 0;
        for (size_t i = 0; i < n; i++)
            entries += epoch_mechanisms[i]->id == (dps_aggregator)a;
        CHECK(entries == 1, "aggregator %d: one entry, not %d", a, entries);
        s_hooks(m);
        CHECK(strcmp(dps_aggregator_name((dps_aggregator)a), m->name) == 0, "%s: its public name", m->name);
        dps_aggregator back = (dps_aggregator)-1;
        CHECK(dps_aggregator_from_name(m->name, &back) == DPS_OK && back == (dps_aggregator)a, "%s: from its name",
              m->name);
        s_configured(m);
    }
    CHECK(epoch_mechanism_for((dps_aggregator)(LAST_AGGREGATOR + 1)) == NULL, "no mechanism past the last");
    CHECK(strcmp(dps_aggregator_name((dps_aggregator)(LAST_AGGREGATOR + 1)), "unknown") == 0, "unknown name");
    CHECK(dps_aggregator_charge_kind((dps_aggregator)(LAST_AGGREGATOR + 1)) == DPS_CHARGE_ZCDP, "unknown: zCDP");
    dps_aggregator none;
    CHECK(dps_aggregator_from_name("nonesuch", &none) == DPS_EINVAL && dps_aggregator_from_name(NULL, &none) ==
          DPS_EINVAL, "unknown names refused");
    dps_config bad;
    dps_config_init(&bad, 20, 2);
    bad.aggregator = (dps_aggregator)(LAST_AGGREGATOR + 1);
    const char *why = "";
    CHECK(dps_config_check(&bad, &why) == DPS_EINVAL && strcmp(why, "unknown aggregator") == 0, "%s", why);

    /* epoch_pack: the done items to the front, in order. */
    int items[6] = {10, 11, 12, 13, 14, 15};
    const unsigned char done[6] = {0, 1, 1, 0, 0, 1};
    CHECK(epoch_pack(items, sizeof *items, done, 6) == 3 && items[0] == 11 && items[1] == 12 && items[2] == 15,
          "packed: %d %d %d", items[0], items[1], items[2]);
    const unsigned char all[3] = {1, 1, 1};
    CHECK(epoch_pack(items, sizeof *items, all, 3) == 3 && items[0] == 11 && items[2] == 15, "all done: unchanged");
    return check_summary();
}
