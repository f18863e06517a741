/* second_moment.c - C = sum x x^T as rows arrive (see second_moment.h). */
#include "config_internal.h"
#include "second_moment.h"
#include "internal.h"
#include "linalg.h"

#include <string.h>

enum { SM_BLOCK = 64 }; /* rows per dsyrk update of C */

int second_moment_init(second_moment *s, size_t d)
{
    s->d = d;
    s->pending = 0;
    s->C = calloc(d * d, sizeof *s->C);
    s->block = malloc(SM_BLOCK * d * sizeof *s->block);
    if (!s->C || !s->block) {
        second_moment_free(s);
        return DPS_ENOMEM;
    }
    return DPS_OK;
}

void second_moment_free(second_moment *s)
{
    free(s->C);
    free(s->block);
    s->C = s->block = NULL;
}

void second_moment_reset(second_moment *s)
{
    memset(s->C, 0, s->d * s->d * sizeof *s->C);
    s->pending = 0;
}

static void s_flush(second_moment *s)
{
    la_syrk_rows_add_double(s->block, s->pending, s->d, s->C);
    s->pending = 0;
}

void second_moment_add(second_moment *s, const float *row)
{
    double *dst = s->block + s->pending * s->d;
    for (size_t i = 0; i < s->d; i++)
        dst[i] = row[i];
    if (++s->pending == SM_BLOCK)
        s_flush(s);
}

void second_moment_finish(second_moment *s)
{
    s_flush(s);
    size_t d = s->d;
    for (size_t i = 0; i < d; i++)
        for (size_t j = i + 1; j < d; j++)
            s->C[j * d + i] = s->C[i * d + j];
}

size_t second_moment_block_rows(void) { return SM_BLOCK; }

size_t second_moment_bytes(size_t d) { return (d * d + SM_BLOCK * d) * sizeof(double); }

size_t epoch_rows_min_buckets(const dps_config *c)
{
    (void)c;
    return 2; /* no buckets: any epoch with a row can be released */
}

dps_zcdp epoch_rows_cost(const dps_config *c) { return (dps_zcdp){c->rho_epoch, 0.0}; }

double epoch_rows_radius_unrelated(const dps_config *c)
{
    (void)c;
    return 0.0; /* no buckets, no radius */
}
