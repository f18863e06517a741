/* Uses the core and the network library through the installed headers: the
   configuration is an opaque handle, set by parameter. */
#include <dpsubspace.h>
#include <dpsubspace_net.h>
#include <stdio.h>

int main(void)
{
    dps_config *cfg = NULL;
    int rc = dps_config_new(&cfg, 100, 4);
    if (!rc)
        rc = dps_config_set_int(cfg, DPS_PARAM_AGGREGATOR, DPS_AGG_GAUSSIAN) |
             dps_config_set_real(cfg, DPS_PARAM_RHO_EPOCH, 0.5) | dps_config_check(cfg, NULL);
    dps_estimator *est = NULL;
    if (!rc)
        rc = dps_estimator_new(&est, cfg);
    dps_estimator_destroy(&est);
    dps_config_destroy(&cfg);
    dps_keypair kp;
    rc |= dps_keypair_generate(&kp);
    printf("dpsubspace %s: %s\n", dps_version(), dps_strerror(rc));
    return rc;
}
