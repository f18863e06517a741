/* args_groups.c - the estimator settings written as lists, as every program
   takes them: the parameter groups (DESIGN 7.2) --param-groups D1,D2,...
   (the groups' widths, in row order; a group written RxC is R*C wide and
   has that shape, for --aggregator kron: DESIGN 7.6) and --group-k
   K1,K2,... (their ranks), and the rho split --split S:C:M; into a
   dps_config.  Part of dps_args, so that dps-estimate and dps-collector
   read them one way. */
#include "args.h"
#include "dpsubspace.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A comma-separated list of sizes into out[0..*n); -1 if malformed or longer
   than max. */
static int s_parse_list(const char *s, size_t *out, size_t max, size_t *n)
{
    char item[32];
    *n = 0;
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == 0 || len >= sizeof item || *n == max)
            return -1;
        memcpy(item, s, len);
        item[len] = '\0';
        if (cli_parse_size(item, &out[(*n)++]))
            return -1;
        s = comma ? comma + 1 : NULL;
        if (comma && !*s)
            return -1; /* a trailing comma */
    }
    return *n ? 0 : -1;
}

/* One --param-groups item, D or RxC, into its width *d and shape *rows
   (0: none); -1 if malformed (a side 0, or R*C past SIZE_MAX). */
static int s_parse_group(const char *item, size_t *d, size_t *rows)
{
    const char *x = strchr(item, 'x');
    *rows = 0;
    if (!x)
        return cli_parse_size(item, d);
    char r[32];
    size_t len = (size_t)(x - item), cols;
    if (len == 0 || len >= sizeof r)
        return -1;
    memcpy(r, item, len);
    r[len] = '\0';
    if (cli_parse_size(r, rows) || cli_parse_size(x + 1, &cols) || *rows == 0 || cols == 0 || cols > SIZE_MAX / *rows)
        return -1;
    *d = *rows * cols;
    return 0;
}

/* The --param-groups list into gd (widths) and gr (shapes' rows); -1 with a
   sentence in err. */
static int s_parse_groups(const char *s, size_t *gd, size_t *gr, size_t *n, char *err, size_t errlen)
{
    char item[64];
    *n = 0;
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == 0 || (comma && !comma[1])) {
            snprintf(err, errlen, "--param-groups: an empty item (a comma too many) in the list D1,D2,...");
            return -1;
        }
        if (*n == DPS_MAX_GROUPS) {
            snprintf(err, errlen, "--param-groups: more than %d groups", DPS_MAX_GROUPS);
            return -1;
        }
        int bad = len >= sizeof item;
        if (!bad) {
            memcpy(item, s, len);
            item[len] = '\0';
            bad = s_parse_group(item, &gd[*n], &gr[*n]) != 0;
        }
        if (bad) {
            snprintf(err, errlen, "--param-groups: group %zu '%.*s' is neither a width D nor a shape RxC (two "
                     "positive whole numbers, e.g. 100352 or 128x784)", *n + 1, (int)(len < 40 ? len : 40), s);
            return -1;
        }
        (*n)++;
        s = comma ? comma + 1 : NULL;
    }
    if (*n == 0) {
        snprintf(err, errlen, "--param-groups: an empty list (want D1,D2,... or RxC items)");
        return -1;
    }
    return 0;
}

int cli_groups_apply(const char *groups, const char *group_k, dps_config *c, char *err, size_t errlen)
{
    if (!groups && !group_k)
        return 0;
    if (!groups) {
        snprintf(err, errlen, "--group-k needs --param-groups (the groups' widths)");
        return -1;
    }
    size_t gd[DPS_MAX_GROUPS], gr[DPS_MAX_GROUPS] = {0}, gk[DPS_MAX_GROUPS];
    size_t n = 0, nk = 0, cd = (size_t)dps_config_int(c, DPS_PARAM_D), ck = (size_t)dps_config_int(c, DPS_PARAM_K);
    if (s_parse_groups(groups, gd, gr, &n, err, errlen))
        return -1;
    size_t d = 0, k = 0;
    for (size_t g = 0; g < n; g++) {
        if (gd[g] < 1 || gd[g] > cd) {
            snprintf(err, errlen, "--param-groups: every width must be in 1..d = %zu (group %zu is %zu)", cd, g + 1,
                     gd[g]);
            return -1;
        }
        d += gd[g];
    }
    if (d != cd) {
        snprintf(err, errlen, "--param-groups: the widths add up to %zu, not to the row dimension d = %zu", d, cd);
        return -1;
    }
    if (group_k) {
        if (s_parse_list(group_k, gk, DPS_MAX_GROUPS, &nk) || nk != n) {
            snprintf(err, errlen, "--group-k: '%s' is not a list of %zu ranks, one per group", group_k, n);
            return -1;
        }
    } else {
        for (size_t g = 0; g < n; g++) /* --k for every group, at most its width */
            gk[g] = ck < gd[g] ? ck : gd[g];
    }
    for (size_t g = 0; g < n; g++) {
        if (gk[g] > gd[g]) {
            snprintf(err, errlen, "--group-k: group %zu has rank %zu above its width %zu", g + 1, gk[g], gd[g]);
            return -1;
        }
        k += gk[g];
    }
    if (k < 1 || k >= cd) {
        snprintf(err, errlen, "the groups' ranks add up to k = %zu: it must be in 1..d-1 = %zu", k, cd - 1);
        return -1;
    }
    for (size_t g = 0; g < DPS_MAX_GROUPS; g++) /* the groups past the last: no shape left from before */
        dps_config_set_group(c, g, g < n ? gd[g] : 0, g < n ? gk[g] : 0, g < n ? gr[g] : 0);
    dps_config_set_int(c, DPS_PARAM_GROUPS, n);
    dps_config_set_int(c, DPS_PARAM_K, k);
    return 0;
}

int cli_split_apply(const char *split, dps_config *c, char *err, size_t errlen)
{
    double part[3];
    char buf[128];
    const char *p = split;
    for (int i = 0; i < 3; i++) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        int last_ok = i < 2 ? colon != NULL : colon == NULL;
        if (!last_ok || len == 0 || len >= sizeof buf)
            goto bad;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (cli_parse_double(buf, &part[i]) || !(part[i] > 0))
            goto bad;
        p = colon ? colon + 1 : p + len;
    }
    dps_config_set_real(c, DPS_PARAM_SPLIT_SEARCH, part[0]);
    dps_config_set_real(c, DPS_PARAM_SPLIT_COUNT, part[1]);
    dps_config_set_real(c, DPS_PARAM_SPLIT_MEAN, part[2]);
    return 0;
bad:;
    double now[3] = {0, 0, 0};
    dps_config_get_real(c, DPS_PARAM_SPLIT_SEARCH, &now[0]);
    dps_config_get_real(c, DPS_PARAM_SPLIT_COUNT, &now[1]);
    dps_config_get_real(c, DPS_PARAM_SPLIT_MEAN, &now[2]);
    snprintf(err, errlen, "--split: '%s' is not three positive numbers S:C:M (radius search : friend count : noisy "
             "average), e.g. %g:%g:%g", split, now[0], now[1], now[2]);
    return -1;
}
