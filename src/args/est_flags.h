/* est_flags.h - the estimator's settings as flags, one table for every
   program that takes them (dps-estimate, dps-collector, dps-mpi-estimate):
   each flag's name, argument name and help, and its default as text, read
   from the library (dps_config_init, the mechanism table, the public
   limits) so that no program states a default of its own.  Each program
   keeps its own storage for the values and adds its own flags; a program
   whose flag means more than the estimator's setting (dps-estimate's --rho
   also budgets its central methods) appends a note to the shared help.

   Who owns what: the table and the strings it returns are static, or the
   caller's buffer. */
#ifndef DPS_EST_FLAGS_H
#define DPS_EST_FLAGS_H

#include <stddef.h>

typedef struct {
    const char *name;    /* without the dashes: "t", "power-blocks"            */
    const char *metavar; /* the value's name in --help                         */
    const char *help;    /* what it sets, for every program                    */
} est_flag;

/* The flag named name ("t" or "--t"); NULL for a name that is not one of
   the estimator's settings. */
const est_flag *est_flag_get(const char *name);
/* Its argument name and help; NULL for an unknown name. */
const char *est_flag_metavar(const char *name);
const char *est_flag_help(const char *name);
/* Its help with a program's note after it ("HELP; NOTE") into buf. */
const char *est_flag_help_noted(const char *name, const char *note, char *buf, size_t len);
/* Its default, as the programs' --help shows it ("125", "2*k", "reference",
   "0 = no cap"), read from the library; static text (made at the first
   call), NULL for an unknown name. */
const char *est_flag_default(const char *name);

/* 1 if the aggregator named aggregator (NULL: the library's default) reads
   parameter p (dps_param_applies); 1 for a name that is no aggregator, which
   the program refuses with its own message. */
int est_flag_applies(const char *aggregator, int p);
/* The aggregator named name into *out (out may be NULL: a check): 0; else
   -1 and a sentence naming the library's aggregators in err. */
int est_flag_aggregator(const char *name, int *out, char *err, size_t len);
/* Refuse the flags given for settings the aggregator does not read
   (--hist-width, --power-blocks and --power-oversample, --dense-max-d):
   given(flag, arg) says whether the program was given "--flag".  0 if none
   was; else -1 and the sentence that says which in err. */
int est_flag_refuse_unread(const char *aggregator, int (*given)(const char *flag, void *arg), void *arg, char *err,
                           size_t len);

#endif
