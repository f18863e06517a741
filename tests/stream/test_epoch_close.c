/* test_epoch_close - the end of a release (src/stream/epoch_close.c) in its
   privacy order: nothing is spent unless the decision is RUN; the cap, the
   memory and the commit are asked in that order and each stops what follows;
   the charge is exactly the cost, of the mechanism's kind, and the commit
   sees it before the accountant does; an error after the charge is a FAILED
   release with the budget spent; the totals state the accountant's. */
#include "check.h"
#include "dpsubspace.h"

#include <math.h>
#include <string.h>

typedef struct {
    int reserve_rc, commit_rc; /* what the hooks return */
    int reserved, committed;   /* how often each was called */
    uint64_t epoch;
    dps_zcdp cost, after;
    dps_zcdp spent_at_commit; /* the accountant's total when the commit ran */
    const dps_accountant *acc;
} hooks_probe;

static int s_reserve(void *arg)
{
    hooks_probe *p = arg;
    p->reserved++;
    return p->reserve_rc;
}

static int s_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp after)
{
    hooks_probe *p = arg;
    p->committed++;
    p->epoch = epoch;
    p->cost = cost;
    p->after = after;
    p->spent_at_commit = dps_accountant_spent(p->acc);
    return p->commit_rc;
}

static dps_accountant *s_acc(double rho_cap, double rho_before)
{
    dps_budget cap = {rho_cap, 0, 1e-6};
    dps_zcdp before = {rho_before, 0};
    dps_accountant *acc = NULL;
    CHECK(dps_accountant_new_resumed(&acc, &cap, &before, DPS_CHARGE_GAUSSIAN) == DPS_OK, "accountant");
    return acc;
}

static void s_test_decisions(void)
{
    dps_zcdp cost = {0.25, 0};
    dps_budget cap = {1.0, 0, 1e-6};
    /* too little input: FAILED with the caller's reason, no hook called, nothing spent */
    {
        dps_accountant *acc = s_acc(1.0, 0.5);
        hooks_probe p = {.acc = acc};
        dps_release_hooks h = {s_reserve, s_commit, &p, NULL};
        dps_snapshot_info info = {.epoch = 7};
        int d = dps_release_decide(acc, cost, DPS_CHARGE_GAUSSIAN, "only 2 buckets", &h, &info);
        CHECK(d == DPS_RELEASE_NOT_RUN && info.status == DPS_SNAP_FAILED && strcmp(info.reason, "only 2 buckets") == 0,
              "too little: not run, FAILED (%d)", d);
        CHECK(p.reserved == 0 && p.committed == 0 && dps_accountant_spent(acc).rho == 0.5,
              "too little: no hook, nothing spent");
        dps_accountant_destroy(&acc);
    }
    /* a cost the accountant cannot take (negative, NaN, infinite; a Gaussian
       one with a delta): FAILED before any hook, nothing spent -- the charge
       after a commit must never fail */
    {
        const dps_zcdp bad[] = {{-1e-3, 0}, {0.5, -1e-3}, {NAN, 0}, {0.5, INFINITY}, {0.25, 1e-8}};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            dps_accountant *acc = s_acc(1.0, 0.5);
            hooks_probe p = {.acc = acc};
            dps_release_hooks h = {s_reserve, s_commit, &p, NULL};
            dps_snapshot_info info = {.epoch = 7};
            int d = dps_release_decide(acc, bad[i], DPS_CHARGE_GAUSSIAN, NULL, &h, &info);
            CHECK(d == DPS_RELEASE_NOT_RUN && info.status == DPS_SNAP_FAILED && strstr(info.reason, "not a valid") &&
                      p.reserved == 0 && p.committed == 0 && dps_accountant_spent(acc).rho == 0.5 &&
                      dps_accountant_spent(acc).delta == 0,
                  "invalid cost %zu (%g, %g): not run, no hook, nothing spent (%d)", i, bad[i].rho, bad[i].delta, d);
            dps_accountant_destroy(&acc);
        }
        CHECK(dps_release_decide(NULL, cost, DPS_CHARGE_GAUSSIAN, NULL, NULL, NULL) == DPS_RELEASE_NOT_RUN,
              "no accountant: not run");
    }
    /* past the cap (0.5 + 0.75 > 1): REFUSED, its reason the default or the hooks' */
    for (int own = 0; own < 2; own++) {
        dps_accountant *acc = s_acc(1.0, 0.5);
        hooks_probe p = {.acc = acc};
        dps_release_hooks h = {s_reserve, s_commit, &p, own ? "the mean would pass the cap" : NULL};
        dps_snapshot_info info = {.epoch = 7};
        int d = dps_release_decide(acc, (dps_zcdp){0.75, 0}, DPS_CHARGE_GAUSSIAN, NULL, &h, &info);
        CHECK(d == DPS_RELEASE_NOT_RUN && info.status == DPS_SNAP_REFUSED, "cap: refused (%d)", d);
        CHECK(strstr(info.reason, own ? "the mean" : "would pass the privacy budget cap: nothing was spent") != NULL,
              "cap: reason %s", info.reason);
        CHECK(p.reserved == 0 && p.committed == 0 && dps_accountant_spent(acc).rho == 0.5 && info.epoch_cost.rho == 0,
              "cap: no hook, nothing spent");
        dps_accountant_destroy(&acc);
    }
    /* a cost that fits exactly (0.5 + 0.5 = 1) runs */
    {
        dps_accountant *acc = s_acc(1.0, 0.5);
        dps_snapshot_info info = {0};
        CHECK(dps_release_decide(acc, (dps_zcdp){0.5, 0}, DPS_CHARGE_GAUSSIAN, NULL, NULL, &info) == DPS_RELEASE_RUN &&
                  dps_accountant_spent(acc).rho == 1.0,
              "at the cap exactly: run, charged");
        dps_accountant_destroy(&acc);
    }
    /* no memory: the commit is not called, nothing spent */
    {
        dps_accountant *acc = s_acc(1.0, 0.5);
        hooks_probe p = {.acc = acc, .reserve_rc = DPS_ENOMEM};
        dps_release_hooks h = {s_reserve, s_commit, &p, NULL};
        dps_snapshot_info info = {0};
        int d = dps_release_decide(acc, cost, DPS_CHARGE_GAUSSIAN, NULL, &h, &info);
        CHECK(d == DPS_RELEASE_NO_MEMORY && p.reserved == 1 && p.committed == 0 && dps_accountant_spent(acc).rho == 0.5,
              "no memory: not committed, nothing spent (%d)", d);
        dps_accountant_destroy(&acc);
    }
    /* the commit refuses: nothing charged */
    {
        dps_accountant *acc = s_acc(1.0, 0.5);
        hooks_probe p = {.acc = acc, .commit_rc = -1};
        dps_release_hooks h = {s_reserve, s_commit, &p, NULL};
        dps_snapshot_info info = {.epoch = 9};
        int d = dps_release_decide(acc, cost, DPS_CHARGE_GAUSSIAN, NULL, &h, &info);
        CHECK(d == DPS_RELEASE_UNCOMMITTED && p.committed == 1 && dps_accountant_spent(acc).rho == 0.5 &&
                  info.epoch_cost.rho == 0,
              "commit refused: uncommitted, nothing charged (%d)", d);
        dps_accountant_destroy(&acc);
    }
    /* run: the commit sees the epoch, the cost and the total after, before the
       accountant is charged; then the charge is exactly the cost, of its kind */
    for (int kind = 0; kind < 2; kind++) {
        dps_accountant *acc = s_acc(1.0, 0.5);
        hooks_probe p = {.acc = acc};
        dps_release_hooks h = {s_reserve, s_commit, &p, NULL};
        dps_snapshot_info info = {.epoch = 11};
        dps_zcdp c = kind ? (dps_zcdp){0.25, 1e-8} : cost;
        int d = dps_release_decide(acc, c, kind ? DPS_CHARGE_ZCDP : DPS_CHARGE_GAUSSIAN, NULL, &h, &info);
        CHECK(d == DPS_RELEASE_RUN && p.reserved == 1 && p.committed == 1, "run (%d)", d);
        CHECK(p.epoch == 11 && p.cost.rho == 0.25 && p.cost.delta == c.delta && p.after.rho == 0.75 &&
                  p.after.delta == c.delta && p.spent_at_commit.rho == 0.5,
              "run: committed epoch %llu cost %g after %g, at commit the accountant had %g",
              (unsigned long long)p.epoch, p.cost.rho, p.after.rho, p.spent_at_commit.rho);
        CHECK(dps_accountant_spent(acc).rho == 0.75 && dps_accountant_spent(acc).delta == c.delta &&
                  info.epoch_cost.rho == 0.25,
              "run: charged the cost");
        CHECK(dps_accountant_kind(acc) == (kind ? DPS_CHARGE_ZCDP : DPS_CHARGE_GAUSSIAN), "run: charged of its kind");
        /* totals: the accountant's, at the cap's delta */
        dps_release_totals(acc, &cap, &info);
        CHECK(info.delta_target == 1e-6 && info.total.rho == 0.75 && info.budget_left == 0.25 &&
                  strcmp(info.budget_unit, "rho") == 0 && info.eps_total == dps_accountant_eps(acc, 1e-6),
              "totals: delta %g total %g left %g unit %s", info.delta_target, info.total.rho, info.budget_left,
              info.budget_unit);
        dps_accountant_destroy(&acc);
    }
    /* totals without a cap: delta_target the default, nothing left to count */
    {
        dps_accountant *acc = NULL;
        CHECK(dps_accountant_new(&acc, NULL, NULL) == DPS_OK, "accountant without a cap");
        dps_snapshot_info info = {0};
        dps_release_totals(acc, NULL, &info);
        CHECK(info.delta_target == DPS_DELTA_TARGET_DEFAULT && isinf(info.budget_left) &&
                  strcmp(info.budget_unit, "none") == 0,
              "totals without a cap");
        dps_accountant_destroy(&acc);
    }
}

static void s_test_outcomes(void)
{
    char buf[200];
    dps_snapshot_info info = {0};
    dps_release_outcome(&info, DPS_OK, 0, "unused", "the mechanism", buf, sizeof buf);
    CHECK(info.status == DPS_SNAP_RELEASED && info.reason[0] == '\0', "released");
    dps_release_outcome(&info, DPS_OK, 1, "WFC said FAIL", "the mechanism", buf, sizeof buf);
    CHECK(info.status == DPS_SNAP_FAILED && strcmp(info.reason, "WFC said FAIL") == 0, "the mechanism's FAIL");
    dps_release_outcome(&info, DPS_OK, 1, NULL, "the mechanism", buf, sizeof buf);
    CHECK(info.status == DPS_SNAP_FAILED && info.reason && strstr(info.reason, "FAIL"), "a FAIL without a reason: one");
    /* an error after the charge: FAILED, budget spent, the error named (over a FAIL) */
    dps_release_outcome(&info, DPS_ENUMERIC, 1, "WFC said FAIL", "Analyze Gauss", buf, sizeof buf);
    CHECK(info.status == DPS_SNAP_FAILED && info.reason == buf && strstr(buf, "Analyze Gauss stopped on an internal "
                                                                              "error after the budget was charged") &&
              strstr(buf, dps_strerror(DPS_ENUMERIC)) && strstr(buf, "budget spent"),
          "an error after the charge: %s", info.reason);
}

int main(void)
{
    s_test_decisions();
    s_test_outcomes();
    return check_summary();
}
