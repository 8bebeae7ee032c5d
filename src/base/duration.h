/*
 * duration.h — durations and whole numbers in text, and the range of a
 * duration setting (internal; base layer). Configuration text (config.c) and
 * store URLs (store/url.c) read and write them the same way.
 */
#ifndef BW_BASE_DURATION_H
#define BW_BASE_DURATION_H

#include <stddef.h>
#include <stdint.h>

#include "breakwater/common.h"

/* The longest duration any setter accepts: 365 days, in nanoseconds. */
#define BW__MAX_DURATION (365 * 86400 * BW_NS_PER_S)

/*
 * Parse a duration as configuration text does ("1.5s", "250ms", "30", "off" =
 * 0). Returns 0, or -1 when malformed.
 */
int bw__parse_duration(const char *v, int64_t *out);
/*
 * Parse a whole number in decimal, with no space anywhere: 0, -1 when it
 * is not one, 1 when it does not fit in int64 (*out then saturates).
 */
int bw__parse_int(const char *v, int64_t *out);
/* Format a duration exactly, in the largest unit that divides it; `zero` for 0. */
void bw__fmt_duration(char *buf, size_t n, int64_t ns, const char *zero);

/*
 * Check a duration setting: in (0, 365d], or 0 where `zero_ok` (off / none).
 * Returns BW_OK, or BW_ERANGE with *err naming `field`.
 */
int bw__check_duration(const char *field, int64_t ns, int zero_ok, bw_error *err);

#endif
