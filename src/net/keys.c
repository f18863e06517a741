/* keys.c - CURVE key pairs in two small text files:
     NAME.key         "public-key = <Z85>"            (shareable, 0644)
     NAME.key_secret  public-key and "secret-key = <Z85>" (0600)
   A collector's authorized-keys directory holds producers' NAME.key files. */
#include "dpsubspace_net.h"
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

int dps_keypair_generate(dps_keypair *out)
{
    if (!out)
        return DPS_EINVAL;
    memset(out, 0, sizeof *out);
    if (zmq_curve_keypair(out->public_key, out->secret_key) != 0)
        return DPS_ENET;
    return DPS_OK;
}

static int s_write_new(const char *path, mode_t mode, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return DPS_EIO;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    ok &= close(fd) == 0;
    return ok ? DPS_OK : DPS_EIO;
}

int dps_keypair_save(const dps_keypair *kp, const char *base)
{
    if (!kp || !base || !net_key_valid(kp->public_key) || !net_key_valid(kp->secret_key))
        return DPS_EINVAL;
    char path[4096], text[512];
    snprintf(text, sizeof text,
             "# dpsubspace CURVE key pair (Z85).  SECRET: keep this file private.\n"
             "public-key = %s\nsecret-key = %s\n", kp->public_key, kp->secret_key);
    if ((size_t)snprintf(path, sizeof path, "%s.key_secret", base) >= sizeof path)
        return DPS_EINVAL;
    int rc = s_write_new(path, 0600, text);
    if (rc)
        return rc;
    snprintf(text, sizeof text,
             "# dpsubspace CURVE public key (Z85).  Safe to share: put it in a collector's\n"
             "# authorized-keys directory to let the holder of the secret key in.\n"
             "public-key = %s\n", kp->public_key);
    char pub[4096];
    snprintf(pub, sizeof pub, "%s.key", base);
    rc = s_write_new(pub, 0644, text);
    if (rc) { /* no half pair left behind */
        snprintf(path, sizeof path, "%s.key_secret", base);
        unlink(path);
    }
    return rc;
}

/* Find "name = value" in a key file; value copied (40 chars). */
static int s_read_field(const char *path, const char *name, char out[DPS_KEY_LEN + 1])
{
    FILE *f = fopen(path, "r");
    if (!f)
        return DPS_EKEY;
    char line[256];
    int rc = DPS_EKEY;
    size_t nl = strlen(name);
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || strncmp(p, name, nl) != 0)
            continue;
        p += nl;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p++ != '=')
            continue;
        while (*p == ' ' || *p == '\t' || *p == '"')
            p++;
        char val[DPS_KEY_LEN + 1];
        size_t i = 0;
        while (i < DPS_KEY_LEN && p[i] && p[i] != '"' && p[i] != '\n' && p[i] != ' ' && p[i] != '\r') {
            val[i] = p[i];
            i++;
        }
        val[i] = 0;
        if (net_key_valid(val)) {
            memcpy(out, val, DPS_KEY_LEN + 1);
            rc = DPS_OK;
        }
        break;
    }
    fclose(f);
    return rc;
}

int dps_keypair_load(dps_keypair *out, const char *path)
{
    if (!out || !path)
        return DPS_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = s_read_field(path, "public-key", out->public_key);
    if (!rc)
        rc = s_read_field(path, "secret-key", out->secret_key);
    return rc;
}

int dps_public_key_load(char out[DPS_KEY_LEN + 1], const char *path)
{
    if (!out || !path)
        return DPS_EINVAL;
    return s_read_field(path, "public-key", out);
}
