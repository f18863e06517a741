/* json.c - the streaming JSON writer of json.h.  Each value goes on its own
   line, so the output is readable and line-oriented tools (grep, awk) can
   pick fields out of it; compact mode writes a document on one line. */
#include "json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>

void cli_json_init(cli_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->count[0] = 0;
    j->is_obj[0] = 0;
    j->compact = 0;
}

void cli_json_init_compact(cli_json *j, FILE *f)
{
    cli_json_init(j, f);
    j->compact = 1;
}

/* Write the string s with JSON escapes, quoted. */
static void s_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Separator, newline, indentation and "key": before a value. */
static void s_before(cli_json *j, const char *key)
{
    int lvl = j->depth;
    assert(lvl < CLI_JSON_MAX_DEPTH);
    assert(lvl == 0 ? key == NULL : (j->is_obj[lvl] ? key != NULL : key == NULL));
    if (lvl > 0) {
        if (j->count[lvl] > 0)
            fputs(j->compact ? ", " : ",", j->f);
        if (!j->compact)
            fprintf(j->f, "\n%*s", 2 * lvl, "");
    }
    j->count[lvl]++;
    if (key) {
        s_quoted(j->f, key);
        fputs(": ", j->f);
    }
}

/* Open a container after its key. */
static void s_open(cli_json *j, const char *key, int obj)
{
    s_before(j, key);
    fputc(obj ? '{' : '[', j->f);
    j->depth++;
    assert(j->depth < CLI_JSON_MAX_DEPTH);
    j->count[j->depth] = 0;
    j->is_obj[j->depth] = obj;
}

/* Close the innermost container. */
static void s_close(cli_json *j, int obj)
{
    assert(j->depth > 0 && j->is_obj[j->depth] == obj);
    int had = j->count[j->depth];
    j->depth--;
    if (had && !j->compact)
        fprintf(j->f, "\n%*s", 2 * j->depth, "");
    fputc(obj ? '}' : ']', j->f);
}

void cli_json_object_begin(cli_json *j, const char *key) { s_open(j, key, 1); }
void cli_json_object_end(cli_json *j) { s_close(j, 1); }
void cli_json_array_begin(cli_json *j, const char *key) { s_open(j, key, 0); }
void cli_json_array_end(cli_json *j) { s_close(j, 0); }

void cli_json_str(cli_json *j, const char *key, const char *v)
{
    s_before(j, key);
    if (v)
        s_quoted(j->f, v);
    else
        fputs("null", j->f);
}

void cli_json_num(cli_json *j, const char *key, double v)
{
    s_before(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.17g", v);
    else
        fputs("null", j->f);
}

void cli_json_u64(cli_json *j, const char *key, uint64_t v)
{
    s_before(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void cli_json_bool(cli_json *j, const char *key, int v)
{
    s_before(j, key);
    fputs(v ? "true" : "false", j->f);
}

void cli_json_null(cli_json *j, const char *key)
{
    s_before(j, key);
    fputs("null", j->f);
}

int cli_json_finish(cli_json *j)
{
    fputc('\n', j->f);
    return (fflush(j->f) != 0 || ferror(j->f)) ? -1 : 0;
}
