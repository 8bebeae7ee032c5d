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

/* What bw__parse_duration says besides 0 (parsed). */
#define BW__DURATION_MALFORMED (-1)
#define BW__DURATION_BARE (-2) /* a number other than 0 without a unit: 30 ms or 30 s? */

/*
 * Parse a duration as configuration text does ("1.5s", "250ms", "off" or
 * "none" = 0, "0" = 0 in any unit). A number other than 0 needs a unit
 * unless `bare_unit` (> 0, in ns) gives it one: without one it is
 * BW__DURATION_BARE (bw__duration_bare says so), otherwise
 * BW__DURATION_MALFORMED when malformed. A negative value is kept (so that a
 * range message can show it), saturating at -INT64_MAX; a value too large
 * for int64 gives INT64_MAX.
 */
int bw__parse_duration(const char *v, int64_t bare_unit, int64_t *out);
/*
 * Fill *err (code, field) for the bare number `v` given to `field`, with two
 * readings as advice, in units `u1` and `u2`, each after `prefix` ("" or
 * "time:"): "wait needs a unit: 30ms or 30s?". Returns code.
 */
int bw__duration_bare(bw_error *err, int code, const char *field, const char *prefix, const char *v, const char *u1,
                      const char *u2);
/*
 * Parse a whole number in decimal, with no space anywhere: 0, -1 when it
 * is not one, 1 when it does not fit in int64 (*out then saturates).
 */
int bw__parse_int(const char *v, int64_t *out);
/* Format a duration exactly, in the largest unit that divides it ("-5m" below 0); `zero` for 0. */
void bw__fmt_duration(char *buf, size_t n, int64_t ns, const char *zero);

/*
 * Check a duration setting: in (0, 365d], or 0 where `zero_ok` (off / none).
 * Returns BW_OK, or BW_ERANGE with *err naming `field`.
 */
int bw__check_duration(const char *field, int64_t ns, int zero_ok, bw_error *err);

#endif
