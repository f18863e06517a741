/* io_internal.h - what the readers of io.c, io_npy.c and io_text.c share:
   the reader's state and a few byte-level helpers.  Private to src/cli. */
#ifndef DPS_CLI_IO_INTERNAL_H
#define DPS_CLI_IO_INTERNAL_H

#include "io.h"

#include <stdint.h>
#include <stdio.h>

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

/* 1 on a little-endian host. */
int io_host_le(void);
/* Reverse the bytes of each of n items of sz bytes. */
void io_swap(void *p, size_t n, size_t sz);
/* *out = a * b; -1 on overflow. */
int io_mul_u64(uint64_t a, uint64_t b, uint64_t *out);
/* The size of f if it is a regular file, else -1. */
long long io_regular_size(FILE *f);

/* Each format's open (parses the header or first line, sets d and what is
   known of the row count) and read (want / up to max_rows rows into buf). */
int io_npy_open(cli_reader *r, cli_msg *err);
int io_npy_read(cli_reader *r, float *buf, size_t want, cli_msg *err);
int io_raw_open(cli_reader *r, cli_msg *err);
int io_raw_read(cli_reader *r, float *buf, size_t want, size_t *got, cli_msg *err);
int io_csv_open(cli_reader *r, cli_msg *err);
int io_csv_read(cli_reader *r, float *buf, size_t want, size_t *got, cli_msg *err);

#endif
