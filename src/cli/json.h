/* json.h - a tiny streaming JSON writer for the programs' summaries: objects
   and arrays nested up to CLI_JSON_MAX_DEPTH, keys and strings escaped,
   numbers as %.17g (null when not finite), indented two spaces per level.

   Who owns what: the writer borrows the FILE; it allocates nothing.  Errors:
   misuse (too deep, a key inside an array) is a programming error caught by
   assert; write errors show up in cli_json_finish. */
#ifndef DPS_CLI_JSON_H
#define DPS_CLI_JSON_H

#include <stdint.h>
#include <stdio.h>

#define CLI_JSON_MAX_DEPTH 16

typedef struct {
    FILE *f;
    int depth;
    int count[CLI_JSON_MAX_DEPTH]; /* items written at each level          */
    int is_obj[CLI_JSON_MAX_DEPTH];
    int compact;                   /* 1: the whole document on one line    */
} cli_json;

/* Start a document on f (one value per line, indented). */
void cli_json_init(cli_json *j, FILE *f);
/* Start a document on f written on one line (JSON Lines: one document per
   line, e.g. one per snapshot in dps-watch --json). */
void cli_json_init_compact(cli_json *j, FILE *f);

/* In every call below, key names the member inside an object and must be NULL
   inside an array or at the top level. */
void cli_json_object_begin(cli_json *j, const char *key);
void cli_json_object_end(cli_json *j);
void cli_json_array_begin(cli_json *j, const char *key);
void cli_json_array_end(cli_json *j);
/* A string (escaped); NULL writes null. */
void cli_json_str(cli_json *j, const char *key, const char *v);
/* A number with %.17g; NaN and infinities write null. */
void cli_json_num(cli_json *j, const char *key, double v);
void cli_json_u64(cli_json *j, const char *key, uint64_t v);
void cli_json_bool(cli_json *j, const char *key, int v);
void cli_json_null(cli_json *j, const char *key);

/* End the document (a final newline) and flush; 0, or -1 if writing failed. */
int cli_json_finish(cli_json *j);

#endif
