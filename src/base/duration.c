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
 * fraction digits count; more are rounded away) and its unit; "off", "none"
 * and a bare 0 give 0; another bare number counts in `bare_unit` (0: it is
 * BW__DURATION_BARE). A positive value below 1 ns becomes 1 ns rather than
 * silently meaning "off".
 */
int bw__parse_duration(const char *v, int64_t bare_unit, int64_t *out)
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
        return BW__DURATION_MALFORMED;
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
    int64_t unit = -1;
    if (!*p) { /* no unit: 0 is 0 in every unit, any other number is ambiguous unless the caller chose a unit */
        if (!nonzero) {
            *out = 0;
            return 0;
        }
        if (bare_unit <= 0)
            return BW__DURATION_BARE;
        unit = bare_unit;
    }
    for (size_t i = 0; *p && i < N_UNITS; i++)
        if (strcmp(p, units[i].name) == 0)
            unit = units[i].ns;
    if (unit < 0)
        return BW__DURATION_MALFORMED;
    frac += (uint64_t)round_up;
    /* whole * unit + frac * unit / scale, with unit = q * scale + r. */
    uint64_t u = (uint64_t)unit, q = u / scale, r = u % scale;
    uint64_t part = frac * r; /* < 1e9 * 1e9: fits */
    uint64_t ns = part / scale + ((part % scale) * 2 >= scale ? 1 : 0);
    if (over || whole > (uint64_t)INT64_MAX / u || (q && frac > (uint64_t)INT64_MAX / q)) {
        ns = (uint64_t)INT64_MAX;
    } else {
        ns += whole * u + frac * q;
        if (ns > (uint64_t)INT64_MAX)
            ns = (uint64_t)INT64_MAX;
        if (ns == 0 && nonzero)
            ns = 1;
    }
    *out = neg ? -(int64_t)ns : (int64_t)ns;
    return 0;
}

int bw__duration_bare(bw_error *err, int code, const char *field, const char *prefix, const char *v, const char *u1,
                      const char *u2)
{
    if (strlen(v) > 24) /* too long to repeat twice */
        return bw__fail(err, code, field, "%s needs a unit, such as %s30%s; a bare number is refused", field, prefix,
                        u2);
    return bw__fail(err, code, field, "%s needs a unit: %s%s%s or %s%s%s? A bare number is refused", field, prefix, v,
                    u1, prefix, v, u2);
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
    if (!((ns == 0 && zero_ok) || (ns > 0 && ns <= BW__MAX_DURATION))) {
        char got[32];
        bw__fmt_duration(got, sizeof got, ns, "0");
        return bw__fail(err, BW_ERANGE, field, "%s must be %sin (0, 365d], got %s", field, zero_ok ? "0 (off) or " : "",
                        got);
    }
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
