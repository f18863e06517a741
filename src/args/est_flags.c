/* est_flags.c - the estimator's settings as flags (est_flags.h): the one
   table of their names, argument names and help, and their defaults read
   from the library.

   Who owns what: the table is static; defaults and noted help go into the
   caller's buffer. */
#include "est_flags.h"

#include "args.h"
#include "dpsubspace.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const est_flag s_flags[] = {
    {"k", "K", "subspace dimension, 1 <= k < d"},
    {"t", "T", "buckets per epoch (the papers' t)"},
    {"m", "M", "rows per bucket (the papers' m; an epoch holds t*m rows)"},
    {"window", "W", "buckets open at once (W < t bounds memory; use only for rows in random order)"},
    {"q", "Q", "reference points (the papers' q; reference and histogram aggregators)"},
    {"aggregator", "NAME",
     "reference (projected reference points), projection (d x d, d <= 10000), histogram (Singhal-Steinke grid "
     "histogram, (sqrt(2 rho), delta)-DP), covariance (no buckets: each epoch's sum x x^T and iterative "
     "eigenvector sampling, pure sqrt(2 rho)-DP, d <= 4096), gaussian (no buckets: each epoch's sum x x^T plus "
     "symmetric Gaussian noise of sd 1/sqrt(rho), its top-k eigenvectors, rho-zCDP, d <= 16384), power (no "
     "buckets: noisy power iteration, one step per disjoint block of the epoch's rows, rho-zCDP, memory "
     "O((k + p) d), any d) or kron (no buckets: gaussian's, but each group written RxC in --param-groups gets "
     "the products u (x) v of the top eigenvectors of its noisy sum G G^T and sum G^T G, memory R^2 + C^2; "
     "noise sd sqrt(2/rho) for every group, rho-zCDP)"},
    {"power-blocks", "T",
     "power aggregator (and the gaussian or kron aggregator's unshaped groups wider than --dense-max-d): "
     "disjoint blocks of the epoch's rows, one noisy power step each (1..1024); by default 3 until an epoch "
     "has been released (a cold start needs steps), then 1"},
    {"power-oversample", "P", "power aggregator: columns iterated beyond k (b = k + P)"},
    {"dense-max-d", "D",
     "gaussian and kron aggregators: the widest group (or d) released densely (a d x d covariance); wider ones "
     "get the noisy power iteration (--power-blocks, --power-oversample) in O(k d) memory; kron: also the "
     "widest side R or C of a shaped group"},
    {"hist-width", "L",
     "histogram aggregator: side of the grid's cells (per coordinate of the projected reference points)"},
    {"param-groups", "D1,D2,...",
     "gaussian, power and kron aggregators: the row is these public parameter groups (a model's parameter "
     "tensors, in row order; widths adding up to d); each gets its own basis, all for the cost of one release"
     "; the basis is group-wise (k = the sum of the ranks rows, each zero outside its group).  "
     "kron: a group written RxC (e.g. 128x784,128,10x128,10) is R*C wide, read as an R x C matrix in row "
     "order (a Linear weight (out, in)), and Kronecker-factored"},
    {"group-k", "K1,K2,...",
     "with --param-groups: each group's rank (0 = no basis for that group); without it every group gets --k "
     "(at most its width); the snapshot's k is their sum"},
    {"rho", "R", "zCDP rho each epoch's release spends"},
    {"delta", "D", "delta of each epoch's release (the bucket aggregators); deltas add up across epochs"},
    {"cap-rho", "R",
     "budget cap: refuse any release that would make the total rho exceed R (or its delta exceed "
     "--delta-target)"},
    {"cap-eps", "E",
     "budget cap: refuse any release that would make the total eps at --delta-target exceed E (the exact "
     "Gaussian eps while every release was a Gaussian mechanism: gaussian, power, kron; else the CKS "
     "conversion of rho)"},
    {"delta-target", "D", "the delta at which the total is stated as eps (and the caps read)"},
    {"alpha", "A", "weighted FriendlyCore's slope of the friend weights (Tsfadia's alpha), in (0, 1]"},
    {"tau", "F",
     "radius search target (the papers' tau): the fraction of t whose friend weight the radius must reach, in "
     "(0, 1]"},
    {"split", "S:C:M",
     "how an epoch's rho is shared between the radius search, the friend count and the noisy average "
     "(normalised to sum 1)"},
    {"public-seed", "P", "seed of the public randomness (the reference points; a power iteration's cold start)"},
    {"seed", "S", "TESTS ONLY: noise from a seeded, reproducible generator (NOT secure); every snapshot says so"},
    {"workers", "N",
     "worker threads, 1..256: the bucket aggregators' bases; the gaussian and covariance aggregators' sums, and "
     "gaussian's noise and eigensolver"},
};
#define N_FLAGS (sizeof s_flags / sizeof *s_flags)

const est_flag *est_flag_get(const char *name)
{
    if (!name)
        return NULL;
    if (strncmp(name, "--", 2) == 0)
        name += 2;
    for (size_t i = 0; i < N_FLAGS; i++)
        if (strcmp(s_flags[i].name, name) == 0)
            return &s_flags[i];
    return NULL;
}

const char *est_flag_metavar(const char *name)
{
    const est_flag *f = est_flag_get(name);
    return f ? f->metavar : NULL;
}

const char *est_flag_help(const char *name)
{
    const est_flag *f = est_flag_get(name);
    return f ? f->help : NULL;
}

const char *est_flag_help_noted(const char *name, const char *note, char *buf, size_t len)
{
    snprintf(buf, len, "%s; %s", est_flag_help(name), note);
    return buf;
}

/* The default of flag f into buf. */
static void s_default(const est_flag *f, char *buf, size_t len)
{
    const char *name = f->name;
    dps_config *lib = NULL; /* k = 1: m and q read as their multiples of k */
    if (dps_config_new(&lib, 2, 1) != DPS_OK) {
        snprintf(buf, len, "?");
        return;
    }
    uint64_t t = dps_config_int(lib, DPS_PARAM_T), m = dps_config_int(lib, DPS_PARAM_M),
             q = dps_config_int(lib, DPS_PARAM_Q), agg = dps_config_int(lib, DPS_PARAM_AGGREGATOR),
             po = dps_config_int(lib, DPS_PARAM_POWER_OVERSAMPLE), ps = dps_config_int(lib, DPS_PARAM_PUBLIC_SEED);
    double rho = dps_config_real(lib, DPS_PARAM_RHO_EPOCH), delta = dps_config_real(lib, DPS_PARAM_DELTA_EPOCH),
           dt = dps_config_real(lib, DPS_PARAM_DELTA_TARGET), alpha = dps_config_real(lib, DPS_PARAM_ALPHA),
           tau = dps_config_real(lib, DPS_PARAM_TAU), ss = dps_config_real(lib, DPS_PARAM_SPLIT_SEARCH),
           sc = dps_config_real(lib, DPS_PARAM_SPLIT_COUNT), sm = dps_config_real(lib, DPS_PARAM_SPLIT_MEAN);
    dps_config_destroy(&lib);
    char x[32], y[32], z[32];
    if (strcmp(name, "t") == 0)
        snprintf(buf, len, "%llu", (unsigned long long)t);
    else if (strcmp(name, "m") == 0)
        snprintf(buf, len, "%llu*k", (unsigned long long)m);
    else if (strcmp(name, "window") == 0)
        snprintf(buf, len, "t");
    else if (strcmp(name, "q") == 0)
        snprintf(buf, len, "%llu*k", (unsigned long long)q);
    else if (strcmp(name, "aggregator") == 0)
        snprintf(buf, len, "%s", dps_aggregator_name((dps_aggregator)agg));
    else if (strcmp(name, "power-blocks") == 0)
        snprintf(buf, len, "0 = 3 cold, 1 warm");
    else if (strcmp(name, "power-oversample") == 0)
        snprintf(buf, len, "%llu", (unsigned long long)po);
    else if (strcmp(name, "dense-max-d") == 0)
        snprintf(buf, len, "%d, at most %d", DPS_DENSE_MAX_D, DPS_DENSE_MAX_D_LIMIT);
    else if (strcmp(name, "hist-width") == 0)
        snprintf(buf, len, "0.25*sqrt(k/d)");
    else if (strcmp(name, "param-groups") == 0)
        snprintf(buf, len, "one group");
    else if (strcmp(name, "group-k") == 0)
        snprintf(buf, len, "--k each");
    else if (strcmp(name, "rho") == 0)
        snprintf(buf, len, "%s", cli_fmt_double(x, rho));
    else if (strcmp(name, "delta") == 0)
        snprintf(buf, len, "%s", cli_fmt_double(x, delta));
    else if (strcmp(name, "cap-rho") == 0 || strcmp(name, "cap-eps") == 0)
        snprintf(buf, len, "0 = no cap");
    else if (strcmp(name, "delta-target") == 0)
        snprintf(buf, len, "%s", cli_fmt_double(x, dt));
    else if (strcmp(name, "alpha") == 0)
        snprintf(buf, len, "%s", cli_fmt_double(x, alpha));
    else if (strcmp(name, "tau") == 0)
        snprintf(buf, len, "%s", cli_fmt_double(x, tau));
    else if (strcmp(name, "split") == 0)
        snprintf(buf, len, "%s:%s:%s", cli_fmt_double(x, ss), cli_fmt_double(y, sc),
                 cli_fmt_double(z, sm));
    else if (strcmp(name, "public-seed") == 0)
        snprintf(buf, len, "%llu", (unsigned long long)ps);
    else if (strcmp(name, "seed") == 0)
        snprintf(buf, len, "none: secure generator");
    else if (strcmp(name, "workers") == 0)
        snprintf(buf, len, "online CPUs");
    else
        snprintf(buf, len, "required");
}

const char *est_flag_default(const char *name)
{
    static char text[N_FLAGS][48];
    const est_flag *f = est_flag_get(name);
    if (!f)
        return NULL;
    char *t = text[f - s_flags];
    if (!t[0])
        s_default(f, t, sizeof text[0]);
    return t;
}

int est_flag_applies(const char *aggregator, int p)
{
    dps_config *lib = NULL;
    dps_config_new(&lib, 2, 1); /* NULL (out of memory): the default reads 0, the reference aggregator */
    dps_aggregator a = (dps_aggregator)dps_config_int(lib, DPS_PARAM_AGGREGATOR);
    dps_config_destroy(&lib);
    if (aggregator && dps_aggregator_from_name(aggregator, &a) != DPS_OK)
        return 1;
    return dps_param_applies((dps_param)p, a);
}

int est_flag_aggregator(const char *name, int *out, char *err, size_t len)
{
    dps_aggregator a;
    if (name && dps_aggregator_from_name(name, &a) == DPS_OK) {
        if (out)
            *out = (int)a;
        return 0;
    }
    size_t n = (size_t)snprintf(err, len, "--aggregator: '%s' is not an aggregator; give one of", name ? name : "");
    for (int i = 0; strcmp(dps_aggregator_name((dps_aggregator)i), "unknown") != 0 && n < len; i++)
        n += (size_t)snprintf(err + n, len - n, "%s %s", i ? "," : "", dps_aggregator_name((dps_aggregator)i));
    return -1;
}

int est_flag_refuse_unread(const char *aggregator, int (*given)(const char *flag, void *arg), void *arg, char *err,
                           size_t len)
{
    /* which aggregators read each is the library's (dps_param_applies); the
       sentence names them as the flags' help does */
    static const struct {
        const char *flag, *also; /* the flags (also: NULL, or a second one read with it) */
        dps_param p;
        const char *readers;
    } s_read_by[] = {
        {"--hist-width", NULL, DPS_PARAM_HIST_WIDTH, "--aggregator histogram"},
        {"--power-blocks", "--power-oversample", DPS_PARAM_POWER_BLOCKS,
         "--aggregator power (and gaussian or kron, for their unshaped groups wider than --dense-max-d)"},
        {"--dense-max-d", NULL, DPS_PARAM_DENSE_MAX_D, "--aggregator gaussian and kron"},
    };
    for (size_t i = 0; i < sizeof s_read_by / sizeof s_read_by[0]; i++) {
        const char *also = s_read_by[i].also;
        if ((given(s_read_by[i].flag, arg) || (also && given(also, arg))) &&
            !est_flag_applies(aggregator, s_read_by[i].p)) {
            if (also)
                snprintf(err, len, "%s and %s apply only to %s; drop them", s_read_by[i].flag, also,
                         s_read_by[i].readers);
            else
                snprintf(err, len, "%s applies only to %s; drop it", s_read_by[i].flag, s_read_by[i].readers);
            return -1;
        }
    }
    return 0;
}
