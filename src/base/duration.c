/*
 * duration.c — durations and whole numbers as configuration text and store
 * URLs write them, and the one range check of a duration setting (duration.h).
 */
#include "base/duration.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define DAY_NS (86400 * BW_NS_PER_S)

/* Duration units, largest first (the formatter picks the largest that divides). */
static const struct unit {
    const char *name;
    int64_t ns;
} units[] = {{"d", DAY_NS},      {"h", 3600 * BW_NS_PER_S}, {"m", 60 * BW_NS_PER_S},
             {"s", BW_NS_PER_S}, {"ms", BW_NS_PER_MS},      {"us", 1000},
             {"ns", 1}};
#define N_UNITS (sizeof units / sizeof units[0])

/*
 * Parse a duration exactly, in integer arithmetic: a decimal number (up to 9
 * fraction digits count; more are rounded away) with an optional unit, seconds by
 * default; "off" and "none" give 0. A value too large for int64 gives INT64_MAX
 * and a negative one -1, so that the setter reports the range. A positive value
 * below 1 ns becomes 1 ns rather than silently meaning "off".
 */
int bw__parse_duration(const char *v, int64_t *out)
{
    if (strcmp(v, "off") == 0 || strcmp(v, "none") == 0) {
        *out = 0;
        return 0;
    }
    const char *p = v;
    int neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
        return -1;
    uint64_t whole = 0, frac = 0, scale = 1;
    int over = 0, nonzero = 0, digits = 0;
    for (; isdigit((unsigned char)*p); p++) {
        nonzero |= *p != '0';
        if (whole > (UINT64_MAX - 9) / 10)
            over = 1;
        else
            whole = whole * 10 + (uint64_t)(*p - '0');
    }
    int round_up = 0;
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++) {
            nonzero |= *p != '0';
            if (digits < 9) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
                digits++;
            } else if (digits == 9) {
                round_up = *p >= '5'; /* the tenth digit rounds the ninth */
                digits++;
            }
        }
    }
    int64_t unit = *p ? -1 : BW_NS_PER_S; /* a bare number is seconds */
    for (size_t i = 0; i < N_UNITS; i++)
        if (strcmp(p, units[i].name) == 0)
            unit = units[i].ns;
    if (unit < 0)
        return -1;
    if (neg && nonzero) {
        *out = -1;
        return 0;
    }
    frac += (uint64_t)round_up;
    /* whole * unit + frac * unit / scale, with unit = q * scale + r. */
    uint64_t u = (uint64_t)unit, q = u / scale, r = u % scale;
    uint64_t part = frac * r; /* < 1e9 * 1e9: fits */
    uint64_t ns = part / scale + ((part % scale) * 2 >= scale ? 1 : 0);
    if (over || whole > (uint64_t)INT64_MAX / u || (q && frac > (uint64_t)INT64_MAX / q)) {
        *out = INT64_MAX;
        return 0;
    }
    ns += whole * u + frac * q;
    *out = ns > (uint64_t)INT64_MAX ? INT64_MAX : (ns == 0 && nonzero ? 1 : (int64_t)ns);
    return 0;
}

int bw__parse_int(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || isspace((unsigned char)*v))
        return -1;
    *out = x; /* LLONG_MIN / LLONG_MAX on overflow */
    return errno == ERANGE ? 1 : 0;
}

int bw__check_duration(const char *field, int64_t ns, int zero_ok, bw_error *err)
{
    if (!((ns == 0 && zero_ok) || (ns > 0 && ns <= BW__MAX_DURATION)))
        return bw__fail(err, BW_ERANGE, field,
                        "%s must be %sin (0, 365d] (nanoseconds 1..%" PRId64 "), got %" PRId64 " ns", field,
                        zero_ok ? "0 (off) or " : "", BW__MAX_DURATION, ns);
    return BW_OK;
}

void bw__fmt_duration(char *buf, size_t n, int64_t ns, const char *zero)
{
    if (ns == 0) {
        snprintf(buf, n, "%s", zero);
        return;
    }
    for (size_t i = 0; i < N_UNITS; i++) {
        if (ns % units[i].ns == 0) {
            snprintf(buf, n, "%" PRId64 "%s", ns / units[i].ns, units[i].name);
            return;
        }
    }
}
