/*
 * config_keys.c — what the configuration text says of a key it does not know:
 * "did you mean failure_rate?", from the names other libraries give the knobs
 * and from the nearest knob in spelling (config.c's parsers call it).
 */
#include <ctype.h>
#include <stddef.h>
#include <string.h>

#include "base/error.h"
#include "core/config.h"

/* ---- unknown keys: another library's name, or a typo ---- */

/*
 * Names other libraries give breakwater's knobs (docs/configuration.md has
 * the table), compared as normalize() leaves them: resilience4j, interlock,
 * Polly, gobreaker, pybreaker, circuitbreaker, grelmicro, Hystrix.
 */
static const struct alias {
    const char *name, *knob, *hint;
} aliases[] = {
    {"failureratethreshold", "failure_rate", "a fraction: 50 % is 0.5"},
    {"errorthresholdpercentage", "failure_rate", "a fraction: 50 % is 0.5"},
    {"failureratio", "failure_rate", NULL},
    {"slowcallratethreshold", "slow_call_rate", "a fraction: 100 % is 1"},
    {"slowcalldurationthreshold", "slow_call_duration", "a duration with its unit, such as 2s"},
    {"minimumnumberofcalls", "min_calls", NULL},
    {"minimumthroughput", "min_calls", NULL},
    {"requestvolumethreshold", "min_calls", NULL},
    {"slidingwindowsize", "window", "window=count:N or window=time:Ns"},
    {"slidingwindowtype", "window", "window=count:N or window=time:Ns"},
    {"windowsize", "window", "window=count:N or window=time:Ns"},
    {"windowtype", "window", "window=count:N or window=time:Ns"},
    {"samplingduration", "window", "window=time:Ns"},
    {"interval", "window", "window=time:Ns"},
    {"permittednumberofcallsinhalfopenstate", "permitted_probes", NULL},
    {"permittedcallsinhalfopen", "permitted_probes", NULL},
    {"maxrequests", "permitted_probes", NULL},
    {"waitdurationinopenstate", "wait", "a duration with its unit, such as 60s"},
    {"waitdurationinopen", "wait", "a duration with its unit, such as 60s"},
    {"breakduration", "wait", "a duration with its unit, such as 5s"},
    {"durationofbreak", "wait", "a duration with its unit, such as 5s"},
    {"resettimeout", "wait", "a duration with its unit, such as 30s"},
    {"recoverytimeout", "wait", "a duration with its unit, such as 30s"},
    {"sleepwindowinmilliseconds", "wait", "a duration with its unit, such as 5000ms"},
    {"timeout", "wait", "how long OPEN lasts, with its unit"},
    {"waitdurationbackoffmultiplier", "wait_multiplier", NULL},
    {"waitintervalfunctioninopenstate", "wait_multiplier", "with wait_max for a growing wait"},
    {"breakdurationgenerator", "wait_multiplier", "with wait_max for a growing wait"},
    {"waitdurationinopenmax", "wait_max", NULL},
    {"maxwaitdurationinhalfopenstate", "max_wait_in_half_open", NULL},
    {"automatictransitionfromopentohalfopenenabled", "auto_transition", NULL},
    {"failurethreshold", "error_threshold", "consecutive failures, with policy=consecutive"},
    {"failmax", "error_threshold", "consecutive failures, with policy=consecutive"},
    {"exceptionsallowedbeforebreaking", "error_threshold", "consecutive failures, with policy=consecutive"},
};

/* key in lowercase letters and digits only, after its last '.' (Hystrix writes circuitBreaker.x): "" if too long. */
static void normalize(const char *key, char *out, size_t n)
{
    const char *dot = strrchr(key, '.');
    size_t k = 0;
    for (const char *p = dot ? dot + 1 : key; *p; p++) {
        if (!isalnum((unsigned char)*p))
            continue;
        if (k + 1 == n) {
            k = 0;
            break;
        }
        out[k++] = (char)tolower((unsigned char)*p);
    }
    out[k] = 0;
}

/* The optimal string alignment distance of a and b (edits, a swap of neighbours counting one), both under 64 bytes. */
static size_t distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b), row[3][64];
    for (size_t j = 0; j <= m; j++)
        row[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t *cur = row[i % 3], *prev = row[(i - 1) % 3], *prev2 = row[(i + 1) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
    }
    return row[n % 3][m];
}

/*
 * The knob an unknown key most likely means, or NULL: the knob another
 * library's name stands for (*hint: how its value differs), else the knob or
 * alias nearest to it in spelling, ignoring case and '_' '-' '.', within 1
 * edit for a short key, 2 up to 9 characters and 3 beyond (as git guesses).
 */
const char *bw__config_suggest(const char *key, const char **hint)
{
    char norm[64], cand[64];
    normalize(key, norm, sizeof norm);
    *hint = NULL;
    size_t len = strlen(norm);
    if (len == 0)
        return NULL;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(norm, aliases[i].name) == 0) {
            *hint = aliases[i].hint;
            return aliases[i].knob;
        }
    size_t most = len <= 4 ? 1 : len <= 9 ? 2 : 3, best = most + 1;
    const char *found = NULL;
    const char *name;
    for (size_t i = 0; (name = bw__config_knob_name(i)) != NULL; i++) {
        normalize(name, cand, sizeof cand);
        size_t d = distance(norm, cand);
        if (d == 0)
            *hint = "keys are lowercase, words joined by '_'";
        if (d < best) {
            best = d;
            found = name;
        }
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        size_t d = distance(norm, aliases[i].name);
        if (d < best) {
            best = d;
            found = aliases[i].knob;
            *hint = aliases[i].hint;
        }
    }
    return found;
}

/* An unknown key in text: the offset, the key, and the knob it most likely means. */
int bw__config_unknown_key(bw_error *err, size_t at, const char *key)
{
    const char *hint, *k = bw__config_suggest(key, &hint);
    if (!k)
        return bw__fail(err, BW_EPARSE, key, "at offset %zu: unknown setting '%.48s'", at, key);
    return bw__fail(err, BW_EPARSE, key, "at offset %zu: unknown setting '%.48s'; did you mean %s?%s%s%s", at, key, k,
                    hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
}

/* Prefix err's message (when code is an error) with where the setting was found; return code. */
