/* Uses the core and the network library through the installed headers. */
#include <dpsubspace.h>
#include <dpsubspace_net.h>
#include <stdio.h>

int main(void)
{
    dps_config cfg;
    dps_config_init(&cfg, 100, 4);
    dps_keypair kp;
    int rc = dps_config_check(&cfg, NULL) | dps_keypair_generate(&kp);
    printf("dpsubspace %s: %s\n", dps_version(), dps_strerror(rc));
    return rc;
}
