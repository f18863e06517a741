/*  dpsubspace_export.h - DPS_EXPORT marks the public API of the libraries.
    Included by dpsubspace.h; nothing to include yourself.

    The libraries are compiled with hidden visibility (CMake's
    C_VISIBILITY_PRESET hidden) and with DPS_BUILDING_LIBRARY defined, so that
    only the functions declared DPS_EXPORT in these headers leave the shared
    libraries: every one of them starts with dps_.  The internals (linear
    algebra, thread pool, wire codec, generated protobuf-c code) stay inside,
    where they cannot collide with a program's own symbols.  For a program
    that includes the headers the macro is empty.  tests/install/test_exports.sh
    checks both shared libraries.                                            */
#ifndef DPSUBSPACE_EXPORT_H
#define DPSUBSPACE_EXPORT_H

#if defined(DPS_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define DPS_EXPORT __attribute__((visibility("default")))
#else
#define DPS_EXPORT
#endif

#endif
