/*  dpsubspace_rgrad.h - DP low-rank trace regression (DP-RGrad).
    Included by dpsubspace.h; conventions as there.                          */
#ifndef DPSUBSPACE_RGRAD_H
#define DPSUBSPACE_RGRAD_H

#include "dpsubspace.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
