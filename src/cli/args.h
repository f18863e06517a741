/* args.h - command-line helpers shared by the dps-* programs: the exit
   codes, one-line error messages that start with the program's name, strict
   number parsing, and a table-driven flag parser that also prints --help.

   Who owns what: the option table belongs to the caller (usually a local array
   in main); the parser only writes through the table's dest pointers and sets
   each entry's `given`.  String values point into argv (never copied). */
#ifndef DPS_CLI_ARGS_H
#define DPS_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

typedef enum {
    CLI_OPT_SECTION, /* not an option: a heading in --help (help = title)   */
    CLI_OPT_FLAG,    /* no value; dest is an int set to 1                    */
    CLI_OPT_SIZE,    /* dest is a size_t                                     */
    CLI_OPT_U64,     /* dest is a uint64_t                                   */
    CLI_OPT_DOUBLE,  /* dest is a double                                     */
    CLI_OPT_STRING   /* dest is a const char * (points into argv)            */
} cli_opt_kind;

typedef struct {
    const char *name;    /* "--n" (NULL for sections)                         */
    cli_opt_kind kind;
    void *dest;          /* where the value goes (see the kinds)              */
    const char *metavar; /* value placeholder in --help, e.g. "N"             */
    const char *deflt;   /* the default as shown in --help (NULL: none;
                            "required" shows as "(required)")                 */
    const char *help;    /* what it means                                     */
    int given;           /* set to 1 by cli_parse_args when it was given      */
} cli_opt;

/* Parse argv[1..argc-1] against opts.  Accepts "--name value", "--name=value",
   "-h" for "--help" (if the table has it), and "--" to end the options.  Other
   arguments are positional: up to max_pos are stored in pos, their number in
   *n_pos.  On an error prints one line (naming the flag) and returns
   CLI_EXIT_USAGE; otherwise 0.  An option given twice is an error. */
int cli_parse_args(int argc, char **argv, cli_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                   size_t *n_pos);

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
/* Every program's start: parse the command line, and on --help (*help set by
   the table) print the usage.  Returns -1 to go on, or the exit code main
   should return now (a usage error, or 0 after --help). */
int cli_parse_or_help(int argc, char **argv, cli_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                      size_t *n_pos, const int *help, const char *synopsis, const char *epilogue);

#endif
