/* io_npy.c - the .npy reader: the header (a Python dict literal: descr,
   fortran_order, shape) and the rows ('<f4' as is, '<f8' converted).
   Who owns what: fills the caller's cli_reader (io_internal.h). */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
int io_npy_open(cli_reader *r, cli_msg *err)
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
    if (io_mul_u64(r->n_rows, r->d, &elems) || io_mul_u64(elems, r->f8 ? 8 : 4, &bytes) || bytes > (uint64_t)LLONG_MAX)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s declares a shape too large to exist; re-create the file",
                           r->name);
    long long size = io_regular_size(r->f);
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
int io_npy_read(cli_reader *r, float *buf, size_t want, cli_msg *err)
{
    size_t n = want * r->d;
    if (!r->f8) {
        size_t got = fread(buf, sizeof(float), n, r->f);
        if (got != n)
            goto truncated;
        if (!io_host_le())
            io_swap(buf, n, sizeof(float));
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
        if (!io_host_le())
            io_swap(r->dbuf, c, sizeof(double));
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

