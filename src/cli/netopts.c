/* netopts.c - security flags, key loading and exit codes shared by the
   network programs (see netopts.h). */
#include "netopts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A sentence for a key file that did not load. */
static int s_key_error(cli_msg *err, const char *flag, const char *path, int is_secret)
{
    if (access(path, R_OK) != 0)
        return cli_msg_set(err, CLI_EXIT_INPUT, "%s: cannot read '%s': %s; check the path (make keys with dps-keygen)",
                           flag, path, strerror(errno));
    if (is_secret)
        return cli_msg_set(err, CLI_EXIT_INPUT,
                           "%s: '%s' has no valid public-key and secret-key lines; give your NAME.key_secret made by "
                           "dps-keygen (the NAME.key file holds only the public half)",
                           flag, path);
    return cli_msg_set(err, CLI_EXIT_INPUT,
                       "%s: '%s' has no valid public-key line; give the collector's NAME.key made by dps-keygen",
                       flag, path);
}

int cli_net_security(const cli_net_flags *f, const char *const *eps, size_t n, cli_net_sec *out, cli_msg *err)
{
    memset(out, 0, sizeof *out);
    if (f->plaintext) {
        if (f->server_key || f->key)
            return cli_msg_set(err, CLI_EXIT_USAGE,
                               "--insecure-plaintext and --server-key/--key exclude each other; give the keys (CURVE) "
                               "or --insecure-plaintext, not both");
        for (size_t i = 0; i < n; i++)
            if (eps[i] && !dps_endpoint_is_local(eps[i]))
                return cli_msg_set(err, CLI_EXIT_USAGE,
                                   "--insecure-plaintext refuses %s: rows and snapshots would cross the network "
                                   "unencrypted; use ipc:// or loopback tcp (127.0.0.1), or CURVE keys "
                                   "(--server-key and --key)",
                                   eps[i]);
        out->sec.plaintext = 1;
        return 0;
    }
    if (!f->server_key || !f->key)
        return cli_msg_set(err, CLI_EXIT_USAGE,
                           "give --server-key FILE and --key FILE (CURVE, made by dps-keygen), or "
                           "--insecure-plaintext for an ipc:// or loopback endpoint%s",
                           f->server_key ? " (--key is missing)" : f->key ? " (--server-key is missing)" : "");
    if (dps_public_key_load(out->server_public, f->server_key) != DPS_OK)
        return s_key_error(err, "--server-key", f->server_key, 0);
    if (dps_keypair_load(&out->own, f->key) != DPS_OK)
        return s_key_error(err, "--key", f->key, 1);
    out->sec.server_public_key = out->server_public;
    out->sec.public_key = out->own.public_key;
    out->sec.secret_key = out->own.secret_key;
    out->sec.plaintext = 0;
    return 0;
}

void cli_net_public_name(const char *key_path, char *out, size_t n)
{
    size_t len = strlen(key_path), sl = strlen("_secret");
    if (len > sl && strcmp(key_path + len - sl, "_secret") == 0)
        snprintf(out, n, "%.*s", (int)(len - sl), key_path);
    else
        snprintf(out, n, "%s", key_path);
}

int cli_net_exit_code(int e)
{
    switch (e) {
    case DPS_OK: return CLI_EXIT_OK;
    case DPS_EAUTH: return CLI_EXIT_AUTH;
    case DPS_ETIMEOUT: return CLI_EXIT_TIMEOUT;
    case DPS_EGONE: return CLI_EXIT_TIMEOUT;
    case DPS_EKEY: return CLI_EXIT_INPUT;
    case DPS_EINVAL: return CLI_EXIT_USAGE;
    default: return CLI_EXIT_RUNTIME;
    }
}

void cli_net_auth_sentence(const cli_net_flags *f, const char *endpoint, const char *authorized_flag, char *out,
                           size_t n)
{
    char pub[1024];
    cli_net_public_name(f->key ? f->key : "?", pub, sizeof pub);
    snprintf(out, n,
             "the collector at %s refused our CURVE key: the public key of --key %s is not in the collector's %s "
             "directory; copy '%s' there (no restart needed) or use an authorized key",
             endpoint, f->key ? f->key : "?", authorized_flag, pub);
}
