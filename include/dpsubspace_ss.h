/*  dpsubspace_ss.h - the exact-case subspace estimator (Singhal-Steinke 2021, Algorithm 1).
    Included by dpsubspace.h; conventions as there.                          */
#ifndef DPSUBSPACE_SS_H
#define DPSUBSPACE_SS_H

#include "dpsubspace.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
