/* args.h - the one command-line parser of the project, and the helpers that
   go with it: the exit codes, one-line error messages that start with the
   program's name, strict number parsing, a table-driven flag parser that also
   prints --help and --version, and the reader of "name = value" config files
   through the same table (dps-collector's --config).

   Every program, benchmark and experiment driver parses its flags here:
   dps-gen, dps-estimate, dps-keygen, dps-watch, dps-status, dps-produce,
   dps-collector, tools/bench/bench-* and tools/experiments/dps-*.  It is the
   static library dps_args (src/args/args.c alone), defined at the top level so
   that the collector, which is built without the tools, links it too; it needs
   only dps_version() from whichever dpsubspace library the program links.

   Who owns what: the option table belongs to the caller (usually a local array
   in main); the parser only writes through the table's dest pointers and sets
   each entry's `given`.  String values point into argv (never copied), text
   values are copied into the caller's buffer. */
#ifndef DPS_CLI_ARGS_H
#define DPS_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dpsubspace.h"

/* Exit codes, the same for every program (documented in each --help). */
enum {
    CLI_EXIT_OK = 0,      /* success                                          */
    CLI_EXIT_RUNTIME = 1, /* runtime failure: memory, numerics, write errors  */
    CLI_EXIT_USAGE = 2,   /* usage: unknown flag, missing or bad value        */
    CLI_EXIT_INPUT = 3,   /* an input file is unreadable or malformed         */
    CLI_EXIT_PRIVACY = 4, /* a private release failed or was refused          */
    /* the network programs (dps-produce, dps-watch, dps-status) add: */
    CLI_EXIT_AUTH = 5,    /* the collector refused our CURVE key              */
    CLI_EXIT_TIMEOUT = 6  /* the collector did not answer or confirm in time  */
};

/* A one-line message buffer filled by functions that can fail; the text says
   what is wrong and what to do, without the program name. */
typedef struct {
    char msg[600];
} cli_msg;

/* Fill m->msg with printf-style text (truncated to fit).  Returns code, so a
   caller can write `return cli_msg_set(m, CLI_EXIT_INPUT, ...)`. */
int cli_msg_set(cli_msg *m, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The program's name used in messages (a static string such as "dps-gen"). */
void cli_set_program(const char *name);
const char *cli_program(void);

/* Print "PROGRAM: message" as one line on stderr; newlines in the message are
   replaced by spaces so that it stays one line. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The text of the last cli_error (without the program name), "" if none;
   static storage, overwritten by the next cli_error. */
const char *cli_last_error(void);

/* Strict number parsing: the whole string must be the number, no leading
   space or sign for the unsigned kinds, no overflow, finite doubles only.
   Return 0 on success, -1 (and *out untouched) otherwise. */
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_size(const char *s, size_t *out);
int cli_parse_double(const char *s, double *out);

/* The parameter groups (DESIGN 7.2) of --param-groups D1,D2,... (an item
   RxC: width R*C and that shape, group_rows = R) and --group-k
   K1,K2,... (either may be NULL; without --group-k every group gets c->k,
   at most its width) into c, whose d and k are set: c->groups, group_d,
   group_rows, group_k, and c->k = the sum of the ranks.  Returns 0, or -1 with a
   sentence in err (c's groups then unspecified). */
int cli_groups_apply(const char *groups, const char *group_k, dps_config *c, char *err, size_t errlen);

/* --split S:C:M (three positive numbers, the shares of an epoch's rho for
   the radius search, the friend count and the noisy average; the library
   normalises them) into c's split_search, split_count, split_mean.  Returns
   0, or -1 with a sentence in err (c unchanged). */
int cli_split_apply(const char *split, dps_config *c, char *err, size_t errlen);

/* dps_config_plan in words (src/args/plan_text.c): at most max lines into
   lines, the count returned (0 for a configuration dps_config_check
   refuses); *near_random = 1 if some group's noise floor leaves its basis
   near random. */
#define CLI_PLAN_LINE 400
size_t cli_plan_lines(const dps_config *c, char lines[][CLI_PLAN_LINE], size_t max, int *near_random);
/* The lines of p's groups alone (cli_plan_lines' after its first): each
   group's mechanism and noise floor, the floor as a share of an epoch of
   `rows` rows, or with rows 0 (not known in advance) as the eigenvalue of
   sum x x^T a direction needs (then no group is judged near random). */
size_t cli_plan_group_lines(const dps_config *c, const dps_plan *p, uint64_t rows, char lines[][CLI_PLAN_LINE],
                            size_t max, int *near_random);

/* v as %g writes it, the exponent without its padding ("1e-8", "0.5", "125"):
   a library default shown in --help.  Returns buf (32 bytes at least). */
const char *cli_fmt_double(char *buf, double v);

typedef enum {
    CLI_OPT_SECTION, /* not an option: a heading in --help (help = title)   */
    CLI_OPT_FLAG,    /* no value; dest is an int set to 1                    */
    CLI_OPT_SIZE,    /* dest is a size_t                                     */
    CLI_OPT_U64,     /* dest is a uint64_t                                   */
    CLI_OPT_DOUBLE,  /* dest is a double                                     */
    CLI_OPT_STRING,  /* dest is a const char * (points into argv)            */
    CLI_OPT_TEXT,    /* dest is a cli_text: the value is copied into its
                        buffer (values read from a config file)              */
    CLI_OPT_PARSE,   /* dest is a cli_parse_to: fn(value, to) converts it
                        (lists, names, ...); the value is taken as is even
                        if it starts with "-", and the flag may be given
                        again (fn appends or the last wins)                  */
    CLI_OPT_CONFIG   /* dest is a const char *: a config file read after the
                        command line through this same table (see
                        cli_read_config); the command line wins              */
} cli_opt_kind;

typedef struct {
    char *buf;
    size_t size; /* of buf, with its terminating 0 */
} cli_text;

typedef struct {
    int (*fn)(const char *value, void *to); /* 0, or -1 if value is not valid */
    void *to;
} cli_parse_to;

typedef struct {
    const char *name;    /* "--n" (NULL for sections)                         */
    cli_opt_kind kind;
    void *dest;          /* where the value goes (see the kinds)              */
    const char *metavar; /* value placeholder in --help, e.g. "N"             */
    const char *deflt;   /* the default as shown in --help (NULL: none;
                            "required" shows as "(required)")                 */
    const char *help;    /* what it means (NULL: not shown in --help, for a
                            former option still read)                         */
    int given;           /* set by the parser: 1 on the command line, 2 from
                            a config file                                     */
} cli_opt;

/* Other names of a program's options: alias is read as name on the command
   line and in config files; shown = 1 puts it beside name in --help (a
   synonym in the users' words: --n-components for --k, as sklearn's
   n_components), shown = 0 keeps it out (a former name, still read). */
typedef struct {
    const char *name, *alias;
    int shown;
} cli_alias;
/* The aliases the next parses and --help use (the caller's array, kept by
   pointer; NULL, 0 for none). */
void cli_set_aliases(const cli_alias *aliases, size_t n);
/* The last former name (shown = 0) a parse read, or NULL: cli_parse_or_help
   prints a note; a daemon logs it its own way. */
const cli_alias *cli_former_used(void);

/* Parse argv[1..argc-1] against opts.  Accepts "--name value", "--name=value",
   "-h" for "--help" (if the table has it), "--version" (if the table does not
   have it: see cli_parse_or_help) and "--" to end the options.  Other
   arguments are positional: up to max_pos are stored in pos, their number in
   *n_pos.  On an error prints one line (naming the flag) and returns
   CLI_EXIT_USAGE; otherwise 0.  An option given twice is an error (except
   CLI_OPT_PARSE). */
int cli_parse_args(int argc, char **argv, cli_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                   size_t *n_pos);

/* Read a config file through the table: one "name = value" a line, name an
   option's name without its "--" ("t = 125", "no-cap = true"), blank lines
   and lines starting with '#' skipped; a flag takes true/yes/1 (or no value)
   or false/no/0.  Options given on the command line (given == 1) keep their
   value; the file's own later lines win over its earlier ones.  The config
   option itself is not a setting.  Returns 0, or CLI_EXIT_USAGE after
   cli_error("FILE:LINE: ...").  Called by cli_parse_or_help; the collector
   calls it again on SIGHUP through a fresh table. */
int cli_read_config(const char *path, cli_opt *opts, size_t n_opts);

/* While on, cli_error only records its message (cli_last_error) and prints
   nothing: for a daemon that logs a failed reload its own way. */
void cli_set_silent(int on);

/* The table entry named name, or NULL. */
const cli_opt *cli_opt_find(const cli_opt *opts, size_t n_opts, const char *name);
/* 1 if the option named name is in the table and was given. */
int cli_opt_given(const cli_opt *opts, size_t n_opts, const char *name);

/* Print a usage error (one line) and return CLI_EXIT_USAGE from the calling
   function. */
#define CLI_USAGE(...)              \
    do {                            \
        cli_error(__VA_ARGS__);     \
        return CLI_EXIT_USAGE;      \
    } while (0)

/* Print --help: synopsis (free text), every option with its value, default and
   meaning, word-wrapped, then epilogue (free text, may be NULL). */
void cli_print_usage(FILE *f, const char *synopsis, const cli_opt *opts, size_t n_opts, const char *epilogue);
/* Print "PROGRAM VERSION" (cli_program(), dps_version()) on stdout. */
void cli_print_version(void);
/* 1 if the last cli_parse_args saw "--version" (a table without its own). */
int cli_version_given(void);
/* Every program's start: parse the command line, then read the config file
   if the table has a CLI_OPT_CONFIG option and it was given; on --help (*help
   set by the table) print the usage, on --version the version.  Returns -1
   to go on, or the exit code main should return now (a usage error, or 0
   after --help or --version). */
int cli_parse_or_help(int argc, char **argv, cli_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                      size_t *n_pos, const int *help, const char *synopsis, const char *epilogue);

#endif
