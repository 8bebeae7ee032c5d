/*
 * error.c — status strings, names of states and outcomes, the version, and the
 * helper that fills a caller's bw_error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

int bw_version(void)
{
    return BW_VERSION_NUM;
}

const char *bw_version_string(void)
{
    return BW_VERSION_STRING;
}

const char *bw_strerror(int code)
{
    switch (code) {
    case BW_OK:
        return "success";
    case BW_REJECTED:
        return "call rejected by the circuit breaker";
    case BW_EINVAL:
        return "invalid argument";
    case BW_ERANGE:
        return "value out of range";
    case BW_ENOMEM:
        return "out of memory";
    case BW_EPARSE:
        return "malformed configuration text";
    case BW_EPERMIT:
        return "invalid permit (already settled, never acquired, or another breaker's)";
    case BW_ESYS:
        return "operating system error";
    case BW_ESTATE:
        return "not allowed in the current state";
    case BW_ELIMIT:
        return "limit reached (no room for another keyed circuit)";
    case BW_ETIMEDOUT:
        return "call timed out";
    case BW_EFULL:
        return "no free slot (bulkhead or time limiter full)";
    case BW_ENOTSUP:
        return "not supported by this build (a component is missing)";
    case BW_ECONFLICT:
        return "lost to other writers of the same entry (contention)";
    default:
        return "unknown error";
    }
}

const char *bw_state_name(bw_state state)
{
    static const char *const names[] = {"closed", "open", "half_open", "forced_open", "disabled", "metrics_only"};
    return (unsigned)state < sizeof names / sizeof names[0] ? names[state] : "unknown";
}

const char *bw_outcome_name(bw_outcome outcome)
{
    static const char *const names[] = {"success", "failure", "ignored", "unreachable"};
    return (unsigned)outcome < sizeof names / sizeof names[0] ? names[outcome] : "unknown";
}

int bw__fail(bw_error *err, int code, const char *field, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}
