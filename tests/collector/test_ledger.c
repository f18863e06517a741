/* test_ledger - the privacy ledger and the snapshot store: totals survive a
   reopen; only a last line without its newline is a tear (cut, or kept when
   its check holds); a damaged line anywhere, the last one included, stops
   the collector and names the line; a failed append leaves no partial line
   and nothing written after it; snapshot files round trip and the latest is
   found; a state directory of another d is refused. */
#include "check.h"
#include "dpsubspace.h"
#include "dpsubspace_net.h"
#include "ledger.h"
#include "store.h"

#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static long s_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Flip the digit at offset from_end from the end of the file (-1: the
   last byte) to another digit (0 <-> 1, 2 <-> 3, ...: twice restores it);
   the byte it found. */
static int s_flip_digit(const char *path, long from_end)
{
    FILE *f = fopen(path, "r+");
    fseek(f, from_end, SEEK_END);
    int ch = fgetc(f);
    fseek(f, from_end, SEEK_END);
    fputc(ch ^ 1, f);
    fclose(f);
    return ch;
}

int main(void)
{
    char dir[] = "/tmp/dps-test-ledger-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "tmpdir");
    char err[512] = "";
    ledger l;
    CHECK(ledger_open(&l, dir, err, sizeof err) == DPS_OK, "open new: %s", err);
    CHECK(l.total.rho == 0 && l.next_epoch == 0, "empty");
    for (uint64_t e = 0; e < 3; e++)
        CHECK(ledger_append(&l, "commit", e, (dps_zcdp){0.5, 1e-6}, NULL) == DPS_OK, "append %llu", (unsigned long long)e);
    CHECK(ledger_append(&l, "outcome", 2, (dps_zcdp){9, 9}, "status=released seq=3") == DPS_OK, "outcome");
    CHECK(ledger_append(&l, "refused", 3, (dps_zcdp){0, 0}, NULL) == DPS_OK, "refused");
    ledger_close(&l);

    CHECK(ledger_open(&l, dir, err, sizeof err) == DPS_OK, "reopen: %s", err);
    CHECK(l.total.rho == 1.5 && l.total.delta == 3e-6, "totals survive: %g %g", l.total.rho, l.total.delta);
    CHECK(l.next_epoch == 4 && l.last_seq == 3 && l.lines == 5, "next epoch %llu seq %llu lines %llu",
          (unsigned long long)l.next_epoch, (unsigned long long)l.last_seq, (unsigned long long)l.lines);
    CHECK(ledger_has_commit(&l, 1) && !ledger_has_commit(&l, 3), "has_commit");
    ledger_close(&l);

    /* A torn last line (crash mid-write) is cut; totals unchanged. */
    char path[600];
    snprintf(path, sizeof path, "%s/ledger", dir);
    int fd = open(path, O_WRONLY | O_APPEND);
    const char *torn = "dps-ledger-v1 kind=commit epoch=4 rho=0.5 del";
    CHECK(write(fd, torn, strlen(torn)) == (ssize_t)strlen(torn), "write torn");
    close(fd);
    CHECK(ledger_open(&l, dir, err, sizeof err) == DPS_OK, "open torn: %s", err);
    CHECK(l.torn_cut == 1 && l.total.rho == 1.5 && l.next_epoch == 4, "torn tail cut");
    CHECK(ledger_append(&l, "commit", 4, (dps_zcdp){0.5, 1e-6}, NULL) == DPS_OK, "append after cut");
    ledger_close(&l);
    CHECK(ledger_open(&l, dir, err, sizeof err) == DPS_OK && l.total.rho == 2.0 && !l.torn_cut, "clean after cut");
    ledger_close(&l);

    /* A flipped digit in the last line, newline present: damage, not a tear
       (it may be the commit of an epoch already released).  The last line is
       line 6, the commit of epoch 4: "...time_unix_ms=<13 digits> check=<16 hex>\n";
       its time's last digit is the 25th byte from the end. */
    long whole = s_size(path);
    int digit = s_flip_digit(path, -25);
    CHECK(digit >= '0' && digit <= '9', "a digit flipped (%c)", digit);
    CHECK(ledger_open(&l, dir, err, sizeof err) == DPS_EIO, "a damaged last line is refused, not cut as a tear");
    CHECK(strstr(err, "line 6 is damaged") != NULL && strstr(err, "Restore the ledger from a backup") != NULL,
          "names the line and what to do: %s", err);
    ledger_close(&l);
    CHECK(s_size(path) == whole, "nothing cut");
    s_flip_digit(path, -25);

    /* The last line without its newline but with its whole check: every byte
       of it but the newline reached the disk, so it is kept (counted) and the
       newline added. */
    CHECK(truncate(path, whole - 1) == 0, "drop the newline");
    CHECK(ledger_open(&l, dir, err, sizeof err) == DPS_OK && !l.torn_cut && l.lines == 6 && l.total.rho == 2.0,
          "a complete last line without its newline is kept: %s", err);
    ledger_close(&l);
    CHECK(s_size(path) == whole, "its newline added (%ld of %ld bytes)", s_size(path), whole);

    /* An append that fails partway (the file size limit, as a full disk
       would): its partial line removed, the ledger halted, so the next
       append writes nothing (before: written onto the partial line, one
       merged line a restart refused, or cut as a tear with a released
       epoch's cost in it). */
    char dir2[] = "/tmp/dps-test-ledger2-XXXXXX", path2[600];
    CHECK(mkdtemp(dir2) != NULL, "tmpdir for the failed append");
    snprintf(path2, sizeof path2, "%s/ledger", dir2);
    CHECK(ledger_open(&l, dir2, err, sizeof err) == DPS_OK, "open: %s", err);
    for (uint64_t e = 0; e < 2; e++)
        CHECK(ledger_append(&l, "commit", e, (dps_zcdp){0.5, 1e-6}, NULL) == DPS_OK, "commit %llu", (unsigned long long)e);
    long two = s_size(path2);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit was, lim;
    getrlimit(RLIMIT_FSIZE, &was);
    lim = was;
    lim.rlim_cur = (rlim_t)two + 60;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "set the file size limit");
    int rc1 = ledger_append(&l, "commit", 2, (dps_zcdp){0.5, 1e-6}, NULL);
    setrlimit(RLIMIT_FSIZE, &was);
    CHECK(rc1 == DPS_EIO && strstr(l.why, "line 3 of") && strstr(l.why, "after 60 of its") &&
              strstr(l.why, "the partial line was removed"),
          "the failed append says what happened: %s", l.why);
    CHECK(s_size(path2) == two, "no partial line left (%ld bytes, %ld before)", s_size(path2), two);
    int rc2 = ledger_append(&l, "commit", 3, (dps_zcdp){0.5, 1e-6}, NULL);
    int rc3 = ledger_append(&l, "outcome", 1, (dps_zcdp){0, 0}, "status=released seq=2");
    CHECK(rc2 == DPS_EIO && rc3 == DPS_EIO && s_size(path2) == two, "nothing is written after a failed append");
    CHECK(l.total.rho == 1.0 && l.lines == 2, "the failed commit is not counted");
    ledger_close(&l);
    CHECK(ledger_open(&l, dir2, err, sizeof err) == DPS_OK && !l.torn_cut && l.lines == 2 && l.total.rho == 1.0,
          "the restart accepts it as before the failure: %s", err);
    ledger_close(&l);
    unlink(path2);
    rmdir(dir2);

    /* A damaged middle line: refuse to start, naming it. */
    FILE *f = fopen(path, "r+");
    fseek(f, 40, SEEK_SET);
    fputc('X', f);
    fclose(f);
    CHECK(ledger_open(&l, dir, err, sizeof err) == DPS_EIO, "damaged line refused");
    CHECK(strstr(err, "line 1 is damaged") != NULL, "says which: %s", err);
    ledger_close(&l);

    /* A ledger begun by a 0.1 collector (v1 lines: rho= delta= total_rho=
       total_delta=) is read, and this one appends v2 lines to it. */
    char dir1[] = "/tmp/dps-test-ledger1-XXXXXX";
    CHECK(mkdtemp(dir1) != NULL, "tmpdir v1");
    char path1[600];
    snprintf(path1, sizeof path1, "%s/ledger", dir1);
    FILE *f1 = fopen(path1, "w");
    for (int e = 0; e < 2; e++) {
        char body[300], ck[17];
        unsigned char h[8];
        int n = snprintf(body, sizeof body, "dps-ledger-v1 kind=commit epoch=%d rho=0.25 delta=1e-06 total_rho=%g "
                         "total_delta=%g time_ms=1", e, 0.25 * (e + 1), 1e-6 * (e + 1));
        crypto_generichash(h, sizeof h, (const unsigned char *)body, (size_t)n, NULL, 0);
        for (int i = 0; i < 8; i++)
            snprintf(ck + 2 * i, 3, "%02x", h[i]);
        fprintf(f1, "%s check=%s\n", body, ck);
    }
    fclose(f1);
    CHECK(ledger_open(&l, dir1, err, sizeof err) == DPS_OK, "open a v1 ledger: %s", err);
    CHECK(l.total.rho == 0.5 && l.next_epoch == 2, "v1 totals read: rho %g, next epoch %llu", l.total.rho,
          (unsigned long long)l.next_epoch);
    CHECK(ledger_append(&l, "commit", 2, (dps_zcdp){0.25, 1e-6}, NULL) == DPS_OK, "append v2 to it");
    ledger_close(&l);
    CHECK(ledger_open(&l, dir1, err, sizeof err) == DPS_OK && l.total.rho == 0.75 && l.lines == 3,
          "v1 and v2 lines together: rho %g, %llu lines (%s)", l.total.rho, (unsigned long long)l.lines, err);
    ledger_close(&l);
    char last[300] = "";
    f1 = fopen(path1, "r");
    while (fgets(last, sizeof last, f1)) {
    }
    fclose(f1);
    CHECK(strncmp(last, "dps-ledger-v2 kind=commit epoch=2 rho_epoch=0.25 delta_epoch=", 60) == 0 &&
              strstr(last, " rho_total=0.75 delta_total=") != NULL,
          "the new line in the snapshots' names: %s", last);
    unlink(path1);
    rmdir(dir1);

    /* Store: put three epochs, find the latest; a garbage file is counted. */
    CHECK(store_init(dir, err, sizeof err) == DPS_OK, "store init");
    for (uint64_t e = 5; e < 8; e++) {
        dps_snapshot_info in;
        memset(&in, 0, sizeof in);
        in.epoch = e;
        in.d = 3;
        in.k = 1;
        in.status = DPS_SNAP_FAILED;
        in.seq = e + 10;
        in.reason = "x";
        dps_snapshot *s = NULL;
        dps_snapshot_new(&s, &in, NULL);
        unsigned char *buf;
        size_t len;
        dps_snapshot_encode(s, &buf, &len);
        CHECK(store_put(dir, e, buf, len) == DPS_OK, "put");
        free(buf);
        dps_snapshot_destroy(&s);
    }
    char junk[700];
    snprintf(junk, sizeof junk, "%s/snapshots/epoch-00000000000000000099.snap", dir);
    f = fopen(junk, "w");
    fputs("garbage", f);
    fclose(f);
    dps_snapshot *latest = NULL;
    uint64_t max_seq, max_epoch;
    size_t count, bad;
    CHECK(store_latest(dir, &latest, &max_seq, &max_epoch, &count, &bad) == DPS_OK, "latest");
    dps_snapshot_info li;
    dps_snapshot_get_info(latest, &li);
    CHECK(count == 3 && bad == 1 && li.epoch == 7 && max_seq == 17, "latest epoch %llu count %zu bad %zu",
          (unsigned long long)li.epoch, count, bad);

    /* The state directory's d.  One made before STATE/shape existed: its
       latest snapshot (d 3) says, and it opens with that d (the file is
       written then); another d is refused, naming both and what to do. */
    char shape[700], line[64] = "";
    snprintf(shape, sizeof shape, "%s/shape", dir);
    CHECK(store_check_shape(dir, 4, latest, err, sizeof err) == DPS_EINVAL && s_size(shape) < 0, "another d refused");
    CHECK(strstr(err, "made by a collector of --d 3 (the d of its latest stored snapshot, epoch 7)") &&
              strstr(err, "this one was given --d 4") && strstr(err, "Start with --d 3") &&
              strstr(err, "another --state-dir for rows of d = 4"),
          "says both and what to do: %s", err);
    CHECK(store_check_shape(dir, 3, latest, err, sizeof err) == DPS_OK, "the same d opens: %s", err);
    f = fopen(shape, "r");
    CHECK(f && fgets(line, sizeof line, f) && strcmp(line, "dps-state-v1 d=3\n") == 0, "d recorded: %s", line);
    if (f)
        fclose(f);
    CHECK(store_check_shape(dir, 3, NULL, err, sizeof err) == DPS_OK, "the record alone: the same d opens");
    CHECK(store_check_shape(dir, 5, NULL, err, sizeof err) == DPS_EINVAL && strstr(err, "--d 3 (recorded in"),
          "the record alone: another d refused: %s", err);
    f = fopen(shape, "w");
    fputs("d=3\n", f);
    fclose(f);
    CHECK(store_check_shape(dir, 3, latest, err, sizeof err) == DPS_EIO && strstr(err, "is damaged"),
          "a damaged record stops: %s", err);
    unlink(shape);
    CHECK(store_check_shape(dir, 5, NULL, err, sizeof err) == DPS_OK && s_size(shape) > 0,
          "no record at all (no snapshot): opens and records");
    dps_snapshot_destroy(&latest);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    return check_summary();
}
