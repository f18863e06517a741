/* test_struct_layout - the public structs' layout (src/stream/struct_layout.c)
   is complete and true: every listed struct's fields come in increasing
   offset order with no gap a field could hide in (a gap before a field is
   padding only when it is smaller than that field's alignment, and the tail
   only when smaller than the struct's), every type is known, and a few
   offsets agree with the compiler's.  A field left out of the table leaves
   a gap at least its own alignment, which fails here; only a 4-byte field
   last in a struct could hide in the tail's padding. */
#include "check.h"
#include "dpsubspace.h"

#include <stddef.h>
#include <string.h>

/* size and alignment of a field type; 0 for an unknown type */
static size_t s_type_size(const char *type)
{
    if (!strcmp(type, "f64") || !strcmp(type, "u64"))
        return 8;
    if (!strcmp(type, "size"))
        return sizeof(size_t);
    if (!strcmp(type, "int"))
        return sizeof(int);
    if (!strcmp(type, "str") || !strcmp(type, "size*"))
        return sizeof(void *);
    return dps_struct_size(type); /* a nested struct of doubles: its alignment is 8 */
}

static void s_check_struct(const char *name)
{
    size_t size = dps_struct_size(name), end = 0, n = 0;
    CHECK(size > 0, "%s has a size", name);
    const char *field, *type;
    size_t count, offset;
    for (size_t i = 0; dps_struct_field(name, i, &field, &type, &count, &offset) == DPS_OK; i++, n++) {
        size_t fs = s_type_size(type), align = fs > 8 ? 8 : fs;
        CHECK(fs > 0, "%s.%s: known type %s", name, field, type);
        CHECK(count >= 1, "%s.%s: count %zu", name, field, count);
        CHECK(offset >= end && offset - end < (align ? align : 1), "%s.%s at %zu: the previous field ends at %zu",
              name, field, offset, end);
        end = offset + fs * count;
    }
    CHECK(n > 0, "%s has fields", name);
    CHECK(end <= size && size - end < 8, "%s: the fields end at %zu of %zu", name, end, size);
}

int main(void)
{
    size_t n = 0;
    for (const char *name; (name = dps_struct_name(n)) != NULL; n++)
        s_check_struct(name);
    CHECK(n == 7, "the seven public structs a binding needs are listed (%zu)", n);
    CHECK(dps_struct_size("dps_snapshot_info") == sizeof(dps_snapshot_info), "sizeof");
    CHECK(dps_struct_size("no_such_struct") == 0 && dps_struct_size(NULL) == 0, "unknown names have no size");
    size_t offset = 0, count = 0;
    const char *field = NULL, *type = NULL;
    CHECK(dps_struct_field("dps_snapshot_info", 24, &field, &type, &count, &offset) == DPS_OK &&
              !strcmp(field, "noise_level") && offset == offsetof(dps_snapshot_info, noise_level),
          "the last field of the snapshot's information");
    CHECK(dps_struct_field("dps_plan", 5, &field, &type, &count, &offset) == DPS_OK && !strcmp(type, "f64") &&
              count == DPS_MAX_GROUPS && offset == offsetof(dps_plan, floor),
          "an array");
    CHECK(dps_struct_field("dps_zcdp", 2, &field, &type, &count, &offset) == DPS_EINVAL, "past the last field");
    return check_summary();
}
