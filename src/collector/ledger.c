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


/* What s_parse found wrong with a line. */
enum { S_OK = 0, S_CHECK = -1, S_FIELDS = -2, S_TOTALS = -3 };

/* Parse one line (without its newline) into l: S_OK; S_CHECK if it is not
   a ledger line or its check does not hold (a tear, when it is the last line
   and has no newline); S_FIELDS or S_TOTALS (err says which) if its check
   holds but what it says is wrong.  l is changed only by a line that parses. */
static int s_parse(ledger *l, const char *line, size_t len, char *err, size_t errlen)
{
    int v1 = len >= strlen(LEDGER_MAGIC_V1) && strncmp(line, LEDGER_MAGIC_V1, strlen(LEDGER_MAGIC_V1)) == 0;
    if (!v1 && (len < strlen(LEDGER_MAGIC) || strncmp(line, LEDGER_MAGIC, strlen(LEDGER_MAGIC)) != 0))
        return S_CHECK;
    const char *ck = strstr(line, " check=");
    if (!ck || strlen(ck + 7) != 16)
        return S_CHECK;
    char want[17];
    s_check(line, (size_t)(ck - line), want);
    if (strncmp(ck + 7, want, 16) != 0)
        return S_CHECK;
    char kind[32], buf[64];
    if (!s_field(line, "kind", kind, sizeof kind) || !s_field(line, "epoch", buf, sizeof buf) ||
        (strcmp(kind, "commit") != 0 && strcmp(kind, "outcome") != 0 && strcmp(kind, "refused") != 0)) {
        snprintf(err, errlen, "its check holds but it names no kind (commit, outcome, refused) or no epoch");
        return S_FIELDS;
    }
    uint64_t epoch = strtoull(buf, NULL, 10);
    if (strcmp(kind, "commit") == 0) {
        char r[64], d[64], tr[64], td[64];
        if (!s_field(line, v1 ? "rho" : "rho_epoch", r, sizeof r) ||
            !s_field(line, v1 ? "delta" : "delta_epoch", d, sizeof d) ||
            !s_field(line, v1 ? "total_rho" : "rho_total", tr, sizeof tr) ||
            !s_field(line, v1 ? "total_delta" : "delta_total", td, sizeof td)) {
            snprintf(err, errlen, "its check holds but the commit of epoch %" PRIu64 " lacks its costs", epoch);
            return S_FIELDS;
        }
        double rho = strtod(r, NULL), delta = strtod(d, NULL);
        if (!(rho >= 0) || !(delta >= 0) || !isfinite(rho) || !isfinite(delta)) {
            snprintf(err, errlen, "its check holds but the commit of epoch %" PRIu64 " has cost rho %s delta %s",
                     epoch, r, d);
            return S_FIELDS;
        }
        double trv = strtod(tr, NULL), tdv = strtod(td, NULL), sr = l->total.rho + rho, sd = l->total.delta + delta;
        if (fabs(trv - sr) > 1e-9 * (1 + sr) || fabs(tdv - sd) > 1e-9 * (1 + sd)) {
            snprintf(err, errlen, "its totals (rho %s, delta %s) do not add up to the commit lines' (rho %.17g, "
                     "delta %.17g) at epoch %" PRIu64, tr, td, sr, sd, epoch);
            return S_TOTALS;
        }
        l->total.rho = sr;
        l->total.delta = sd;
    } else if (strcmp(kind, "outcome") == 0 && s_field(line, "seq", buf, sizeof buf)) {
        uint64_t seq = strtoull(buf, NULL, 10);
        if (seq > l->last_seq)
            l->last_seq = seq;
    }
    if (epoch + 1 > l->next_epoch)
        l->next_epoch = epoch + 1;
    return S_OK;
}

/* Why cutting a torn last line is safe for privacy.  A line is torn when
   not every byte of it reached the disk; its newline is its last byte, so a
   torn line has none, and it is the last line: after a failed append the
   ledger is halted (nothing more is written in that run), and a restart
   cuts the tear before it appends.  ledger_append returns DPS_OK only after
   the whole line, newline included, was written and fdatasync'ed.  So:
   - a torn commit line's append never returned DPS_OK; the commit hook
     (publish.c) then reports failure and the estimator does not run the
     mechanism: nothing of that epoch was released, and its cost was not
     spent;
   - an outcome or refused line costs 0: cutting one loses only the record of
     a status and seq (the stored snapshot carries its own seq, and a
     restart numbers from the larger of the two).
   A complete line (newline present) whose check fails is damage, not a
   tear: it may be the commit of an epoch already released, so the
   collector stops rather than forget its cost.  A last line without its
   newline whose check holds has every byte but the newline: it is kept and
   completed, since counting a commit whose mechanism may not have run
   overstates the spending, and cutting one that did run (a newline lost to
   damage) would understate it. */
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
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) { /* not a short ledger: its unread tail would look torn and be cut */
            snprintf(err, errlen, "cannot read %s (%s at byte %zu of %zu): fix the disk and start again", l->path,
                     r < 0 ? strerror(errno) : "end of file", got, size);
            free(buf);
            return DPS_EIO;
        }
        got += (size_t)r;
    }
    buf[got] = 0;
    size_t pos = 0;
    int rc = DPS_OK, complete_last = 0;
    while (pos < got) {
        char *nl = memchr(buf + pos, '\n', got - pos);
        size_t len = nl ? (size_t)(nl - (buf + pos)) : got - pos;
        if (nl)
            *nl = 0;
        char why[400] = "its check does not match its text";
        int pr = s_parse(l, buf + pos, len, why, sizeof why);
        if (pr == S_CHECK && !nl) { /* the tear (see above) */
            l->torn_cut = 1;
            break;
        }
        if (pr != S_OK) {
            snprintf(err, errlen,
                     "ledger %s line %" PRIu64 " is damaged: %s.  Refusing to start: the budget already spent "
                     "cannot be known without that line (the epoch it names may have been released).  Restore the "
                     "ledger from a backup; do not delete or edit the line to start: a commit's cost would be "
                     "forgotten", l->path, l->lines + 1, why);
            rc = DPS_EIO;
            break;
        }
        complete_last = !nl;
        l->lines++;
        pos += len + (nl ? 1 : 0);
    }
    free(buf);
    if (rc)
        return rc;
    l->end = pos;
    if (l->torn_cut && (ftruncate(l->fd, (off_t)l->end) != 0 || fsync(l->fd) != 0)) {
        snprintf(err, errlen, "cannot cut the torn last line of %s (at byte %" PRIu64 "): %s; fix the disk and "
                 "start again", l->path, l->end, strerror(errno));
        return DPS_EIO;
    }
    if (complete_last) { /* its newline, so that the next line starts on a line of its own */
        if (pwrite(l->fd, "\n", 1, (off_t)l->end) != 1 || fsync(l->fd) != 0) {
            snprintf(err, errlen, "cannot add the newline the last line of %s lacks: %s; fix the disk and start "
                     "again", l->path, strerror(errno));
            return DPS_EIO;
        }
        l->end++;
    }
    return DPS_OK;
}

/* An append failed after written of its n bytes (errno_was): halt, remove
   what was written, and say in l->why what is left on disk. */
static void s_append_failed(ledger *l, const char *what, int errno_was, size_t written, size_t n)
{
    l->halted = 1;
    int cut = ftruncate(l->fd, (off_t)l->end) == 0 && fdatasync(l->fd) == 0;
    char left[300];
    if (!written)
        snprintf(left, sizeof left, "nothing of it was written");
    else if (cut)
        snprintf(left, sizeof left, "the partial line was removed");
    else if (written < n)
        snprintf(left, sizeof left, "removing its %zu bytes failed too (%s): they have no newline, so a restart "
                 "cuts them as a torn line", written, strerror(errno));
    else
        snprintf(left, sizeof left, "removing it failed too (%s): it may be complete on disk, and then a restart "
                 "counts it (a commit's cost counted for an epoch not released: the safe side)", strerror(errno));
    snprintf(l->why, sizeof l->why, "%s line %" PRIu64 " of %s failed after %zu of its %zu bytes (%s); %s", what,
             l->lines + 1, l->path, written, n, strerror(errno_was), left);
}

int ledger_append(ledger *l, const char *kind, uint64_t epoch, dps_zcdp cost, const char *extra)
{
    if (l->halted) /* why already says what failed: nothing is written after it */
        return DPS_EIO;
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
    while (off < (size_t)n) { /* at end, not at the file offset: a failed write leaves nothing past it */
        ssize_t w = pwrite(l->fd, line + off, (size_t)n - off, (off_t)(l->end + off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s_append_failed(l, "writing", w < 0 ? errno : EIO, off, (size_t)n);
            return DPS_EIO;
        }
        off += (size_t)w;
    }
    if (fdatasync(l->fd) != 0) {
        s_append_failed(l, "syncing", errno, off, (size_t)n);
        return DPS_EIO;
    }
    l->end += (uint64_t)n;
    if (commit)
        l->total = total;
    if (epoch + 1 > l->next_epoch)
        l->next_epoch = epoch + 1;
    l->lines++;
    return DPS_OK;
}

void ledger_halt(ledger *l, const char *why)
{
    if (!l->halted)
        snprintf(l->why, sizeof l->why, "%s", why);
    l->halted = 1;
}

dps_charge_kind ledger_kind(const ledger *l)
{
    return l->total.rho == 0.0 && l->total.delta == 0.0 ? DPS_CHARGE_GAUSSIAN : DPS_CHARGE_ZCDP;
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
