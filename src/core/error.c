/* error.c - error sentences, version, and the one place OpenBLAS's process-wide
   settings are touched. */
#include "dpsubspace.h"
#include "internal.h"

#include <pthread.h>

static const char *s_sentences[DPS_ERR_COUNT_] = {
    [DPS_OK] = "success",
    [DPS_EINVAL] = "invalid argument",
    [DPS_ENOMEM] = "out of memory",
    [DPS_EDIM] = "batch dimension differs from the configured dimension",
    [DPS_EEMPTY] = "empty batch",
    [DPS_EFULL] = "the epoch is full; close it before pushing more rows",
    [DPS_ENUMERIC] = "a LAPACK routine reported a numerical failure",
    [DPS_ERANDOM] = "the secure random generator could not be initialised",
    [DPS_ELIMIT] = "the problem is above this algorithm's documented size limit",
    [DPS_EBUDGET] = "the charge would pass the privacy budget cap",
    [DPS_ECOMMIT] = "the ledger commit hook failed; nothing was released",
    [DPS_ESTATE] = "the call is not valid in the object's current state",
    [DPS_ENET] = "a ZeroMQ call failed (bad endpoint, address in use, or the context ended)",
    [DPS_EPROTO] = "a message is malformed or speaks another protocol version",
    [DPS_EAUTH] = "the peer refused our credentials",
    [DPS_EKEY] = "a key file is missing, unreadable or malformed",
    [DPS_EIO] = "a file could not be read, written or synced",
    [DPS_ETIMEOUT] = "nothing arrived in time",
    [DPS_ECANCELED] = "canceled: the caller's cancel flag ended the wait",
    [DPS_EGONE] = "the collector went silent (killed, crashed or unreachable) for longer than the collector timeout",
};

const char *dps_strerror(int err)
{
    if (err < 0 || err >= DPS_ERR_COUNT_)
        return "unknown error";
    return s_sentences[err];
}

static __thread const char *s_last_error = "";

const char *dps_last_error(void) { return s_last_error ? s_last_error : ""; }

void dps_set_last_error(const char *why) { s_last_error = why ? why : ""; }

const char *dps_version(void)
{
    return DPS_STR(DPS_VERSION_MAJOR) "." DPS_STR(DPS_VERSION_MINOR) "." DPS_STR(DPS_VERSION_PATCH);
}

/* OpenBLAS exports these; Debian's cblas.h may be the netlib one, so declare them. */
extern void openblas_set_num_threads(int num_threads);
extern char *openblas_get_corename(void);

static pthread_once_t s_blas_once = PTHREAD_ONCE_INIT;
static int s_blas_set_by_user = 0;

static void s_blas_default(void)
{
    if (!s_blas_set_by_user)
        openblas_set_num_threads(1);
}

void dps_blas_set_threads(int n)
{
    s_blas_set_by_user = 1;
    openblas_set_num_threads(n < 1 ? 1 : n);
}

void dps_blas_init_once(void) { pthread_once(&s_blas_once, s_blas_default); }

const char *dps_blas_corename(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}
