/* store.c - snapshot files (see store.h). */
#include "store.h"
#include "dpsubspace_net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int store_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int store_init(const char *state_dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/snapshots", state_dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return DPS_EIO;
    }
    store_fsync_dir(state_dir);
    return DPS_OK;
}

/* Write len bytes to fd (open on tmp), fsync, close, rename tmp to fin,
   fsync dir; on failure tmp is removed and errno says why. */
static int s_write_atomic(int fd, const char *tmp, const char *fin, const char *dir, const void *buf, size_t len)
{
    size_t off = 0;
    int e = 0;
    while (!e && off < len) {
        ssize_t w = write(fd, (const char *)buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            e = w < 0 ? errno : EIO;
        else
            off += (size_t)w;
    }
    if (!e && fsync(fd) != 0)
        e = errno;
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, fin) != 0)
        e = errno;
    if (!e && store_fsync_dir(dir) != 0)
        e = errno;
    if (e) {
        unlink(tmp);
        errno = e;
    }
    return e ? DPS_EIO : DPS_OK;
}

int store_put(const char *state_dir, uint64_t epoch, const unsigned char *buf, size_t len)
{
    char dir[4096], tmp[4200], fin[4200];
    snprintf(dir, sizeof dir, "%s/snapshots", state_dir);
    snprintf(tmp, sizeof tmp, "%s/.epoch-%020" PRIu64 ".tmp", dir, epoch);
    snprintf(fin, sizeof fin, "%s/epoch-%020" PRIu64 ".snap", dir, epoch);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return DPS_EIO;
    return s_write_atomic(fd, tmp, fin, dir, buf, len);
}


/* 1 and the epoch if name is a stored snapshot's (epoch-<20 digits>.snap). */
static int s_snap_epoch(const char *name, uint64_t *epoch)
{
    char tail[8];
    return sscanf(name, "epoch-%20" SCNu64 ".%5s", epoch, tail) == 2 && strcmp(tail, "snap") == 0;
}

static int s_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

long store_prune(const char *state_dir, uint64_t keep_n, double keep_days, double now_unix)
{
    if (keep_n == 0 && !(keep_days > 0))
        return 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/snapshots", state_dir);
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    size_t n = 0, cap = 64;
    uint64_t *epochs = malloc(cap * sizeof *epochs);
    struct dirent *de;
    while (epochs && (de = readdir(dp))) {
        uint64_t epoch;
        if (!s_snap_epoch(de->d_name, &epoch))
            continue;
        if (n == cap) {
            uint64_t *more = realloc(epochs, 2 * cap * sizeof *epochs);
            if (!more)
                break;
            epochs = more;
            cap *= 2;
        }
        epochs[n++] = epoch;
    }
    closedir(dp);
    if (!epochs)
        return -1;
    qsort(epochs, n, sizeof *epochs, s_desc);
    long deleted = 0;
    for (size_t i = 1; i < n; i++) { /* i = 0: the newest stays */
        char path[4200];
        snprintf(path, sizeof path, "%s/epoch-%020" PRIu64 ".snap", dir, epochs[i]);
        int drop = keep_n > 0 && i >= keep_n;
        struct stat st;
        if (!drop && keep_days > 0 && stat(path, &st) == 0)
            drop = now_unix - (double)st.st_mtime > keep_days * 86400.0;
        if (drop && unlink(path) == 0)
            deleted++;
    }
    free(epochs);
    if (deleted)
        store_fsync_dir(dir);
    return deleted;
}

static int s_read_file(const char *path, unsigned char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return DPS_EIO;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0) {
        fclose(f);
        return DPS_EIO;
    }
    *buf = malloc((size_t)n + 1);
    if (!*buf) {
        fclose(f);
        return DPS_ENOMEM;
    }
    *len = fread(*buf, 1, (size_t)n, f);
    fclose(f);
    return *len == (size_t)n ? DPS_OK : DPS_EIO;
}

int store_latest(const char *state_dir, dps_snapshot **latest, uint64_t *max_seq, uint64_t *max_epoch,
                 size_t *count, size_t *bad)
{
    *latest = NULL;
    *max_seq = *max_epoch = 0;
    *count = *bad = 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/snapshots", state_dir);
    DIR *dp = opendir(dir);
    if (!dp)
        return errno == ENOENT ? DPS_OK : DPS_EIO;
    struct dirent *de;
    uint64_t best_epoch = 0;
    int have = 0;
    while ((de = readdir(dp))) {
        uint64_t epoch;
        if (!s_snap_epoch(de->d_name, &epoch))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unsigned char *buf = NULL;
        size_t len = 0;
        dps_snapshot *s = NULL;
        if (s_read_file(path, &buf, &len) != DPS_OK || dps_snapshot_decode(buf, len, &s) != DPS_OK) {
            (*bad)++;
            free(buf);
            continue;
        }
        free(buf);
        (*count)++;
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        if (in.seq > *max_seq)
            *max_seq = in.seq;
        if (in.epoch > *max_epoch)
            *max_epoch = in.epoch;
        if (!have || in.epoch >= best_epoch) {
            dps_snapshot_destroy(latest);
            *latest = s;
            best_epoch = in.epoch;
            have = 1;
        } else {
            dps_snapshot_destroy(&s);
        }
    }
    closedir(dp);
    return DPS_OK;
}

/* What a state directory's contents depend on, and so what a collector
   must share to use it: the row dimension d alone.  Rows of another d are
   another stream (another model's gradients, another table), and the
   stored snapshots, k x d bases, would be republished to its subscribers as
   the latest (the welcome message); a restart with another d is a mistake
   of the --state-dir or of the --d.  k, t, m, rho, the aggregator and the
   groups are settings an operator may change between runs: each snapshot
   states its own, and the ledger adds the costs whatever they were. */
#define SHAPE_MAGIC "dps-state-v1 d="

int store_check_shape(const char *state_dir, uint64_t d, const dps_snapshot *latest, char *err, size_t errlen)
{
    char path[4200], from[4300];
    snprintf(path, sizeof path, "%s/shape", state_dir);
    uint64_t was = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        char line[128] = "";
        int ok = fgets(line, sizeof line, f) && strncmp(line, SHAPE_MAGIC, strlen(SHAPE_MAGIC)) == 0 &&
                 sscanf(line + strlen(SHAPE_MAGIC), "%" SCNu64, &was) == 1 && was > 0;
        fclose(f);
        if (!ok) {
            snprintf(err, errlen, "%s is damaged (it holds one line, \"" SHAPE_MAGIC "<d>\"): write into it the --d of "
                     "the collector that made this state directory, or restore it from a backup", path);
            return DPS_EIO;
        }
        snprintf(from, sizeof from, "recorded in %s", path);
    } else if (errno != ENOENT) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return DPS_EIO;
    } else if (latest) { /* a state directory of a collector before the file: its snapshots say */
        dps_snapshot_info in;
        dps_snapshot_get_info(latest, &in);
        was = in.d;
        snprintf(from, sizeof from, "the d of its latest stored snapshot, epoch %" PRIu64, in.epoch);
    }
    if (was && was != d) {
        snprintf(err, errlen,
                 "--state-dir %s was made by a collector of --d %" PRIu64 " (%s), and this one was given --d %" PRIu64
                 ": its ledger and snapshots are those of rows of d = %" PRIu64 ".  Start with --d %" PRIu64 " to go "
                 "on with that stream, or give another --state-dir for rows of d = %" PRIu64 " (a new state "
                 "directory starts an empty ledger: use one only for rows of other examples than those this ledger "
                 "has spent budget on)",
                 state_dir, was, from, d, was, was, d);
        return DPS_EINVAL;
    }
    if (f)
        return DPS_OK;
    char tmp[4200], body[64];
    snprintf(tmp, sizeof tmp, "%s/.shape.tmp", state_dir);
    int n = snprintf(body, sizeof body, SHAPE_MAGIC "%" PRIu64 "\n", d);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || s_write_atomic(fd, tmp, path, state_dir, body, (size_t)n) != DPS_OK) {
        snprintf(err, errlen, "cannot write %s: %s (make room in, or repair, its file system)", path, strerror(errno));
        return DPS_EIO;
    }
    return DPS_OK;
}
