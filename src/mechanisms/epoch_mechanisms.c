/* epoch_mechanisms.c - the table of epoch mechanisms (epoch_mechanism.h):
   one entry per dps_aggregator value, each defined in its own file.  Adding
   a mechanism: write epoch_<name>.c against the interface (its file goes in
   DPS_SOURCES, CMakeLists.txt), give it a dps_aggregator value
   (include/dpsubspace.h) and a line here; tests/mechanisms/
   test_epoch_mechanisms.c then checks it (update its LAST_AGGREGATOR). */
#include "epoch_mechanism.h"

#include <string.h>

extern const epoch_mechanism epoch_reference;  /* epoch_reference.c  */
extern const epoch_mechanism epoch_projection; /* epoch_projection.c */
extern const epoch_mechanism epoch_histogram;  /* epoch_histogram.c  */
extern const epoch_mechanism epoch_covariance; /* epoch_covariance.c */
extern const epoch_mechanism epoch_gaussian;   /* epoch_gaussian.c   */
extern const epoch_mechanism epoch_power;      /* epoch_power.c      */
extern const epoch_mechanism epoch_kron;       /* epoch_kron.c       */

const epoch_mechanism *const epoch_mechanisms[] = {
    &epoch_reference,
    &epoch_projection,
    &epoch_histogram,
    &epoch_covariance,
    &epoch_gaussian,
    &epoch_power,
    &epoch_kron,
    NULL,
};

const epoch_mechanism *epoch_mechanism_for(dps_aggregator a)
{
    for (size_t i = 0; epoch_mechanisms[i]; i++)
        if (epoch_mechanisms[i]->id == a)
            return epoch_mechanisms[i];
    return NULL;
}

const char *dps_aggregator_name(dps_aggregator a)
{
    const epoch_mechanism *m = epoch_mechanism_for(a);
    return m ? m->name : "unknown";
}

dps_charge_kind dps_aggregator_charge_kind(dps_aggregator a)
{
    const epoch_mechanism *m = epoch_mechanism_for(a);
    return m ? m->kind : DPS_CHARGE_ZCDP;
}

int dps_aggregator_takes_groups(dps_aggregator a)
{
    const epoch_mechanism *m = epoch_mechanism_for(a);
    return m && (m->uses & EPOCH_USES_GROUPS) != 0;
}

int dps_aggregator_from_name(const char *name, dps_aggregator *out)
{
    for (size_t i = 0; epoch_mechanisms[i] && name; i++)
        if (strcmp(name, epoch_mechanisms[i]->name) == 0) {
            *out = epoch_mechanisms[i]->id;
            return DPS_OK;
        }
    return DPS_EINVAL;
}
