/* log.c - "2026-11-21 10:00:00.123 dps-collector [warn] message" on stderr. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static int s_level = LOG_INFO;
static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;

void log_set_level(int level) { s_level = level; }
int log_level(void) { return s_level; }

static void s_line(const char *tag, const char *fmt, va_list ap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    pthread_mutex_lock(&s_mu);
    fprintf(stderr, "%s.%03ld dps-collector %s", stamp, ts.tv_nsec / 1000000, tag);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    pthread_mutex_unlock(&s_mu);
}

#define LOG_FN(name, lvl, tag)          \
    void name(const char *fmt, ...)     \
    {                                   \
        if (s_level < (lvl))            \
            return;                     \
        va_list ap;                     \
        va_start(ap, fmt);              \
        s_line(tag, fmt, ap);           \
        va_end(ap);                     \
    }
LOG_FN(log_info, LOG_INFO, "")
LOG_FN(log_warn, LOG_QUIET, "[warn] ")
LOG_FN(log_error, LOG_QUIET, "[error] ")
LOG_FN(log_debug, LOG_DEBUG, "[debug] ")
