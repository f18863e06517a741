/* shard_comm.h - the collective steps the sharded mechanisms
   (power_sharded.c, reference_sharded.c) and the sharded collector share.
   Each counts what this rank sends into a shard_traffic (the benchmarks'
   "bytes moved" and calls: each call costs a latency); NULL counts nothing.
   Collective: every rank of comm calls them in the same order. */
#ifndef DPS_SHARD_COMM_H
#define DPS_SHARD_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t bytes; /* bytes this rank sent into allreduces, reduces, broadcasts, gathers */
    uint64_t calls; /* ... in how many collective calls                           */
} shard_traffic;

/* rc of every rank -> the largest on every rank (DPS_OK is 0, errors are
   positive): all ranks go on, or all stop with the same code. */
int shard_agree(MPI_Comm comm, int rc, shard_traffic *t);
/* buf (n doubles) = the sum over the ranks, on every rank. */
void shard_sum(MPI_Comm comm, double *buf, size_t n, shard_traffic *t);
/* buf (n doubles) = the sum over the ranks, on rank 0 (the others' buf is
   left as it was or overwritten: not to be read). */
void shard_sum_to_rank0(MPI_Comm comm, double *buf, size_t n, shard_traffic *t);
/* buf (n doubles) = rank 0's, on every rank. */
void shard_from_rank0(MPI_Comm comm, double *buf, size_t n, shard_traffic *t);
/* The whole k x d matrix on rank 0 (out there; NULL elsewhere) from every
   rank's k x w slice of columns dps_shard_slice(d, R, rank). */
void shard_gather_rows(MPI_Comm comm, size_t k, size_t d, const float *slice, float *out, shard_traffic *t);

#endif
