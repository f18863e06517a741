/* bench_common.h - helpers shared by the benchmarks in tools/bench (not part of
   the library): clocks, a fast non-cryptographic generator for test data, the
   environment header every report starts with, the in-run references (sgemm
   peak, memory read bandwidth) that the headline ratios are taken against, and
   the value kinds of their flags (parsed by src/args/args.h, as every program).

   Everything here is static: each benchmark is one translation unit plus this
   header. */
#ifndef DPS_BENCH_COMMON_H
#define DPS_BENCH_COMMON_H

#include "config_internal.h"
#include "args.h"
#include "dpsubspace.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ clocks */
static inline double b_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (all threads), seconds. */
static inline double b_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the calling thread, seconds. */
static inline double b_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* -------------------------------------------------- test-data generator */
/* xoshiro256** (Blackman-Vigna): fast, NOT cryptographic.  Benchmark data only;
   the library's own noise never comes from here. */
typedef struct { uint64_t s[4]; } b_rng;

static inline uint64_t b_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t b_u64(b_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = b_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = b_rotl(s[3], 45);
    return out;
}

static inline void b_seed(b_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) { /* splitmix64 */
        uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        r->s[i] = z ^ (z >> 31);
    }
}

static inline double b_uniform(b_rng *r) { return ((double)(b_u64(r) >> 11) + 0.5) * 0x1.0p-53; }

static inline double b_gauss(b_rng *r)
{
    double u1 = b_uniform(r), u2 = b_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* out[i] += a * (+-1) for n entries, signs from r (64 per draw). */
static inline void b_add_signs(b_rng *r, float *out, size_t n, float a)
{
    for (size_t i = 0; i < n; i += 64) {
        uint64_t bits = b_u64(r);
        size_t e = n - i < 64 ? n - i : 64;
        for (size_t j = 0; j < e; j++)
            out[i + j] += ((bits >> j) & 1) ? a : -a;
    }
}

/* m unit rows near the span of the k rows of B (d long): a uniform unit vector
   of span(B) plus random signs of size noise/sqrt(d) per coordinate,
   normalised.  g: k doubles of scratch.  Shared by the benchmarks' data. */
static inline void b_rows_near_span(b_rng *r, const float *B, size_t k, size_t d, size_t m, double noise,
                                    float *X, double *g)
{
    float a = (float)(noise / sqrt((double)d));
    for (size_t j = 0; j < m; j++) {
        float *x = X + j * d;
        double gs = 0;
        for (size_t i = 0; i < k; i++) {
            g[i] = b_gauss(r);
            gs += g[i] * g[i];
        }
        gs = 1.0 / sqrt(gs); /* a uniform unit vector of span(b) (b nearly orthonormal) */
        memset(x, 0, d * sizeof *x);
        for (size_t i = 0; i < k; i++) {
            float gi = (float)(g[i] * gs);
            const float *bi = B + i * d;
            for (size_t c = 0; c < d; c++)
                x[c] += gi * bi[c];
        }
        if (a > 0)
            b_add_signs(r, x, d, a);
        double ss = 0;
        for (size_t c = 0; c < d; c++)
            ss += (double)x[c] * x[c];
        float inv = (float)(1.0 / sqrt(ss));
        for (size_t c = 0; c < d; c++)
            x[c] *= inv;
    }
}

/* Fill with uniform values in [-1, 1) (content irrelevant: reference kernels). */
static inline void b_fill_uniform_d(b_rng *r, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0 * b_uniform(r) - 1.0;
}
static inline void b_fill_uniform_f(b_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(2.0 * b_uniform(r) - 1.0);
}

static inline void *b_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------------- header */
static inline const char *b_env(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "(unset)";
}

static inline void b_loadavg(char *buf, size_t n)
{
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return;
    if (fgets(buf, (int)n, f)) {
        size_t l = strlen(buf);
        if (l && buf[l - 1] == '\n')
            buf[l - 1] = 0;
    }
    fclose(f);
}

/* MemAvailable from /proc/meminfo in bytes; 0 if unknown. */
static inline size_t b_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

static inline void b_cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ')
                    c++;
                snprintf(buf, n, "%s", c);
                size_t l = strlen(buf);
                if (l && buf[l - 1] == '\n')
                    buf[l - 1] = 0;
            }
            break;
        }
    }
    fclose(f);
}

/* The lines every report starts with.  Call after dps_blas_set_threads(). */
static inline void b_header(const char *name, int blas_threads)
{
    char model[256], load[128];
    struct utsname u;
    b_cpu_model(model, sizeof model);
    b_loadavg(load, sizeof load);
    if (uname(&u) != 0)
        snprintf(u.nodename, sizeof u.nodename, "?");
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    printf("# %s  (dpsubspace %s)\n", name, dps_version());
    printf("# date %s  host %s  cpu \"%s\"  online cpus %ld\n", when, u.nodename, model,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("# openblas corename %s  OPENBLAS_CORETYPE=%s  OPENBLAS_NUM_THREADS=%s  blas threads set to %d\n",
           dps_blas_corename(), b_env("OPENBLAS_CORETYPE"), b_env("OPENBLAS_NUM_THREADS"), blas_threads);
    printf("# loadavg at start: %s   (a shared machine: >~0.1 plus our own load means the figures are noisy)\n",
           load);
    fflush(stdout);
}

static inline void b_footer(void)
{
    char load[128];
    b_loadavg(load, sizeof load);
    printf("# loadavg at end: %s\n", load);
    fflush(stdout);
}

/* --------------------------------------------------------- references */
/* Best sgemm GFLOP/s over reps of an n x n x n product (2 n^3 flops), with the
   BLAS thread count currently set. */
static inline double b_sgemm_peak(size_t n, int reps)
{
    float *A = b_alloc(n * n * sizeof *A), *B = b_alloc(n * n * sizeof *B), *C = b_alloc(n * n * sizeof *C);
    b_rng r;
    b_seed(&r, 12345);
    b_fill_uniform_f(&r, A, n * n);
    b_fill_uniform_f(&r, B, n * n);
    memset(C, 0, n * n * sizeof *C);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, A, (int)n, B, (int)n,
                0.0f, C, (int)n); /* warm-up: thread pool, pages */
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = b_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, A, (int)n, B,
                    (int)n, 0.0f, C, (int)n);
        double dt = b_now() - t0;
        if (dt < best)
            best = dt;
    }
    free(A); free(B); free(C);
    return 2.0 * (double)n * n * n / best / 1e9;
}

/* Same for dgemm (the aggregation's Gram is in double). */
static inline double b_dgemm_peak(size_t n, int reps)
{
    double *A = b_alloc(n * n * sizeof *A), *B = b_alloc(n * n * sizeof *B), *C = b_alloc(n * n * sizeof *C);
    b_rng r;
    b_seed(&r, 54321);
    b_fill_uniform_d(&r, A, n * n);
    b_fill_uniform_d(&r, B, n * n);
    memset(C, 0, n * n * sizeof *C);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, A, (int)n, B, (int)n, 0.0,
                C, (int)n);
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = b_now();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, A, (int)n, B, (int)n,
                    0.0, C, (int)n);
        double dt = b_now() - t0;
        if (dt < best)
            best = dt;
    }
    free(A); free(B); free(C);
    return 2.0 * (double)n * n * n / best / 1e9;
}

/* Memory read bandwidth: each of nthreads threads sums its own slice of a
   buffer much larger than the last-level cache with OpenBLAS's sasum (an
   optimised streaming read).  Best of reps, bytes read per second. */
typedef struct { const float *x; size_t n; volatile float sink; } b_read_arg;

static inline void *b_read_thread(void *p)
{
    b_read_arg *a = p;
    a->sink = cblas_sasum((int)a->n, a->x, 1);
    return NULL;
}

static inline double b_read_bw(size_t bytes, int nthreads, int reps)
{
    int nt = nthreads < 1 ? 1 : (nthreads > 64 ? 64 : nthreads);
    size_t per = bytes / sizeof(float) / (size_t)nt, n = per * (size_t)nt;
    float *x = b_alloc(n * sizeof *x);
    b_rng r;
    b_seed(&r, 777);
    b_fill_uniform_f(&r, x, n);
    double best = 1e30;
    for (int rep = 0; rep < reps + 1; rep++) { /* first pass is a warm-up */
        b_read_arg args[64];
        pthread_t th[64];
        double t0 = b_now();
        for (int i = 0; i < nt; i++) {
            args[i].x = x + (size_t)i * per;
            args[i].n = per;
            if (nt == 1)
                b_read_thread(&args[i]);
            else
                pthread_create(&th[i], NULL, b_read_thread, &args[i]);
        }
        if (nt > 1)
            for (int i = 0; i < nt; i++)
                pthread_join(th[i], NULL);
        double dt = b_now() - t0;
        if (rep > 0 && dt < best)
            best = dt;
    }
    free(x);
    return (double)n * sizeof(float) / best;
}

/* memcpy bandwidth, one thread: bytes copied per second (the traffic is about
   twice that: one read and one write stream, plus write-allocate). */
static inline double b_memcpy_bw(size_t bytes, int reps)
{
    char *a = b_alloc(bytes), *b = b_alloc(bytes);
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double best = 1e30;
    for (int rep = 0; rep < reps + 1; rep++) {
        double t0 = b_now();
        memcpy(b, a, bytes);
        double dt = b_now() - t0;
        if (rep > 0 && dt < best)
            best = dt;
        a[rep % bytes] ^= b[(rep * 4099) % bytes]; /* keep the copies live */
    }
    free(a); free(b);
    return (double)bytes / best;
}

/* First-touch rate: bytes per second of memset on freshly allocated memory
   (page faults + zeroing by the kernel + the memset).  Large scratch buffers
   that are allocated, zeroed and freed on every call pay this. */
static inline double b_first_touch_bw(size_t bytes)
{
    double best = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        char *a = b_alloc(bytes);
        double t0 = b_now();
        memset(a, rep + 1, bytes);
        double dt = b_now() - t0;
        if (dt < best)
            best = dt;
        free(a);
    }
    return (double)bytes / best;
}

/* ---------------------------------------------------------------- args */
/* Parse a comma-separated list of sizes ("1e3,10000,1e5") into out (max n);
   returns the count, 0 on a bad list. */
static inline size_t b_parse_list(const char *s, size_t *out, size_t n)
{
    size_t c = 0;
    const char *p = s;
    while (*p && c < n) {
        char *end = NULL;
        double v = strtod(p, &end);
        if (end == p || !(v >= 1) || v > 1e12)
            return 0;
        out[c++] = (size_t)(v + 0.5);
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    return c;
}

/* Values for the programs' one flag parser (src/args/args.h, CLI_OPT_PARSE):
   a size written as digits or as 1e4 (b_size), a list of them (b_sizes), an
   int (b_int).  B_SIZE / B_SIZES / B_INT make the table lines. */
typedef struct {
    size_t *v;
    size_t n, max;
} b_size_list;

static inline int b_size(const char *s, void *to) { return b_parse_list(s, (size_t *)to, 1) == 1 ? 0 : -1; }

static inline int b_sizes(const char *s, void *to)
{
    b_size_list *l = to;
    size_t n = b_parse_list(s, l->v, l->max);
    if (!n)
        return -1;
    l->n = n;
    return 0;
}

static inline int b_int(const char *s, void *to)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < -1000000000L || v > 1000000000L)
        return -1;
    *(int *)to = (int)v;
    return 0;
}

#define B_SIZE(name, dest, metavar, deflt, help) \
    {name, CLI_OPT_PARSE, &(cli_parse_to){b_size, dest}, metavar, deflt, help, 0}
#define B_SIZES(name, list, metavar, deflt, help) \
    {name, CLI_OPT_PARSE, &(cli_parse_to){b_sizes, list}, metavar, deflt, help, 0}
#define B_INT(name, dest, metavar, deflt, help) \
    {name, CLI_OPT_PARSE, &(cli_parse_to){b_int, dest}, metavar, deflt, help, 0}

/* The last line of every benchmark's table, and the parse that prints it. */
#define B_HELP(help) {"--help", CLI_OPT_FLAG, help, NULL, NULL, "print this help and exit", 0}

static inline int b_parse(int argc, char **argv, cli_opt *flags, size_t n, const int *help, const char *synopsis)
{
    return cli_parse_or_help(argc, argv, flags, n, NULL, 0, NULL, help, synopsis, NULL);
}

/* The library's default buckets per epoch (dps_config_init), and as text. */
static inline size_t b_lib_t(void)
{
    dps_config c;
    dps_config_init(&c, 2, 1); /* d and k are only stored */
    return c.t;
}

static inline const char *b_lib_t_text(char *buf, size_t n)
{
    snprintf(buf, n, "%zu", b_lib_t());
    return buf;
}

static inline double b_peak_rss_bytes(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0; /* Linux: kilobytes */
}

/* Current resident set size (VmRSS) in bytes; 0 if unknown. */
static inline double b_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024.0;
}


/* ----------------------------------------------------------- epoch close */
/* What a timed dps_estimator_close_epoch gave: wall and CPU seconds, peak RSS
   after it, the snapshot's info (reason not kept) and sin of its basis to
   truth (-1 when not released); rc is the call's result. */
typedef struct {
    int rc;
    double seconds, cpu, maxrss, sin;
    dps_snapshot_info info;
} b_closed;

/* Close est's epoch, timed, then destroy est (the caller's pointer is
   cleared).  Prints progress to stderr with the monotonic window (for perf),
   and on failure the "# close failed" and RESULT lines. */
static inline b_closed b_close_epoch_timed(dps_estimator **est, const float *truth, size_t k, size_t d)
{
    b_closed c;
    memset(&c, 0, sizeof c);
    c.sin = -1;
    dps_snapshot *snap = NULL;
    double t0 = b_now(), c0 = b_cpu();
    c.rc = dps_estimator_close_epoch(*est, &snap);
    c.seconds = b_now() - t0;
    c.cpu = b_cpu() - c0;
    c.maxrss = b_peak_rss_bytes();
    fprintf(stderr, "progress: d=%zu k=%zu: closed in %.2f s (CLOCK_MONOTONIC %.6f to %.6f: for perf record -k mono, "
            "perf report --time)\n", d, k, c.seconds, t0, t0 + c.seconds);
    if (c.rc) {
        printf("# close failed: %s\n", dps_strerror(c.rc));
        printf("RESULT d=%zu k=%zu status=error-close\n", d, k);
    } else {
        dps_snapshot_get_info(snap, &c.info);
        c.info.reason = "";
        if (c.info.status == DPS_SNAP_RELEASED)
            c.sin = dps_subspace_sin(dps_snapshot_basis(snap), truth, k, d, NULL);
    }
    dps_snapshot_destroy(&snap);
    dps_estimator_destroy(est);
    return c;
}

#endif
