/* sharded_none.c - dps-collector built without MPI: --sharded is refused
   (the sharded mode is src/mpi/collector_sharded.c). */
#include "collector.h"

#include <stdio.h>

int collector_sharded_start(int *argc, char ***argv, int *rank, int *size, char *err, size_t errlen)
{
    (void)argc;
    (void)argv;
    *rank = 0;
    *size = 1;
    snprintf(err, errlen, "--sharded needs MPI, and this dps-collector was built without it (install Open MPI: "
             "tools/setup does; then build again)");
    return -1;
}

int collector_sharded_agree(int rc) { return rc; }

int collector_sharded_serve(collector *c, dps_config *cfg, const dps_keypair *kp, int rank, int size)
{
    (void)c;
    (void)cfg;
    (void)kp;
    (void)rank;
    (void)size;
    return 2;
}

void collector_sharded_end(void) {}
