/*
 * dialect_c.h — the C/OpenMP dialect the CPU backend generates its kernels
 * in (dialect_c.c; src/codegen/dialect.h).
 */
#ifndef FSL_CPU_DIALECT_C_H
#define FSL_CPU_DIALECT_C_H

#include "codegen/codegen.h"

extern const fsl_dialect fsl_dialect_c;

#endif
