/* log.h - the daemon's log lines: timestamped on stderr (the default), on
   stderr with journald's "<priority>" prefixes (--log journal, for systemd:
   the journal adds the time), or to syslog(3) (--log syslog, facility
   daemon).  Priorities: error 3, warn 4, info 6, debug 7. */
#ifndef DPS_LOG_H
#define DPS_LOG_H

enum { LOGLEVEL_QUIET = 0, LOGLEVEL_INFO = 1, LOGLEVEL_DEBUG = 2 };
typedef enum { LOG_TO_STDERR, LOG_TO_JOURNAL, LOG_TO_SYSLOG } log_sink;
void log_set_level(int level);
int log_level(void);
/* Where the lines go; -1 for a name other than stderr, journal, syslog. */
int log_set_sink_name(const char *name);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
