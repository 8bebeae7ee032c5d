/*
 * test_metrics.c (tests/unit/) — the Prometheus / OpenMetrics exposition and
 * the /metrics server (observe.h), on a deterministic scenario on a manual
 * clock: a breaker with known successes, slow calls and failures that trips
 * and rejects, one that probes its way closed again, one with operator verbs
 * and a stale outcome, a keyed breaker (its circuits summed, and per key with
 * keys_max), a registry, a breaker with counters off and one whose name needs
 * escaping. It checks exact sample lines, the layout of both formats (every
 * family once, its series together, OpenMetrics' names and # EOF),
 * BW_ELIMIT's length (and the NUL at the cut), bad arguments, the prefix
 * rule, fwrite, writes racing calls and adds racing writes and scrapes (for
 * TSan and ASan), and the HTTP server over a real socket (status, content
 * type, Accept, 404, 405 without reading a body, bad addresses, a port in use,
 * one shared text a second, the connection and header limits from several
 * loopback addresses, stop's bound).
 *
 * `test_metrics --dump DIR` writes the scenario's texts to DIR instead (for
 * tests/integration/promtool_check.sh, which runs promtool on them).
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "clockfix.h"
#include "base/tick.h"

#define S BW_NS_PER_S
#define MS BW_NS_PER_MS

/* ---- text helpers ---- */

/*
 * The set's text in `format` (malloc'd), through bw_metrics_write's length
 * query; when calls on other threads make it grow between the query and the
 * write, the BW_ELIMIT that follows gives the new length: try again.
 */
static char *text_of(bw_metrics *m, bw_metrics_format format)
{
    size_t need = 0;
    int rc = bw_metrics_write(m, format, NULL, 0, &need);
    if (rc != BW_ELIMIT) {
        H_FAIL("bw_metrics_write(size 0): %s", bw_strerror(rc));
        return calloc(1, 1);
    }
    for (int tries = 0; tries < 100; tries++) {
        char *buf = malloc(need + 1);
        size_t len = 0;
        rc = bw_metrics_write(m, format, buf, need + 1, &len);
        if (rc == BW_OK) {
            CHECK(len <= need);
            CHECK_INT(strlen(buf), len);
            return buf;
        }
        free(buf);
        if (rc != BW_ELIMIT || len <= need) {
            H_FAIL("bw_metrics_write(size %zu): %s, len %zu", need + 1, bw_strerror(rc), len);
            return calloc(1, 1);
        }
        need = len;
    }
    H_FAIL("bw_metrics_write never fit");
    return calloc(1, 1);
}

/* Whether `text` holds the whole line `want` (no newline in want). */
static int has_line(const char *text, const char *want)
{
    size_t n = strlen(want);
    for (const char *p = text; (p = strstr(p, want)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return 1;
    return 0;
}

#define CHECK_LINE(text, want)                                                                                         \
    do {                                                                                                               \
        if (!has_line(text, want))                                                                                     \
            H_FAIL("missing line: %s", want);                                                                          \
    } while (0)

#define CHECK_NO_LINE(text, want)                                                                                      \
    do {                                                                                                               \
        if (has_line(text, want))                                                                                      \
            H_FAIL("unexpected line: %s", want);                                                                       \
    } while (0)

/* Lines of text starting with `prefix`. */
static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *p = text; *p;) {
        if (strncmp(p, prefix, pl) == 0)
            n++;
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}

/* A line "<start><value>" printed with a double formatted as %.15g (the exposition's own precision). */
static void check_dbl_line(const char *text, const char *start, double v)
{
    char want[256];
    snprintf(want, sizeof want, "%s%.15g", start, v);
    CHECK_LINE(text, want);
}

/* ---- the layout of a text ---- */

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/*
 * Every family once (TYPE before its samples, HELP beside it), its samples
 * together right after its header and named as its type says (OpenMetrics:
 * counter families without _total, their samples with it; # EOF last and only
 * there), every sample line "name{labels} value" with a number for value.
 */
static void check_layout(const char *text, bw_metrics_format format)
{
    int om = format == BW_METRICS_OPENMETRICS;
    char families[64][128];
    int nfam = 0;
    char cur[128] = "", cur_type[16] = "";
    int eof_seen = 0, lineno = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) {
            H_FAIL("the text does not end with a newline");
            return;
        }
        size_t n = (size_t)(nl - p);
        char ln[1024];
        if (n >= sizeof ln) {
            H_FAIL("line %d is too long", lineno);
            return;
        }
        memcpy(ln, p, n);
        ln[n] = 0;
        lineno++;
        p = nl + 1;
        if (eof_seen) {
            H_FAIL("a line after # EOF: %s", ln);
            return;
        }
        if (strcmp(ln, "# EOF") == 0) {
            if (!om)
                H_FAIL("# EOF in the Prometheus text");
            eof_seen = 1;
            continue;
        }
        if (strncmp(ln, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            if (sscanf(ln + 7, "%127s %31s", name, type) != 2) {
                H_FAIL("bad TYPE line: %s", ln);
                continue;
            }
            for (int i = 0; i < nfam; i++)
                if (strcmp(families[i], name) == 0)
                    H_FAIL("family %s appears twice", name);
            if (nfam < 64)
                strcpy(families[nfam++], name);
            if (strcmp(type, "counter") == 0) {
                if (om && ends_with(name, strlen(name), "_total"))
                    H_FAIL("OpenMetrics counter family named with _total: %s", name);
                if (!om && !ends_with(name, strlen(name), "_total"))
                    H_FAIL("Prometheus counter not named with _total: %s", name);
            } else if (ends_with(name, strlen(name), "_total")) {
                H_FAIL("a %s named with _total: %s", type, name);
            }
            strcpy(cur, name);
            strcpy(cur_type, type);
            continue;
        }
        if (strncmp(ln, "# HELP ", 7) == 0 || strncmp(ln, "# UNIT ", 7) == 0) {
            char name[128];
            if (sscanf(ln + 7, "%127s", name) != 1)
                H_FAIL("bad comment line: %s", ln);
            /* Prometheus: HELP precedes its TYPE; OpenMetrics: TYPE first, then UNIT and HELP. */
            if (om && strcmp(name, cur) != 0)
                H_FAIL("%.6s of %s outside its family (%s)", ln, name, cur);
            if (om && strncmp(ln, "# UNIT ", 7) == 0 && !ends_with(name, strlen(name), "_seconds"))
                H_FAIL("unit not a suffix of %s", name);
            if (!om && strncmp(ln, "# UNIT ", 7) == 0)
                H_FAIL("# UNIT in the Prometheus text");
            continue;
        }
        if (ln[0] == '#') {
            H_FAIL("unexpected comment: %s", ln);
            continue;
        }
        /* a sample: its name must belong to the current family */
        char *brace = strchr(ln, '{'), *close = strrchr(ln, '}');
        if (!brace || !close || close[1] != ' ' || !cur[0]) {
            H_FAIL("bad sample line: %s", ln);
            continue;
        }
        *brace = 0;
        const char *sample = ln;
        int ok;
        if (strcmp(cur_type, "histogram") == 0) {
            char b[160], s[160], c[160];
            snprintf(b, sizeof b, "%s_bucket", cur);
            snprintf(s, sizeof s, "%s_sum", cur);
            snprintf(c, sizeof c, "%s_count", cur);
            ok = !strcmp(sample, b) || !strcmp(sample, s) || !strcmp(sample, c);
        } else if (om && strcmp(cur_type, "counter") == 0) {
            char t[160];
            snprintf(t, sizeof t, "%s_total", cur);
            ok = !strcmp(sample, t);
        } else {
            ok = !strcmp(sample, cur);
        }
        if (!ok)
            H_FAIL("sample %s outside its family (current %s %s)", sample, cur_type, cur);
        const char *value = close + 2;
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (*value == 0 || *end != 0 || errno || v != v)
            H_FAIL("bad value in: %s} %s", sample, value);
    }
    if (om && !eof_seen)
        H_FAIL("OpenMetrics text without # EOF");
    if (om)
        CHECK(ends_with(text, strlen(text), "# EOF\n"));
}

/* The sample lines of a text (comments dropped), sorted and joined, for comparing two formats' samples. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *samples_of(const char *text)
{
    size_t n = 0, cap = 64;
    char **lines = malloc(cap * sizeof *lines);
    char *copy = strdup(text);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (l[0] == '#')
            continue;
        if (n == cap)
            lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = l;
    }
    qsort(lines, n, sizeof *lines, cmp_str);
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(lines[i]) + 1;
    char *out = malloc(total), *q = out;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(lines[i]);
        memcpy(q, lines[i], l);
        q[l] = '\n';
        q += l + 1;
    }
    *q = 0;
    free(lines);
    free(copy);
    return out;
}

/* ---- the scenario ---- */

typedef struct scenario {
    bw_breaker *payments;  /* 4 successes of 2 ms, 1 slow success of 1.5 s, 5 failures: OPEN; 3 rejections */
    bw_breaker *search;    /* 4 failures: OPEN; 1 s later 2 probes pass: CLOSED */
    bw_breaker *inventory; /* force_open, a rejection, a stale settle, reset; an ignored and an unreachable call */
    bw_breaker *tenants;   /* keyed: alice 3 successes, bob 2 failures, carol 1 success; its own circuit 1 success */
    bw_breaker *quiet;     /* counters off; 2 successes */
    bw_breaker *weird;     /* named we"ird\name: 1 success */
    bw_registry *reg;      /* r-one, r-two (1 success), r-three */
} scenario;

static bw_breaker *make(const char *name, const char *text)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    if (text && bw_config_parse(c, text, &e) != BW_OK)
        H_FAIL("bw_config_parse(%s): %s", text, e.message);
    bw_breaker *b = NULL;
    if (bw_breaker_new(name, c, &b, &e) != BW_OK)
        H_FAIL("bw_breaker_new(%s): %s", name, e.message);
    bw_config_free(c);
    return b;
}

/* One call on b taking `dur` on the manual clock, settled with o. */
static void timed_call(bw_breaker *b, int64_t dur, bw_outcome o)
{
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    pump(dur);
    CHECK_OK(bw_settle_ex(b, &p, o, o == BW_FAILURE ? 503 : 0));
}

static void keyed_calls(bw_breaker *b, const char *key, int n, bw_outcome o)
{
    for (int i = 0; i < n; i++) {
        bw_permit p;
        CHECK_OK(bw_keyed_acquire(b, key, &p, NULL));
        CHECK_OK(bw_settle(b, &p, o));
    }
}

static void scenario_make(scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    clock_fresh(CLOCKFIX_START);

    sc->payments = make("payments", "window=count:10 min_calls=10 failure_rate=0.5 slow_call_duration=1s wait=10s");
    for (int i = 0; i < 4; i++)
        timed_call(sc->payments, 2 * MS, BW_SUCCESS);
    timed_call(sc->payments, 1500 * MS, BW_SUCCESS);
    for (int i = 0; i < 5; i++)
        timed_call(sc->payments, 0, BW_FAILURE);
    CHECK_STATE(sc->payments, BW_STATE_OPEN);
    for (int i = 0; i < 3; i++) {
        bw_permit p;
        CHECK_RC(bw_acquire(sc->payments, &p, NULL), BW_REJECTED);
    }

    sc->search = make("search", "window=count:4 min_calls=4 failure_rate=0.5 wait=1s permitted_probes=2 "
                                "max_concurrent_probes=1");
    for (int i = 0; i < 4; i++)
        timed_call(sc->search, 0, BW_FAILURE);
    CHECK_STATE(sc->search, BW_STATE_OPEN);
    pump(1 * S);
    timed_call(sc->search, 0, BW_SUCCESS);
    timed_call(sc->search, 0, BW_SUCCESS);
    CHECK_STATE(sc->search, BW_STATE_CLOSED);

    sc->inventory = make("inventory", NULL);
    bw_permit stale;
    CHECK_OK(bw_acquire(sc->inventory, &stale, NULL));
    CHECK_OK(bw_breaker_force_open(sc->inventory));
    bw_permit p;
    CHECK_RC(bw_acquire(sc->inventory, &p, NULL), BW_REJECTED);
    CHECK_OK(bw_settle(sc->inventory, &stale, BW_SUCCESS)); /* dropped as stale */
    CHECK_OK(bw_breaker_reset(sc->inventory));
    timed_call(sc->inventory, 0, BW_IGNORED);
    timed_call(sc->inventory, 0, BW_UNREACHABLE);

    sc->tenants = make("tenants", NULL);
    keyed_calls(sc->tenants, "alice", 3, BW_SUCCESS);
    keyed_calls(sc->tenants, "bob", 2, BW_FAILURE);
    keyed_calls(sc->tenants, "carol", 1, BW_SUCCESS);
    timed_call(sc->tenants, 0, BW_SUCCESS);

    sc->quiet = make("quiet", "counters=false");
    timed_call(sc->quiet, 0, BW_SUCCESS);
    timed_call(sc->quiet, 0, BW_SUCCESS);

    sc->weird = make("we\"ird\\name", NULL);
    timed_call(sc->weird, 0, BW_SUCCESS);

    bw_config *d = bw_config_new();
    bw_config_set_clock(d, clk);
    bw_error e;
    CHECK_OK(bw_registry_new(d, &sc->reg, &e));
    bw_config_free(d);
    bw_breaker *b;
    CHECK_OK(bw_registry_get(sc->reg, "r-one", NULL, &b, &e));
    CHECK_OK(bw_registry_get(sc->reg, "r-two", NULL, &b, &e));
    timed_call(b, 0, BW_SUCCESS);
    CHECK_OK(bw_registry_get(sc->reg, "r-three", NULL, &b, &e));

    pump(2500 * MS); /* payments' and search's last failures are now 3.5 s old (search's 1 s wait, and these 2.5 s) */
}

static void scenario_free(scenario *sc)
{
    bw_breaker_free(sc->payments);
    bw_breaker_free(sc->search);
    bw_breaker_free(sc->inventory);
    bw_breaker_free(sc->tenants);
    bw_breaker_free(sc->quiet);
    bw_breaker_free(sc->weird);
    bw_registry_free(sc->reg);
}

/* A set of the whole scenario with these options (prefix NULL: the default). */
static bw_metrics *scenario_set(scenario *sc, const char *prefix, size_t keys_max)
{
    bw_metrics_options o = {prefix, keys_max};
    bw_metrics *m = NULL;
    bw_error e;
    CHECK_OK(bw_metrics_new(&o, &m, &e));
    if (!m)
        exit(2);
    bw_breaker *list[] = {sc->payments, sc->search, sc->inventory, sc->tenants, sc->quiet, sc->weird};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        CHECK_OK(bw_metrics_add_breaker(m, list[i]));
    CHECK_OK(bw_metrics_add_registry(m, sc->reg));
    return m;
}

/* ---- tests ---- */

/* ---- the call-duration histogram and the clocks that time calls ---- */

/*
 * A clock that reads like the coarse one (base/tick.h): the fixture's manual
 * clock as of its last tick, one tick every `period`.
 */
typedef struct ticks {
    int64_t period;
} ticks;

static int64_t ticks_now(void *user)
{
    const ticks *t = user;
    int64_t now = bw_clock_now(clk);
    return now - now % t->period;
}

/* The bucket b's histogram counted its one call in since `before` (the index), or -1 when not exactly one call. */
static int bucket_of_call(bw_breaker *b, const bw_counters *before)
{
    bw_counters k;
    CHECK_OK(bw_breaker_counters(b, &k));
    int at = -1, n = 0;
    for (int i = 0; i < BW_DURATION_BUCKETS; i++)
        if (k.duration_buckets[i] != before->duration_buckets[i]) {
            at = i;
            n += (int)(k.duration_buckets[i] - before->duration_buckets[i]);
        }
    return n == 1 ? at : -1;
}

/* The bucket a call of exactly d belongs in. */
static int bucket_holding(const int64_t *bounds, int64_t d)
{
    int i = 0;
    while (i < BW_DURATION_BUCKETS - 1 && d > bounds[i])
        i++;
    return i;
}

/* One call of `dur` on b, starting `phase` after a tick of `period`: the bucket it was counted in. */
static int bucket_after(bw_breaker *b, int64_t period, int64_t phase, int64_t dur)
{
    int64_t now = clock_now();
    clock_to(now - now % period + period + phase);
    bw_counters before;
    CHECK_OK(bw_breaker_counters(b, &before));
    timed_call(b, dur, BW_SUCCESS);
    return bucket_of_call(b, &before);
}

/*
 * The histogram's bounds (BW_DURATION_BOUNDS_NS) are what every clock a
 * breaker may time its calls with resolves, the coarse clock's longest period
 * (10 ms) included: the first bound is at least a period and each bucket at
 * least a period wide. On an exact clock a call of exactly a bound counts in
 * its bucket and one a nanosecond longer in the next; on a clock that ticks
 * every 10 ms, calls a whole number of periods long count in their own
 * bucket whatever the phase of the ticks, for every bucket, and calls shorter
 * than a period (1 to 9 ms: like issue 25's, which landed in le="0.001") in
 * the bucket that holds them, never as faster than the clock can tell.
 */
static void test_duration_buckets(void)
{
    clock_fresh(CLOCKFIX_START);
    static const int64_t bounds[BW_DURATION_BUCKETS - 1] = BW_DURATION_BOUNDS_NS;
    const int64_t period = bw__tick_period_for(INT64_MAX);
    CHECK_INT(period, 10 * MS);
    CHECK(bounds[0] >= period);
    for (int i = 1; i < BW_DURATION_BUCKETS - 1; i++)
        if (bounds[i] - bounds[i - 1] < period)
            H_FAIL("bucket (%lld ns, %lld ns] is narrower than the coarse clock's period", (long long)bounds[i - 1],
                   (long long)bounds[i]);
    /* An exact clock: the bounds themselves. */
    bw_breaker *exact = make("exact", "counters=true");
    for (int i = 0; i < BW_DURATION_BUCKETS - 1; i++) {
        CHECK_INT(bucket_after(exact, 1, 0, bounds[i]), i);
        CHECK_INT(bucket_after(exact, 1, 0, bounds[i] + 1), i + 1);
    }
    bw_breaker_free(exact);
    /* A clock that ticks every period. */
    ticks t = {period};
    bw_clock *coarse = NULL;
    CHECK_OK(bw_clock_custom_new(ticks_now, &t, &coarse));
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_set_clock(c, coarse));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("coarse", c, &b, NULL));
    bw_config_free(c);
    static const int64_t phases[] = {0, 1 * MS, 3 * MS, 7 * MS, 10 * MS - 1};
    for (size_t ph = 0; ph < sizeof phases / sizeof phases[0]; ph++) {
        for (int i = 0; i < BW_DURATION_BUCKETS; i++) {
            /* The longest whole number of periods in bucket i (past the last bound for +Inf). */
            int64_t lo = i > 0 ? bounds[i - 1] : -1, hi = i < BW_DURATION_BUCKETS - 1 ? bounds[i] : lo + period;
            int64_t d = hi - hi % period;
            if (d <= lo) {
                H_FAIL("bucket %d holds no whole number of the coarse clock's periods", i);
                continue;
            }
            int got = bucket_after(b, period, phases[ph], d);
            if (got != i)
                H_FAIL("a call of %lld ns at phase %lld ns counted in bucket %d, not %d", (long long)d,
                       (long long)phases[ph], got, i);
        }
        for (int64_t d = 1 * MS; d < period; d += 2 * MS) /* 1, 3, 5, 7, 9 ms: the bucket that holds them */
            CHECK_INT(bucket_after(b, period, phases[ph], d), bucket_holding(bounds, d));
    }
    bw_breaker_free(b);
    bw_clock_free(coarse);
}

static void test_content_types(void)
{
    CHECK_STR(bw_metrics_content_type(BW_METRICS_PROMETHEUS), "text/plain; version=0.0.4; charset=utf-8");
    CHECK_STR(bw_metrics_content_type(BW_METRICS_OPENMETRICS),
              "application/openmetrics-text; version=1.0.0; charset=utf-8");
    CHECK(bw_metrics_content_type((bw_metrics_format)2) == NULL);
    CHECK(bw_metrics_content_type((bw_metrics_format)-1) == NULL);
}

static void test_prefix_rule(void)
{
    static const char *const bad[] = {"", "9lives", "a-b", "a b", "a:b", "caf\xc3\xa9", "x.y", "a\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bw_metrics_options o = {bad[i], 0};
        bw_metrics *m = (bw_metrics *)&o; /* must be reset to NULL */
        bw_error e;
        memset(&e, 0, sizeof e);
        CHECK_RC(bw_metrics_new(&o, &m, &e), BW_EINVAL);
        CHECK(m == NULL);
        CHECK_INT(e.code, BW_EINVAL);
        CHECK_STR(e.field, "prefix");
        CHECK(strstr(e.message, "[a-zA-Z_][a-zA-Z0-9_]*") != NULL || strstr(e.message, "at most") != NULL);
    }
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    bw_metrics_options o = {longp, 0};
    bw_metrics *m = NULL;
    bw_error e;
    CHECK_RC(bw_metrics_new(&o, &m, &e), BW_EINVAL);
    CHECK_STR(e.field, "prefix");

    static const char *const good[] = {"a", "_", "svc_cb", "A9_z", "_x1"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        bw_metrics_options g = {good[i], 0};
        m = NULL;
        CHECK_OK(bw_metrics_new(&g, &m, NULL));
        CHECK(m != NULL);
        bw_metrics_free(m);
    }
    CHECK_OK(bw_metrics_new(NULL, &m, NULL)); /* NULL options: the defaults */
    bw_metrics_free(m);
    CHECK_RC(bw_metrics_new(NULL, NULL, &e), BW_EINVAL);
    bw_metrics_free(NULL);
}

static void test_bad_arguments(void)
{
    bw_metrics *m = NULL;
    CHECK_OK(bw_metrics_new(NULL, &m, NULL));
    clock_fresh(CLOCKFIX_START);
    bw_breaker *b = make("solo", NULL);
    char buf[64];
    size_t len = 7;
    CHECK_RC(bw_metrics_write(NULL, BW_METRICS_PROMETHEUS, buf, sizeof buf, &len), BW_EINVAL);
    CHECK_RC(bw_metrics_write(m, BW_METRICS_PROMETHEUS, NULL, 10, &len), BW_EINVAL);
    CHECK_RC(bw_metrics_write(m, (bw_metrics_format)5, buf, sizeof buf, &len), BW_EINVAL);
    CHECK_INT(len, 7); /* untouched by an error */
    CHECK_RC(bw_metrics_fwrite(NULL, BW_METRICS_PROMETHEUS, stdout), BW_EINVAL);
    CHECK_RC(bw_metrics_fwrite(m, BW_METRICS_PROMETHEUS, NULL), BW_EINVAL);
    CHECK_RC(bw_metrics_fwrite(m, (bw_metrics_format)5, stdout), BW_EINVAL);
    CHECK_RC(bw_metrics_add_breaker(NULL, b), BW_EINVAL);
    CHECK_RC(bw_metrics_add_breaker(m, NULL), BW_EINVAL);
    CHECK_RC(bw_metrics_add_registry(NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_metrics_add_registry(m, NULL), BW_EINVAL);
    /* a keyed circuit is exported through its breaker, never on its own */
    bw_breaker *circuit = NULL;
    CHECK_OK(bw_keyed_get(b, "k1", &circuit, NULL));
    CHECK_RC(bw_metrics_add_breaker(m, circuit), BW_EINVAL);
    bw_keyed_release(circuit);
    bw_breaker_free(b);
    bw_metrics_free(m);
}

static void test_empty_set(void)
{
    bw_metrics *m = NULL;
    CHECK_OK(bw_metrics_new(NULL, &m, NULL));
    char buf[16];
    size_t len = 99;
    CHECK_OK(bw_metrics_write(m, BW_METRICS_PROMETHEUS, buf, sizeof buf, &len));
    CHECK_INT(len, 0);
    CHECK_STR(buf, "");
    CHECK_OK(bw_metrics_write(m, BW_METRICS_OPENMETRICS, buf, sizeof buf, &len));
    CHECK_INT(len, 6);
    CHECK_STR(buf, "# EOF\n");
    CHECK_RC(bw_metrics_write(m, BW_METRICS_PROMETHEUS, NULL, 0, &len), BW_ELIMIT); /* no room for the NUL */
    CHECK_INT(len, 0);
    bw_metrics_free(m);
}

/* The exact samples of the scenario, in the Prometheus text. */
static void test_scenario_samples(void)
{
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 0);
    char *t = text_of(m, BW_METRICS_PROMETHEUS);

    /* payments: OPEN after 10 calls, 3 rejections */
    CHECK_LINE(t, "breakwater_state{name=\"payments\",state=\"open\"} 1");
    CHECK_LINE(t, "breakwater_state{name=\"payments\",state=\"closed\"} 0");
    CHECK_LINE(t, "breakwater_state{name=\"payments\",state=\"half_open\"} 0");
    CHECK_LINE(t, "breakwater_state{name=\"payments\",state=\"forced_open\"} 0");
    CHECK_LINE(t, "breakwater_state{name=\"payments\",state=\"disabled\"} 0");
    CHECK_LINE(t, "breakwater_state{name=\"payments\",state=\"metrics_only\"} 0");
    CHECK_INT(count_lines(t, "breakwater_state{name=\"payments\","), 6);
    CHECK_LINE(t, "breakwater_calls_total{name=\"payments\",kind=\"success\"} 4");
    CHECK_LINE(t, "breakwater_calls_total{name=\"payments\",kind=\"slow_success\"} 1");
    CHECK_LINE(t, "breakwater_calls_total{name=\"payments\",kind=\"failure\"} 5");
    CHECK_LINE(t, "breakwater_calls_total{name=\"payments\",kind=\"slow_failure\"} 0");
    CHECK_LINE(t, "breakwater_calls_total{name=\"payments\",kind=\"ignored\"} 0");
    CHECK_LINE(t, "breakwater_calls_total{name=\"payments\",kind=\"unreachable\"} 0");
    CHECK_LINE(t, "breakwater_calls_total{name=\"payments\",kind=\"stale\"} 0");
    CHECK_LINE(t, "breakwater_rejected_total{name=\"payments\",state=\"open\"} 3");
    CHECK_LINE(t, "breakwater_rejected_total{name=\"payments\",state=\"half_open\"} 0");
    CHECK_LINE(t, "breakwater_rejected_total{name=\"payments\",state=\"forced_open\"} 0");
    CHECK_LINE(t, "breakwater_transitions_total{name=\"payments\",from=\"closed\",to=\"open\"} 1");
    CHECK_INT(count_lines(t, "breakwater_transitions_total{name=\"payments\","), 1);
    CHECK_LINE(t, "breakwater_resets_total{name=\"payments\"} 0");
    CHECK_LINE(t, "breakwater_probe_rounds_total{name=\"payments\",result=\"passed\"} 0");
    CHECK_LINE(t, "breakwater_probe_rounds_total{name=\"payments\",result=\"failed\"} 0");
    CHECK_LINE(t, "breakwater_store_events_total{name=\"payments\",event=\"degraded\"} 0");
    CHECK_LINE(t, "breakwater_store_events_total{name=\"payments\",event=\"recovered\"} 0");
    CHECK_LINE(t, "breakwater_store_events_total{name=\"payments\",event=\"write_dropped\"} 0");
    /* its histogram: 5 failures of 0 s, 4 successes of 2 ms, 1 of 1.5 s (cumulative buckets) */
    static const char *const les[] = {"0.01", "0.025", "0.05", "0.1",  "0.25", "0.5", "1.0",
                                      "2.5",  "5.0",   "10.0", "30.0", "60.0", "+Inf"};
    static const int cum[] = {9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10};
    for (int i = 0; i < 13; i++) {
        char want[128];
        snprintf(want, sizeof want, "breakwater_call_duration_seconds_bucket{name=\"payments\",le=\"%s\"} %d", les[i],
                 cum[i]);
        CHECK_LINE(t, want);
    }
    CHECK_INT(count_lines(t, "breakwater_call_duration_seconds_bucket{name=\"payments\","), 13);
    CHECK_LINE(t, "breakwater_call_duration_seconds_sum{name=\"payments\"} 1.508");
    CHECK_LINE(t, "breakwater_call_duration_seconds_count{name=\"payments\"} 10");
    /* its last failure was settled 3.5 s ago: search's 1 s wait, then 2.5 s */
    CHECK_LINE(t, "breakwater_last_failure_age_seconds{name=\"payments\"} 3.5");
    /* the window gauges say what the snapshot says */
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(sc.payments, &s));
    check_dbl_line(t, "breakwater_failure_rate{name=\"payments\"} ", s.failure_rate);
    check_dbl_line(t, "breakwater_slow_call_rate{name=\"payments\"} ", s.slow_call_rate);
    char want[160];
    snprintf(want, sizeof want, "breakwater_window_calls{name=\"payments\",kind=\"total\"} %" PRIu64, s.total_calls);
    CHECK_LINE(t, want);
    snprintf(want, sizeof want, "breakwater_window_calls{name=\"payments\",kind=\"failed\"} %" PRIu64, s.failed_calls);
    CHECK_LINE(t, want);
    snprintf(want, sizeof want, "breakwater_window_calls{name=\"payments\",kind=\"slow\"} %" PRIu64, s.slow_calls);
    CHECK_LINE(t, want);

    /* search: tripped, then a passed probe round */
    CHECK_LINE(t, "breakwater_state{name=\"search\",state=\"closed\"} 1");
    CHECK_LINE(t, "breakwater_transitions_total{name=\"search\",from=\"closed\",to=\"open\"} 1");
    CHECK_LINE(t, "breakwater_transitions_total{name=\"search\",from=\"open\",to=\"half_open\"} 1");
    CHECK_LINE(t, "breakwater_transitions_total{name=\"search\",from=\"half_open\",to=\"closed\"} 1");
    CHECK_INT(count_lines(t, "breakwater_transitions_total{name=\"search\","), 3);
    CHECK_LINE(t, "breakwater_probe_rounds_total{name=\"search\",result=\"passed\"} 1");
    CHECK_LINE(t, "breakwater_probe_rounds_total{name=\"search\",result=\"failed\"} 0");
    CHECK_LINE(t, "breakwater_last_failure_age_seconds{name=\"search\"} 3.5");
    CHECK_LINE(t, "breakwater_calls_total{name=\"search\",kind=\"failure\"} 4");
    CHECK_LINE(t, "breakwater_calls_total{name=\"search\",kind=\"success\"} 2");

    /* inventory: operator verbs, a stale outcome, ignored and unreachable; no failure so no age */
    CHECK_LINE(t, "breakwater_state{name=\"inventory\",state=\"closed\"} 1");
    CHECK_LINE(t, "breakwater_transitions_total{name=\"inventory\",from=\"closed\",to=\"forced_open\"} 1");
    CHECK_LINE(t, "breakwater_transitions_total{name=\"inventory\",from=\"forced_open\",to=\"closed\"} 1");
    CHECK_LINE(t, "breakwater_rejected_total{name=\"inventory\",state=\"forced_open\"} 1");
    CHECK_LINE(t, "breakwater_resets_total{name=\"inventory\"} 1");
    CHECK_LINE(t, "breakwater_calls_total{name=\"inventory\",kind=\"stale\"} 1");
    CHECK_LINE(t, "breakwater_calls_total{name=\"inventory\",kind=\"ignored\"} 1");
    CHECK_LINE(t, "breakwater_calls_total{name=\"inventory\",kind=\"unreachable\"} 1");
    CHECK_LINE(t, "breakwater_calls_total{name=\"inventory\",kind=\"success\"} 0");
    CHECK_INT(count_lines(t, "breakwater_last_failure_age_seconds{name=\"inventory\""), 0);

    /* tenants: its circuits summed into its own series, no key label, no per-key series */
    CHECK_LINE(t, "breakwater_calls_total{name=\"tenants\",kind=\"success\"} 5");
    CHECK_LINE(t, "breakwater_calls_total{name=\"tenants\",kind=\"failure\"} 2");
    CHECK_LINE(t, "breakwater_keyed_circuits{name=\"tenants\"} 3");
    CHECK(strstr(t, "key=") == NULL);
    CHECK_INT(count_lines(t, "breakwater_keyed_circuits{"), 1);

    /* quiet: counters off, so only gauges */
    CHECK_LINE(t, "breakwater_state{name=\"quiet\",state=\"closed\"} 1");
    CHECK_INT(count_lines(t, "breakwater_calls_total{name=\"quiet\""), 0);
    CHECK_INT(count_lines(t, "breakwater_call_duration_seconds_bucket{name=\"quiet\""), 0);
    CHECK_LINE(t, "breakwater_window_calls{name=\"quiet\",kind=\"total\"} 2");

    /* the name with a quote and a backslash, escaped */
    CHECK_LINE(t, "breakwater_state{name=\"we\\\"ird\\\\name\",state=\"closed\"} 1");
    CHECK_LINE(t, "breakwater_calls_total{name=\"we\\\"ird\\\\name\",kind=\"success\"} 1");

    /* the registry's breakers */
    CHECK_LINE(t, "breakwater_state{name=\"r-one\",state=\"closed\"} 1");
    CHECK_LINE(t, "breakwater_calls_total{name=\"r-two\",kind=\"success\"} 1");
    CHECK_LINE(t, "breakwater_state{name=\"r-three\",state=\"closed\"} 1");

    /* every breaker has its six state series: 6 + 3 registry breakers */
    CHECK_INT(count_lines(t, "breakwater_state{"), 9 * 6);
    CHECK_LINE(t, "# HELP breakwater_calls_total Settled calls by kind (slow: at least slow_call_duration).");
    CHECK_LINE(t, "# TYPE breakwater_calls_total counter");
    CHECK_LINE(t, "# TYPE breakwater_state gauge");
    CHECK_LINE(t, "# TYPE breakwater_call_duration_seconds histogram");
    check_layout(t, BW_METRICS_PROMETHEUS);

    free(t);
    bw_metrics_free(m);
    scenario_free(&sc);
}

/* OpenMetrics: the same samples, its own metadata, # EOF. */
static void test_openmetrics(void)
{
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 0);
    char *prom = text_of(m, BW_METRICS_PROMETHEUS);
    char *om = text_of(m, BW_METRICS_OPENMETRICS);
    check_layout(om, BW_METRICS_OPENMETRICS);
    CHECK_LINE(om, "# TYPE breakwater_calls counter");
    CHECK_LINE(om, "# HELP breakwater_calls Settled calls by kind (slow: at least slow_call_duration).");
    CHECK_LINE(om, "# TYPE breakwater_rejected counter");
    CHECK_LINE(om, "# TYPE breakwater_state gauge");
    CHECK_LINE(om, "# TYPE breakwater_call_duration_seconds histogram");
    CHECK_LINE(om, "# UNIT breakwater_call_duration_seconds seconds");
    CHECK_NO_LINE(om, "# TYPE breakwater_calls_total counter");
    CHECK_LINE(om, "breakwater_calls_total{name=\"payments\",kind=\"success\"} 4");
    CHECK(strcmp(om + strlen(om) - 6, "# EOF\n") == 0);
    CHECK_INT(count_lines(om, "# EOF"), 1);
    char *a = samples_of(prom), *b = samples_of(om);
    CHECK(strcmp(a, b) == 0); /* one set of samples, two formats */
    free(a);
    free(b);
    free(prom);
    free(om);
    bw_metrics_free(m);
    scenario_free(&sc);
}

/* keys_max: per-key series of calls, rejections and state, for at most keys_max circuits. */
static void test_keyed_per_key(void)
{
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 10);
    char *t = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK_LINE(t, "breakwater_calls_total{name=\"tenants\",key=\"alice\",kind=\"success\"} 3");
    CHECK_LINE(t, "breakwater_calls_total{name=\"tenants\",key=\"bob\",kind=\"failure\"} 2");
    CHECK_LINE(t, "breakwater_calls_total{name=\"tenants\",key=\"carol\",kind=\"success\"} 1");
    CHECK_LINE(t, "breakwater_state{name=\"tenants\",key=\"alice\",state=\"closed\"} 1");
    CHECK_LINE(t, "breakwater_rejected_total{name=\"tenants\",key=\"bob\",state=\"open\"} 0");
    /* the breaker's own series still sum them */
    CHECK_LINE(t, "breakwater_calls_total{name=\"tenants\",kind=\"success\"} 5");
    CHECK_INT(count_lines(t, "breakwater_state{name=\"tenants\",key="), 3 * 6);
    CHECK_INT(count_lines(t, "breakwater_calls_total{name=\"tenants\",key="), 3 * BW_CALL_KINDS);
    CHECK_INT(count_lines(t, "breakwater_rejected_total{name=\"tenants\",key="), 3 * 3);
    /* calls, rejected and state only */
    CHECK_INT(count_lines(t, "breakwater_transitions_total{name=\"tenants\",key="), 0);
    CHECK_INT(count_lines(t, "breakwater_call_duration_seconds_bucket{name=\"tenants\",key="), 0);
    check_layout(t, BW_METRICS_PROMETHEUS);
    free(t);
    bw_metrics_free(m);

    /* bounded: keys_max 2 gives two of the three */
    m = scenario_set(&sc, NULL, 2);
    t = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK_INT(count_lines(t, "breakwater_state{name=\"tenants\",key="), 2 * 6);
    CHECK_INT(count_lines(t, "breakwater_calls_total{name=\"tenants\",key="), 2 * BW_CALL_KINDS);
    CHECK_LINE(t, "breakwater_calls_total{name=\"tenants\",kind=\"success\"} 5");
    char *om = text_of(m, BW_METRICS_OPENMETRICS);
    check_layout(om, BW_METRICS_OPENMETRICS);
    free(om);
    free(t);
    bw_metrics_free(m);
    scenario_free(&sc);
}

static void test_prefix(void)
{
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, "svc_cb", 0);
    char *t = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK_LINE(t, "svc_cb_calls_total{name=\"payments\",kind=\"failure\"} 5");
    CHECK_LINE(t, "# TYPE svc_cb_rejected_total counter");
    CHECK(strstr(t, "breakwater_") == NULL);
    check_layout(t, BW_METRICS_PROMETHEUS);
    free(t);
    bw_metrics_free(m);
    scenario_free(&sc);
}

/* Registry breakers made after add_registry are exported; a name is exported once. */
static void test_registry_and_duplicates(void)
{
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = NULL;
    CHECK_OK(bw_metrics_new(NULL, &m, NULL));
    CHECK_OK(bw_metrics_add_registry(m, sc.reg));
    char *t = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK_INT(count_lines(t, "breakwater_state{"), 3 * 6);
    free(t);
    bw_breaker *b;
    CHECK_OK(bw_registry_get(sc.reg, "r-four", NULL, &b, NULL));
    t = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK_LINE(t, "breakwater_state{name=\"r-four\",state=\"closed\"} 1");
    CHECK_INT(count_lines(t, "breakwater_state{"), 4 * 6);
    free(t);
    /* the same breaker twice, and a registry breaker added on its own too */
    CHECK_OK(bw_metrics_add_breaker(m, sc.payments));
    CHECK_OK(bw_metrics_add_breaker(m, sc.payments));
    CHECK_OK(bw_metrics_add_breaker(m, b));
    CHECK_OK(bw_metrics_add_registry(m, sc.reg));
    t = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK_INT(count_lines(t, "breakwater_state{"), 5 * 6);
    CHECK_INT(count_lines(t, "breakwater_state{name=\"payments\","), 6);
    CHECK_INT(count_lines(t, "breakwater_state{name=\"r-four\","), 6);
    check_layout(t, BW_METRICS_PROMETHEUS);
    free(t);
    bw_metrics_free(m);
    scenario_free(&sc);
}

/* BW_ELIMIT: the exact length needed, for every size below it. */
static void test_elimit(void)
{
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 0);
    for (int f = 0; f < 2; f++) {
        bw_metrics_format format = (bw_metrics_format)f;
        size_t need = 0;
        CHECK_RC(bw_metrics_write(m, format, NULL, 0, &need), BW_ELIMIT);
        CHECK(need > 1000);
        char *buf = malloc(need + 1);
        size_t len = 0;
        char *full = text_of(m, format);
        size_t sizes[] = {1, 2, 100, need / 2, need - 1, need};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            len = 0;
            memset(buf, 'x', need + 1);
            CHECK_RC(bw_metrics_write(m, format, buf, sizes[i], &len), BW_ELIMIT);
            CHECK_INT(len, need);
            CHECK(buf[sizes[i]] == 'x'); /* nothing written past size */
            /* NUL-terminated within size, at the cut: what precedes it is the start of the text */
            const char *nul = memchr(buf, 0, sizes[i]);
            CHECK(nul != NULL);
            if (nul)
                CHECK(memcmp(buf, full, (size_t)(nul - buf)) == 0);
        }
        free(full);
        CHECK_RC(bw_metrics_write(m, format, buf, need, NULL), BW_ELIMIT); /* len may be NULL */
        CHECK_OK(bw_metrics_write(m, format, buf, need + 1, &len));
        CHECK_INT(len, need);
        CHECK_INT(strlen(buf), need);
        char *again = text_of(m, format);
        CHECK(strcmp(again, buf) == 0);
        free(again);
        free(buf);
    }
    bw_metrics_free(m);
    scenario_free(&sc);
}

static void test_fwrite(void)
{
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 10);
    for (int f = 0; f < 2; f++) {
        FILE *tf = tmpfile();
        CHECK(tf != NULL);
        if (!tf)
            break;
        CHECK_OK(bw_metrics_fwrite(m, (bw_metrics_format)f, tf));
        long n = ftell(tf);
        rewind(tf);
        char *got = calloc(1, (size_t)n + 1);
        CHECK_INT(fread(got, 1, (size_t)n, tf), n);
        char *want = text_of(m, (bw_metrics_format)f);
        CHECK(strcmp(got, want) == 0);
        free(got);
        free(want);
        fclose(tf);
    }
    /* a text many times the stream buffer (64 KiB): written in chunks, the same text */
    bw_registry *big = NULL;
    CHECK_OK(bw_registry_new(NULL, &big, NULL));
    char name[64];
    for (int i = 0; i < 400; i++) {
        bw_breaker *b;
        snprintf(name, sizeof name, "svc-%04d.inventory.internal", i);
        CHECK_OK(bw_registry_get(big, name, NULL, &b, NULL));
        bw_permit p;
        if (bw_acquire(b, &p, NULL) == BW_OK)
            bw_settle(b, &p, BW_SUCCESS);
    }
    bw_metrics *mb = NULL;
    CHECK_OK(bw_metrics_new(NULL, &mb, NULL));
    CHECK_OK(bw_metrics_add_registry(mb, big));
    FILE *tf = tmpfile();
    CHECK(tf != NULL);
    if (tf) {
        CHECK_OK(bw_metrics_fwrite(mb, BW_METRICS_OPENMETRICS, tf));
        long n = ftell(tf);
        CHECK(n > 4 * 65536);
        rewind(tf);
        char *got = calloc(1, (size_t)n + 1);
        CHECK_INT(fread(got, 1, (size_t)n, tf), n);
        char *want = text_of(mb, BW_METRICS_OPENMETRICS);
        CHECK(strcmp(got, want) == 0);
        check_layout(got, BW_METRICS_OPENMETRICS);
        free(got);
        free(want);
        fclose(tf);
    }
    bw_metrics_free(mb);
    bw_registry_free(big);

    /* a stream that refuses writes */
    FILE *ro = fopen("/dev/null", "r");
    CHECK(ro != NULL);
    if (ro) {
        CHECK_RC(bw_metrics_fwrite(m, BW_METRICS_PROMETHEUS, ro), BW_ESYS);
        fclose(ro);
    }
    bw_metrics_free(m);
    scenario_free(&sc);
}

/* ---- writes racing calls (meant for TSan and ASan) ---- */

typedef struct race {
    bw_registry *reg;
    bw_breaker *keyed;
    atomic_int stop;
    int id;
} race;

static void *race_caller(void *arg)
{
    race *r = arg;
    char name[32];
    for (int i = 0; !atomic_load(&r->stop); i++) {
        snprintf(name, sizeof name, "race-%d-%d", r->id, i % 64);
        bw_breaker *b;
        if (bw_registry_get(r->reg, name, NULL, &b, NULL) != BW_OK)
            continue;
        bw_permit p;
        if (bw_acquire(b, &p, NULL) == BW_OK)
            bw_settle(b, &p, i % 3 ? BW_SUCCESS : BW_FAILURE);
        snprintf(name, sizeof name, "key-%d", i % 200);
        if (bw_keyed_acquire(r->keyed, name, &p, NULL) == BW_OK)
            bw_settle(r->keyed, &p, i % 5 ? BW_SUCCESS : BW_FAILURE);
    }
    return NULL;
}

static void test_concurrent_writes(void)
{
    bw_registry *reg = NULL;
    bw_breaker *keyed = NULL;
    bw_config *d = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_parse(d, "keyed_maxsize=50", &e));
    CHECK_OK(bw_registry_new(d, &reg, &e));
    CHECK_OK(bw_breaker_new("race-keyed", d, &keyed, &e));
    bw_config_free(d);
    bw_metrics_options o = {NULL, 8};
    bw_metrics *m = NULL;
    CHECK_OK(bw_metrics_new(&o, &m, NULL));
    CHECK_OK(bw_metrics_add_registry(m, reg));
    CHECK_OK(bw_metrics_add_breaker(m, keyed));
    race rs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        rs[i].reg = reg;
        rs[i].keyed = keyed;
        rs[i].id = i;
        atomic_init(&rs[i].stop, 0);
        pthread_create(&th[i], NULL, race_caller, &rs[i]);
    }
    for (int i = 0; i < 40; i++) {
        char *t = text_of(m, i % 2 ? BW_METRICS_OPENMETRICS : BW_METRICS_PROMETHEUS);
        check_layout(t, i % 2 ? BW_METRICS_OPENMETRICS : BW_METRICS_PROMETHEUS);
        free(t);
    }
    for (int i = 0; i < 2; i++) {
        atomic_store(&rs[i].stop, 1);
        pthread_join(th[i], NULL);
    }
    bw_metrics_free(m);
    bw_breaker_free(keyed);
    bw_registry_free(reg);
}

/* ---- the HTTP server ---- */

typedef struct reply {
    int status;
    char content_type[128];
    char *body; /* malloc'd */
    char *head; /* the status line and headers, malloc'd */
} reply;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The server's cache age limit (src/observe/http.c, BW_TESTING only): -1 restores the default. */
void bw__metrics_set_cache_age(int64_t ns);

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/*
 * A TCP connection to 127.0.0.1:port from the loopback address `src` (NULL:
 * any; 127.0.0.0/8 is all this machine's, so each is a client address of its
 * own to the server), with a receive buffer of rcvbuf bytes (0: the system's)
 * and a timeout of timeout_ms on each read and write; -1 on failure.
 */
static int connect_from(const char *src, int port, int rcvbuf, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in sin;
    if (src) {
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        if (inet_pton(AF_INET, src, &sin.sin_addr) != 1 || bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
            close(fd);
            return -1;
        }
    }
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_str(int fd, const char *str)
{
    size_t n = strlen(str);
    while (n > 0) {
        ssize_t w = write(fd, str, n);
        if (w <= 0)
            return -1;
        str += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read fd to its end (or a read's timeout) as an HTTP answer into *out; 0 on success, -1 without a status line. */
static int read_reply(int fd, reply *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    if (!sep || sscanf(buf, "HTTP/1.%*d %d", &out->status) != 1) {
        free(buf);
        return -1;
    }
    *sep = 0;
    out->head = strdup(buf);
    out->body = strdup(sep + 4);
    for (char *h = buf; (h = strstr(h, "\r\n")) != NULL;) {
        h += 2;
        if (strncasecmp(h, "Content-Type: ", 14) == 0) {
            char *e = strstr(h, "\r\n");
            size_t l = e ? (size_t)(e - h - 14) : strlen(h + 14);
            if (l >= sizeof out->content_type)
                l = sizeof out->content_type - 1;
            memcpy(out->content_type, h + 14, l);
            out->content_type[l] = 0;
        }
    }
    free(buf);
    return 0;
}

/* The request line and headers of a request ("Connection: close"), with an Accept header unless accept is NULL. */
static void request_text(char *req, size_t size, const char *method, const char *path, const char *accept)
{
    snprintf(req, size, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s\r\n", method, path,
             accept ? "Accept: " : "", accept ? accept : "", accept ? "\r\n" : "");
}

/* One HTTP/1.1 request ("Connection: close") to 127.0.0.1:port from the address src (NULL: any); 0 on success. */
static int http_from(const char *src, int port, const char *method, const char *path, const char *accept, reply *out)
{
    memset(out, 0, sizeof *out);
    int fd = connect_from(src, port, 0, 10000);
    if (fd < 0)
        return -1;
    char req[512];
    request_text(req, sizeof req, method, path, accept);
    int rc = send_str(fd, req) == 0 ? read_reply(fd, out) : -1;
    close(fd);
    return rc;
}

static int http(int port, const char *method, const char *path, const char *accept, reply *out)
{
    return http_from(NULL, port, method, path, accept, out);
}

static void reply_free(reply *r)
{
    free(r->body);
    free(r->head);
}

/* Open file descriptors of this process (Linux: /proc/self/fd), or -1. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- adding while written or served (meant for TSan and ASan) ---- */

#define ADD_BREAKERS 300
#define ADD_REGISTRIES 6
#define ADD_MAX 60000 /* adds at most (each breaker many times: the set exports it once) */

typedef struct adder {
    bw_metrics *m;
    bw_breaker **breakers;
    bw_registry **regs;
    atomic_int stop;
    int adds;
} adder;

/*
 * Adds every registry 40 times, then the breakers round after round as fast
 * as it can until told to stop (or ADD_MAX): many registries make a write's
 * listing long, and fast adds grow the set's array while it is copied.
 */
static void *adder_main(void *arg)
{
    adder *a = arg;
    for (int i = 0; i < 40 * ADD_REGISTRIES; i++)
        CHECK_OK(bw_metrics_add_registry(a->m, a->regs[i % ADD_REGISTRIES]));
    while (!atomic_load(&a->stop) && a->adds < ADD_MAX) {
        CHECK_OK(bw_metrics_add_breaker(a->m, a->breakers[a->adds % ADD_BREAKERS]));
        a->adds++;
    }
    return NULL;
}

/* An add races writes (bw_metrics_write, as the server's thread does) and scrapes: the set's mutex. */
static void test_add_while_written(void)
{
    bw_breaker **breakers = calloc(ADD_BREAKERS, sizeof *breakers);
    bw_registry *regs[ADD_REGISTRIES];
    char name[64];
    for (int i = 0; i < ADD_BREAKERS; i++) {
        snprintf(name, sizeof name, "added-%03d", i);
        CHECK_OK(bw_breaker_new(name, NULL, &breakers[i], NULL));
    }
    for (int i = 0; i < ADD_REGISTRIES; i++) {
        CHECK_OK(bw_registry_new(NULL, &regs[i], NULL));
        for (int k = 0; k < 3; k++) {
            bw_breaker *b;
            snprintf(name, sizeof name, "reg-%d-%d", i, k);
            CHECK_OK(bw_registry_get(regs[i], name, NULL, &b, NULL));
        }
    }
    bw_metrics *m = NULL;
    CHECK_OK(bw_metrics_new(NULL, &m, NULL));
    bw_metrics_server *srv = NULL;
    int served = bw_metrics_serve(m, "127.0.0.1:0", &srv, NULL) == BW_OK;
    adder a = {m, breakers, regs, 0, 0};
    atomic_init(&a.stop, 0);
    pthread_t th;
    pthread_create(&th, NULL, adder_main, &a);
    int writes = 0;
    char *buf = malloc(1 << 20);
    while (writes < 40) {
        if (served && writes % 8 == 7) { /* a scrape: the server's thread writes the set */
            reply r;
            CHECK_INT(http(bw_metrics_server_port(srv), "GET", "/metrics", NULL, &r), 0);
            CHECK_INT(r.status, 200);
            reply_free(&r);
        } else {
            size_t len = 0;
            int rc =
                bw_metrics_write(m, writes % 2 ? BW_METRICS_OPENMETRICS : BW_METRICS_PROMETHEUS, buf, 1 << 20, &len);
            CHECK(rc == BW_OK);
        }
        writes++;
    }
    atomic_store(&a.stop, 1);
    pthread_join(th, NULL);
    free(buf);
    if (a.adds < ADD_BREAKERS) /* a slow adder: the rest now, so that the set is whole */
        for (int i = a.adds; i < ADD_BREAKERS; i++)
            CHECK_OK(bw_metrics_add_breaker(m, breakers[i]));
    /* the set as the adds left it: every breaker once */
    char *t = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK_INT(count_lines(t, "breakwater_state{"), 6 * (ADD_BREAKERS + 3 * ADD_REGISTRIES));
    CHECK_INT(count_lines(t, "breakwater_state{name=\"added-123\","), 6);
    CHECK_INT(count_lines(t, "breakwater_state{name=\"reg-5-2\","), 6);
    check_layout(t, BW_METRICS_PROMETHEUS);
    free(t);
    if (served)
        bw_metrics_server_stop(srv);
    bw_metrics_free(m);
    for (int i = 0; i < ADD_BREAKERS; i++)
        bw_breaker_free(breakers[i]);
    for (int i = 0; i < ADD_REGISTRIES; i++)
        bw_registry_free(regs[i]);
    free(breakers);
}

static void test_http(void)
{
    int fds_before = open_fds();
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 0);
    bw_metrics_server *srv = NULL;
    bw_error e;
    memset(&e, 0, sizeof e);
    int rc = bw_metrics_serve(m, "127.0.0.1:0", &srv, &e);
    if (!(bw_components() & BW_COMPONENT_METRICS_HTTP)) {
        CHECK_RC(rc, BW_ENOTSUP);
        CHECK(srv == NULL);
        bw_metrics_free(m);
        scenario_free(&sc);
        return;
    }
    CHECK_OK(rc);
    if (rc != BW_OK) {
        fprintf(stderr, "bw_metrics_serve: %s\n", e.message);
        bw_metrics_free(m);
        scenario_free(&sc);
        return;
    }
    int port = bw_metrics_server_port(srv);
    CHECK(port > 0 && port < 65536);
    CHECK_INT(bw_metrics_server_port(NULL), 0);

    reply r;
    /* no Accept: the Prometheus text, exactly what bw_metrics_write gives */
    CHECK_INT(http(port, "GET", "/metrics", NULL, &r), 0);
    CHECK_INT(r.status, 200);
    CHECK_STR(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    char *want = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK(r.body && strcmp(r.body, want) == 0);
    free(want);
    reply_free(&r);

    /* Prometheus' own Accept header: OpenMetrics */
    CHECK_INT(http(port, "GET", "/metrics",
                   "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                   "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                   &r),
              0);
    CHECK_INT(r.status, 200);
    CHECK_STR(r.content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    CHECK(r.body && ends_with(r.body, strlen(r.body), "# EOF\n"));
    if (r.body)
        check_layout(r.body, BW_METRICS_OPENMETRICS);
    reply_free(&r);

    /* text/plain preferred, OpenMetrics refused, and anything else: the Prometheus text */
    const char *texty[] = {"text/plain;q=1, application/openmetrics-text;q=0.5", "application/openmetrics-text;q=0",
                           "*/*", "application/json"};
    for (size_t i = 0; i < sizeof texty / sizeof texty[0]; i++) {
        CHECK_INT(http(port, "GET", "/metrics", texty[i], &r), 0);
        CHECK_INT(r.status, 200);
        CHECK_STR(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
        reply_free(&r);
    }
    CHECK_INT(http(port, "GET", "/metrics", "Application/OpenMetrics-Text; version=1.0.0", &r), 0);
    CHECK_STR(r.content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    reply_free(&r);

    /* a query string is not part of the path */
    CHECK_INT(http(port, "GET", "/metrics?x=1", NULL, &r), 0);
    CHECK_INT(r.status, 200);
    reply_free(&r);
    /* HEAD: the headers only */
    CHECK_INT(http(port, "HEAD", "/metrics", NULL, &r), 0);
    CHECK_INT(r.status, 200);
    CHECK_STR(r.body, "");
    reply_free(&r);

    /* other paths 404, other methods 405 */
    const char *paths[] = {"/", "/metrics/", "/metricsx", "/favicon.ico"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        CHECK_INT(http(port, "GET", paths[i], NULL, &r), 0);
        CHECK_INT(r.status, 404);
        reply_free(&r);
    }
    const char *methods[] = {"POST", "PUT", "DELETE"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        CHECK_INT(http(port, methods[i], "/metrics", NULL, &r), 0);
        CHECK_INT(r.status, 405);
        CHECK(r.head && strstr(r.head, "Allow: GET, HEAD") != NULL);
        reply_free(&r);
    }

    /* a second server on the same port: the system's reason */
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    bw_metrics_server *srv2 = (bw_metrics_server *)&r;
    memset(&e, 0, sizeof e);
    CHECK_RC(bw_metrics_serve(m, addr, &srv2, &e), BW_ESYS);
    CHECK(srv2 == NULL);
    CHECK(strstr(e.message, strerror(EADDRINUSE)) != NULL);
    CHECK(strstr(e.message, addr) != NULL);

    /* the text follows the breakers: a breaker made now is in the first answer rendered after the last one
       (the server renders a text at most once a second: test_http_cache) */
    bw_breaker *b;
    CHECK_OK(bw_registry_get(sc.reg, "r-late", NULL, &b, NULL));
    bw__metrics_set_cache_age(0); /* as if a second had passed */
    CHECK_INT(http(port, "GET", "/metrics", NULL, &r), 0);
    bw__metrics_set_cache_age(-1);
    CHECK(r.body && has_line(r.body, "breakwater_state{name=\"r-late\",state=\"closed\"} 1"));
    reply_free(&r);

    bw_metrics_server_stop(srv);
    bw_metrics_server_stop(NULL);
    /* the port is free again */
    CHECK_OK(bw_metrics_serve(m, addr, &srv2, &e));
    bw_metrics_server_stop(srv2);
    bw_metrics_free(m);
    scenario_free(&sc);
    /* and nothing is left open: listening sockets, connections, the daemon's own descriptors */
    CHECK_INT(open_fds(), fds_before);
}

/* A server for m on 127.0.0.1 (its port in *port), or NULL when this build has none (then the caller returns). */
static bw_metrics_server *serve(bw_metrics *m, int *port)
{
    bw_metrics_server *srv = NULL;
    bw_error e;
    memset(&e, 0, sizeof e);
    int rc = bw_metrics_serve(m, "127.0.0.1:0", &srv, &e);
    if (!(bw_components() & BW_COMPONENT_METRICS_HTTP)) {
        CHECK_RC(rc, BW_ENOTSUP);
        return NULL;
    }
    CHECK_OK(rc);
    if (rc != BW_OK)
        fprintf(stderr, "bw_metrics_serve: %s\n", e.message);
    *port = bw_metrics_server_port(srv);
    return srv;
}

/*
 * One rendered text a format, shared by the scrapes of the same second:
 * concurrent scrapes get the same text, a change made right after a scrape is
 * not in the next one of that second, and is in the first one after it.
 * (test_metrics links the shared library, which has no test hooks: the one
 * wait here is the real second.)
 */
static void test_http_cache(void)
{
    int fds_before = open_fds();
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 0);
    int port = 0;
    bw_metrics_server *srv = serve(m, &port);
    if (!srv) {
        bw_metrics_free(m);
        scenario_free(&sc);
        return;
    }
    bw__metrics_set_cache_age(INT64_MAX); /* no text gets old until the test says so (no sleeping) */

    /* two scrapes at once, both requests sent before either answer is read: the same text */
    char req[512];
    request_text(req, sizeof req, "GET", "/metrics", NULL);
    int a = connect_from(NULL, port, 0, 10000), b = connect_from(NULL, port, 0, 10000);
    CHECK(a >= 0 && b >= 0);
    CHECK_INT(send_str(a, req), 0);
    CHECK_INT(send_str(b, req), 0);
    reply ra, rb;
    CHECK_INT(read_reply(a, &ra), 0);
    CHECK_INT(read_reply(b, &rb), 0);
    close(a);
    close(b);
    CHECK_INT(ra.status, 200);
    CHECK_INT(rb.status, 200);
    CHECK(ra.body && rb.body && strcmp(ra.body, rb.body) == 0);

    /* a change now (a new breaker, and a call on another) is not in a scrape of the same second... */
    bw_breaker *late;
    CHECK_OK(bw_registry_get(sc.reg, "r-late", NULL, &late, NULL));
    timed_call(sc.weird, 0, BW_FAILURE);
    reply r;
    CHECK_INT(http(port, "GET", "/metrics", NULL, &r), 0);
    CHECK_INT(r.status, 200);
    CHECK(r.body && ra.body && strcmp(r.body, ra.body) == 0);
    CHECK(r.body && !has_line(r.body, "breakwater_state{name=\"r-late\",state=\"closed\"} 1"));
    reply_free(&r);
    /* ...while the other format has a text of its own */
    CHECK_INT(http(port, "GET", "/metrics", "application/openmetrics-text", &r), 0);
    CHECK_STR(r.content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    CHECK(r.body && ends_with(r.body, strlen(r.body), "# EOF\n"));
    reply_free(&r);

    /* ...and is in the first scrape once the text is old enough (the hook makes every text old) */
    bw__metrics_set_cache_age(0);
    CHECK_INT(http(port, "GET", "/metrics", NULL, &r), 0);
    bw__metrics_set_cache_age(-1);
    CHECK_INT(r.status, 200);
    CHECK(r.body && has_line(r.body, "breakwater_state{name=\"r-late\",state=\"closed\"} 1"));
    CHECK(r.body && has_line(r.body, "breakwater_calls_total{name=\"we\\\"ird\\\\name\",kind=\"failure\"} 1"));
    char *want = text_of(m, BW_METRICS_PROMETHEUS);
    CHECK(r.body && strcmp(r.body, want) == 0);
    free(want);
    reply_free(&r);
    reply_free(&ra);
    reply_free(&rb);

    bw_metrics_server_stop(srv);
    bw_metrics_free(m);
    scenario_free(&sc);
    CHECK_INT(open_fds(), fds_before);
}

/* Whether fd has something to read (or its end) within ms. */
static int readable(int fd, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, ms) > 0;
}

/*
 * What a client can hold: other methods are answered at once, without the
 * body they announce; a request head larger than a connection's memory is
 * refused; at most 8 connections from one address and 16 in all.
 */
static void test_http_limits(void)
{
    int fds_before = open_fds();
    scenario sc;
    scenario_make(&sc);
    bw_metrics *m = scenario_set(&sc, NULL, 0);
    int port = 0;
    bw_metrics_server *srv = serve(m, &port);
    if (!srv) {
        bw_metrics_free(m);
        scenario_free(&sc);
        return;
    }
    reply r;

    /* POST announcing 100 MB that never come: 405 at once */
    int64_t t0 = now_ms();
    int fd = connect_from(NULL, port, 0, 3000);
    CHECK(fd >= 0);
    CHECK_INT(send_str(fd, "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n"), 0);
    CHECK_INT(read_reply(fd, &r), 0);
    close(fd);
    CHECK_INT(r.status, 405);
    CHECK(now_ms() - t0 < 2000);
    reply_free(&r);

    /* a head of 20 KiB: refused (431); one of 8 KiB: answered */
    size_t pads[2] = {20 * 1024, 8 * 1024};
    for (int i = 0; i < 2; i++) {
        char *big = malloc(pads[i] + 200);
        int n = snprintf(big, 200, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Pad: ");
        memset(big + n, 'a', pads[i]);
        strcpy(big + n + pads[i], "\r\n\r\n");
        fd = connect_from(NULL, port, 0, 10000);
        CHECK(fd >= 0);
        CHECK_INT(send_str(fd, big), 0);
        int got = read_reply(fd, &r);
        close(fd);
        free(big);
        if (i == 0) {
            CHECK(got != 0 || r.status == 431);
        } else {
            CHECK_INT(got, 0);
            CHECK_INT(r.status, 200);
        }
        if (got == 0)
            reply_free(&r);
    }

    /* 8 connections from 127.0.0.3 that never finish their head: a 9th from there is closed unanswered,
       another address is answered */
    const char *part = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    int hold[16];
    for (int i = 0; i < 16; i++)
        hold[i] = -1;
    for (int i = 0; i < 8; i++) {
        hold[i] = connect_from("127.0.0.3", port, 0, 10000);
        CHECK(hold[i] >= 0);
        CHECK_INT(send_str(hold[i], part), 0);
    }
    CHECK(http_from("127.0.0.3", port, "GET", "/metrics", NULL, &r) != 0);
    CHECK_INT(http_from("127.0.0.2", port, "GET", "/metrics", NULL, &r), 0);
    CHECK_INT(r.status, 200);
    reply_free(&r);

    /* 8 more from 127.0.0.4: 16 in all, so a 17th connection waits (not answered while they are held)... */
    for (int i = 8; i < 16; i++) {
        hold[i] = connect_from("127.0.0.4", port, 0, 10000);
        CHECK(hold[i] >= 0);
        CHECK_INT(send_str(hold[i], part), 0);
    }
    char req[512];
    request_text(req, sizeof req, "GET", "/metrics", NULL);
    fd = connect_from("127.0.0.5", port, 0, 10000);
    CHECK(fd >= 0);
    CHECK_INT(send_str(fd, req), 0);
    CHECK(!readable(fd, 500));
    /* ...and is answered once one of them goes */
    close(hold[0]);
    hold[0] = -1;
    CHECK_INT(read_reply(fd, &r), 0);
    CHECK_INT(r.status, 200);
    reply_free(&r);
    close(fd);
    for (int i = 0; i < 16; i++)
        if (hold[i] >= 0)
            close(hold[i]);

    bw_metrics_server_stop(srv);
    bw_metrics_free(m);
    scenario_free(&sc);
    CHECK_INT(open_fds(), fds_before);
}

/*
 * Stop is bounded: a client that asked for a large text and does not read it
 * is given about 2 s; one that never finishes its head, or announces a body
 * it never sends, is not waited for.
 */
static void test_http_stop(void)
{
    int fds_before = open_fds();
    bw_registry *big = NULL;
    CHECK_OK(bw_registry_new(NULL, &big, NULL));
    char name[64];
    for (int i = 0; i < 2500; i++) {
        bw_breaker *b;
        snprintf(name, sizeof name, "svc-%04d.inventory.internal", i);
        CHECK_OK(bw_registry_get(big, name, NULL, &b, NULL));
    }
    bw_metrics *m = NULL;
    CHECK_OK(bw_metrics_new(NULL, &m, NULL));
    CHECK_OK(bw_metrics_add_registry(m, big));
    int port = 0;
    bw_metrics_server *srv = serve(m, &port);
    if (!srv) {
        bw_metrics_free(m);
        bw_registry_free(big);
        return;
    }
    char req[512];
    request_text(req, sizeof req, "GET", "/metrics", NULL);
    /* the text (some 7 MB) is more than the socket buffers hold: its answer stays in progress */
    int stuck = connect_from(NULL, port, 4096, 10000);
    CHECK(stuck >= 0);
    CHECK_INT(send_str(stuck, req), 0);
    CHECK(readable(stuck, 10000)); /* the answer has started */
    int slow = connect_from(NULL, port, 0, 10000);
    CHECK_INT(send_str(slow, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"), 0);
    int upload = connect_from(NULL, port, 0, 10000);
    CHECK_INT(send_str(upload, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n"), 0);
    sleep_ms(100);
    int64_t t0 = now_ms();
    bw_metrics_server_stop(srv);
    int64_t took = now_ms() - t0;
    CHECK(took < 4000);
    fprintf(stderr, "test_http_stop: stop took %lld ms (a grace of 2 s for the answer not being read)\n",
            (long long)took);
    close(stuck);
    close(slow);
    close(upload);
    bw_metrics_free(m);
    bw_registry_free(big);
    CHECK_INT(open_fds(), fds_before);
}

static void test_http_bad_addresses(void)
{
    bw_metrics *m = NULL;
    CHECK_OK(bw_metrics_new(NULL, &m, NULL));
    bw_metrics_server *srv = NULL;
    bw_error e;
    if (!(bw_components() & BW_COMPONENT_METRICS_HTTP)) {
        CHECK_RC(bw_metrics_serve(m, "127.0.0.1:0", &srv, &e), BW_ENOTSUP);
        CHECK(strstr(e.message, "libmicrohttpd") != NULL);
        bw_metrics_free(m);
        return;
    }
    static const char *const bad[] = {"",
                                      "127.0.0.1",
                                      "localhost:9100",
                                      "127.0.0.1:",
                                      ":9100",
                                      "127.0.0.1:65536",
                                      "127.0.0.1:99999999",
                                      "127.0.0.1:-1",
                                      "127.0.0.1:80a",
                                      "127.0.0.1: 80",
                                      "256.0.0.1:80",
                                      "::1:9100",
                                      "[::1]:9100",
                                      "1.2.3:80",
                                      "127.0.0.1:80:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv = (bw_metrics_server *)&e;
        memset(&e, 0, sizeof e);
        CHECK_RC(bw_metrics_serve(m, bad[i], &srv, &e), BW_EINVAL);
        CHECK(srv == NULL);
        CHECK_STR(e.field, "address");
        CHECK(e.message[0] != 0);
    }
    CHECK_RC(bw_metrics_serve(NULL, "127.0.0.1:0", &srv, &e), BW_EINVAL);
    CHECK_RC(bw_metrics_serve(m, NULL, &srv, &e), BW_EINVAL);
    CHECK_RC(bw_metrics_serve(m, "127.0.0.1:0", NULL, &e), BW_EINVAL);
    /* an address this machine does not have */
    memset(&e, 0, sizeof e);
    CHECK_RC(bw_metrics_serve(m, "192.0.2.1:0", &srv, &e), BW_ESYS);
    CHECK(strstr(e.message, strerror(EADDRNOTAVAIL)) != NULL);
    bw_metrics_free(m);
}

/* ---- --dump DIR ---- */

static int dump_one(const char *dir, const char *file, bw_metrics *m, bw_metrics_format format)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "test_metrics: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    int rc = bw_metrics_fwrite(m, format, f);
    if (fclose(f) != 0 || rc != BW_OK) {
        fprintf(stderr, "test_metrics: writing %s failed: %s\n", path, bw_strerror(rc));
        return 1;
    }
    return 0;
}

static int dump(const char *dir)
{
    scenario sc;
    scenario_make(&sc);
    int bad = 0;
    bw_metrics *m = scenario_set(&sc, NULL, 0);
    bad |= dump_one(dir, "scenario.prom", m, BW_METRICS_PROMETHEUS);
    bad |= dump_one(dir, "scenario.om", m, BW_METRICS_OPENMETRICS);
    bw_metrics_free(m);
    m = scenario_set(&sc, NULL, 10);
    bad |= dump_one(dir, "scenario_keys.prom", m, BW_METRICS_PROMETHEUS);
    bad |= dump_one(dir, "scenario_keys.om", m, BW_METRICS_OPENMETRICS);
    bw_metrics_free(m);
    m = scenario_set(&sc, "svc_cb", 2);
    bad |= dump_one(dir, "scenario_prefix.prom", m, BW_METRICS_PROMETHEUS);
    bw_metrics_free(m);
    scenario_free(&sc);
    clock_done();
    return bad || h_failed_checks ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--dump") == 0)
        return dump(argv[2]);
    RUN(test_duration_buckets);
    RUN(test_content_types);
    RUN(test_prefix_rule);
    RUN(test_bad_arguments);
    RUN(test_empty_set);
    RUN(test_scenario_samples);
    RUN(test_openmetrics);
    RUN(test_keyed_per_key);
    RUN(test_prefix);
    RUN(test_registry_and_duplicates);
    RUN(test_elimit);
    RUN(test_fwrite);
    RUN(test_concurrent_writes);
    RUN(test_add_while_written);
    RUN(test_http);
    RUN(test_http_cache);
    RUN(test_http_limits);
    RUN(test_http_stop);
    RUN(test_http_bad_addresses);
    clock_done();
    bw_fini();
    return TEST_SUMMARY();
}
