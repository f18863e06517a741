/* netopts.h - what the network programs (dps-produce, dps-watch, dps-status)
   share: the three security flags, loading the CURVE keys they name into a
   dps_security, the plaintext rule checked before any socket exists, and the
   mapping of library errors to exit codes.

   Who owns what: a cli_net_sec holds copies of the keys; its sec member
   points into it, so keep the struct where it is (do not copy it) while sec
   is in use.  Errors: CLI_EXIT_USAGE for flags that do not fit together or
   plaintext to a non-local endpoint, CLI_EXIT_INPUT for a key file that is
   missing or malformed, each with a sentence in the cli_msg. */
#ifndef DPS_CLI_NETOPTS_H
#define DPS_CLI_NETOPTS_H

#include "args.h"

#include "dpsubspace_net.h"

#include <stddef.h>

/* The flags as parsed (strings point into argv). */
typedef struct {
    const char *server_key; /* --server-key FILE: the collector's .key or .key_secret */
    const char *key;        /* --key FILE: our own .key_secret                        */
    int plaintext;          /* --insecure-plaintext                                   */
} cli_net_flags;

/* The flags' rows of a program's option table, under a "Security:" heading.
   key_help says where the program's public key must be for the collector to
   let it in. */
#define CLI_NET_OPTS(flags, key_help)                                                                         \
    {NULL, CLI_OPT_SECTION, NULL, NULL, NULL,                                                                 \
     "Security (CURVE encryption and authentication unless --insecure-plaintext):", 0},                       \
        {"--server-key", CLI_OPT_STRING, &(flags).server_key, "FILE", NULL,                                   \
         "the collector's public key: its NAME.key file (a .key_secret works too; only the public key is "    \
         "read)", 0},                                                                                         \
        {"--key", CLI_OPT_STRING, &(flags).key, "FILE", NULL, key_help, 0},                                   \
        {"--insecure-plaintext", CLI_OPT_FLAG, &(flags).plaintext, NULL, NULL,                                \
         "no encryption, no authentication (the collector must run with --insecure-plaintext too); "          \
         "refused for endpoints other than ipc:// and loopback tcp (127.x, localhost, [::1])", 0}

typedef struct {
    char server_public[DPS_KEY_LEN + 1];
    dps_keypair own;
    dps_security sec; /* points into server_public and own */
} cli_net_sec;

/* Check the flags against every endpoint in eps (n of them, NULL entries are
   skipped) and load the keys.  0, CLI_EXIT_USAGE or CLI_EXIT_INPUT. */
int cli_net_security(const cli_net_flags *f, const char *const *eps, size_t n, cli_net_sec *out, cli_msg *err);

/* The public key file that goes with a .key_secret path ("a/b.key_secret" ->
   "a/b.key"), for messages; the path itself if it does not end so. */
void cli_net_public_name(const char *key_path, char *out, size_t n);

/* The exit code for a library error: DPS_EAUTH 5, DPS_ETIMEOUT 6, DPS_EKEY 3,
   DPS_EINVAL 2, anything else 1. */
int cli_net_exit_code(int dps_err);

/* A sentence for a refused CURVE key: which file's key, and where its .key
   must go (authorized_flag: "--authorized-keys" or "--subscriber-keys"). */
void cli_net_auth_sentence(const cli_net_flags *f, const char *endpoint, const char *authorized_flag, char *out,
                           size_t n);

#endif
