/*
 * duration.c — bw_duration_parse (config.h): a duration on its own, as the
 * configuration text reads one (base/duration.h), for programs that take
 * durations of their own (the command's options).
 */
#include <stdint.h>

#include "base/duration.h"
#include "base/error.h"
#include "breakwater/config.h"

int bw_duration_parse(const char *text, int64_t bare_unit, int64_t *ns, bw_error *err)
{
    if (!text || !ns || bare_unit < 0)
        return bw__fail(err, BW_EINVAL, "duration",
                        "bw_duration_parse needs text and ns, and a bare_unit of 0 or more");
    int64_t v;
    int b = bw__parse_duration(text, bare_unit, &v);
    if (b == BW__DURATION_BARE)
        return bw__duration_bare(err, BW_EPARSE, "duration", "", text, "ms", "s");
    if (b)
        return bw__fail(err, BW_EPARSE, "duration",
                        "duration must be a number and its unit (ns, us, ms, s, m, h or d), such as 1.5s; got '%.60s'",
                        text);
    if (v < 0 || v > BW__MAX_DURATION)
        return bw__fail(err, BW_ERANGE, "duration", "duration must be in [0, 365d], got '%.60s'", text);
    *ns = v;
    return BW_OK;
}
