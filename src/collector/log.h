/* log.h - human-readable, timestamped log lines on stderr for the daemon. */
#ifndef DPS_LOG_H
#define DPS_LOG_H

enum { LOG_QUIET = 0, LOG_INFO = 1, LOG_DEBUG = 2 };
void log_set_level(int level);
int log_level(void);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
