/* test_config_params - the configuration by parameter: every parameter's
   name maps back to it and is unique; a new handle reads dps_config_init's
   defaults; each setter writes the field it names and no other (the struct
   compared byte for byte against a direct write); the type and storage
   checks refuse without changing anything; groups and the commit hook. */
#include "config_internal.h"
#include "check.h"
#include "dpsubspace.h"

#include <limits.h>
#include <stdio.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static int s_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp after)
{
    (void)arg; (void)epoch; (void)cost; (void)after;
    return 0;
}

/* The field of p in c, written directly: the reference for the setters. */
static void s_direct(dps_config *c, dps_param p, uint64_t iv, double rv)
{
    switch (p) {
    case DPS_PARAM_D: c->d = iv; break;
    case DPS_PARAM_K: c->k = iv; break;
    case DPS_PARAM_T: c->t = iv; break;
    case DPS_PARAM_M: c->m = iv; break;
    case DPS_PARAM_WINDOW: c->window = iv; break;
    case DPS_PARAM_Q: c->q = iv; break;
    case DPS_PARAM_AGGREGATOR: c->aggregator = (dps_aggregator)iv; break;
    case DPS_PARAM_RHO_EPOCH: c->rho_epoch = rv; break;
    case DPS_PARAM_DELTA_EPOCH: c->delta_epoch = rv; break;
    case DPS_PARAM_ALPHA: c->alpha = rv; break;
    case DPS_PARAM_TAU: c->tau = rv; break;
    case DPS_PARAM_SPLIT_SEARCH: c->split_search = rv; break;
    case DPS_PARAM_SPLIT_COUNT: c->split_count = rv; break;
    case DPS_PARAM_SPLIT_MEAN: c->split_mean = rv; break;
    case DPS_PARAM_XI_MIN: c->xi_min = rv; break;
    case DPS_PARAM_HIST_WIDTH: c->hist_width = rv; break;
    case DPS_PARAM_GROUPS: c->groups = iv; break;
    case DPS_PARAM_POWER_BLOCKS: c->power_blocks = iv; break;
    case DPS_PARAM_POWER_OVERSAMPLE: c->power_oversample = iv; break;
    case DPS_PARAM_DENSE_MAX_D: c->dense_max_d = iv; break;
    case DPS_PARAM_CAP_RHO: c->cap.rho_cap = rv; break;
    case DPS_PARAM_CAP_EPS: c->cap.eps_cap = rv; break;
    case DPS_PARAM_DELTA_TARGET: c->cap.delta_target = rv; break;
    case DPS_PARAM_PUBLIC_SEED: c->public_seed = iv; break;
    case DPS_PARAM_SEEDED: c->seeded = (int)iv; break;
    case DPS_PARAM_SEED: c->seed = iv; break;
    case DPS_PARAM_WORKERS: c->workers = (int)iv; break;
    case DPS_PARAM_FIRST_EPOCH: c->first_epoch = iv; break;
    case DPS_PARAM_SPENT_RHO: c->spent_before.rho = rv; break;
    case DPS_PARAM_SPENT_DELTA: c->spent_before.delta = rv; break;
    default: break;
    }
}

static void s_test_names(void)
{
    for (int p = 0; p < DPS_PARAM_COUNT; p++) {
        const char *name = dps_param_name((dps_param)p);
        dps_param back = DPS_PARAM_COUNT;
        CHECK(name && dps_param_from_name(name, &back) == DPS_OK && back == (dps_param)p, "param %d: name %s", p,
              name ? name : "(null)");
    }
    dps_param out;
    CHECK(dps_param_from_name("no_such", &out) == DPS_EINVAL && dps_param_from_name(NULL, &out) == DPS_EINVAL,
          "unknown names refused");
    CHECK(dps_param_name(DPS_PARAM_COUNT) == NULL && dps_param_name((dps_param)-1) == NULL, "out of range: NULL");
    CHECK(strcmp(dps_param_name(DPS_PARAM_CAP_RHO), "cap_rho") == 0 &&
              strcmp(dps_param_name(DPS_PARAM_SPENT_DELTA), "spent_delta") == 0 &&
              strcmp(dps_param_name(DPS_PARAM_POWER_BLOCKS), "power_blocks") == 0,
          "names: the fields'");
}

static void s_test_set_get(void)
{
    dps_config *h = NULL;
    CHECK(dps_config_new(&h, 40, 3) == DPS_OK && h, "new");
    dps_config ref;
    dps_config_init(&ref, 40, 3);
    CHECK(memcmp(h, &ref, sizeof ref) == 0, "a new handle holds dps_config_init's defaults");
    uint64_t iv;
    double rv;
    CHECK(dps_config_get_int(h, DPS_PARAM_M, &iv) == DPS_OK && iv == 6, "the default m = 2k read back: %llu",
          (unsigned long long)iv);
    CHECK(dps_config_get_real(h, DPS_PARAM_DELTA_TARGET, &rv) == DPS_OK && rv == DPS_DELTA_TARGET_DEFAULT,
          "the default delta_target read back");
    CHECK(dps_config_int(h, DPS_PARAM_M) == 6 && dps_config_real(h, DPS_PARAM_DELTA_TARGET) == DPS_DELTA_TARGET_DEFAULT &&
              dps_config_int(h, DPS_PARAM_TAU) == 0 && dps_config_real(h, DPS_PARAM_M) == 0 &&
              dps_config_int(NULL, DPS_PARAM_M) == 0 && dps_config_int(h, DPS_PARAM_COUNT) == 0,
          "the value getters: the setting, or 0 for the other type, no handle or no parameter");
    /* each setter writes its field and nothing else */
    for (int p = 0; p < DPS_PARAM_COUNT; p++) {
        dps_param q = (dps_param)p;
        uint64_t want_i = 1000 + (uint64_t)p;
        double want_r = 0.125 * (p + 1);
        dps_config_init(h, 40, 3);
        dps_config_init(&ref, 40, 3);
        int real = dps_param_is_real(q);
        int rc = real ? dps_config_set_real(h, q, want_r) : dps_config_set_int(h, q, want_i);
        s_direct(&ref, q, want_i, want_r);
        CHECK(rc == DPS_OK && memcmp(h, &ref, sizeof ref) == 0, "set %s: its field only", dps_param_name(q));
        int got = real ? dps_config_get_real(h, q, &rv) == DPS_OK && rv == want_r
                       : dps_config_get_int(h, q, &iv) == DPS_OK && iv == want_i;
        CHECK(got, "get %s: what was set", dps_param_name(q));
        /* the other type is refused and changes nothing */
        rc = real ? dps_config_set_int(h, q, 1) : dps_config_set_real(h, q, 1.0);
        int rc2 = real ? dps_config_get_int(h, q, &iv) : dps_config_get_real(h, q, &rv);
        CHECK(rc == DPS_EINVAL && rc2 == DPS_EINVAL && memcmp(h, &ref, sizeof ref) == 0, "%s: the other type refused",
              dps_param_name(q));
    }
    /* storage: an int field refuses what it cannot hold */
    dps_config_init(h, 40, 3);
    dps_config_init(&ref, 40, 3);
    CHECK(dps_config_set_int(h, DPS_PARAM_WORKERS, (uint64_t)INT_MAX + 1) == DPS_EINVAL &&
              dps_config_set_int(h, DPS_PARAM_AGGREGATOR, (uint64_t)INT_MAX + 1) == DPS_EINVAL &&
              memcmp(h, &ref, sizeof ref) == 0,
          "an int field: a value above INT_MAX refused, nothing changed");
    CHECK(dps_config_set_int(h, DPS_PARAM_SEED, UINT64_MAX) == DPS_OK && h->seed == UINT64_MAX,
          "a 64-bit seed kept whole");
    CHECK(dps_config_set_int(h, DPS_PARAM_COUNT, 1) == DPS_EINVAL && dps_config_set_real(NULL, DPS_PARAM_TAU, 1) ==
                                                                          DPS_EINVAL,
          "out of range, no handle: refused");
    /* groups and the hook */
    CHECK(dps_config_set_group(h, 2, 30, 2, 5) == DPS_OK && h->group_d[2] == 30 && h->group_k[2] == 2 &&
              h->group_rows[2] == 5,
          "set_group");
    size_t dg, kg, rg;
    CHECK(dps_config_get_group(h, 2, &dg, &kg, &rg) == DPS_OK && dg == 30 && kg == 2 && rg == 5, "get_group");
    CHECK(dps_config_set_group(h, DPS_MAX_GROUPS, 1, 1, 0) == DPS_EINVAL, "a group past DPS_MAX_GROUPS refused");
    int arg = 0;
    CHECK(dps_config_set_commit(h, s_commit, &arg) == DPS_OK && h->commit == s_commit && h->commit_arg == &arg,
          "set_commit");
    /* a configuration made by parameter passes the check as the struct does */
    dps_config_init(h, 40, 3);
    dps_config_set_int(h, DPS_PARAM_AGGREGATOR, DPS_AGG_GAUSSIAN);
    dps_config_set_real(h, DPS_PARAM_RHO_EPOCH, 0.5);
    const char *why = NULL;
    CHECK(dps_config_check(h, &why) == DPS_OK, "checked: %s", why);
    dps_config_set_int(h, DPS_PARAM_K, 40);
    CHECK(dps_config_check(h, &why) == DPS_EINVAL && strstr(why, "k must satisfy"), "the check names the rule: %s",
          why);
    /* dps_estimator_new names the rule that failed (dps_last_error) */
    dps_estimator *est = NULL;
    CHECK(dps_estimator_new(&est, h) == DPS_EINVAL && est == NULL && strstr(dps_last_error(), "k must satisfy"),
          "dps_estimator_new's error names the rule: '%s'", dps_last_error());
    dps_config_set_int(h, DPS_PARAM_K, 3);
    dps_config_set_int(h, DPS_PARAM_WORKERS, 1);
    CHECK(dps_estimator_new(&est, h) == DPS_OK && dps_last_error()[0] == '\0', "a good one clears it");
    dps_estimator_destroy(&est);
    dps_config_destroy(&h);
    CHECK(h == NULL, "destroy clears the handle");
    dps_config_destroy(&h); /* twice: harmless */
}

/* Which aggregator reads which mechanism-specific parameter: the documented
   sets (dps_param_applies in dpsubspace.h), and for hist_width and groups
   the same answer as dps_config_check, which refuses them where unread. */
static void s_test_applies(void)
{
    static const struct {
        dps_param p;
        const char *readers;
    } want[] = {{DPS_PARAM_Q, " reference histogram "},
                {DPS_PARAM_HIST_WIDTH, " histogram "},
                {DPS_PARAM_GROUPS, " gaussian power kron "},
                {DPS_PARAM_POWER_BLOCKS, " gaussian power kron "},
                {DPS_PARAM_POWER_OVERSAMPLE, " gaussian power kron "},
                {DPS_PARAM_DENSE_MAX_D, " gaussian kron "},
                {DPS_PARAM_RHO_EPOCH, " reference projection histogram covariance gaussian power kron "}};
    int n_agg = 0;
    for (int a = 0; strcmp(dps_aggregator_name((dps_aggregator)a), "unknown") != 0; a++, n_agg++) {
        const char *name = dps_aggregator_name((dps_aggregator)a);
        char padded[40];
        snprintf(padded, sizeof padded, " %s ", name);
        for (size_t i = 0; i < sizeof want / sizeof *want; i++)
            CHECK(dps_param_applies(want[i].p, (dps_aggregator)a) == (strstr(want[i].readers, padded) != NULL),
                  "%s reads %s: %d", name, dps_param_name(want[i].p), dps_param_applies(want[i].p, (dps_aggregator)a));
        dps_config c;
        dps_config_init(&c, 40, 3);
        c.aggregator = (dps_aggregator)a;
        c.rho_epoch = 4;
        c.t = 1000;
        c.hist_width = 0.5;
        CHECK((dps_config_check(&c, NULL) != DPS_EINVAL || !dps_param_applies(DPS_PARAM_HIST_WIDTH, c.aggregator)) &&
                  (dps_param_applies(DPS_PARAM_HIST_WIDTH, c.aggregator) || dps_config_check(&c, NULL) != DPS_OK),
              "%s: hist_width refused exactly where it is not read", name);
    }
    CHECK(n_agg == 7, "seven aggregators (%d)", n_agg);
    CHECK(dps_param_applies(DPS_PARAM_Q, (dps_aggregator)n_agg) == 0 &&
              dps_param_applies(DPS_PARAM_COUNT, DPS_AGG_REFERENCE) == 0,
          "out of range: 0");
}

int main(void)
{
    s_test_names();
    s_test_applies();
    s_test_set_get();
    return check_summary();
}
