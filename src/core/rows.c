/* rows.c - rows into the unit ball, exactly (see rows.h).

   Why ||dst|| <= 1 holds for every float row (u = 2^-53, the double unit
   roundoff; S = the exact sum of squares; d <= 2^40):
   1. Each x_i^2 is exact in double: a float has 24 significant bits (48 for
      the product, <= 53) and its square lies in [2^-298, 2^256], inside the
      normal double range.  So the sum of squares neither overflows nor
      underflows: any non-zero row has ss > 0 and a finite 1/sqrt(ss) (this is
      what the old float inverse lacked: for a row of entries 1e-41 it
      overflowed to +inf, and for entries near 3e38 it was a subnormal float
      with a few bits of precision).
   2. Adding d non-negative terms in any order gives ss = S(1 + theta),
      |theta| <= g := d 2^-52 (the standard bound (d-1)u/(1-(d-1)u)).
   3. Margin m = 2^-24 + g.  CLIP leaves x unchanged only when ss <= 1 - m,
      and then S <= (1 - m)/(1 - g) < 1.
   4. Otherwise dst_i = toward_zero(x_i * c), c = (1 - m)/sqrt(ss) computed in
      double (m, 1 - m, the root, the quotient and the product: at most six
      roundings of (1 + u) each), so |dst_i| <= |x_i| (1 - m)(1 + 7u)/sqrt(ss)
      and ||dst|| <= (1 - m)(1 + 7u) sqrt(S/ss) <= (1 - m)(1 + 7u)(1 + g) < 1,
      since 2^-24 > 7u + 7ug.  Rounding toward zero (not to nearest) is what
      makes the float step unable to add length.
   A normalised row loses at most m + 2^-23 + 8u of its length (rounding
   toward zero costs at most 2^-23 relative per entry; subnormal results lose
   less than 2^-149 each): for d <= 2^26 its norm is at least 1 - 2^-21. */
#include "rows.h"
#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A float read where it lies: a row inside a received message sits at any
   byte address (its offset in the message is the fields before it), so the
   loops below read through this type, which assumes no alignment. */
typedef float row_float __attribute__((aligned(1), may_alias));

/* Sum of x_i^2 in double: lane l sums the entries i = l mod SS_LANES in
   order, then the lanes are added pairwise (an order of additions the bound
   in 2. covers); NaN or Inf if an entry is.  Sixteen independent sums keep
   the adder busy (one or four sums wait on the adder's latency: a third of
   memory speed); each lane is the same IEEE operations whichever vector
   width runs it, so every clone gives the same bits (test_rows). */
enum { SS_LANES = 16 };

__attribute__((target_clones("default", "avx2", "avx512f")))
static double s_sum_squares(const row_float *x, size_t d)
{
    double a[SS_LANES] = {0};
    size_t i = 0;
    for (; i + SS_LANES <= d; i += SS_LANES)
        for (size_t l = 0; l < SS_LANES; l++) {
            double v = x[i + l];
            a[l] += v * v;
        }
    for (; i < d; i++) {
        double v = x[i];
        a[i % SS_LANES] += v * v;
    }
    /* lanes l and l + w added for w = 8, 4, 2, 1, written out so that the
       sums stay in registers */
    double b0 = a[0] + a[8], b1 = a[1] + a[9], b2 = a[2] + a[10], b3 = a[3] + a[11];
    double b4 = a[4] + a[12], b5 = a[5] + a[13], b6 = a[6] + a[14], b7 = a[7] + a[15];
    double c0 = b0 + b4, c1 = b1 + b5, c2 = b2 + b6, c3 = b3 + b7;
    return (c0 + c2) + (c1 + c3);
}

double row_sum_squares(const float *x, size_t d) { return s_sum_squares((const row_float *)x, d); }

static double s_margin(size_t d) { return 0x1p-24 + (double)d * 0x1p-52; }

/* nextafterf(f, 0) for a finite non-zero f: the same sign, the magnitude's
   bit pattern less one (IEEE-754 binary32 orders magnitudes as integers).
   Without the libm call the normalising loop below vectorises (the call
   took a sixth of an epoch's time at d = 1e3). */
static inline float s_toward_zero(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    b -= 1;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* dst = x c, each entry rounded toward zero (the argument's 4.).  Every row
   the estimator takes passes here: compiled at -O3 (CMakeLists.txt) and for
   the wider vector units, each chosen at load (target_clones), so that the
   loop runs 8 or 16 lanes at a time; every lane makes the same IEEE
   operations as the scalar loop, so the floats are the same bit for bit
   whichever runs (tools/golden, test_rows). */
__attribute__((target_clones("default", "avx2")))
static void s_scale_portable(const row_float *x, size_t n, double c, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        double w = (double)x[i] * c;
        float f = (float)w;
        if (fabs((double)f) > fabs(w)) /* rounded away from zero: one step back */
            f = s_toward_zero(f);
        dst[i] = f;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same products, rounded toward zero by the conversion itself (AVX-512's
   embedded rounding): w = x c rounded to nearest in double, then to float
   toward zero, which is what the portable loop's step back computes.  A
   third of its instructions per entry. */
__attribute__((target("avx512f")))
static void s_scale_avx512(const row_float *x, size_t n, double c, float *dst)
{
    __m512d vc = _mm512_set1_pd(c);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d w = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps((const float *)(x + i))), vc);
        _mm256_storeu_ps(dst + i, _mm512_cvt_roundpd_ps(w, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
    }
    if (i < n) { /* the last n - i < 8 entries, the other lanes masked off (never read or written) */
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        __m256 v = _mm512_castps512_ps256(_mm512_maskz_loadu_ps(k, (const float *)(x + i)));
        __m256 f = _mm512_cvt_roundpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(v), vc), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        _mm512_mask_storeu_ps(dst + i, k, _mm512_castps256_ps512(f));
    }
}
#endif

static int s_portable_only; /* tests only (rows_force_portable) */

void rows_force_portable(int on) { s_portable_only = on; }

static void s_scale(const row_float *x, size_t n, double c, float *dst)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!s_portable_only && __builtin_cpu_supports("avx512f")) {
        s_scale_avx512(x, n, c, dst);
        return;
    }
#endif
    s_scale_portable(x, n, c, dst);
}

int row_fits_unit_ball(const float *x, size_t d)
{
    double ss = row_sum_squares(x, d);
    return isfinite(ss) && ss <= 1.0 - s_margin(d);
}

/* row_unit_part on a row at any address (x may be dst: each entry is read
   before it is written). */
static row_kind s_unit(const row_float *x, size_t n, double ss, size_t d, row_mode mode, float *dst)
{
    if (!isfinite(ss)) { /* NaN if any entry is (NaN + Inf is NaN), else Inf */
        memset(dst, 0, n * sizeof *dst);
        return isnan(ss) ? ROW_NAN : ROW_INF;
    }
    if (ss == 0) { /* only an all-zero row: see 1. */
        memset(dst, 0, n * sizeof *dst);
        return ROW_ZERO;
    }
    double m = s_margin(d);
    if (mode == ROW_CLIP && ss <= 1.0 - m) {
        if ((const void *)dst != (const void *)x)
            memmove(dst, (const void *)x, n * sizeof *dst);
        return ROW_OK;
    }
    s_scale(x, n, (1.0 - m) / sqrt(ss), dst);
    return ROW_OK;
}

row_kind row_unit(const float *x, size_t d, row_mode mode, float *dst)
{
    return s_unit((const row_float *)x, d, row_sum_squares(x, d), d, mode, dst);
}

row_kind row_unit_part(const float *x, size_t n, double ss, size_t d, row_mode mode, float *dst)
{
    return s_unit((const row_float *)x, n, ss, d, mode, dst);
}

row_kind row_unit_le(const unsigned char *x, size_t d, row_mode mode, float *dst)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < d; i++) { /* into host order in dst, then in place */
        uint32_t v = (uint32_t)x[4 * i] | (uint32_t)x[4 * i + 1] << 8 | (uint32_t)x[4 * i + 2] << 16 |
                     (uint32_t)x[4 * i + 3] << 24;
        memcpy(dst + i, &v, 4);
    }
    return row_unit(dst, d, mode, dst);
#else
    const row_float *r = (const row_float *)(const void *)x;
    return s_unit(r, d, s_sum_squares(r, d), d, mode, dst);
#endif
}

const float *rows_clipped(const float *X, size_t n, size_t d, float **owned)
{
    *owned = NULL;
    size_t i = 0;
    while (i < n && row_fits_unit_ball(X + i * d, d))
        i++;
    if (i == n)
        return X;
    float *Y = dps_aligned_alloc(n * d, sizeof(float));
    if (!Y)
        return NULL;
    for (i = 0; i < n; i++)
        row_unit(X + i * d, d, ROW_CLIP, Y + i * d);
    *owned = Y;
    return Y;
}

int rows_gram_clipped(const float *X, size_t n, size_t d, double *C, uint64_t *nonfinite)
{
    enum { ROWS = 64 }; /* rows per dsyrk */
    double *B = malloc(ROWS * d * sizeof *B);
    float *row = malloc(d * sizeof *row);
    if (!B || !row) {
        free(B);
        free(row);
        return DPS_ENOMEM;
    }
    uint64_t bad = 0;
    for (size_t i0 = 0; i0 < n; i0 += ROWS) {
        size_t r = DPS_MIN((size_t)ROWS, n - i0);
        for (size_t i = 0; i < r; i++) {
            row_kind kind = row_unit(X + (i0 + i) * d, d, ROW_CLIP, row);
            bad += kind == ROW_NAN || kind == ROW_INF;
            for (size_t j = 0; j < d; j++)
                B[i * d + j] = row[j];
        }
        la_syrk_rows_add_double(B, r, d, C); /* upper triangle */
    }
    free(B);
    free(row);
    for (size_t i = 0; i < d; i++)
        for (size_t j = i + 1; j < d; j++)
            C[j * d + i] = C[i * d + j];
    if (nonfinite)
        *nonfinite = bad;
    return DPS_OK;
}

/* One split of a row's coordinates for every sharded party (the producers'
   slices, the collector ranks', power_sharded's): shard r gets q = d / n
   coordinates, one more for the first d % n. */
void dps_shard_slice(size_t d, size_t shards, size_t shard, size_t *c0, size_t *c1)
{
    size_t q = shards ? d / shards : d, extra = shards ? d % shards : 0;
    *c0 = shard * q + (shard < extra ? shard : extra);
    *c1 = *c0 + q + (shard < extra ? 1 : 0);
}
