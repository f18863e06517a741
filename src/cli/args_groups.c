/* args_groups.c - the estimator settings written as lists, as every program
   takes them: the parameter groups (DESIGN 7.2) --param-groups D1,D2,...
   (the groups' widths, in row order) and --group-k K1,K2,... (their ranks),
   and the rho split --split S:C:M; into a dps_config.  Part of dps_args, so
   that dps-estimate and dps-collector read them one way. */
#include "args.h"
#include "dpsubspace.h"

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

int cli_groups_apply(const char *groups, const char *group_k, dps_config *c, char *err, size_t errlen)
{
    if (!groups && !group_k)
        return 0;
    if (!groups) {
        snprintf(err, errlen, "--group-k needs --param-groups (the groups' widths)");
        return -1;
    }
    size_t n = 0, nk = 0;
    if (s_parse_list(groups, c->group_d, DPS_MAX_GROUPS, &n)) {
        snprintf(err, errlen, "--param-groups: '%s' is not a list of 1 to %d widths D1,D2,...", groups, DPS_MAX_GROUPS);
        return -1;
    }
    size_t d = 0, k = 0;
    for (size_t g = 0; g < n; g++) {
        if (c->group_d[g] < 1 || c->group_d[g] > c->d) {
            snprintf(err, errlen, "--param-groups: every width must be in 1..d = %zu (group %zu is %zu)", c->d, g + 1,
                     c->group_d[g]);
            return -1;
        }
        d += c->group_d[g];
    }
    if (d != c->d) {
        snprintf(err, errlen, "--param-groups: the widths add up to %zu, not to the row dimension d = %zu", d, c->d);
        return -1;
    }
    if (group_k) {
        if (s_parse_list(group_k, c->group_k, DPS_MAX_GROUPS, &nk) || nk != n) {
            snprintf(err, errlen, "--group-k: '%s' is not a list of %zu ranks, one per group", group_k, n);
            return -1;
        }
    } else {
        for (size_t g = 0; g < n; g++) /* --k for every group, at most its width */
            c->group_k[g] = c->k < c->group_d[g] ? c->k : c->group_d[g];
    }
    for (size_t g = 0; g < n; g++) {
        if (c->group_k[g] > c->group_d[g]) {
            snprintf(err, errlen, "--group-k: group %zu has rank %zu above its width %zu", g + 1, c->group_k[g],
                     c->group_d[g]);
            return -1;
        }
        k += c->group_k[g];
    }
    if (k < 1 || k >= c->d) {
        snprintf(err, errlen, "the groups' ranks add up to k = %zu: it must be in 1..d-1 = %zu", k, c->d - 1);
        return -1;
    }
    c->groups = n;
    c->k = k;
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
    c->split_search = part[0];
    c->split_count = part[1];
    c->split_mean = part[2];
    return 0;
bad:
    snprintf(err, errlen, "--split: '%s' is not three positive numbers S:C:M (radius search : friend count : noisy "
             "average), e.g. %g:%g:%g", split, c->split_search, c->split_count, c->split_mean);
    return -1;
}
