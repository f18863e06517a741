/* io.c - reading row matrices from .npy / raw float32 / CSV and writing
   float32 .npy (see io.h for the formats and the error convention).  The
   formats' parsers are io_npy.c and io_text.c (raw and CSV); this file
   picks one, and holds the byte helpers and the writer.

   Who owns what: a cli_reader owns its FILE (unless it is stdin), its display
   name and its scratch buffers; nothing it returns points into them.  Size
   checks happen at open time for regular files, so a truncated .npy or raw
   file is refused before any row is used. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- helpers */
/* 1 on a little-endian host. */
int io_host_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Reverse the bytes of n items of size sz in place (big-endian hosts only). */
void io_swap(void *p, size_t n, size_t sz)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++, c += sz)
        for (size_t a = 0, b = sz - 1; a < b; a++, b--) {
            unsigned char t = c[a];
            c[a] = c[b];
            c[b] = t;
        }
}

/* a * b into *out; -1 on overflow of uint64_t. */
int io_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a && b > UINT64_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

int cli_format_parse(const char *s, cli_format *out)
{
    if (strcmp(s, "npy") == 0)
        *out = CLI_FMT_NPY;
    else if (strcmp(s, "raw") == 0)
        *out = CLI_FMT_RAW;
    else if (strcmp(s, "csv") == 0)
        *out = CLI_FMT_CSV;
    else
        return -1;
    return 0;
}

/* 1 if path ends with ext (ASCII, case-insensitive). */
static int s_ends_with(const char *path, const char *ext)
{
    size_t n = strlen(path), e = strlen(ext);
    if (n < e)
        return 0;
    for (size_t i = 0; i < e; i++) {
        char a = path[n - e + i], b = ext[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (a != b)
            return 0;
    }
    return 1;
}

cli_format cli_format_from_path(const char *path)
{
    if (s_ends_with(path, ".npy"))
        return CLI_FMT_NPY;
    if (s_ends_with(path, ".raw") || s_ends_with(path, ".f32") || s_ends_with(path, ".bin"))
        return CLI_FMT_RAW;
    if (s_ends_with(path, ".csv") || s_ends_with(path, ".txt"))
        return CLI_FMT_CSV;
    return CLI_FMT_AUTO;
}

const char *cli_format_name(cli_format f)
{
    switch (f) {
    case CLI_FMT_NPY: return "npy";
    case CLI_FMT_RAW: return "raw";
    case CLI_FMT_CSV: return "csv";
    case CLI_FMT_AUTO: break;
    }
    return "auto";
}

/* Size of the regular file behind f, or -1 if it is not a regular file. */
long long io_regular_size(FILE *f)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return (long long)st.st_size;
}

/* -------------------------------------------------------------- reader */
int cli_reader_open(cli_reader **out, const char *path, cli_format fmt, size_t dim, cli_msg *err)
{
    *out = NULL;
    int is_stdin = strcmp(path, "-") == 0;
    if (fmt == CLI_FMT_AUTO) {
        if (is_stdin)
            return cli_msg_set(err, CLI_EXIT_USAGE, "reading standard input needs --format npy|csv|raw");
        fmt = cli_format_from_path(path);
        if (fmt == CLI_FMT_AUTO)
            return cli_msg_set(err, CLI_EXIT_USAGE,
                               "cannot tell the format of '%s' from its name (.npy, .csv/.txt, .raw/.f32/.bin); pass "
                               "--format npy|csv|raw",
                               path);
    }
    if (fmt == CLI_FMT_RAW && dim == 0)
        return cli_msg_set(err, CLI_EXIT_USAGE,
                           "raw float32 input needs the row length: pass --dim D (D values per row)");
    cli_reader *r = calloc(1, sizeof *r);
    if (!r)
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory");
    size_t nl = strlen(path) + 3;
    r->name = malloc(nl < 16 ? 16 : nl);
    if (!r->name) {
        free(r);
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory");
    }
    if (is_stdin)
        strcpy(r->name, "standard input");
    else
        snprintf(r->name, nl, "'%s'", path);
    r->fmt = fmt;
    int rc = 0;
    if (is_stdin) {
        r->f = stdin;
    } else {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = cli_msg_set(err, CLI_EXIT_INPUT, "'%s' is a directory; give a file", path);
        } else if (!(r->f = fopen(path, "rb"))) {
            rc = cli_msg_set(err, CLI_EXIT_INPUT, "cannot open '%s': %s; check the path", path, strerror(errno));
        }
        r->own_f = r->f != NULL;
    }
    if (!rc) {
        if (fmt == CLI_FMT_NPY)
            rc = io_npy_open(r, err);
        else if (fmt == CLI_FMT_RAW) {
            r->d = dim;
            rc = io_raw_open(r, err);
        } else
            rc = io_csv_open(r, err);
    }
    if (!rc && dim && r->d != dim)
        rc = cli_msg_set(err, CLI_EXIT_INPUT, "%s has rows of length %zu but --dim is %zu; fix --dim or the file",
                         r->name, r->d, dim);
    if (rc) {
        cli_reader_close(&r);
        return rc;
    }
    *out = r;
    return 0;
}

size_t cli_reader_dim(const cli_reader *r) { return r->d; }

cli_format cli_reader_format(const cli_reader *r) { return r->fmt; }

int cli_reader_rows(const cli_reader *r, uint64_t *n)
{
    if (!r->rows_known)
        return 0;
    *n = r->n_rows;
    return 1;
}

int cli_reader_next(cli_reader *r, float *buf, size_t max_rows, size_t *got, cli_msg *err)
{
    *got = 0;
    if (max_rows == 0)
        return 0;
    int rc = 0;
    if (r->fmt == CLI_FMT_NPY) {
        uint64_t left = r->n_rows - r->rows_read;
        size_t want = left < max_rows ? (size_t)left : max_rows;
        if (want && !(rc = io_npy_read(r, buf, want, err)))
            *got = want;
    } else if (r->fmt == CLI_FMT_RAW) {
        rc = io_raw_read(r, buf, max_rows, got, err);
    } else {
        rc = io_csv_read(r, buf, max_rows, got, err);
    }
    if (!rc)
        r->rows_read += *got;
    return rc;
}

int cli_reader_skip(cli_reader *r, uint64_t n, uint64_t *skipped, cli_msg *err)
{
    if (skipped)
        *skipped = 0;
    uint64_t done = 0;
    if (r->rows_known && (r->fmt == CLI_FMT_NPY || r->fmt == CLI_FMT_RAW) && io_regular_size(r->f) >= 0) {
        uint64_t left = r->n_rows - r->rows_read;
        uint64_t k = n < left ? n : left;
        /* k * d * 8 fits: the whole file's size was checked against the header at open */
        uint64_t bytes = k * (uint64_t)r->d * (r->f8 ? 8u : 4u);
        if (bytes > (uint64_t)LLONG_MAX || fseeko(r->f, (off_t)bytes, SEEK_CUR) != 0)
            return cli_msg_set(err, CLI_EXIT_INPUT, "cannot seek in %s: %s", r->name, strerror(errno));
        r->rows_read += k;
        done = k;
    } else {
        size_t chunk = r->d < 65536 ? 65536 / r->d : 1;
        float *buf = malloc(chunk * r->d * sizeof *buf);
        if (!buf)
            return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory skipping rows of %s", r->name);
        while (done < n) {
            size_t got = 0, want = n - done < chunk ? (size_t)(n - done) : chunk;
            int rc = cli_reader_next(r, buf, want, &got, err);
            if (rc) {
                free(buf);
                return rc;
            }
            if (got == 0)
                break;
            done += got;
        }
        free(buf);
    }
    if (skipped)
        *skipped = done;
    return 0;
}

void cli_reader_close(cli_reader **pr)
{
    if (!pr || !*pr)
        return;
    cli_reader *r = *pr;
    if (r->f && r->own_f)
        fclose(r->f);
    free(r->name);
    free(r->dbuf);
    free(r->line);
    free(r->pending);
    free(r);
    *pr = NULL;
}

int cli_reader_read_all(cli_reader *r, float **rows, size_t *n, cli_msg *err)
{
    *rows = NULL;
    *n = 0;
    size_t dd = r->d;
    uint64_t known = 0;
    int is_known = cli_reader_rows(r, &known);
    if (is_known && known - r->rows_read > SIZE_MAX / sizeof(float) / dd)
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "%s is too large for this machine's memory", r->name);
    size_t cap = is_known ? (size_t)(known - r->rows_read) : 1024;
    float *buf = malloc((cap ? cap : 1) * dd * sizeof *buf);
    size_t have = 0;
    int rc = 0;
    while (buf && !(is_known && have == cap)) {
        if (have == cap) { /* unknown length: grow geometrically */
            float *nb = cap <= SIZE_MAX / 2 / sizeof(float) / dd ? realloc(buf, 2 * cap * dd * sizeof *buf) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = 0;
        rc = cli_reader_next(r, buf + have * dd, cap - have, &got, err);
        if (rc || got == 0)
            break;
        have += got;
    }
    if (!buf)
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory reading %s (%zu rows of %zu values so far)",
                           r->name, have, dd);
    if (rc) {
        free(buf);
        return rc;
    }
    if (have == 0) {
        free(buf);
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s has no rows; give a file with rows", r->name);
    }
    *rows = buf;
    *n = have;
    return 0;
}

int cli_read_all(const char *path, cli_format fmt, size_t dim, float **rows, size_t *n, size_t *d, cli_msg *err)
{
    *rows = NULL;
    *n = *d = 0;
    cli_reader *r = NULL;
    int rc = cli_reader_open(&r, path, fmt, dim, err);
    if (!rc)
        rc = cli_reader_read_all(r, rows, n, err);
    if (!rc)
        *d = r->d;
    cli_reader_close(&r);
    return rc;
}

/* --------------------------------------------------------------- writer */
/* Write all of data (n floats, little-endian) to f; 0 or -1. */
static int s_write_f32(FILE *f, const float *data, size_t n)
{
    if (io_host_le())
        return fwrite(data, sizeof(float), n, f) == n ? 0 : -1;
    float tmp[1024];
    for (size_t i = 0; i < n;) {
        size_t c = n - i < 1024 ? n - i : 1024;
        memcpy(tmp, data + i, c * sizeof(float));
        io_swap(tmp, c, sizeof(float));
        if (fwrite(tmp, sizeof(float), c, f) != c)
            return -1;
        i += c;
    }
    return 0;
}

int cli_npy_write(const char *path, const float *data, size_t rows, size_t cols, int one_d, cli_msg *err)
{
    char dict[160];
    if (one_d)
        snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }", cols);
    else
        snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
    /* Version 1.0: 10-byte preamble; pad with spaces and end with '\n' so that
       the data starts at a multiple of 64 bytes (numpy's alignment).  The dict
       is under 160 bytes, so the 2-byte length of version 1.0 always fits. */
    size_t dl = strlen(dict);
    size_t total = (10 + dl + 1 + 63) / 64 * 64;
    size_t hlen = total - 10;
    char header[256];
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    header[8] = (char)(hlen & 0xff);
    header[9] = (char)(hlen >> 8);
    memcpy(header + 10, dict, dl);
    memset(header + 10 + dl, ' ', hlen - dl - 1);
    header[total - 1] = '\n';

    size_t tl = strlen(path) + 32;
    char *tmp = malloc(tl);
    if (!tmp)
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory writing '%s'", path);
    snprintf(tmp, tl, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "cannot create '%s': %s; check the directory and permissions", path,
                           strerror(e));
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "cannot write '%s': %s", path, strerror(e));
    }
    int bad = fwrite(header, 1, total, f) != total;
    if (!bad)
        bad = s_write_f32(f, data, rows * cols);
    if (!bad)
        bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        free(tmp);
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "cannot write '%s': %s; check free space and permissions", path,
                           strerror(e));
    }
    free(tmp);
    return 0;
}

int cli_check_writable(const char *path, const char *flag, cli_msg *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_msg_set(err, CLI_EXIT_USAGE, "%s: '%s' is a directory; give a file name", flag, path);
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    char *dir = malloc(dl + 2);
    if (!dir)
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory");
    if (!slash)
        strcpy(dir, ".");
    else if (dl == 0)
        strcpy(dir, "/");
    else {
        memcpy(dir, path, dl);
        dir[dl] = '\0';
    }
    int rc = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = cli_msg_set(err, CLI_EXIT_USAGE, "%s: directory '%s' does not exist; create it or choose another path",
                         flag, dir);
    else if (access(dir, W_OK) != 0)
        rc = cli_msg_set(err, CLI_EXIT_USAGE, "%s: directory '%s' is not writable; choose another path", flag, dir);
    free(dir);
    return rc;
}
