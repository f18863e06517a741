/* test_rows - rows into the unit ball (src/core/rows.c): for every kind of float
   row (NaN, Inf, zero, subnormal, near FLT_MAX, mixed magnitudes, random at
   every scale) the result's norm is <= 1 when measured exactly, a normalised
   row's norm is >= 1 - 2^-21, and the kind is reported. */
#include "check.h"
#include "dpsubspace.h"
#include "rows.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An upper bound on ||x||^2 that is rigorous: each x_i^2 is exact in double
   (a float's 24-bit significand squared fits 53 bits; its exponent range fits
   double's), and a long-double (64-bit significand) sum of d non-negative
   terms is within d 2^-63 relative of the exact sum. */
static long double s_norm2_upper(const float *x, size_t d)
{
    long double s = 0;
    for (size_t i = 0; i < d; i++) {
        double v = (double)x[i] * (double)x[i];
        s += v;
    }
    return s * (1.0L + (long double)d * 0x1p-62L);
}

static long double s_norm2_lower(const float *x, size_t d)
{
    long double s = 0;
    for (size_t i = 0; i < d; i++)
        s += (double)x[i] * (double)x[i];
    return s * (1.0L - (long double)d * 0x1p-62L);
}

static int s_all_zero(const float *x, size_t d)
{
    for (size_t i = 0; i < d; i++)
        if (x[i] != 0)
            return 0;
    return 1;
}

static void s_fill(float *x, size_t d, float v)
{
    for (size_t i = 0; i < d; i++)
        x[i] = v;
}

/* row_unit's ROW_NORMALISE written the plain way (rows.c's comment, 4.):
   the sum of squares in rows.c's order (16 lanes, entry i in lane i mod 16,
   the lanes added pairwise), c = (1 - m)/sqrt(ss), each product rounded
   toward zero with libm's nextafterf.  rows.c steps toward zero by the bit
   pattern, or by AVX-512's rounding mode, instead (so that its loop
   vectorises): they must all agree bit for bit. */
static void s_reference_unit(const float *x, size_t d, float *out)
{
    double a[16] = {0};
    for (size_t i = 0; i < d; i++)
        a[i % 16] += (double)x[i] * x[i];
    for (size_t w = 8; w >= 1; w /= 2)
        for (size_t l = 0; l < w; l++)
            a[l] += a[l + w];
    double c = (1.0 - (0x1p-24 + (double)d * 0x1p-52)) / sqrt(a[0]);
    for (size_t i = 0; i < d; i++) {
        double w = (double)x[i] * c;
        float f = (float)w;
        out[i] = fabs((double)f) > fabs(w) ? nextafterf(f, 0.0f) : f;
    }
}

/* r (d floats) through row_unit with each scaling loop, and through
   row_unit_le from each byte offset 0..3 (a row inside a received message
   lies at any address): every one the reference's bits. */
static void s_check_bits(const char *what, const float *r, size_t d)
{
    float *got = malloc(d * sizeof *got), *want = malloc(d * sizeof *want);
    unsigned char *bytes = malloc(d * 4 + 4);
    s_reference_unit(r, d, want);
    for (int portable = 0; portable <= 1; portable++) {
        rows_force_portable(portable);
        row_unit(r, d, ROW_NORMALISE, got);
        CHECK(memcmp(got, want, d * sizeof *got) == 0, "%s (%s loop): the same bits as nextafterf's", what,
              portable ? "portable" : "fastest");
        for (size_t off = 0; off < 4; off++) {
            for (size_t i = 0; i < d; i++) { /* little-endian float32, as the wire carries them */
                uint32_t v;
                memcpy(&v, r + i, 4);
                for (int b = 0; b < 4; b++)
                    bytes[off + 4 * i + (size_t)b] = (unsigned char)(v >> (8 * b));
            }
            memset(got, 0xff, d * sizeof *got);
            row_kind k = row_unit_le(bytes + off, d, ROW_NORMALISE, got);
            CHECK(k == ROW_OK && memcmp(got, want, d * sizeof *got) == 0,
                  "%s (%s loop): row_unit_le at byte offset %zu gives the same bits", what,
                  portable ? "portable" : "fastest", off);
        }
    }
    rows_force_portable(0);
    free(got);
    free(want);
    free(bytes);
}

/* One row through both modes; expect the kind `want` (and, for a scaled
   row, the reference's bits from every loop and address). */
static void s_check_row(const char *what, const float *x, size_t d, row_kind want)
{
    if (want == ROW_OK)
        s_check_bits(what, x, d);
    float *y = malloc(d * sizeof *y);
    for (int mode = ROW_NORMALISE; mode <= ROW_CLIP; mode++) {
        memset(y, 0x7f, d * sizeof *y); /* garbage that would show */
        row_kind got = row_unit(x, d, (row_mode)mode, y);
        CHECK(got == want, "%s (mode %d): kind %d, want %d", what, mode, got, want);
        long double up = s_norm2_upper(y, d);
        CHECK(up <= 1.0L, "%s (mode %d): ||y||^2 up to %.21Lg > 1", what, mode, up);
        if (want != ROW_OK) {
            CHECK(s_all_zero(y, d), "%s (mode %d): a bad row becomes the zero vector", what, mode);
            continue;
        }
        if (mode == ROW_NORMALISE || s_norm2_lower(x, d) > 1.0L) {
            /* 2 x 2^-21 + a margin for the squares: norm >= 1 - 2^-21 */
            long double lo = s_norm2_lower(y, d);
            CHECK(lo >= 1.0L - 0x1p-20L, "%s (mode %d): ||y||^2 %.21Lg below 1 - 2^-20", what, mode, lo);
        }
        /* the direction is kept: the largest entry keeps its sign */
        size_t top = 0;
        for (size_t i = 1; i < d; i++)
            if (fabsf(x[i]) > fabsf(x[top]))
                top = i;
        CHECK((double)y[top] * (double)x[top] > 0, "%s (mode %d): largest entry %g -> %g", what, mode,
              (double)x[top], (double)y[top]);
    }
    /* in place */
    memcpy(y, x, d * sizeof *y);
    row_kind got = row_unit(y, d, ROW_NORMALISE, y);
    CHECK(got == want && s_norm2_upper(y, d) <= 1.0L, "%s: in place", what);
    free(y);
}

int main(void)
{
    enum { D = 257 };
    float x[D];

    /* The issue 9 row: every entry 1e-41 (subnormal).  Its inverse norm
       overflowed a float before; now it is a unit row. */
    s_fill(x, D, 1e-41f);
    s_check_row("all entries 1e-41", x, D, ROW_OK);
    memset(x, 0, sizeof x);
    x[17] = FLT_TRUE_MIN;
    s_check_row("one entry FLT_TRUE_MIN", x, D, ROW_OK);
    s_fill(x, D, 3e38f);
    s_check_row("all entries 3e38", x, D, ROW_OK);
    s_fill(x, D, -FLT_MAX);
    s_check_row("all entries -FLT_MAX", x, D, ROW_OK);
    s_fill(x, D, 1e-41f);
    x[3] = FLT_MAX;
    s_check_row("FLT_MAX among subnormals", x, D, ROW_OK);
    memset(x, 0, sizeof x);
    s_check_row("zero", x, D, ROW_ZERO);
    s_fill(x, D, 0.5f);
    x[100] = NAN;
    s_check_row("one NaN", x, D, ROW_NAN);
    x[101] = INFINITY;
    s_check_row("NaN and Inf", x, D, ROW_NAN);
    x[100] = -INFINITY;
    s_check_row("-Inf and Inf", x, D, ROW_INF);

    /* Rows whose norm is exactly 1, or a rounding away from it: CLIP must not
       let them out above 1. */
    memset(x, 0, sizeof x);
    x[0] = 1.0f;
    s_check_row("e_1", x, D, ROW_OK);
    x[0] = nextafterf(1.0f, 2.0f);
    s_check_row("e_1 (1 + 2^-23)", x, D, ROW_OK);
    s_fill(x, D, (float)(1.0 / sqrt((double)D)));
    s_check_row("1/sqrt(d) everywhere", x, D, ROW_OK);

    /* Random rows at scales from 2^-140 to 2^120, several dimensions. */
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 9);
    size_t dims[] = {1, 2, 3, 7, 23, 64, 1000, 100003};
    char what[80];
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
        size_t d = dims[di];
        float *r = malloc(d * sizeof *r);
        for (int e = -140; e <= 120; e += 13) {
            dps_rng_gaussian_fill_f(rng, 1.0, r, d);
            for (size_t i = 0; i < d; i++)
                r[i] = ldexpf(r[i], e) / sqrtf((float)d);
            snprintf(what, sizeof what, "random d=%zu scale 2^%d", d, e);
            s_check_row(what, r, d, s_all_zero(r, d) ? ROW_ZERO : ROW_OK);
            if (!s_all_zero(r, d))
                s_check_bits(what, r, d);
        }
        free(r);
    }
    dps_rng_destroy(&rng);

    /* row_fits_unit_ball: only finite rows safely inside. */
    s_fill(x, D, 0.01f);
    CHECK(row_fits_unit_ball(x, D), "a short row fits");
    x[0] = NAN;
    CHECK(!row_fits_unit_ball(x, D), "NaN does not fit");
    memset(x, 0, sizeof x);
    x[0] = 1.0f;
    CHECK(!row_fits_unit_ball(x, D), "a unit row is not 'safely inside' (it is clipped by the margin)");
    return check_summary();
}
