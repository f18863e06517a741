/* ledger.c - the privacy ledger (see ledger.h). */
#include "ledger.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEDGER_MAGIC "dps-ledger-v2 "
#define LEDGER_MAGIC_V1 "dps-ledger-v1 " /* read, not written: rho= delta= total_rho= total_delta= */

static void s_check(const char *body, size_t n, char out[17])
{
    unsigned char h[8];
    crypto_generichash(h, sizeof h, (const unsigned char *)body, n, NULL, 0);
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* Value of key=... in a line (NULL if absent); copies at most cap-1 chars. */
static const char *s_field(const char *line, const char *key, char *buf, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p++) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t i = 0;
            while (v[i] && v[i] != ' ' && v[i] != '\n' && i + 1 < cap) {
                buf[i] = v[i];
                i++;
            }
            buf[i] = 0;
            return buf;
        }
    }
    return NULL;
}


/* Parse one complete line; 0 ok, -1 bad check or fields. */
static int s_parse(ledger *l, const char *line, size_t len, char *err, size_t errlen)
{
    int v1 = len >= strlen(LEDGER_MAGIC_V1) && strncmp(line, LEDGER_MAGIC_V1, strlen(LEDGER_MAGIC_V1)) == 0;
    if (!v1 && (len < strlen(LEDGER_MAGIC) || strncmp(line, LEDGER_MAGIC, strlen(LEDGER_MAGIC)) != 0))
        return -1;
    const char *ck = strstr(line, " check=");
    if (!ck || strlen(ck + 7) < 16)
        return -1;
    char want[17];
    s_check(line, (size_t)(ck - line), want);
    if (strncmp(ck + 7, want, 16) != 0)
        return -1;
    char kind[32], buf[64];
    if (!s_field(line, "kind", kind, sizeof kind) || !s_field(line, "epoch", buf, sizeof buf))
        return -1;
    uint64_t epoch = strtoull(buf, NULL, 10);
    if (epoch + 1 > l->next_epoch)
        l->next_epoch = epoch + 1;
    if (strcmp(kind, "commit") == 0) {
        char r[64], d[64], tr[64], td[64];
        if (!s_field(line, v1 ? "rho" : "rho_epoch", r, sizeof r) ||
            !s_field(line, v1 ? "delta" : "delta_epoch", d, sizeof d) ||
            !s_field(line, v1 ? "total_rho" : "rho_total", tr, sizeof tr) ||
            !s_field(line, v1 ? "total_delta" : "delta_total", td, sizeof td))
            return -1;
        double rho = strtod(r, NULL), delta = strtod(d, NULL);
        if (!(rho >= 0) || !(delta >= 0) || !isfinite(rho) || !isfinite(delta))
            return -1;
        l->total.rho += rho;
        l->total.delta += delta;
        double trv = strtod(tr, NULL), tdv = strtod(td, NULL);
        if (fabs(trv - l->total.rho) > 1e-9 * (1 + l->total.rho) ||
            fabs(tdv - l->total.delta) > 1e-9 * (1 + l->total.delta)) {
            snprintf(err, errlen, "ledger totals do not add up at epoch %" PRIu64, epoch);
            return -2;
        }
    } else if (strcmp(kind, "outcome") == 0) {
        if (s_field(line, "seq", buf, sizeof buf)) {
            uint64_t seq = strtoull(buf, NULL, 10);
            if (seq > l->last_seq)
                l->last_seq = seq;
        }
    } else if (strcmp(kind, "refused") != 0) {
        return -1;
    }
    return 0;
}

int ledger_open(ledger *l, const char *dir, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialise");
        return DPS_EIO;
    }
    if ((size_t)snprintf(l->path, sizeof l->path, "%s/ledger", dir) >= sizeof l->path) {
        snprintf(err, errlen, "state directory path too long");
        return DPS_EINVAL;
    }
    int existed = access(l->path, F_OK) == 0;
    l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (l->fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", l->path, strerror(errno));
        return DPS_EIO;
    }
    if (!existed && (fsync(l->fd) != 0 || store_fsync_dir(dir) != 0)) {
        snprintf(err, errlen, "cannot sync new ledger %s: %s", l->path, strerror(errno));
        return DPS_EIO;
    }
    struct stat st;
    if (fstat(l->fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat %s", l->path);
        return DPS_EIO;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        snprintf(err, errlen, "out of memory reading the ledger");
        return DPS_ENOMEM;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(l->fd, buf + got, size - got, (off_t)got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = 0;
    size_t pos = 0, good_end = 0;
    int rc = DPS_OK;
    while (pos < got) {
        char *nl = memchr(buf + pos, '\n', got - pos);
        size_t len = nl ? (size_t)(nl - (buf + pos)) : got - pos;
        int last = !nl || (size_t)(nl - buf) + 1 >= got;
        if (nl)
            *nl = 0;
        int pr = nl ? s_parse(l, buf + pos, len, err, errlen) : -1;
        if (pr == -2) {
            rc = DPS_EIO;
            break;
        }
        if (pr != 0) {
            if (last) { /* torn tail: the write never completed, so nothing was released */
                l->torn_cut = 1;
                break;
            }
            snprintf(err, errlen,
                     "ledger %s line %" PRIu64 " is damaged; refusing to start because the budget already "
                     "spent cannot be known (restore the ledger from a backup)",
                     l->path, l->lines + 1);
            rc = DPS_EIO;
            break;
        }
        l->lines++;
        pos += len + 1;
        good_end = pos;
    }
    free(buf);
    if (rc)
        return rc;
    if (l->torn_cut) {
        if (ftruncate(l->fd, (off_t)good_end) != 0 || fsync(l->fd) != 0) {
            snprintf(err, errlen, "cannot cut the torn last line of %s: %s", l->path, strerror(errno));
            return DPS_EIO;
        }
    }
    if (lseek(l->fd, 0, SEEK_END) < 0) {
        snprintf(err, errlen, "cannot seek %s", l->path);
        return DPS_EIO;
    }
    return DPS_OK;
}

int ledger_append(ledger *l, const char *kind, uint64_t epoch, dps_zcdp cost, const char *extra)
{
    int commit = strcmp(kind, "commit") == 0;
    dps_zcdp total = l->total;
    if (commit) {
        total.rho += cost.rho;
        total.delta += cost.delta;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char line[1024];
    int n = snprintf(line, sizeof line,
                     LEDGER_MAGIC "kind=%s epoch=%" PRIu64 " rho_epoch=%.17g delta_epoch=%.17g rho_total=%.17g "
                                  "delta_total=%.17g time_unix_ms=%" PRIu64 "%s%s",
                     kind, epoch, commit ? cost.rho : 0.0, commit ? cost.delta : 0.0, total.rho, total.delta,
                     (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000, extra ? " " : "",
                     extra ? extra : "");
    if (n < 0 || (size_t)n + 26 >= sizeof line)
        return DPS_EINVAL;
    char ck[17];
    s_check(line, (size_t)n, ck);
    n += snprintf(line + n, sizeof line - (size_t)n, " check=%s\n", ck);
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(l->fd, line + off, (size_t)n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return DPS_EIO;
        off += (size_t)w;
    }
    if (fdatasync(l->fd) != 0)
        return DPS_EIO;
    if (commit)
        l->total = total;
    if (epoch + 1 > l->next_epoch)
        l->next_epoch = epoch + 1;
    l->lines++;
    return DPS_OK;
}

int ledger_has_commit(const ledger *l, uint64_t epoch)
{
    FILE *f = fopen(l->path, "r");
    if (!f)
        return 0;
    char line[1100], want[64], buf[64];
    snprintf(want, sizeof want, "%" PRIu64, epoch);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char kind[32];
        if (s_field(line, "kind", kind, sizeof kind) && strcmp(kind, "commit") == 0 &&
            s_field(line, "epoch", buf, sizeof buf) && strcmp(buf, want) == 0)
            found = 1;
    }
    fclose(f);
    return found;
}

void ledger_close(ledger *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}
