/* io.c - reading row matrices from .npy / raw float32 / CSV and writing
   float32 .npy (see io.h for the formats and the error convention).

   Who owns what: a cli_reader owns its FILE (unless it is stdin), its display
   name and its scratch buffers; nothing it returns points into them.  Size
   checks happen at open time for regular files, so a truncated .npy or raw
   file is refused before any row is used. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_NPY_MAX_HEADER (1u << 20) /* refuse absurd header lengths        */
#define S_NPY_MAX_DIMS 8            /* we parse at most this many dims     */
#define S_CHUNK_DOUBLES 65536       /* '<f8' conversion buffer (elements)  */

struct cli_reader {
    FILE *f;
    int own_f;        /* 1 unless f is stdin                              */
    char *name;       /* for messages: "'path'" or "standard input"        */
    cli_format fmt;
    size_t d;
    int rows_known;
    uint64_t n_rows;  /* when rows_known                                  */
    uint64_t rows_read;
    /* npy */
    int f8;           /* data is '<f8'                                    */
    double *dbuf;     /* conversion buffer for '<f8'                      */
    size_t dbuf_len;
    /* csv */
    char *line;       /* getline buffer                                   */
    size_t line_cap;
    uint64_t line_no; /* of the last line read                            */
    uint64_t first_line; /* line number of the first data row             */
    float *pending;   /* the first data row, parsed at open               */
    int has_pending;
};

/* ------------------------------------------------------------- helpers */
/* 1 on a little-endian host. */
static int s_host_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Reverse the bytes of n items of size sz in place (big-endian hosts only). */
static void s_swap(void *p, size_t n, size_t sz)
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
static int s_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
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
static long long s_regular_size(FILE *f)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return (long long)st.st_size;
}

/* --------------------------------------------------------- npy header */
typedef struct {
    const char *p, *end;
} s_cursor;

static void s_skip_space(s_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Parse a Python string literal ('x' or "x", no escapes) into out (size n). */
static int s_parse_pystr(s_cursor *c, char *out, size_t n)
{
    s_skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return -1;
    char q = *c->p++;
    size_t len = 0;
    while (c->p < c->end && *c->p != q) {
        if (len + 1 < n)
            out[len++] = *c->p;
        c->p++;
    }
    if (c->p >= c->end)
        return -1;
    c->p++;
    out[len] = '\0';
    return 0;
}

/* Parse a tuple of non-negative integers "(a, b, )" into dims. */
static int s_parse_shape(s_cursor *c, uint64_t *dims, int *ndim)
{
    s_skip_space(c);
    if (c->p >= c->end || *c->p != '(')
        return -1;
    c->p++;
    *ndim = 0;
    for (;;) {
        s_skip_space(c);
        if (c->p < c->end && *c->p == ')') {
            c->p++;
            return 0;
        }
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return -1;
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            unsigned dig = (unsigned)(*c->p - '0');
            if (v > (UINT64_MAX - dig) / 10)
                return -1;
            v = v * 10 + dig;
            c->p++;
        }
        if (c->p < c->end && (*c->p == 'L' || *c->p == 'l'))
            c->p++; /* Python 2 long suffix */
        if (*ndim >= S_NPY_MAX_DIMS)
            return -1;
        dims[(*ndim)++] = v;
        s_skip_space(c);
        if (c->p < c->end && *c->p == ',')
            c->p++;
        else if (c->p < c->end && *c->p == ')')
            continue;
        else
            return -1;
    }
}

/* Parse the header dict.  Fills descr, *fortran, dims, *ndim; returns
   CLI_EXIT_INPUT with a message on anything unexpected. */
static int s_npy_parse_header(const char *h, size_t len, const char *name, char *descr, size_t descr_n,
                              int *fortran, uint64_t *dims, int *ndim, cli_msg *err)
{
    s_cursor c = {h, h + len};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    s_skip_space(&c);
    if (c.p >= c.end || *c.p != '{')
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s has a malformed .npy header (no '{'); re-save it with numpy.save",
                           name);
    c.p++;
    for (;;) {
        s_skip_space(&c);
        if (c.p < c.end && *c.p == '}')
            break;
        char key[64];
        if (s_parse_pystr(&c, key, sizeof key))
            return cli_msg_set(err, CLI_EXIT_INPUT,
                               "%s has a malformed .npy header (expected a quoted key); re-save it with numpy.save",
                               name);
        s_skip_space(&c);
        if (c.p >= c.end || *c.p != ':')
            return cli_msg_set(err, CLI_EXIT_INPUT,
                               "%s has a malformed .npy header (no ':' after '%s'); re-save it with numpy.save", name,
                               key);
        c.p++;
        s_skip_space(&c);
        if (strcmp(key, "descr") == 0) {
            if (c.p < c.end && *c.p == '[')
                return cli_msg_set(err, CLI_EXIT_INPUT,
                                   "%s holds a structured dtype; save a plain float32 matrix: "
                                   "numpy.save(path, arr.astype(numpy.float32))",
                                   name);
            if (s_parse_pystr(&c, descr, descr_n))
                return cli_msg_set(err, CLI_EXIT_INPUT, "%s has a malformed 'descr' in its .npy header", name);
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if ((size_t)(c.end - c.p) >= 4 && strncmp(c.p, "True", 4) == 0) {
                *fortran = 1;
                c.p += 4;
            } else if ((size_t)(c.end - c.p) >= 5 && strncmp(c.p, "False", 5) == 0) {
                *fortran = 0;
                c.p += 5;
            } else {
                return cli_msg_set(err, CLI_EXIT_INPUT, "%s has a malformed 'fortran_order' in its .npy header", name);
            }
            have_fortran = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (s_parse_shape(&c, dims, ndim))
                return cli_msg_set(err, CLI_EXIT_INPUT, "%s has a malformed 'shape' in its .npy header", name);
            have_shape = 1;
        } else {
            return cli_msg_set(err, CLI_EXIT_INPUT,
                               "%s has an unexpected key '%s' in its .npy header; re-save it with numpy.save", name,
                               key);
        }
        s_skip_space(&c);
        if (c.p < c.end && *c.p == ',')
            c.p++;
        else if (!(c.p < c.end && *c.p == '}'))
            return cli_msg_set(err, CLI_EXIT_INPUT,
                               "%s has a malformed .npy header (expected ',' or '}'); re-save it with numpy.save",
                               name);
    }
    if (!have_descr || !have_fortran || !have_shape)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s has an incomplete .npy header (needs descr, fortran_order and shape); "
                           "re-save it with numpy.save",
                           name);
    return 0;
}

/* Read and check the .npy preamble and header of r->f; sets d, n_rows, f8 and
   checks the size of a regular file against the header. */
static int s_npy_open(cli_reader *r, cli_msg *err)
{
    unsigned char pre[12];
    size_t got = fread(pre, 1, 8, r->f);
    if (got < 8 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s is not a .npy file (no \\x93NUMPY magic); for raw float32 pass --format raw --dim D, "
                           "for text --format csv",
                           r->name);
    unsigned major = pre[6], minor = pre[7];
    size_t lenbytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
    if (!lenbytes)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s uses .npy format version %u.%u, which this program does not read; "
                           "re-save it with numpy.save (version 1.0 or 2.0)",
                           r->name, major, minor);
    if (fread(pre + 8, 1, lenbytes, r->f) != lenbytes)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s is truncated inside the .npy preamble; re-create the file",
                           r->name);
    uint32_t hlen = pre[8] | (uint32_t)pre[9] << 8;
    if (lenbytes == 4)
        hlen |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (hlen == 0 || hlen > S_NPY_MAX_HEADER)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s has an implausible .npy header length %u; re-create the file",
                           r->name, (unsigned)hlen);
    char *h = malloc(hlen);
    if (!h)
        return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory reading the header of %s", r->name);
    if (fread(h, 1, hlen, r->f) != hlen) {
        free(h);
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s is truncated inside the .npy header; re-create the file",
                           r->name);
    }
    char descr[32] = "";
    int fortran = 0, ndim = 0;
    uint64_t dims[S_NPY_MAX_DIMS] = {0};
    int rc = s_npy_parse_header(h, hlen, r->name, descr, sizeof descr, &fortran, dims, &ndim, err);
    free(h);
    if (rc)
        return rc;
    if (strcmp(descr, "<f4") == 0)
        r->f8 = 0;
    else if (strcmp(descr, "<f8") == 0)
        r->f8 = 1;
    else if (strcmp(descr, ">f4") == 0 || strcmp(descr, ">f8") == 0)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s is big-endian ('%s'); re-save it little-endian: numpy.save(path, arr.astype('<f4'))",
                           r->name, descr);
    else
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s has dtype '%s'; this program reads '<f4' or '<f8': "
                           "numpy.save(path, arr.astype(numpy.float32))",
                           r->name, descr);
    if (fortran)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s is stored in Fortran (column-major) order, which is not supported; re-save it in C "
                           "order: numpy.save(path, numpy.ascontiguousarray(arr))",
                           r->name);
    if (ndim == 2) {
        r->n_rows = dims[0];
        r->d = (size_t)dims[1];
        if (dims[1] > SIZE_MAX)
            return cli_msg_set(err, CLI_EXIT_INPUT, "%s has a row length too large for this machine", r->name);
    } else if (ndim == 1) {
        r->n_rows = 1;
        r->d = (size_t)dims[0];
        if (dims[0] > SIZE_MAX)
            return cli_msg_set(err, CLI_EXIT_INPUT, "%s has a row length too large for this machine", r->name);
    } else {
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s has %d dimensions; this program reads a 2-D array (rows x dim): reshape it with "
                           "arr.reshape(n, d)",
                           r->name, ndim);
    }
    if (r->d == 0 || r->n_rows == 0)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s has shape (%llu, %zu): no data; give a file with rows", r->name,
                           (unsigned long long)r->n_rows, r->d);
    r->rows_known = 1;
    uint64_t elems, bytes;
    if (s_mul_u64(r->n_rows, r->d, &elems) || s_mul_u64(elems, r->f8 ? 8 : 4, &bytes) || bytes > (uint64_t)LLONG_MAX)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s declares a shape too large to exist; re-create the file",
                           r->name);
    long long size = s_regular_size(r->f);
    if (size >= 0) {
        uint64_t header = 8 + lenbytes + hlen;
        uint64_t have = (uint64_t)size > header ? (uint64_t)size - header : 0;
        if (have < bytes)
            return cli_msg_set(err, CLI_EXIT_INPUT,
                               "%s is truncated: its header says %llu x %zu '%s' (%llu bytes of data) but only %llu "
                               "bytes follow; re-create or re-copy the file",
                               r->name, (unsigned long long)r->n_rows, r->d, descr, (unsigned long long)bytes,
                               (unsigned long long)have);
        if (have > bytes)
            return cli_msg_set(err, CLI_EXIT_INPUT,
                               "%s has %llu bytes after its data; it is not a plain .npy matrix (re-save it with "
                               "numpy.save)",
                               r->name, (unsigned long long)(have - bytes));
    }
    return 0;
}

/* Read want rows of npy data into buf; converts '<f8'. */
static int s_npy_read(cli_reader *r, float *buf, size_t want, cli_msg *err)
{
    size_t n = want * r->d;
    if (!r->f8) {
        size_t got = fread(buf, sizeof(float), n, r->f);
        if (got != n)
            goto truncated;
        if (!s_host_le())
            s_swap(buf, n, sizeof(float));
        return 0;
    }
    if (!r->dbuf) {
        r->dbuf_len = S_CHUNK_DOUBLES;
        r->dbuf = malloc(r->dbuf_len * sizeof *r->dbuf);
        if (!r->dbuf)
            return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory converting %s from float64", r->name);
    }
    for (size_t done = 0; done < n;) {
        size_t c = n - done < r->dbuf_len ? n - done : r->dbuf_len;
        if (fread(r->dbuf, sizeof(double), c, r->f) != c)
            goto truncated;
        if (!s_host_le())
            s_swap(r->dbuf, c, sizeof(double));
        for (size_t i = 0; i < c; i++)
            buf[done + i] = (float)r->dbuf[i];
        done += c;
    }
    return 0;
truncated:
    if (ferror(r->f))
        return cli_msg_set(err, CLI_EXIT_INPUT, "cannot read %s: %s", r->name, strerror(errno));
    return cli_msg_set(err, CLI_EXIT_INPUT,
                       "%s is truncated: it ends within the first %llu of %llu rows; re-create or re-copy the file",
                       r->name, (unsigned long long)(r->rows_read + want), (unsigned long long)r->n_rows);
}

/* ------------------------------------------------------------------ raw */
static int s_raw_open(cli_reader *r, cli_msg *err)
{
    long long size = s_regular_size(r->f);
    if (size < 0)
        return 0; /* a pipe: rows known at the end */
    uint64_t row_bytes;
    if (s_mul_u64(r->d, 4, &row_bytes))
        return cli_msg_set(err, CLI_EXIT_USAGE, "--dim %zu is too large", r->d);
    if (size == 0)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s is empty; give a file with rows", r->name);
    if ((uint64_t)size % row_bytes != 0)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s has %lld bytes, not a whole number of rows of %zu float32 (%llu bytes each); check "
                           "--dim or that the file is raw little-endian float32",
                           r->name, size, r->d, (unsigned long long)row_bytes);
    r->rows_known = 1;
    r->n_rows = (uint64_t)size / row_bytes;
    return 0;
}

/* Read up to want rows of raw data; *got rows were complete. */
static int s_raw_read(cli_reader *r, float *buf, size_t want, size_t *got, cli_msg *err)
{
    size_t n = want * r->d;
    size_t c = fread(buf, sizeof(float), n, r->f);
    if (c < n && ferror(r->f))
        return cli_msg_set(err, CLI_EXIT_INPUT, "cannot read %s: %s", r->name, strerror(errno));
    if (c % r->d != 0)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s ends in the middle of a row (%zu values after the last whole row of %zu); check --dim "
                           "or that the file is raw float32",
                           r->name, c % r->d, r->d);
    if (!s_host_le())
        s_swap(buf, c, sizeof(float));
    *got = c / r->d;
    if (*got == 0 && r->rows_read == 0)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s is empty; give a file with rows", r->name);
    return 0;
}

/* ------------------------------------------------------------------ csv */
/* Read the next non-blank line into r->line (trailing CR/LF removed).
   Returns 1 if a line was read, 0 at the end, CLI_EXIT_INPUT on read errors
   (negated, so that it cannot be confused with 1: -CLI_EXIT_INPUT). */
static int s_csv_getline(cli_reader *r, cli_msg *err)
{
    for (;;) {
        errno = 0;
        ssize_t n = getline(&r->line, &r->line_cap, r->f);
        if (n < 0) {
            if (ferror(r->f)) {
                cli_msg_set(err, CLI_EXIT_INPUT, "cannot read %s: %s", r->name, strerror(errno));
                return -CLI_EXIT_INPUT;
            }
            return 0;
        }
        r->line_no++;
        if ((size_t)n != strlen(r->line)) {
            cli_msg_set(err, CLI_EXIT_INPUT, "%s line %llu contains a NUL byte; is it really a CSV text file?",
                        r->name, (unsigned long long)r->line_no);
            return -CLI_EXIT_INPUT;
        }
        while (n > 0 && (r->line[n - 1] == '\n' || r->line[n - 1] == '\r'))
            r->line[--n] = '\0';
        if (strspn(r->line, " \t") != (size_t)n)
            return 1;
    }
}

/* Number of comma-separated fields in line. */
static size_t s_csv_count(const char *line)
{
    size_t n = 1;
    for (const char *p = line; *p; p++)
        n += *p == ',';
    return n;
}

/* Parse the comma-separated numbers of line into out (n fields).  Returns 0,
   or the 1-based index of the first field that is not a number (its text, at
   most bad_n - 1 bytes, copied to bad). */
static size_t s_csv_parse(char *line, float *out, size_t n, char *bad, size_t bad_n)
{
    char *p = line;
    for (size_t i = 0; i < n; i++) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        char *e = p + strlen(p);
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        char *end = NULL;
        double v = *p ? strtod(p, &end) : 0;
        if (!*p || *end != '\0') {
            snprintf(bad, bad_n, "%s", p);
            if (comma)
                *comma = ',';
            return i + 1;
        }
        out[i] = (float)v;
        if (comma) {
            *comma = ',';
            p = comma + 1;
        }
    }
    return 0;
}

/* Report a field of the current line that is not a number. */
static int s_csv_bad_field(cli_reader *r, size_t field, const char *text, cli_msg *err)
{
    return cli_msg_set(err, CLI_EXIT_INPUT,
                       "%s line %llu field %zu: '%.40s' is not a number; CSV input needs numbers separated by "
                       "commas (only the first line may be a header)",
                       r->name, (unsigned long long)r->line_no, field, text);
}

/* Read up to the first data row: skip a header line, set d, keep the row. */
static int s_csv_open(cli_reader *r, cli_msg *err)
{
    char bad[48];
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = s_csv_getline(r, err);
        if (rc < 0)
            return -rc;
        if (rc == 0)
            return cli_msg_set(err, CLI_EXIT_INPUT, "%s has no data rows; give a CSV with one row of numbers per line",
                               r->name);
        size_t n = s_csv_count(r->line);
        float *row = malloc(n * sizeof *row);
        if (!row)
            return cli_msg_set(err, CLI_EXIT_RUNTIME, "out of memory reading %s", r->name);
        size_t f = s_csv_parse(r->line, row, n, bad, sizeof bad);
        if (f == 0) {
            r->d = n;
            r->pending = row;
            r->has_pending = 1;
            r->first_line = r->line_no;
            return 0;
        }
        free(row);
        if (attempt == 1)
            return s_csv_bad_field(r, f, bad, err); /* the line after a header must be data */
    }
    return 0;
}

/* Read up to want CSV rows into buf. */
static int s_csv_read(cli_reader *r, float *buf, size_t want, size_t *got, cli_msg *err)
{
    size_t k = 0;
    char bad[48];
    if (r->has_pending && want > 0) {
        memcpy(buf, r->pending, r->d * sizeof *buf);
        r->has_pending = 0;
        k = 1;
    }
    while (k < want) {
        int rc = s_csv_getline(r, err);
        if (rc < 0)
            return -rc;
        if (rc == 0)
            break;
        size_t n = s_csv_count(r->line);
        if (n != r->d)
            return cli_msg_set(err, CLI_EXIT_INPUT,
                               "%s line %llu has %zu fields but the first data row (line %llu) has %zu; every row "
                               "needs the same number of values",
                               r->name, (unsigned long long)r->line_no, n, (unsigned long long)r->first_line, r->d);
        size_t f = s_csv_parse(r->line, buf + k * r->d, n, bad, sizeof bad);
        if (f)
            return s_csv_bad_field(r, f, bad, err);
        k++;
    }
    *got = k;
    return 0;
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
            rc = s_npy_open(r, err);
        else if (fmt == CLI_FMT_RAW) {
            r->d = dim;
            rc = s_raw_open(r, err);
        } else
            rc = s_csv_open(r, err);
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
        if (want && !(rc = s_npy_read(r, buf, want, err)))
            *got = want;
    } else if (r->fmt == CLI_FMT_RAW) {
        rc = s_raw_read(r, buf, max_rows, got, err);
    } else {
        rc = s_csv_read(r, buf, max_rows, got, err);
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
    if (r->rows_known && (r->fmt == CLI_FMT_NPY || r->fmt == CLI_FMT_RAW) && s_regular_size(r->f) >= 0) {
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
    if (s_host_le())
        return fwrite(data, sizeof(float), n, f) == n ? 0 : -1;
    float tmp[1024];
    for (size_t i = 0; i < n;) {
        size_t c = n - i < 1024 ? n - i : 1024;
        memcpy(tmp, data + i, c * sizeof(float));
        s_swap(tmp, c, sizeof(float));
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
