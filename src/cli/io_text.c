/* io_text.c - the raw float32 and CSV readers.
   Who owns what: fill the caller's cli_reader (io_internal.h); the CSV
   line buffer belongs to the reader. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ raw */
int io_raw_open(cli_reader *r, cli_msg *err)
{
    long long size = io_regular_size(r->f);
    if (size < 0)
        return 0; /* a pipe: rows known at the end */
    uint64_t row_bytes;
    if (io_mul_u64(r->d, 4, &row_bytes))
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
int io_raw_read(cli_reader *r, float *buf, size_t want, size_t *got, cli_msg *err)
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
    if (!io_host_le())
        io_swap(buf, c, sizeof(float));
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
int io_csv_open(cli_reader *r, cli_msg *err)
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
int io_csv_read(cli_reader *r, float *buf, size_t want, size_t *got, cli_msg *err)
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

