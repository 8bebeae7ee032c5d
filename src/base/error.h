/*
 * error.h — filling a caller's bw_error (internal; base layer).
 *
 * Every layer reports a failure the same way: the status it returns, and the
 * same status with the field at fault and a sentence in the caller's bw_error
 * (which may be NULL). bw_strerror and the state and outcome names live in
 * error.c beside it.
 */
#ifndef BW_BASE_ERROR_H
#define BW_BASE_ERROR_H

#include "base/compiler.h"
#include "breakwater/common.h"

/* Fill *err (if not NULL) with code, field (may be NULL: "") and the formatted message; return code. */
int bw__fail(bw_error *err, int code, const char *field, const char *fmt, ...) BW_PRINTF(4, 5);

#endif
