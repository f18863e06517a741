/* log.c - the daemon's log lines (see log.h). */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <syslog.h>

static int s_level = LOGLEVEL_INFO;
static log_sink s_sink = LOG_TO_STDERR;
static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;

void log_set_level(int level) { s_level = level; }
int log_level(void) { return s_level; }

int log_set_sink_name(const char *name)
{
    if (strcmp(name, "stderr") == 0)
        s_sink = LOG_TO_STDERR;
    else if (strcmp(name, "journal") == 0)
        s_sink = LOG_TO_JOURNAL;
    else if (strcmp(name, "syslog") == 0) {
        s_sink = LOG_TO_SYSLOG;
        openlog("dps-collector", LOG_PID, LOG_DAEMON);
    } else
        return -1;
    return 0;
}

static void s_line(int prio, const char *tag, const char *fmt, va_list ap)
{
    if (s_sink == LOG_TO_SYSLOG) {
        vsyslog(prio, fmt, ap);
        return;
    }
    /* the whole line in one write(2): the ranks of a sharded collector share
       mpirun's stderr, and stderr is unbuffered (a line written in pieces
       would interleave with another rank's) */
    char head[96], small[2048], *line = small;
    if (s_sink == LOG_TO_JOURNAL) {
        snprintf(head, sizeof head, "<%d>", prio);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        localtime_r(&ts.tv_sec, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(head, sizeof head, "%s.%03ld dps-collector %s", stamp, ts.tv_nsec / 1000000, tag);
    }
    size_t hl = strlen(head);
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    size_t len = hl + (n > 0 ? (size_t)n : 0) + 1;
    if (len + 1 > sizeof small && !(line = malloc(len + 1)))
        line = small, len = sizeof small - 1; /* no memory: the line cut short */
    memcpy(line, head, hl);
    vsnprintf(line + hl, len - hl, fmt, ap);
    line[len - 1] = '\n';
    line[len] = 0;
    pthread_mutex_lock(&s_mu);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    pthread_mutex_unlock(&s_mu);
    if (line != small)
        free(line);
}

#define LOG_FN(name, lvl, prio, tag)    \
    void name(const char *fmt, ...)     \
    {                                   \
        if (s_level < (lvl))            \
            return;                     \
        va_list ap;                     \
        va_start(ap, fmt);              \
        s_line(prio, tag, fmt, ap);     \
        va_end(ap);                     \
    }
LOG_FN(log_info, LOGLEVEL_INFO, LOG_INFO, "")
LOG_FN(log_warn, LOGLEVEL_QUIET, LOG_WARNING, "[warn] ")
LOG_FN(log_error, LOGLEVEL_QUIET, LOG_ERR, "[error] ")
LOG_FN(log_debug, LOGLEVEL_DEBUG, LOG_DEBUG, "[debug] ")
