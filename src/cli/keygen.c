/* keygen.c - dps-keygen: make a CURVE key pair for a collector, a producer, a
   subscriber or an operator, as NAME.key (public) and NAME.key_secret (both
   keys), with dps_keypair_generate and dps_keypair_save.  Never overwrites.

   Who owns what: main owns the key pair (on its stack; wiped before return)
   and the path buffer.  Errors: one line on stderr, the exit codes of args.h. */
#include "args.h"

#include "dpsubspace_net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char s_synopsis[] =
    "Usage: dps-keygen NAME [--dir DIR]\n"
    "\n"
    "Makes a CURVE key pair (ZeroMQ's elliptic-curve encryption and\n"
    "authentication) and writes two files:\n"
    "  NAME.key          the public key (mode 0644): safe to share\n"
    "  NAME.key_secret   the public and the secret key (mode 0600): keep private\n"
    "An existing file is never overwritten.\n"
    "\n"
    "What goes where:\n"
    "  collector  dps-collector --server-key NAME.key_secret; hand NAME.key to\n"
    "             every producer, subscriber and operator (their --server-key).\n"
    "  producer   dps-produce --key NAME.key_secret; copy NAME.key into the\n"
    "             collector's --authorized-keys directory.  No restart needed:\n"
    "             a key file added, rewritten or removed counts at the next\n"
    "             connection, and within 1 s for producers already connected.\n"
    "  operator   dps-status --key NAME.key_secret; NAME.key into\n"
    "             --authorized-keys as well.\n"
    "  subscriber dps-watch --key NAME.key_secret; NAME.key into the collector's\n"
    "             --subscriber-keys directory if it has one (else any CURVE\n"
    "             client with the collector's public key may subscribe).\n";

static const char s_epilogue[] =
    "Example:\n"
    "  dps-keygen collector --dir keys && dps-keygen trainer-1 --dir keys\n"
    "  mkdir -p authorized && cp keys/trainer-1.key authorized/\n"
    "  dps-collector --d 784 --k 10 --state-dir state --cap-rho 20 \\\n"
    "      --server-key keys/collector.key_secret --authorized-keys authorized\n"
    "  dps-produce rows.npy --server-key keys/collector.key --key keys/trainer-1.key_secret\n"
    "\n"
    "Exit codes: 0 ok; 1 runtime failure (no CURVE support, writing failed);\n"
    "2 usage (unknown flag, bad NAME, a file of that name exists, DIR unusable).\n";

/* Check NAME: a file name, not a path, without the extensions we add. */
static int s_check_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        cli_error("NAME '%s' cannot be a file name; give a name such as 'collector' or 'trainer-1'", name);
        return CLI_EXIT_USAGE;
    }
    if (strchr(name, '/')) {
        cli_error("NAME '%s' contains '/'; give a plain name and the directory with --dir", name);
        return CLI_EXIT_USAGE;
    }
    if ((n > 4 && strcmp(name + n - 4, ".key") == 0) || (n > 11 && strcmp(name + n - 11, ".key_secret") == 0)) {
        cli_error("give NAME without .key or .key_secret (both files are written: NAME.key and NAME.key_secret)");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* Make sure dir exists (create it with mode 0700 if it does not) and is a
   writable directory. */
static int s_prepare_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT || mkdir(dir, 0700) != 0) {
            cli_error("--dir: cannot create directory '%s': %s", dir, strerror(errno));
            return CLI_EXIT_USAGE;
        }
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        cli_error("--dir: '%s' exists and is not a directory", dir);
        return CLI_EXIT_USAGE;
    }
    if (access(dir, W_OK) != 0) {
        cli_error("--dir: directory '%s' is not writable; choose another", dir);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* Parse, check, generate and write; returns the exit code. */
int main(int argc, char **argv)
{
    cli_set_program("dps-keygen");
    const char *dir = NULL;
    int help = 0;
    cli_opt opts[] = {
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Options:", 0},
        {"--dir", CLI_OPT_STRING, &dir, "DIR", "the current directory",
         "write the two files into DIR (created with mode 0700 if missing)", 0},
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    size_t n_opts = sizeof opts / sizeof opts[0];
    const char *pos[1] = {NULL};
    size_t n_pos = 0;
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, pos, 1, &n_pos, &help, s_synopsis, s_epilogue);
    if (rc >= 0)
        return rc;
    if (n_pos != 1) {
        cli_error("give the key's NAME, e.g. dps-keygen trainer-1 --dir keys (see --help)");
        return CLI_EXIT_USAGE;
    }
    const char *name = pos[0];
    if ((rc = s_check_name(name)) != 0 || (dir && (rc = s_prepare_dir(dir)) != 0))
        return rc;
    char base[4096], pub[4200], sec[4200];
    if ((size_t)snprintf(base, sizeof base, "%s%s%s", dir ? dir : "", dir ? "/" : "", name) >= sizeof base) {
        cli_error("the path of NAME in --dir is too long");
        return CLI_EXIT_USAGE;
    }
    snprintf(pub, sizeof pub, "%s.key", base);
    snprintf(sec, sizeof sec, "%s.key_secret", base);
    struct stat st;
    const char *exists = lstat(sec, &st) == 0 ? sec : lstat(pub, &st) == 0 ? pub : NULL;
    if (exists) {
        cli_error("'%s' already exists: keys are never overwritten (clients and collectors may rely on them); "
                  "choose another NAME or remove the old files yourself",
                  exists);
        return CLI_EXIT_USAGE;
    }
    dps_keypair kp;
    rc = dps_keypair_generate(&kp);
    if (rc) {
        cli_error("cannot make a CURVE key pair: %s (is libzmq built with CURVE/libsodium?)", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    rc = dps_keypair_save(&kp, base);
    memset(&kp, 0, sizeof kp);
    if (rc) {
        int e = errno; /* not cleaned up: a file that appeared meanwhile may be someone else's */
        cli_error("cannot write '%s' and '%s': %s (%s); check the directory, and remove a half-written pair "
                  "before trying again",
                  sec, pub, dps_strerror(rc), strerror(e));
        return CLI_EXIT_RUNTIME;
    }
    printf("wrote %s (secret, mode 0600): keep it private; it is the collector's --server-key, or a client's "
           "--key (dps-produce, dps-watch, dps-status)\n",
           sec);
    printf("wrote %s (public, mode 0644): for a producer/operator key copy it into the collector's "
           "--authorized-keys directory (a subscriber's into --subscriber-keys, if used); for a collector's key "
           "give it to clients as their --server-key\n",
           pub);
    return CLI_EXIT_OK;
}
