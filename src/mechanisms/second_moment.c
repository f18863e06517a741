/* second_moment.c - C = sum x x^T as rows arrive (see second_moment.h). */
#include "config_internal.h"
#include "second_moment.h"
#include "internal.h"
#include "linalg.h"

#include <string.h>

enum { SM_BLOCK = 256 }; /* rows per dsyrk update of C */
/* Below this width a block's update is too small to share: one dsyrk. */
enum { SM_SHARED_MIN_D = 256 };

size_t second_moment_parts(size_t d, int workers)
{
    return (workers >= 2 && d >= SM_SHARED_MIN_D) ? (size_t)workers : 1;
}

int second_moment_init(second_moment *s, size_t d, dps_pool *pool)
{
    s->d = d;
    s->pending = 0;
    s->pool = pool;
    s->parts = second_moment_parts(d, pool ? pool_size(pool) : 1);
    s->C = calloc(d * d, sizeof *s->C);
    s->block = malloc(SM_BLOCK * d * sizeof *s->block);
    s->cut = malloc((s->parts + 1) * sizeof *s->cut);
    if (!s->C || !s->block || !s->cut) {
        second_moment_free(s);
        return DPS_ENOMEM;
    }
    for (size_t w = 0; w <= s->parts; w++) /* equal areas of the upper triangle */
        s->cut[w] = la_triangle_cut(d, s->parts, w);
    return DPS_OK;
}

void second_moment_free(second_moment *s)
{
    free(s->C);
    free(s->block);
    free(s->cut);
    s->C = s->block = NULL;
    s->cut = NULL;
}

void second_moment_reset(second_moment *s)
{
    memset(s->C, 0, s->d * s->d * sizeof *s->C);
    s->pending = 0;
}

static void s_part(void *arg, size_t w, int worker)
{
    (void)worker;
    second_moment *s = arg;
    la_syrk_rows_add_double_cols(s->block, s->pending, s->d, s->cut[w], s->cut[w + 1], s->C);
}

static void s_flush(second_moment *s)
{
    if (s->parts > 1 && s->pending)
        pool_for(s->pool, s->parts, s_part, s);
    else
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

void second_moment_flush(second_moment *s) { s_flush(s); }

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
