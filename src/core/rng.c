/* rng.c - random sources: a ChaCha20 keystream (libsodium) keyed either from
   the OS entropy pool (secure mode) or from a seed (reproducible mode), and the
   samplers built on it.

   Both modes share one code path; only the 32-byte key differs, so a test run in
   seeded mode exercises exactly the sampler code that secure mode runs.
   Floating-point caveat: Gaussian and Laplace samples are computed in double
   precision from 53-bit uniforms; like every floating-point DP implementation
   this is not immune to the precision attacks of Mironov (CCS 2012). */
#include "dpsubspace.h"
#include "internal.h"

#include <math.h>
#include <sodium.h>
#include <string.h>

#define RNG_BUF 1024 /* keystream bytes made per refill (16 ChaCha20 blocks) */

struct dps_rng {
    unsigned char key[crypto_stream_chacha20_KEYBYTES];
    unsigned char nonce[crypto_stream_chacha20_NONCEBYTES];
    uint64_t block;             /* next ChaCha20 block counter */
    unsigned char buf[RNG_BUF];
    size_t pos;                 /* bytes of buf already used */
    int seeded;
    int has_spare;              /* Box-Muller makes two normals */
    double spare;
};

static const unsigned char s_zeros[RNG_BUF];

static int s_sodium_ready(void)
{
    return sodium_init() >= 0; /* 0 first time, 1 after; -1 on failure */
}

/* r's stream from its first byte under key (whatever r held before). */
static void s_set_key(dps_rng *r, const unsigned char *key, int seeded)
{
    memcpy(r->key, key, sizeof r->key);
    memset(r->nonce, 0, sizeof r->nonce);
    r->block = 0;
    r->pos = RNG_BUF;
    r->seeded = seeded;
    r->has_spare = 0;
    r->spare = 0;
}

static int s_new_with_key(dps_rng **out, const unsigned char *key, int seeded)
{
    if (!out)
        return DPS_EINVAL;
    *out = NULL;
    dps_rng *r = calloc(1, sizeof *r);
    if (!r)
        return DPS_ENOMEM;
    s_set_key(r, key, seeded);
    *out = r;
    return DPS_OK;
}

size_t rng_bytes(void) { return sizeof(struct dps_rng); }

int dps_rng_new_secure(dps_rng **out)
{
    if (!s_sodium_ready())
        return DPS_ERANDOM;
    unsigned char key[crypto_stream_chacha20_KEYBYTES];
    randombytes_buf(key, sizeof key);
    int rc = s_new_with_key(out, key, 0);
    sodium_memzero(key, sizeof key);
    return rc;
}

int dps_rng_new_labelled(dps_rng **out, uint64_t seed, const char *label, uint64_t index)
{
    if (!s_sodium_ready())
        return DPS_ERANDOM;
    unsigned char key[crypto_stream_chacha20_KEYBYTES];
    unsigned char le[16];
    for (int i = 0; i < 8; i++) {
        le[i] = (unsigned char)(seed >> (8 * i));
        le[8 + i] = (unsigned char)(index >> (8 * i));
    }
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof key);
    static const char domain[] = "dpsubspace/rng/v1";
    crypto_generichash_update(&st, (const unsigned char *)domain, sizeof domain);
    const char *lab = label ? label : "";
    crypto_generichash_update(&st, (const unsigned char *)lab, strlen(lab) + 1);
    crypto_generichash_update(&st, le, sizeof le);
    crypto_generichash_final(&st, key, sizeof key);
    return s_new_with_key(out, key, 1);
}

int dps_rng_new_seeded(dps_rng **out, uint64_t seed)
{
    return dps_rng_new_labelled(out, seed, "seeded", 0);
}

static void s_bytes(dps_rng *r, void *dst, size_t n)
{
    unsigned char *d = dst;
    while (n) {
        if (r->pos == RNG_BUF) {
            crypto_stream_chacha20_xor_ic(r->buf, s_zeros, RNG_BUF, r->nonce, r->block, r->key);
            r->block += RNG_BUF / 64;
            r->pos = 0;
        }
        size_t take = DPS_MIN(n, (size_t)(RNG_BUF - r->pos));
        memcpy(d, r->buf + r->pos, take);
        r->pos += take;
        d += take;
        n -= take;
    }
}

void rng_rekey(dps_rng *child, dps_rng *parent)
{
    unsigned char key[crypto_stream_chacha20_KEYBYTES];
    s_bytes(parent, key, sizeof key);
    s_set_key(child, key, parent->seeded);
    sodium_memzero(key, sizeof key);
}

int rng_forks_new(dps_rng **forks, size_t n)
{
    for (size_t c = 0; c < n; c++)
        if (dps_rng_new_seeded(&forks[c], 0) != DPS_OK) { /* keyed at each use */
            rng_forks_destroy(forks, n);
            return DPS_ENOMEM;
        }
    return DPS_OK;
}

void rng_forks_key(dps_rng **forks, size_t n, dps_rng *parent)
{
    for (size_t c = 0; c < n; c++)
        rng_rekey(forks[c], parent);
}

void rng_forks_destroy(dps_rng **forks, size_t n)
{
    for (size_t c = 0; c < n; c++)
        dps_rng_destroy(&forks[c]);
}

int dps_rng_fork(dps_rng *parent, dps_rng **out)
{
    if (!parent || !out)
        return DPS_EINVAL;
    *out = NULL;
    dps_rng *r = calloc(1, sizeof *r); /* before the draw: a fork refused for memory leaves the parent as it was */
    if (!r)
        return DPS_ENOMEM;
    unsigned char key[crypto_stream_chacha20_KEYBYTES];
    s_bytes(parent, key, sizeof key);
    s_set_key(r, key, parent->seeded);
    sodium_memzero(key, sizeof key);
    *out = r;
    return DPS_OK;
}

void dps_rng_destroy(dps_rng **rng)
{
    if (!rng || !*rng)
        return;
    sodium_memzero(*rng, sizeof **rng);
    free(*rng);
    *rng = NULL;
}

int dps_rng_is_seeded(const dps_rng *rng) { return rng ? rng->seeded : 0; }

/* 8 keystream bytes as a little-endian integer (the same on every host). */
static uint64_t s_u64_of(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

uint64_t dps_rng_u64(dps_rng *rng)
{
    unsigned char b[8];
    s_bytes(rng, b, 8);
    return s_u64_of(b);
}

/* (j + 0.5) / 2^53 for j uniform in [0, 2^53): exact, in (0, 1). */
static double s_uniform_of(const unsigned char *b) { return ((double)(s_u64_of(b) >> 11) + 0.5) * 0x1.0p-53; }

double dps_rng_uniform(dps_rng *rng)
{
    unsigned char b[8];
    s_bytes(rng, b, 8);
    return s_uniform_of(b);
}

uint64_t dps_rng_below(dps_rng *rng, uint64_t n)
{
    if (n <= 1)
        return 0;
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n) - 1; /* accept v <= limit */
    for (;;) {
        uint64_t v = dps_rng_u64(rng);
        if (v <= limit)
            return v % n;
    }
}

/* Box-Muller: two independent N(0, 1) from two uniforms in (0, 1), as
   sigma * r * cos(a) (returned, for the given sigma) and r * sin(a) (*spare,
   scaled when it is used): the operations and their order of the first
   version, so seeded streams keep their bits. */
static double s_box_muller(double u1, double u2, double sigma, double *spare)
{
    double r = sqrt(-2.0 * log(u1));
    double a = 2.0 * M_PI * u2;
    *spare = r * sin(a);
    return sigma * r * cos(a);
}

double dps_rng_gaussian(dps_rng *rng, double sigma)
{
    if (rng->has_spare) {
        rng->has_spare = 0;
        return sigma * rng->spare;
    }
    double u1 = dps_rng_uniform(rng), u2 = dps_rng_uniform(rng);
    rng->has_spare = 1;
    return s_box_muller(u1, u2, sigma, &rng->spare);
}

double dps_rng_laplace(dps_rng *rng, double b)
{
    /* Difference of two Exp(1) variables is Laplace(0, 1). */
    double e1 = -log(dps_rng_uniform(rng));
    double e2 = -log(dps_rng_uniform(rng));
    return b * (e1 - e2);
}

/* n samples, the same values as n calls of dps_rng_gaussian (the same
   keystream bytes, pairs and spare, the same operations in the same order),
   with the keystream taken FILL_PAIRS pairs at a time: the per-call overhead
   was a third of a sample's cost, and the release draws q d reference points
   and q d noise values an epoch (8e5 at d = 1e4). */
#define FILL_PAIRS 128
typedef enum { FILL_DOUBLE, FILL_FLOAT, ADD_DOUBLE } fill_kind;

static void s_put(void *out, size_t i, double v, fill_kind kind)
{
    if (kind == FILL_FLOAT)
        ((float *)out)[i] = (float)v;
    else if (kind == FILL_DOUBLE)
        ((double *)out)[i] = v;
    else
        ((double *)out)[i] += v;
}

static void s_gaussian_fill(dps_rng *rng, double sigma, void *out, size_t n, fill_kind kind)
{
    size_t i = 0;
    if (n && rng->has_spare) {
        rng->has_spare = 0;
        s_put(out, i++, sigma * rng->spare, kind);
    }
    unsigned char b[FILL_PAIRS * 16];
    while (i < n) {
        size_t pairs = DPS_MIN((size_t)FILL_PAIRS, (n - i + 1) / 2);
        s_bytes(rng, b, pairs * 16);
        for (size_t p = 0; p < pairs; p++) {
            double z1;
            s_put(out, i++, s_box_muller(s_uniform_of(b + 16 * p), s_uniform_of(b + 16 * p + 8), sigma, &z1), kind);
            if (i < n) {
                s_put(out, i++, sigma * z1, kind);
            } else {
                rng->spare = z1;
                rng->has_spare = 1;
            }
        }
    }
    sodium_memzero(b, sizeof b); /* keystream (secure mode) does not stay on the stack */
}

void dps_rng_gaussian_fill(dps_rng *rng, double sigma, double *out, size_t n)
{
    s_gaussian_fill(rng, sigma, out, n, FILL_DOUBLE);
}

void dps_rng_gaussian_fill_f(dps_rng *rng, double sigma, float *out, size_t n)
{
    s_gaussian_fill(rng, sigma, out, n, FILL_FLOAT);
}

void dps_rng_gaussian_add(dps_rng *rng, double sigma, double *x, size_t n)
{
    s_gaussian_fill(rng, sigma, x, n, ADD_DOUBLE);
}
