/* io.h - file input and output of row matrices for the command-line programs.

   Reads rows (float32, row-major) from
     - .npy: format versions 1.0, 2.0 (and 3.0), dtype '<f4' or '<f8' (converted
       to float), C order only, shape (n, d) or (d,) (one row);
     - raw: little-endian float32, row after row, the row length given by the
       caller (--dim);
     - CSV: numbers separated by commas, one row per line; the first non-blank
       line is skipped as a header if any of its fields is not a number; blank
       lines are ignored; every row must have the same number of fields.
   A path of "-" reads standard input.  Writes float32 .npy files atomically
   (a temporary file in the same directory, renamed into place).

   Who owns what: a cli_reader owns its FILE and buffers until
   cli_reader_close; cli_read_all gives the caller a malloc'ed matrix to free().
   Errors: functions return CLI_EXIT_INPUT (3) for a missing, unreadable or
   malformed input, CLI_EXIT_USAGE (2) when the caller's arguments cannot work
   (raw without a row length, unknown format), CLI_EXIT_RUNTIME (1) for memory
   or write failures, with a sentence in the cli_msg. */
#ifndef DPS_CLI_IO_H
#define DPS_CLI_IO_H

#include "args.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { CLI_FMT_AUTO = 0, CLI_FMT_NPY, CLI_FMT_RAW, CLI_FMT_CSV } cli_format;

/* "npy", "raw" or "csv" to a format; -1 if s is none of them. */
int cli_format_parse(const char *s, cli_format *out);
/* The format a path's extension names (.npy; .raw .f32 .bin; .csv .txt), or
   CLI_FMT_AUTO if it names none. */
cli_format cli_format_from_path(const char *path);
/* "npy", "raw", "csv" or "auto"; static string. */
const char *cli_format_name(cli_format f);

typedef struct cli_reader cli_reader;

/* Open path for reading rows.  fmt CLI_FMT_AUTO is resolved from the
   extension.  dim: the row length; required for raw, and for npy/CSV, if
   non-zero, it must match the file's.  On success the caller owns *out. */
int cli_reader_open(cli_reader **out, const char *path, cli_format fmt, size_t dim, cli_msg *err);
/* Row length d (known once open). */
size_t cli_reader_dim(const cli_reader *r);
/* The format actually read. */
cli_format cli_reader_format(const cli_reader *r);
/* 1 and *n = the number of rows if the file says (npy header, raw regular
   file); 0 if it is known only at the end (CSV, pipes). */
int cli_reader_rows(const cli_reader *r, uint64_t *n);
/* Read up to max_rows rows into buf (max_rows * d floats); *got = 0 at the end
   of the input.  An input error mid-file returns CLI_EXIT_INPUT. */
int cli_reader_next(cli_reader *r, float *buf, size_t max_rows, size_t *got, cli_msg *err);
/* Skip up to n rows without returning them: a seek for .npy and raw regular
   files (so a producer can start in the middle of a 10 GB file at once),
   reading and discarding otherwise (pipes, CSV).  *skipped (may be NULL) says
   how many were skipped: fewer than n only at the end of the input.  Errors
   as cli_reader_next. */
int cli_reader_skip(cli_reader *r, uint64_t n, uint64_t *skipped, cli_msg *err);
/* Close and free; sets *r = NULL.  NULL is fine. */
void cli_reader_close(cli_reader **r);

/* Read the rest of an open reader's rows into *rows (malloc'ed n x d, the
   caller frees) and *n.  No rows at all is an error (CLI_EXIT_INPUT). */
int cli_reader_read_all(cli_reader *r, float **rows, size_t *n, cli_msg *err);

/* Open, read everything and close: *rows (malloc'ed n x d, the caller frees), *n, *d.
   An input with no rows is an error (CLI_EXIT_INPUT). */
int cli_read_all(const char *path, cli_format fmt, size_t dim, float **rows, size_t *n, size_t *d, cli_msg *err);

/* Write a float32 C-order .npy of shape (rows, cols), or (cols,) when one_d is
   set (rows must be 1 then).  Atomic: the file appears complete or not at all. */
int cli_npy_write(const char *path, const float *data, size_t rows, size_t cols, int one_d, cli_msg *err);

/* 0 if a file can be created at path (its directory exists and is writable),
   else CLI_EXIT_USAGE with a sentence naming flag.  Lets a program refuse a bad
   output path before it spends any privacy budget. */
int cli_check_writable(const char *path, const char *flag, cli_msg *err);

#endif
