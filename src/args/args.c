/* args.c - exit codes, one-line errors, strict numbers, the flag parser and
   the config-file reader shared by every program (see args.h).  Nothing here
   allocates: values point into argv or are copied into the caller's buffers,
   and messages go straight to stderr. */
#include "args.h"

#include "dpsubspace.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *s_program = "dps";
static char s_last[1024]; /* the last message printed by cli_error */
static int s_silent;      /* cli_set_silent: record messages, print nothing */
static int s_version;     /* --version was asked for (cli_parse_or_help prints) */

#define S_WIDTH 79  /* --help wraps at this column */
#define S_INDENT 28 /* column where an option's explanation starts */

const char *cli_last_error(void) { return s_last; }

int cli_msg_set(cli_msg *m, int code, const char *fmt, ...)
{
    if (m) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->msg, sizeof m->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void cli_set_silent(int on) { s_silent = on; }

void cli_set_program(const char *name) { s_program = name ? name : "dps"; }

const char *cli_program(void) { return s_program; }

void cli_error(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    memcpy(s_last, line, sizeof s_last);
    if (s_silent)
        return;
    fflush(stdout);
    fprintf(stderr, "%s: %s\n", s_program, line);
    fflush(stderr);
}

/* ------------------------------------------------------------- numbers */
int cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -1; /* rejects "", " 1", "-1", "+1" */
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0' || v > UINT64_MAX)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_size(const char *s, size_t *out)
{
    uint64_t v = 0;
    if (cli_parse_u64(s, &v) || v > SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

int cli_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)s[0]))
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0))
        return -1; /* overflow is an error; underflow to a tiny value is kept */
    *out = v;
    return 0;
}

const char *cli_fmt_double(char *buf, double v)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%g", v);
    char *e = strchr(tmp, 'e'), *o = buf;
    for (char *p = tmp; *p; p++) {
        *o++ = *p;
        if (e && p == e) { /* e-08 -> e-8, e+10 -> e10 */
            if (p[1] == '-')
                *o++ = *++p;
            else if (p[1] == '+')
                p++;
            while (p[1] == '0' && p[2])
                p++;
        }
    }
    *o = 0;
    return buf;
}

/* --------------------------------------------------------------- parser */
const cli_opt *cli_opt_find(const cli_opt *opts, size_t n_opts, const char *name)
{
    for (size_t i = 0; i < n_opts; i++)
        if (opts[i].kind != CLI_OPT_SECTION && opts[i].name && strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

int cli_opt_given(const cli_opt *opts, size_t n_opts, const char *name)
{
    const cli_opt *o = cli_opt_find(opts, n_opts, name);
    return o && o->given;
}

static const cli_alias *s_aliases;
static size_t s_n_aliases;
static const cli_alias *s_former_used; /* the last former name read */

const cli_alias *cli_former_used(void) { return s_former_used; }

void cli_set_aliases(const cli_alias *aliases, size_t n)
{
    s_aliases = aliases;
    s_n_aliases = aliases ? n : 0;
}

/* 1 if name equals the first len bytes of arg. */
static int s_name_is(const char *name, const char *arg, size_t len)
{
    return strlen(name) == len && strncmp(name, arg, len) == 0;
}

/* The shown alias of the option named name, or NULL. */
static const char *s_shown_alias(const char *name)
{
    for (size_t i = 0; i < s_n_aliases; i++)
        if (s_aliases[i].shown && strcmp(s_aliases[i].name, name) == 0)
            return s_aliases[i].alias;
    return NULL;
}

/* The table entry named by the first len bytes of arg, directly or through
   an alias, or NULL. */
static cli_opt *s_find_n(cli_opt *opts, size_t n_opts, const char *arg, size_t len)
{
    for (size_t a = 0; a < s_n_aliases; a++)
        if (s_name_is(s_aliases[a].alias, arg, len)) {
            if (!s_aliases[a].shown)
                s_former_used = &s_aliases[a];
            arg = s_aliases[a].name;
            len = strlen(arg);
            break;
        }
    for (size_t i = 0; i < n_opts; i++)
        if (opts[i].kind != CLI_OPT_SECTION && opts[i].name && s_name_is(opts[i].name, arg, len))
            return &opts[i];
    return NULL;
}

/* Store value into o's destination.  Returns 0, or CLI_EXIT_USAGE after
   printing what is wrong. */
static int s_store(cli_opt *o, const char *value)
{
    switch (o->kind) {
    case CLI_OPT_SIZE:
        if (cli_parse_size(value, (size_t *)o->dest)) {
            cli_error("%s: '%s' is not a whole number; give digits only, e.g. %s 1000 (see --help)", o->name, value,
                      o->name);
            return CLI_EXIT_USAGE;
        }
        return 0;
    case CLI_OPT_U64:
        if (cli_parse_u64(value, (uint64_t *)o->dest)) {
            cli_error("%s: '%s' is not a whole number in 0..18446744073709551615; give digits only (see --help)",
                      o->name, value);
            return CLI_EXIT_USAGE;
        }
        return 0;
    case CLI_OPT_DOUBLE:
        if (cli_parse_double(value, (double *)o->dest)) {
            cli_error("%s: '%s' is not a finite number; give e.g. %s 0.5 or %s 1e-5 (see --help)", o->name, value,
                      o->name, o->name);
            return CLI_EXIT_USAGE;
        }
        return 0;
    case CLI_OPT_STRING:
    case CLI_OPT_CONFIG:
        if (!*value) {
            cli_error("%s: the value is empty; give %s %s (see --help)", o->name, o->name,
                      o->metavar ? o->metavar : "VALUE");
            return CLI_EXIT_USAGE;
        }
        *(const char **)o->dest = value;
        return 0;
    case CLI_OPT_TEXT: {
        const cli_text *t = o->dest;
        if (!*value || strlen(value) >= t->size) {
            cli_error("%s: give a value of 1 to %zu characters (see --help)", o->name, t->size - 1);
            return CLI_EXIT_USAGE;
        }
        memcpy(t->buf, value, strlen(value) + 1);
        return 0;
    }
    case CLI_OPT_PARSE: {
        const cli_parse_to *p = o->dest;
        if (p->fn(value, p->to)) {
            cli_error("%s: '%s' is not a valid %s (see --help)", o->name, value, o->metavar ? o->metavar : "value");
            return CLI_EXIT_USAGE;
        }
        return 0;
    }
    case CLI_OPT_FLAG:
        *(int *)o->dest = 1;
        return 0;
    case CLI_OPT_SECTION:
        break;
    }
    return CLI_EXIT_USAGE;
}

int cli_parse_args(int argc, char **argv, cli_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                   size_t *n_pos)
{
    size_t np = 0;
    int only_pos = 0;
    s_version = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int is_opt = !only_pos && a[0] == '-' && a[1] != '\0'; /* "-" alone is positional (stdin) */
        if (is_opt && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (!is_opt) {
            if (np >= max_pos) {
                if (max_pos == 0)
                    cli_error("unexpected argument '%s': this program takes only --flags (see --help)", a);
                else
                    cli_error("unexpected extra argument '%s': give one input file (see --help)", a);
                return CLI_EXIT_USAGE;
            }
            pos[np++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        cli_opt *o = NULL;
        if (strcmp(a, "-h") == 0)
            o = s_find_n(opts, n_opts, "--help", 6);
        else if (a[1] == '-')
            o = s_find_n(opts, n_opts, a, len);
        if (!o && strcmp(a, "--version") == 0) {
            s_version = 1;
            continue;
        }
        if (!o) {
            char dashed[128]; /* --n_components: did they mean --n-components? */
            size_t dl = len < sizeof dashed ? len : sizeof dashed - 1;
            memcpy(dashed, a, dl);
            for (size_t c = 2; c < dl; c++)
                dashed[c] = dashed[c] == '_' ? '-' : dashed[c];
            if (memchr(a, '_', dl) && s_find_n(opts, n_opts, dashed, dl))
                cli_error("unknown flag '%.*s': did you mean '%.*s'?", (int)len, a, (int)dl, dashed);
            else
                cli_error("unknown flag '%.*s'; run %s --help for the list of flags", (int)len, a, s_program);
            return CLI_EXIT_USAGE;
        }
        if (o->given && o->kind != CLI_OPT_PARSE) {
            const char *alias = s_shown_alias(o->name);
            cli_error("%s%s%s%s was given twice; give it once", o->name, alias ? " (or " : "", alias ? alias : "",
                      alias ? ")" : "");
            return CLI_EXIT_USAGE;
        }
        o->given = 1;
        const char *value = NULL;
        if (o->kind == CLI_OPT_FLAG) {
            if (eq) {
                cli_error("%s takes no value (got '%s'); give it alone", o->name, eq + 1);
                return CLI_EXIT_USAGE;
            }
        } else if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc || (o->kind != CLI_OPT_PARSE && argv[i + 1][0] == '-' && argv[i + 1][1] == '-')) {
                cli_error("%s needs a value: %s %s (see --help)", o->name, o->name, o->metavar ? o->metavar : "VALUE");
                return CLI_EXIT_USAGE;
            }
            value = argv[++i];
        }
        int rc = s_store(o, value);
        if (rc)
            return rc;
    }
    if (n_pos)
        *n_pos = np;
    return 0;
}

/* --------------------------------------------------------------- config */
/* s without its leading and trailing blanks (s is modified). */
static char *s_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    for (char *e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n');)
        *--e = 0;
    return s;
}

/* One "name = value" line of path (lineno) into the table. */
static int s_config_line(const char *path, int lineno, char *line, cli_opt *opts, size_t n_opts)
{
    char *eq = strchr(line, '=');
    if (eq)
        *eq = 0;
    char *name = s_trim(line), *value = eq ? s_trim(eq + 1) : NULL;
    char flag[128];
    snprintf(flag, sizeof flag, "--%s", name);
    cli_opt *o = s_find_n(opts, n_opts, flag, strlen(flag));
    if (!o || o->kind == CLI_OPT_CONFIG || strcmp(flag, "--help") == 0) {
        if (!eq)
            cli_error("%s:%d: '%s' is not a setting: write name = value", path, lineno, name);
        else
            cli_error("%s:%d: unknown setting '%s'", path, lineno, name);
        return CLI_EXIT_USAGE;
    }
    if (o->given == 1)
        return 0; /* the command line wins */
    if (o->kind == CLI_OPT_FLAG && value) {
        int yes = !strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "1");
        if (!yes && strcmp(value, "false") && strcmp(value, "no") && strcmp(value, "0")) {
            cli_error("%s:%d: %s takes true or false", path, lineno, name);
            return CLI_EXIT_USAGE;
        }
        if (!yes)
            return 0;
    }
    if (o->kind != CLI_OPT_FLAG && !value) {
        cli_error("%s:%d: %s needs a value: %s = %s", path, lineno, name, name, o->metavar ? o->metavar : "VALUE");
        return CLI_EXIT_USAGE;
    }
    if (o->kind == CLI_OPT_STRING) {
        cli_error("%s:%d: %s cannot be set in a config file; give it on the command line", path, lineno, name);
        return CLI_EXIT_USAGE; /* its value would point into a line that is gone */
    }
    o->given = 2;
    int silent = s_silent;
    s_silent = 1; /* say it once, with the file and line */
    int rc = s_store(o, value);
    s_silent = silent;
    if (rc) {
        char why[sizeof s_last];
        memcpy(why, s_last, sizeof why);
        cli_error("%s:%d: %s%s", path, lineno, why,
                  value && strchr(value, '#') ? " (a comment must be on a line of its own)" : "");
    }
    return rc;
}

int cli_read_config(const char *path, cli_opt *opts, size_t n_opts)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error("--config: cannot read %s: %s", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    char line[4400];
    int lineno = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        char *p = s_trim(line);
        if (*p && *p != '#')
            rc = s_config_line(path, lineno, p, opts, n_opts);
    }
    fclose(f);
    return rc;
}

/* ----------------------------------------------------------------- help */
/* Print text word-wrapped from column col (the cursor is there already),
   continuing lines at column indent; a '\n' in text forces a break. */
static void s_wrap(FILE *f, const char *text, int col, int indent)
{
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            p++;
            continue;
        }
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (col > indent && col + 1 + (int)w > S_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
    }
    fputc('\n', f);
}

void cli_print_usage(FILE *f, const char *synopsis, const cli_opt *opts, size_t n_opts, const char *epilogue)
{
    fputs(synopsis, f);
    for (size_t i = 0; i < n_opts; i++) {
        const cli_opt *o = &opts[i];
        if (o->kind == CLI_OPT_SECTION) {
            fprintf(f, "\n%s\n", o->help);
            continue;
        }
        if (!o->help)
            continue; /* a hidden option: a former name still read */
        char head[96];
        const char *mv = o->kind == CLI_OPT_FLAG ? "" : o->metavar ? o->metavar : "VALUE";
        const char *sp = mv[0] ? " " : "", *alias = s_shown_alias(o->name);
        if (alias)
            snprintf(head, sizeof head, "  %s%s%s, %s%s%s", o->name, sp, mv, alias, sp, mv);
        else
            snprintf(head, sizeof head, "  %s%s%s", o->name, sp, mv);
        int col = (int)strlen(head);
        fputs(head, f);
        if (col + 1 >= S_INDENT) {
            fprintf(f, "\n%*s", S_INDENT, "");
        } else {
            fprintf(f, "%*s", S_INDENT - col, "");
        }
        char text[1024];
        if (o->deflt && strcmp(o->deflt, "required") == 0)
            snprintf(text, sizeof text, "%s (required)", o->help);
        else if (o->deflt)
            snprintf(text, sizeof text, "%s (default: %s)", o->help, o->deflt);
        else
            snprintf(text, sizeof text, "%s", o->help);
        s_wrap(f, text, S_INDENT, S_INDENT);
    }
    if (epilogue)
        fprintf(f, "\n%s", epilogue);
}

int cli_version_given(void) { return s_version; }

void cli_print_version(void)
{
    printf("%s %s\n", s_program, dps_version());
}

int cli_parse_or_help(int argc, char **argv, cli_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                      size_t *n_pos, const int *help, const char *synopsis, const char *epilogue)
{
    int rc = cli_parse_args(argc, argv, opts, n_opts, pos, max_pos, n_pos);
    if (rc)
        return rc;
    if (s_version) {
        cli_print_version();
        return CLI_EXIT_OK;
    }
    if (cli_former_used() && !s_silent)
        fprintf(stderr, "%s: note: %s is the former name of %s (read as it)\n", s_program,
                cli_former_used()->alias, cli_former_used()->name);
    for (size_t i = 0; i < n_opts && !*help; i++)
        if (opts[i].kind == CLI_OPT_CONFIG && opts[i].given && (rc = cli_read_config(*(const char **)opts[i].dest,
                                                                                     opts, n_opts)))
            return rc;
    if (*help) {
        cli_print_usage(stdout, synopsis, opts, n_opts, epilogue);
        return CLI_EXIT_OK;
    }
    return -1;
}
