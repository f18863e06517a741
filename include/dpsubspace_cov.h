/*  dpsubspace_cov.h - pure eps-DP covariance and subspace (Amin et al. 2019).
    Included by dpsubspace.h; conventions as there.                          */
#ifndef DPSUBSPACE_COV_H
#define DPSUBSPACE_COV_H

#include "dpsubspace.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
