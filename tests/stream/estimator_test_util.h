/* estimator_test_util.h - what the streaming estimator's test programs share:
   a seeded configuration, a commit hook that counts the charges, one epoch
   pushed and closed.  Static: each test program compiles its own copy. */
#ifndef DPS_TEST_ESTIMATOR_UTIL_H
#define DPS_TEST_ESTIMATOR_UTIL_H

#include "config_internal.h"
#include "dpsubspace.h"

static inline dps_config s_cfg(size_t d, size_t k, size_t t, size_t m, uint64_t seed)
{
    dps_config c;
    dps_config_init(&c, d, k);
    c.t = t;
    c.m = m;
    c.window = t;
    c.seeded = 1;
    c.seed = seed;
    c.workers = 2;
    return c;
}

/* ------------------------------------------------------------ commit hook */
typedef struct {
    int calls, fail;
    double rho_seen;
} ledger;

static inline int s_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp after)
{
    (void)epoch; (void)after;
    ledger *l = arg;
    l->calls++;
    l->rho_seen += cost.rho;
    return l->fail;
}

static inline dps_snapshot *s_run_epoch(dps_estimator *e, const float *rows, size_t n, size_t d)
{
    size_t taken = 0;
    dps_estimator_push(e, rows, n, d, &taken);
    dps_snapshot *s = NULL;
    dps_estimator_close_epoch(e, &s);
    return s;
}

#endif
