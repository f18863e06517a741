/* bench_ingest_net.h - helpers shared by bench-ingest and bench-latency (not
   part of the library): a scratch directory, CURVE key files, endpoints, the
   real dps-collector as a child process (started, waited for on its status
   endpoint, stopped with SIGTERM), and per-thread CPU of a process from
   /proc/<pid>/task/<tid>/stat.

   Everything here is static, like bench_common.h, which it builds on. */
#ifndef DPS_BENCH_INGEST_NET_H
#define DPS_BENCH_INGEST_NET_H

#include "bench_common.h"
#include "dpsubspace_net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

/* ------------------------------------------------------------ scratch dir */
static char n_tmp[160];

static void n_rm_tree(const char *path, int depth)
{
    DIR *dp = depth < 8 ? opendir(path) : NULL;
    if (dp) {
        struct dirent *de;
        while ((de = readdir(dp))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            struct stat sb;
            if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
                n_rm_tree(sub, depth + 1);
            else
                unlink(sub);
        }
        closedir(dp);
    }
    rmdir(path);
}

static inline void n_tmp_cleanup(void)
{
    if (n_tmp[0] && !getenv("BENCH_KEEP_TMP"))
        n_rm_tree(n_tmp, 0);
}

/* A fresh directory under $TMPDIR (or /tmp), removed at exit unless
   BENCH_KEEP_TMP is set. ipc:// paths live here, so keep the prefix short. */
static inline const char *n_tmp_init(const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(n_tmp, sizeof n_tmp, "%s/%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(n_tmp)) {
        fprintf(stderr, "cannot create a scratch directory %s: %s\n", n_tmp, strerror(errno));
        exit(2);
    }
    atexit(n_tmp_cleanup);
    return n_tmp;
}

/* ------------------------------------------------------------------- keys */
/* The collector's pair (n_tmp/server.key_secret), one producer pair whose
   public key is in n_tmp/authorized/ (the collector's --authorized-keys). */
typedef struct {
    dps_keypair server, client;
    char server_secret_file[300], authorized_dir[300];
} n_keys;

static inline int n_keys_make(n_keys *k)
{
    char base[300];
    int rc = dps_keypair_generate(&k->server);
    if (!rc)
        rc = dps_keypair_generate(&k->client);
    snprintf(base, sizeof base, "%s/server", n_tmp);
    if (!rc)
        rc = dps_keypair_save(&k->server, base);
    snprintf(k->server_secret_file, sizeof k->server_secret_file, "%s/server.key_secret", n_tmp);
    snprintf(k->authorized_dir, sizeof k->authorized_dir, "%s/authorized", n_tmp);
    if (!rc && mkdir(k->authorized_dir, 0700) != 0)
        rc = DPS_EIO;
    snprintf(base, sizeof base, "%s/authorized/client", n_tmp); /* the collector reads only *.key */
    if (!rc)
        rc = dps_keypair_save(&k->client, base);
    return rc;
}

/* Client-side security for the collector's sockets. */
static inline dps_security n_sec(const n_keys *k, int curve)
{
    dps_security s;
    memset(&s, 0, sizeof s);
    if (curve) {
        s.server_public_key = k->server.public_key;
        s.public_key = k->client.public_key;
        s.secret_key = k->client.secret_key;
    } else {
        s.plaintext = 1;
    }
    return s;
}

/* -------------------------------------------------------------- endpoints */
static inline int n_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* transport "ipc": ipc://n_tmp/<name>; "tcp": a free loopback port. */
static inline void n_endpoint(char *out, size_t n, const char *transport, const char *name)
{
    if (!strcmp(transport, "tcp"))
        snprintf(out, n, "tcp://127.0.0.1:%d", n_free_port());
    else
        snprintf(out, n, "ipc://%s/%s", n_tmp, name);
}

/* -------------------------------------------------------------- collector */
typedef struct {
    pid_t pid;
    char ingest[300], publish[300], status[300], state[300], log[300];
    dps_security sec;
} n_collector;

static inline void n_collector_tail(const n_collector *c, int lines)
{
    FILE *f = fopen(c->log, "r");
    if (!f)
        return;
    char buf[64][512];
    int n = 0;
    while (fgets(buf[n % 64], sizeof buf[0], f))
        n++;
    fclose(f);
    if (lines > 64)
        lines = 64;
    int from = n > lines ? n - lines : 0;
    for (int i = from; i < n; i++)
        fprintf(stderr, "  collector log: %s", buf[i % 64]);
}

/* Start `collector` with the common arguments (dims, endpoints, state dir,
   security) plus extra (NULL-terminated), then wait until its status endpoint
   answers (up to timeout_ms).  0 or -1 (message printed). */
static inline int n_collector_start(n_collector *c, const char *collector, const char *transport, const char *name,
                                    const n_keys *keys, int curve, size_t d, size_t k, const char **extra,
                                    int timeout_ms)
{
    memset(c, 0, sizeof c[0]);
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.in", name);
    n_endpoint(c->ingest, sizeof c->ingest, transport, tmp);
    snprintf(tmp, sizeof tmp, "%s.pub", name);
    n_endpoint(c->publish, sizeof c->publish, transport, tmp);
    snprintf(tmp, sizeof tmp, "%s.st", name);
    n_endpoint(c->status, sizeof c->status, transport, tmp);
    snprintf(c->state, sizeof c->state, "%s/%s-state", n_tmp, name);
    snprintf(c->log, sizeof c->log, "%s/%s.log", n_tmp, name);
    c->sec = n_sec(keys, curve);
    char ds[32], ks[32];
    snprintf(ds, sizeof ds, "%zu", d);
    snprintf(ks, sizeof ks, "%zu", k);
    const char *argv[80];
    int a = 0;
    argv[a++] = collector;
    argv[a++] = "--d"; argv[a++] = ds;
    argv[a++] = "--k"; argv[a++] = ks;
    argv[a++] = "--state-dir"; argv[a++] = c->state;
    argv[a++] = "--ingest"; argv[a++] = c->ingest;
    argv[a++] = "--publish"; argv[a++] = c->publish;
    argv[a++] = "--status"; argv[a++] = c->status;
    argv[a++] = "--no-cap"; /* a benchmark, not a privacy budget: the collector requires the choice */
    if (curve) {
        argv[a++] = "--server-key"; argv[a++] = keys->server_secret_file;
        argv[a++] = "--authorized-keys"; argv[a++] = keys->authorized_dir;
    } else {
        argv[a++] = "--insecure-plaintext";
    }
    for (int i = 0; extra && extra[i] && a < 78; i++)
        argv[a++] = extra[i];
    argv[a] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, c->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawn(&c->pid, collector, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "cannot start %s: %s\n", collector, strerror(rc));
        c->pid = 0;
        return -1;
    }
    double end = b_now() + timeout_ms / 1000.0;
    while (b_now() < end) {
        dps_collector_status st;
        if (dps_collector_status_query(c->status, &c->sec, 300, &st) == DPS_OK)
            return 0;
        int status;
        if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
            fprintf(stderr, "the collector exited at start (status %d):\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            n_collector_tail(c, 15);
            c->pid = 0;
            return -1;
        }
    }
    fprintf(stderr, "the collector did not answer on %s within %d ms\n", c->status, timeout_ms);
    n_collector_tail(c, 15);
    return -1;
}

/* SIGTERM, wait up to 30 s, then SIGKILL.  Returns its exit code (or -1). */
static inline int n_collector_stop(n_collector *c)
{
    if (c->pid <= 0)
        return -1;
    kill(c->pid, SIGTERM);
    int status = 0;
    double end = b_now() + 30;
    for (;;) {
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid)
            break;
        if (r < 0 || b_now() > end) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    c->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The "ingest stalls" line a stopped collector logs (collector.c): the
   longest batch in the estimator, the longest publish, the longest wait for
   a release and all of them, in ms; -1 each when the log has no such line (a
   collector from before it was added). */
static inline void n_collector_stalls(const n_collector *c, double *batch_ms, double *warm_ms, double *publish_ms,
                                      double *wait_ms, double *wait_total_ms)
{
    *batch_ms = *warm_ms = *publish_ms = *wait_ms = *wait_total_ms = -1;
    FILE *f = fopen(c->log, "r");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "ingest stalls: the longest a batch took in the estimator was ");
        const char *q = strstr(line, "the longest publish ");
        if (p && q) {
            *batch_ms = atof(p + strlen("ingest stalls: the longest a batch took in the estimator was "));
            *publish_ms = atof(q + strlen("the longest publish "));
            const char *h = strstr(line, "backpressure apart; ");
            if (h)
                *warm_ms = atof(h + strlen("backpressure apart; "));
            const char *w = strstr(line, "the longest wait ");
            const char *a = strstr(line, " ms in all");
            if (w && a) {
                *wait_ms = atof(w + strlen("the longest wait "));
                while (a > line && a[-1] != ' ')
                    a--;
                *wait_total_ms = atof(a);
            }
        }
    }
    fclose(f);
}

/* Poll the status endpoint until pred(st, arg) holds: DPS_OK, DPS_ETIMEOUT. */
typedef int (*n_status_pred)(const dps_collector_status *st, const void *arg);
static inline int n_wait_status(const n_collector *c, n_status_pred pred, const void *arg, int timeout_ms,
                                int poll_ms, dps_collector_status *out)
{
    double end = b_now() + timeout_ms / 1000.0;
    for (;;) {
        dps_collector_status st;
        if (dps_collector_status_query(c->status, &c->sec, 2000, &st) == DPS_OK) {
            if (out)
                *out = st;
            if (pred(&st, arg))
                return DPS_OK;
        }
        if (b_now() > end)
            return DPS_ETIMEOUT;
        usleep((useconds_t)poll_ms * 1000);
    }
}

/* ----------------------------------------------------- per-thread CPU time */
#define N_MAX_THREADS 64
typedef struct {
    int n;
    struct { int tid; char comm[32]; unsigned long long ticks; } th[N_MAX_THREADS];
    unsigned long long total; /* process utime + stime (all threads, including exited ones) */
    double when;
} n_cpu_snap;

static inline int n_read_stat(const char *path, char *comm, size_t ncomm, unsigned long long *ticks)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[1024];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (!l || !r || r < l)
        return -1;
    if (comm) {
        size_t cl = (size_t)(r - l - 1);
        if (cl >= ncomm)
            cl = ncomm - 1;
        memcpy(comm, l + 1, cl);
        comm[cl] = 0;
    }
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
    unsigned long long ut = 0, st = 0;
    char state;
    if (sscanf(r + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state, &ut, &st) != 3)
        return -1;
    *ticks = ut + st;
    return 0;
}

static inline void n_cpu_take(pid_t pid, n_cpu_snap *s)
{
    memset(s, 0, sizeof *s);
    s->when = b_now();
    char path[128];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    n_read_stat(path, NULL, 0, &s->total);
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *dp = opendir(path);
    if (!dp)
        return;
    struct dirent *de;
    while ((de = readdir(dp)) && s->n < N_MAX_THREADS) {
        if (de->d_name[0] == '.')
            continue;
        char p2[320];
        snprintf(p2, sizeof p2, "/proc/%d/task/%s/stat", (int)pid, de->d_name);
        if (n_read_stat(p2, s->th[s->n].comm, sizeof s->th[0].comm, &s->th[s->n].ticks) == 0) {
            s->th[s->n].tid = atoi(de->d_name);
            s->n++;
        }
    }
    closedir(dp);
}

/* "total 143% of a core: main 97%, ZMQbg/IO/0 31%, workers(2) 14%, ..." into buf.
   Threads other than the main one and named ZMQbg/... are summed as "other"
   (in dps-collector: the estimator's workers and the ZAP handler). */
static inline void n_cpu_report(pid_t pid, const n_cpu_snap *a, const n_cpu_snap *b, char *buf, size_t n,
                                double *total_pct, double *main_pct)
{
    double hz = (double)sysconf(_SC_CLK_TCK), wall = b->when - a->when;
    if (wall <= 0)
        wall = 1e-9;
    double tot = 100.0 * (double)(b->total - a->total) / hz / wall;
    double mainp = 0, other = 0;
    int nother = 0;
    char io[256] = "";
    size_t iol = 0;
    for (int i = 0; i < b->n; i++) {
        unsigned long long before = 0;
        for (int j = 0; j < a->n; j++)
            if (a->th[j].tid == b->th[i].tid)
                before = a->th[j].ticks;
        double p = 100.0 * (double)(b->th[i].ticks - before) / hz / wall;
        if (b->th[i].tid == (int)pid)
            mainp = p;
        else if (!strncmp(b->th[i].comm, "ZMQbg/", 6)) {
            if (p >= 0.5 && iol < sizeof io - 40)
                iol += (size_t)snprintf(io + iol, sizeof io - iol, ", %s %.0f%%", b->th[i].comm, p);
        } else {
            other += p;
            nother++;
        }
    }
    snprintf(buf, n, "%.0f%% of a core: main loop %.0f%%%s, other threads (%d: workers, ZAP) %.0f%%", tot, mainp, io,
             nother, other);
    if (total_pct)
        *total_pct = tot;
    if (main_pct)
        *main_pct = mainp;
}

/* VmHWM of a process in bytes (0 if unknown). */
static inline double n_peak_rss(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024.0;
}

/* ------------------------------------------------------------------- data */
/* n rows of dimension d near a k-dimensional span (k random-sign directions
   B, as bench-aggregate), plus noise of norm `noise`, normalised. */
static inline void n_rows_lowrank(b_rng *r, size_t n, size_t d, size_t k, double noise, float *X)
{
    float *B = b_alloc(k * d * sizeof *B);
    for (size_t i = 0; i < k; i++) {
        memset(B + i * d, 0, d * sizeof *B);
        b_add_signs(r, B + i * d, d, (float)(1.0 / sqrt((double)d)));
    }
    double *g = b_alloc(k * sizeof *g);
    b_rows_near_span(r, B, k, d, n, noise, X, g);
    free(g);
    free(B);
}

/* Rows per message: 256, or fewer so that a message is about target_bytes
   (1 MiB by default): 256 rows for d <= 1024, 26 rows at d = 1e4, 3 at 1e5. */
static inline size_t n_batch_rows(size_t d, double target_bytes)
{
    double r = target_bytes / (4.0 * (double)d);
    size_t b = r < 1 ? 1 : (size_t)(r + 0.5);
    return b > 256 ? 256 : b;
}

static inline double n_median(double *v, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 1; i < n; i++) /* insertion sort: n is small */
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
