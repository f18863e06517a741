/* reload.c - SIGHUP in dps-collector: the command line and --config read
   again (live settings change at once, the rest at the next start), and the
   publish socket bound again when a subscriber key was removed.
   Who owns what: borrows the collector (collector.h). */
#include "collector.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>


/* -------------------------------------------------------------- reload */

/* SIGHUP: read the command line and the config file again.  Settings that can
   change while running (options_apply_live) take effect now; a change to any
   other is logged and waits for a restart.  A configuration that does not
   parse or check is refused as a whole: the running one stays. */
void collector_reload_config(collector *c)
{
    collector_options next;
    options_defaults(&next);
    char err[8192];
    const char *why = "";
    if (options_parse(&next, c->argc, c->argv, err, sizeof err) != 0 || options_finish(&next, err, sizeof err) != 0) {
        log_error("SIGHUP: configuration not reloaded, the running one stays: %s", err);
        return;
    }
    dps_config *cfg = NULL;
    int rc = dps_config_new(&cfg, next.d, next.k);
    if (!rc) {
        pthread_mutex_lock(&c->ledger.mu);
        collector_config(&next, &c->ledger.led, cfg);
        pthread_mutex_unlock(&c->ledger.mu);
        rc = dps_config_check(cfg, &why);
    }
    dps_config_destroy(&cfg); /* only checked: the running estimator keeps its own */
    if (rc != DPS_OK) {
        log_error("SIGHUP: configuration not reloaded, the running one stays: %s", rc == DPS_ENOMEM ? "out of memory" : why);
        return;
    }
    option_change ch[64];
    size_t n = options_diff(&c->o, &next, ch, sizeof ch / sizeof *ch);
    int cap = 0;
    for (size_t i = 0; i < n && i < sizeof ch / sizeof *ch; i++)
        cap |= ch[i].live && (strncmp(ch[i].name, "cap-", 4) == 0 || strcmp(ch[i].name, "no-cap") == 0 ||
                              strcmp(ch[i].name, "delta-target") == 0);
    dps_budget budget = {next.cap_rho, next.cap_eps, next.delta_target};
    if (cap && dps_estimator_set_cap(c->est, &budget) != DPS_OK) {
        log_error("SIGHUP: configuration not reloaded, the running one stays: the budget cap is out of range");
        return;
    }
    for (size_t i = 0; i < n && i < sizeof ch / sizeof *ch; i++) {
        if (ch[i].live)
            log_info("SIGHUP: %s changed from %s to %s", ch[i].name, ch[i].before, ch[i].after);
        else
            log_warn("SIGHUP: %s changed from %s to %s in the configuration; it takes effect at the next start "
                     "(restart the collector), %s meanwhile", ch[i].name, ch[i].before, ch[i].after, ch[i].before);
    }
    options_apply_live(&c->o, &next);
    log_set_level(c->o.quiet ? LOGLEVEL_QUIET : c->o.verbose ? LOGLEVEL_DEBUG : LOGLEVEL_INFO);
    if (cap) {
        dps_zcdp spent = dps_estimator_spent(c->est);
        log_info("SIGHUP: privacy budget cap now %s; spent so far rho %.6g delta %.3g",
                 c->o.cap_rho > 0 ? "on rho" : c->o.cap_eps > 0 ? "on eps" : "none", spent.rho, spent.delta);
    }
    if (!n)
        log_info("SIGHUP: configuration unchanged");
}

/* A subscriber key left the subscriber-keys directory: drop every subscriber
   connection by binding the publish socket again.  The removed key's
   reconnection is refused by the ZAP handler; the others reconnect (libzmq
   retries every 100 ms) and receive the latest snapshot again as the welcome
   message, which subscribers recognise by its sequence number.  Returns 0 when
   the socket is bound again; on failure the loop retries. */
int collector_rebind_publish(collector *c)
{
    char ep[1024];
    size_t n = sizeof ep;
    if (zmq_getsockopt(c->pub.xpub, ZMQ_LAST_ENDPOINT, ep, &n) != 0 || !ep[0])
        snprintf(ep, sizeof ep, "%s", c->o.publish);
    zmq_unbind(c->pub.xpub, ep); /* fails only if already unbound (an earlier failed attempt) */
    if (zmq_bind(c->pub.xpub, ep) != 0) {
        log_error("could not bind the publish socket %s again: %s (retrying)", ep, zmq_strerror(errno));
        return -1;
    }
    log_info("a subscriber key was removed: every subscriber reconnects to %s, and the removed key is refused", ep);
    return 0;
}
