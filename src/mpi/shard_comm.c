/* shard_comm.c - the sharded mechanisms' collective steps (shard_comm.h). */
#include "shard_comm.h"
#include "dpsubspace.h"


static void s_count(shard_traffic *t, size_t bytes)
{
    if (t) {
        t->bytes += bytes;
        t->calls++;
    }
}

int shard_agree(MPI_Comm comm, int rc, shard_traffic *t)
{
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, comm);
    s_count(t, sizeof(int));
    return worst;
}

void shard_sum(MPI_Comm comm, double *buf, size_t n, shard_traffic *t)
{
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, comm);
    s_count(t, n * sizeof(double));
}

void shard_sum_to_rank0(MPI_Comm comm, double *buf, size_t n, shard_traffic *t)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : buf, buf, (int)n, MPI_DOUBLE, MPI_SUM, 0, comm);
    s_count(t, n * sizeof(double));
}

void shard_from_rank0(MPI_Comm comm, double *buf, size_t n, shard_traffic *t)
{
    MPI_Bcast(buf, (int)n, MPI_DOUBLE, 0, comm);
    s_count(t, n * sizeof(double));
}

void shard_gather_rows(MPI_Comm comm, size_t k, size_t d, const float *slice, float *out, shard_traffic *t)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int counts[size], displs[size]; /* one per rank: small */
    size_t c0 = 0, c1 = 0;
    dps_shard_slice(d, (size_t)size, (size_t)rank, &c0, &c1);
    size_t w = c1 - c0;
    if (rank == 0)
        for (int r = 0; r < size; r++) {
            size_t a, b;
            dps_shard_slice(d, (size_t)size, (size_t)r, &a, &b);
            counts[r] = (int)(b - a);
            displs[r] = (int)a;
        }
    for (size_t j = 0; j < k; j++)
        MPI_Gatherv(slice + j * w, (int)w, MPI_FLOAT, rank == 0 ? out + j * d : NULL, counts, displs, MPI_FLOAT, 0,
                    comm);
    if (t) {
        t->bytes += k * w * sizeof(float);
        t->calls += k;
    }
}
