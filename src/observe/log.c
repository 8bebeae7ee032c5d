/*
 * log.c — the logging listener (observe.h): logfmt or JSON lines, levels,
 * rate-limited rejections, to a FILE *, an fd, syslog or a sink.
 *
 * Each event becomes one line, built in a buffer on the delivering thread's
 * stack (LINE_BYTES, 2 KiB) and handed to the destination in one piece: one
 * fwrite + fflush under the FILE's own lock, one write(2) (retried on EINTR and
 * after a partial write), one syslog(3), or one call of the sink. Nothing is
 * allocated on that path. All of it runs on the delivering thread, which is a
 * breaker's caller: a destination that blocks (a full pipe or socket in
 * blocking mode, a stalled journald, a FILE on a slow disk) holds that call up
 * for as long (observe.h says so, and to use a sink with a queue of its own for
 * such destinations). An fd is never waited for past what write(2) itself
 * does: a write that fails (EAGAIN on a non-blocking fd that is full, or an
 * error) drops the line, counted in `dropped` and reported as dropped=N on the
 * next line written to the fd; when a line was cut short by a partial write,
 * `torn` is set and the next line written starts with a newline, so the
 * fragment stays a line of its own and never prefixes the next one.
 *
 * Fields come in a fixed order: ts level event name [key] <the event's
 * fields> [suppressed] [dropped] [message] msg. Every field but the
 * user's `message` and the human `msg` is bounded (a name or a key is at most
 * 255 bytes), so those always fit; `message` is cut at MESSAGE_BYTES and `msg`
 * at what is left of the line, each ending in "..." when cut, never inside an
 * escape or a UTF-8 sequence, so a cut line is still a valid line.
 *
 * Escaping: JSON strings escape '"', '\\' and every control character (\n, \r,
 * \t by name, the rest and DEL as \u00XX); a byte that is not part of valid
 * UTF-8 becomes \ufffd, so a strict parser accepts any line. A logfmt value is
 * written bare unless it is empty or holds a space, '"', '=', '\\', a control
 * character or invalid UTF-8; then it is quoted with the same escapes.
 *
 * Rejections are rate-limited per (breaker pointer, key): a fixed table of
 * SLOTS slots, indexed by a hash of both; two breakers whose hashes collide
 * share a slot (its budget and its suppressed count). A slot counts the lines
 * written in the current one-second window (CLOCK_MONOTONIC) and the rejections
 * suppressed since its last line; the next line written from the slot carries
 * suppressed=N.
 *
 * Locking: `mu` protects `slots` (every field of every slot) and nothing else.
 * It is held only for a slot's bookkeeping (a clock read and a few compares),
 * never while a line is formatted or written. `dropped` and `torn` are atomic
 * (a line's count is taken with an exchange and given back when that line is
 * dropped too). Everything else in a bw_log is written once by bw_log_new and
 * then only read, so any number of threads may deliver to one log at once.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "breakwater/observe.h"
#include "breakwater/pipeline.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/systime.h"

#define SLOTS 64          /* rate-limit slots (a power of two) */
#define LINE_BYTES 2048   /* a line, with its newline and NUL */
#define LINE_TAIL 3       /* kept free for the closing '}', the newline and the NUL */
#define MESSAGE_BYTES 512 /* the longest `message` value written, quotes included */
#define MSG_BYTES 768     /* the human text before escaping */
#define N_TYPES 12        /* event types this file knows: BW_EVENT_STATE_CHANGE .. BW_EVENT_SHED */
#define CUT "..."         /* ends a value that was cut */
#define CUT_LEN (sizeof CUT - 1)

typedef struct slot {
    int used;            /* 0 until the first rejection hashed here */
    int64_t start;       /* the current window's start (monotonic ns) */
    uint32_t written;    /* lines written in the window */
    uint64_t suppressed; /* rejections not written since the last line */
} slot;

struct bw_log {
    bw_log_options o;
    unsigned mask;
    pthread_mutex_t mu; /* protects slots */
    slot slots[SLOTS];
    _Atomic uint64_t dropped; /* fd: lines not written whole since the last line written (reported as dropped=N) */
    atomic_int torn;          /* fd: the last line written stopped short of its newline */
#ifdef BW_TESTING
    _Atomic int64_t now_override;                             /* the rate limiter's clock when >= 0 (bw__log_set_now) */
    ssize_t (*_Atomic write_hook)(int, const void *, size_t); /* write(2) when NULL (bw__log_set_write) */
#endif
};

/* ---- options, construction ---- */

void bw_log_options_init(bw_log_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->format = BW_LOG_LOGFMT;
    o->min_level = BW_LOG_INFO;
    o->file = NULL;
    o->fd = -1;
    o->syslog = 0;
    o->sink = NULL;
    o->sink_user = NULL;
    o->rejections_per_second = 1;
}

/* The level of an event (the highest it can have for STATE_CHANGE when `worst`). */
static bw_log_level level_of(bw_event_type type, bw_state to, int worst)
{
    switch (type) {
    case BW_EVENT_STATE_CHANGE:
        return worst || to == BW_STATE_OPEN ? BW_LOG_ERROR : BW_LOG_WARN;
    case BW_EVENT_STORE_DEGRADED:
    case BW_EVENT_STORE_WRITE_DROPPED:
    case BW_EVENT_STORE_CORRUPT:
    case BW_EVENT_BULKHEAD_REJECTED:
    case BW_EVENT_FALLBACK:
        return BW_LOG_WARN;
    case BW_EVENT_STORE_RECOVERED:
    case BW_EVENT_RESET:
    case BW_EVENT_RETRY:
        return BW_LOG_INFO;
    case BW_EVENT_CALL:
    case BW_EVENT_REJECTED:
    case BW_EVENT_SHED:
        return BW_LOG_DEBUG;
    }
    return BW_LOG_INFO; /* a type appended after this file was written */
}

int bw_log_new(const bw_log_options *o, bw_log **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    *out = NULL;
    if (!o)
        return bw__fail(err, BW_EINVAL, "o", "the options must not be NULL (fill them with bw_log_options_init)");
    if (o->format != BW_LOG_LOGFMT && o->format != BW_LOG_JSON)
        return bw__fail(err, BW_EINVAL, "format", "format must be BW_LOG_LOGFMT or BW_LOG_JSON, got %d",
                        (int)o->format);
    if ((int)o->min_level < BW_LOG_DEBUG || (int)o->min_level > BW_LOG_ERROR)
        return bw__fail(err, BW_EINVAL, "min_level", "min_level must be BW_LOG_DEBUG .. BW_LOG_ERROR, got %d",
                        (int)o->min_level);
    if (o->syslog != 0 && o->syslog != 1)
        return bw__fail(err, BW_EINVAL, "syslog", "syslog must be 0 or 1, got %d", o->syslog);
    const char *set[4];
    int n = 0;
    if (o->file)
        set[n++] = "file";
    if (o->fd >= 0)
        set[n++] = "fd";
    if (o->syslog)
        set[n++] = "syslog";
    if (o->sink)
        set[n++] = "sink";
    if (n == 0)
        return bw__fail(err, BW_EINVAL, "destination",
                        "no destination: set exactly one of file, fd (>= 0), syslog (1) or sink");
    if (n > 1)
        return bw__fail(err, BW_EINVAL, set[1], "more than one destination: %s and %s are both set; set exactly one",
                        set[0], set[1]);
    bw_log *log = calloc(1, sizeof *log);
    if (!log)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    if (pthread_mutex_init(&log->mu, NULL) != 0) {
        free(log);
        return bw__fail(err, BW_ESYS, "", "could not create the log's mutex");
    }
    log->o = *o;
    for (int t = 0; t < N_TYPES; t++)
        if (level_of((bw_event_type)t, BW_STATE_CLOSED, 1) >= o->min_level)
            log->mask |= BW_EVENT_MASK(t);
    atomic_init(&log->dropped, 0);
    atomic_init(&log->torn, 0);
#ifdef BW_TESTING
    atomic_init(&log->now_override, -1);
    atomic_init(&log->write_hook, NULL);
#endif
    *out = log;
    return BW_OK;
}

void bw_log_free(bw_log *log)
{
    if (!log)
        return;
    pthread_mutex_destroy(&log->mu);
    free(log);
}

#ifdef BW_TESTING
/* The tests' build only: the rate limiter reads mono_ns instead of CLOCK_MONOTONIC (a negative value: the clock
 * again). Declared by the tests themselves. */
void bw__log_set_now(bw_log *log, int64_t mono_ns);
void bw__log_set_now(bw_log *log, int64_t mono_ns)
{
    if (log)
        atomic_store(&log->now_override, mono_ns);
}

/* The tests' build only: the fd destination's write(2) is fn instead (NULL: write(2) again), to make partial
 * writes and EAGAIN at will. Declared by the tests themselves. */
void bw__log_set_write(bw_log *log, ssize_t (*fn)(int, const void *, size_t));
void bw__log_set_write(bw_log *log, ssize_t (*fn)(int, const void *, size_t))
{
    if (log)
        atomic_store(&log->write_hook, fn);
}
#endif

/* One write(2) of the fd destination (the tests' hook in their build). */
static ssize_t fd_write(bw_log *log, int fd, const char *p, size_t n)
{
#ifdef BW_TESTING
    ssize_t (*hook)(int, const void *, size_t) = atomic_load(&log->write_hook);
    if (hook)
        return hook(fd, p, n);
#else
    (void)log;
#endif
    return write(fd, p, n);
}

static int64_t limiter_now(bw_log *log)
{
#ifdef BW_TESTING
    int64_t t = atomic_load(&log->now_override);
    if (t >= 0)
        return t;
#else
    (void)log;
#endif
    return bw__mono_now();
}

/*
 * Whether a rejection of (breaker, key) may be written now; when it may,
 * *suppressed is the count of those its slot suppressed since its last line.
 */
static int admit_rejection(bw_log *log, const bw_event *e, uint64_t *suppressed)
{
    *suppressed = 0;
    uint32_t max = log->o.rejections_per_second;
    if (max == 0)
        return 1;
    uint64_t h = bw__mix64((uint64_t)(uintptr_t)e->breaker);
    if (e->key)
        h ^= bw__hash(h, e->key, strlen(e->key));
    slot *s = &log->slots[bw__mix64(h) & (SLOTS - 1)];
    int ok;
    pthread_mutex_lock(&log->mu);
    int64_t now = limiter_now(log);
    if (!s->used || now < s->start || now - s->start >= BW_NS_PER_S) {
        s->used = 1;
        s->start = now;
        s->written = 0;
    }
    if (s->written < max) {
        s->written++;
        *suppressed = s->suppressed;
        s->suppressed = 0;
        ok = 1;
    } else {
        s->suppressed++;
        ok = 0;
    }
    pthread_mutex_unlock(&log->mu);
    return ok;
}

/* ---- building a line ---- */

typedef struct line {
    char buf[LINE_BYTES];
    size_t len;
    size_t cap; /* LINE_BYTES - LINE_TAIL */
    int json;
    int fields;
} line;

/* The length of the valid UTF-8 sequence at p (n bytes left), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

/*
 * The escaped form of the character at s[*i] (n bytes in all) into unit[]
 * (at least 7 bytes); returns its length and advances *i.
 */
static size_t escape_unit(const unsigned char *s, size_t n, size_t *i, char *unit)
{
    unsigned c = s[*i];
    size_t k = utf8_len(s + *i, n - *i);
    if (k == 0) {
        (*i)++;
        memcpy(unit, "\\ufffd", 6);
        return 6;
    }
    if (k > 1) {
        memcpy(unit, s + *i, k);
        *i += k;
        return k;
    }
    (*i)++;
    switch (c) {
    case '"':
    case '\\':
        unit[0] = '\\';
        unit[1] = (char)c;
        return 2;
    case '\n':
        memcpy(unit, "\\n", 2);
        return 2;
    case '\r':
        memcpy(unit, "\\r", 2);
        return 2;
    case '\t':
        memcpy(unit, "\\t", 2);
        return 2;
    default:
        break;
    }
    if (c < 0x20 || c == 0x7f) {
        static const char hex[] = "0123456789abcdef";
        memcpy(unit, "\\u00", 4);
        unit[4] = hex[c >> 4];
        unit[5] = hex[c & 0xf];
        return 6;
    }
    unit[0] = (char)c;
    return 1;
}

/* Whether a logfmt value must be quoted. */
static int needs_quotes(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 1;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f)
            return 1;
        size_t k = utf8_len(s + i, n - i);
        if (k == 0)
            return 1;
        i += k;
    }
    return 0;
}

static int put(line *l, const char *s, size_t n)
{
    if (n > l->cap - l->len)
        return 0;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    return 1;
}

/* The separator and `key=` (logfmt) or `"key":` (JSON) of a field; 0 when it does not fit. */
static int put_key(line *l, const char *key)
{
    if (l->fields > 0 && !put(l, l->json ? "," : " ", 1))
        return 0;
    size_t k = strlen(key);
    if (l->json)
        return put(l, "\"", 1) && put(l, key, k) && put(l, "\":", 2);
    return put(l, key, k) && put(l, "=", 1);
}

/* A field whose value is written as it is (a number, a boolean, a bare word); all or nothing. */
static void field_raw(line *l, const char *key, const char *value)
{
    size_t mark = l->len;
    if (put_key(l, key) && put(l, value, strlen(value)))
        l->fields++;
    else
        l->len = mark;
}

static void field_fmt(line *l, const char *key, const char *fmt, ...) BW_PRINTF(3, 4);
static void field_fmt(line *l, const char *key, const char *fmt, ...)
{
    char v[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof v)
        field_raw(l, key, v);
}

static void field_str(line *l, const char *key, const char *value, size_t max);

/* A word of the library's own (a level, an event, a state...): bare in logfmt, a string in JSON. */
static void field_word(line *l, const char *key, const char *word)
{
    field_str(l, key, word, LINE_BYTES);
}

static void field_bool(line *l, const char *key, int v)
{
    field_raw(l, key, v ? "true" : "false");
}

static void field_double(line *l, const char *key, const char *fmt, double v)
{
    if (!isfinite(v)) {
        field_raw(l, key, l->json ? "null" : "nan");
        return;
    }
    char s[64];
    int n = snprintf(s, sizeof s, fmt, v);
    if (n > 0 && (size_t)n < sizeof s)
        field_raw(l, key, s);
}

/*
 * A string field, escaped, its value (quotes included) at most `max` bytes
 * (and what is left of the line); cut with CUT when longer. Written whole or
 * not at all when even the key and a cut value do not fit.
 */
static void field_str(line *l, const char *key, const char *value, size_t max)
{
    const unsigned char *s = (const unsigned char *)(value ? value : "");
    size_t n = strlen((const char *)s);
    size_t mark = l->len;
    if (!put_key(l, key)) {
        l->len = mark;
        return;
    }
    int quoted = l->json || needs_quotes(s, n);
    size_t room = l->cap - l->len;
    if (room > max)
        room = max;
    size_t closing = quoted ? 1 : 0;
    if (room < 2 * closing + CUT_LEN) {
        l->len = mark;
        return;
    }
    /* The escaped size, to know whether it must be cut. */
    char unit[8];
    size_t need = 2 * closing;
    for (size_t i = 0; i < n && need <= room;)
        need += escape_unit(s, n, &i, unit);
    int cut = need > room;
    size_t limit = l->len + room - closing - (cut ? CUT_LEN : 0);
    if (quoted)
        l->buf[l->len++] = '"';
    for (size_t i = 0; i < n;) {
        size_t k = escape_unit(s, n, &i, unit);
        if (l->len + k > limit)
            break;
        memcpy(l->buf + l->len, unit, k);
        l->len += k;
    }
    if (cut) {
        memcpy(l->buf + l->len, CUT, CUT_LEN);
        l->len += CUT_LEN;
    }
    if (quoted)
        l->buf[l->len++] = '"';
    l->fields++;
}

/* ---- the fields of an event ---- */

static const char *level_name(bw_log_level level)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    return (unsigned)level < 4 ? names[level] : "info";
}

static const char *event_name(bw_event_type type)
{
    static const char *const names[N_TYPES] = {
        "state_change",      "call",     "rejected",       "reset",           "retry",
        "bulkhead_rejected", "fallback", "store_degraded", "store_recovered", "store_write_dropped",
        "store_corrupt",     "shed"};
    return (unsigned)type < N_TYPES ? names[type] : "unknown";
}

static const char *fallback_name(int reason)
{
    switch ((unsigned)reason) {
    case BW_FALLBACK_ON_REJECTED:
        return "rejected";
    case BW_FALLBACK_ON_TIMEOUT:
        return "timeout";
    case BW_FALLBACK_ON_FULL:
        return "full";
    case BW_FALLBACK_ON_FAILURE:
        return "failure";
    }
    return "unknown";
}

/* A wait in whole milliseconds, rounded up (a wait of 0.2 ms is not "0 ms"). */
static long long ceil_ms(int64_t ns)
{
    return (long long)(ns / BW_NS_PER_MS + (ns % BW_NS_PER_MS > 0));
}

/* ts: the wall clock, RFC 3339 in UTC with milliseconds. */
static void field_ts(line *l)
{
    struct timespec ts;
    struct tm tm;
    char v[96];
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || !gmtime_r(&ts.tv_sec, &tm))
        return;
    int n = snprintf(v, sizeof v, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ts.tv_nsec / 1000000));
    if (n > 0 && (size_t)n < sizeof v)
        field_str(l, "ts", v, sizeof v + 2);
}

/* Whether a state change of this reason carries rate and total, or count. */
static int uses_rate(const bw_event *e)
{
    switch (e->reason) {
    case BW_REASON_FAILURE_RATE:
    case BW_REASON_SLOW_RATE:
    case BW_REASON_PROBES_PASSED:
        return 1;
    case BW_REASON_PROBES_FAILED: /* the rate policy's; the consecutive policy's has a count instead */
        return !(e->count > 0 && e->total == 0);
    default:
        return 0;
    }
}

static int uses_count(const bw_event *e)
{
    switch (e->reason) {
    case BW_REASON_CONSECUTIVE_FAILURES:
    case BW_REASON_PROBES_INCONCLUSIVE:
        return 1;
    case BW_REASON_PROBES_FAILED:
        return !uses_rate(e);
    default:
        return 0;
    }
}

/* The human text of a state change's reason, after the " (" the caller wrote; "" for none. */
static int reason_text(char *m, size_t size, const bw_event *e)
{
    unsigned long long total = (unsigned long long)e->total;
    double rate = isfinite(e->rate) ? e->rate : 0;
    switch (e->reason) {
    case BW_REASON_NONE:
        return snprintf(m, size, "%s", "");
    case BW_REASON_INITIAL:
        return snprintf(m, size, " (initial state)");
    case BW_REASON_FAILURE_RATE:
        return snprintf(m, size, " (failure rate %.2f of %llu calls)", rate, total);
    case BW_REASON_SLOW_RATE:
        return snprintf(m, size, " (slow-call rate %.2f of %llu calls)", rate, total);
    case BW_REASON_CONSECUTIVE_FAILURES:
        return snprintf(m, size, " (%u consecutive failures)", (unsigned)e->count);
    case BW_REASON_WAIT_ENDED:
        return snprintf(m, size, " (open wait ended)");
    case BW_REASON_PROBES_PASSED:
        return snprintf(m, size, " (probes passed: failure rate %.2f of %llu probes)", rate, total);
    case BW_REASON_PROBES_FAILED:
        if (uses_rate(e))
            return snprintf(m, size, " (probes failed: rate %.2f of %llu probes)", rate, total);
        return snprintf(m, size, " (probes failed: %u consecutive failures)", (unsigned)e->count);
    case BW_REASON_PROBES_INCONCLUSIVE:
        return snprintf(m, size, " (%u probes inconclusive)", (unsigned)e->count);
    case BW_REASON_HALF_OPEN_TIMEOUT:
        return snprintf(m, size, " (half-open round timed out)");
    case BW_REASON_SHARED:
        return snprintf(m, size, " (shared state from the store)");
    case BW_REASON_OPERATOR:
        return snprintf(m, size, " (operator)");
    case BW_REASON_RETRY_AFTER:
        return snprintf(m, size, " (the dependency asked for a wait: Retry-After)");
    case BW_REASON_STORE_DOWN:
        return snprintf(m, size, " (the store failed: this process's own circuit until it answers)");
    }
    return snprintf(m, size, " (reason %d)", (int)e->reason);
}

/* Append to the human text m (size bytes, *n used), truncating safely. */
static void msg_add(char *m, size_t size, size_t *n, const char *fmt, ...) BW_PRINTF(4, 5);
static void msg_add(char *m, size_t size, size_t *n, const char *fmt, ...)
{
    if (*n >= size - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(m + *n, size - *n, fmt, ap);
    va_end(ap);
    if (k > 0)
        *n = (size_t)k < size - *n ? *n + (size_t)k : size - 1;
}

/* The event's own fields, and its human text into m. */
static void event_fields(line *l, const bw_event *e, uint64_t suppressed, uint64_t dropped, char *m, size_t size)
{
    size_t n = 0;
    const char *name = e->name ? e->name : "";
    int pipeline = !e->breaker && !e->key &&
                   (e->type == BW_EVENT_RETRY || e->type == BW_EVENT_BULKHEAD_REJECTED ||
                    e->type == BW_EVENT_FALLBACK || e->type == BW_EVENT_SHED);
    msg_add(m, size, &n, "%s %s", pipeline ? "pipeline" : "circuit", name);
    if (e->key)
        msg_add(m, size, &n, " key %s", e->key);
    msg_add(m, size, &n, ": ");
    switch (e->type) {
    case BW_EVENT_STATE_CHANGE: {
        field_word(l, "from", bw_state_name(e->from));
        field_word(l, "to", bw_state_name(e->to));
        field_word(l, "reason", bw_reason_name(e->reason));
        if (uses_rate(e)) {
            field_double(l, "rate", "%.6g", e->rate);
            field_fmt(l, "total", "%llu", (unsigned long long)e->total);
        }
        if (uses_count(e))
            field_fmt(l, "count", "%u", (unsigned)e->count);
        char why[128];
        reason_text(why, sizeof why, e);
        msg_add(m, size, &n, "%s -> %s%s", bw_state_name(e->from), bw_state_name(e->to), why);
        break;
    }
    case BW_EVENT_CALL:
        field_word(l, "outcome", bw_outcome_name(e->outcome));
        field_bool(l, "slow", e->slow);
        field_bool(l, "stale", e->stale);
        field_fmt(l, "duration_ms", "%.3f", (double)e->duration_ns / (double)BW_NS_PER_MS);
        if (e->rc != 0)
            field_fmt(l, "rc", "%d", e->rc);
        msg_add(m, size, &n, "call %s in %.3f ms", bw_outcome_name(e->outcome),
                (double)e->duration_ns / (double)BW_NS_PER_MS);
        if (e->rc != 0)
            msg_add(m, size, &n, " (rc %d)", e->rc);
        if (e->slow)
            msg_add(m, size, &n, " (slow)");
        if (e->stale)
            msg_add(m, size, &n, " (stale, not counted)");
        break;
    case BW_EVENT_REJECTED:
        field_word(l, "state", bw_state_name(e->to));
        if (e->retry_after_ns >= 0)
            field_fmt(l, "retry_after_ms", "%lld", ceil_ms(e->retry_after_ns));
        msg_add(m, size, &n, "call rejected (%s", bw_state_name(e->to));
        if (e->retry_after_ns >= 0)
            msg_add(m, size, &n, ", retry after %lld ms", ceil_ms(e->retry_after_ns));
        msg_add(m, size, &n, ")");
        if (suppressed > 0)
            msg_add(m, size, &n, "; %llu more suppressed", (unsigned long long)suppressed);
        break;
    case BW_EVENT_RESET:
        msg_add(m, size, &n, "reset");
        break;
    case BW_EVENT_RETRY:
        field_fmt(l, "attempt", "%d", e->attempt);
        field_fmt(l, "delay_ms", "%lld", ceil_ms(e->delay_ns > 0 ? e->delay_ns : 0));
        field_str(l, "status", bw_strerror(e->status), LINE_BYTES);
        if (e->status == BW_OK)
            field_fmt(l, "rc", "%d", e->rc);
        msg_add(m, size, &n, "attempt %d failed (", e->attempt);
        if (e->status == BW_OK)
            msg_add(m, size, &n, "rc %d", e->rc);
        else
            msg_add(m, size, &n, "%s", bw_strerror(e->status));
        msg_add(m, size, &n, "), retrying in %lld ms", ceil_ms(e->delay_ns > 0 ? e->delay_ns : 0));
        break;
    case BW_EVENT_BULKHEAD_REJECTED:
        field_str(l, "status", bw_strerror(e->status), LINE_BYTES);
        msg_add(m, size, &n, "bulkhead full, call not made");
        break;
    case BW_EVENT_FALLBACK:
        field_word(l, "fallback_reason", fallback_name(e->fallback_reason));
        field_str(l, "status", bw_strerror(e->status), LINE_BYTES);
        if (e->status == BW_OK)
            field_fmt(l, "rc", "%d", e->rc);
        msg_add(m, size, &n, "fallback used (%s)", fallback_name(e->fallback_reason));
        break;
    case BW_EVENT_STORE_DEGRADED:
        field_str(l, "status", bw_strerror(e->status), LINE_BYTES);
        msg_add(m, size, &n, "store degraded (%s), running on local state", bw_strerror(e->status));
        break;
    case BW_EVENT_STORE_RECOVERED:
        msg_add(m, size, &n, "store recovered");
        break;
    case BW_EVENT_STORE_WRITE_DROPPED:
        if (e->status == BW_ECONFLICT) {
            field_str(l, "status", bw_strerror(e->status), LINE_BYTES);
            msg_add(m, size, &n, "store write dropped (lost to other writers)");
        } else {
            msg_add(m, size, &n, "store write dropped (queue full)");
        }
        break;
    case BW_EVENT_STORE_CORRUPT:
        msg_add(m, size, &n, "stored entry malformed, replaced by a fresh circuit");
        break;
    case BW_EVENT_SHED:
        field_str(l, "status", bw_strerror(e->status), LINE_BYTES);
        msg_add(m, size, &n, "call shed (%s)", bw_strerror(e->status));
        break;
    default:
        field_fmt(l, "type", "%d", (int)e->type);
        msg_add(m, size, &n, "event %d", (int)e->type);
        break;
    }
    if (suppressed > 0)
        field_fmt(l, "suppressed", "%llu", (unsigned long long)suppressed);
    if (dropped > 0)
        field_fmt(l, "dropped", "%llu", (unsigned long long)dropped);
    if (e->message && e->message[0] &&
        (e->type == BW_EVENT_CALL || e->type == BW_EVENT_STORE_DEGRADED || e->type == BW_EVENT_STORE_CORRUPT ||
         (unsigned)e->type >= N_TYPES))
        field_str(l, "message", e->message, MESSAGE_BYTES);
}

/* ---- delivery ---- */

/* One write(2), retried after EINTR. */
static ssize_t write_once(bw_log *log, int fd, const char *p, size_t n)
{
    ssize_t w;
    do
        w = fd_write(log, fd, p, n);
    while (w < 0 && errno == EINTR);
    return w;
}

/*
 * The line p (n bytes, its newline included) to fd; 0 when it was not written
 * whole (dropped: the caller counts it). Bounded: every write(2) but an
 * EINTR's moves the line on, and a write that moves nothing ends it.
 */
static int write_fd(bw_log *log, int fd, const char *p, size_t n)
{
    if (atomic_load_explicit(&log->torn, memory_order_relaxed) && atomic_exchange(&log->torn, 0)) {
        /* The last line stopped short: end it, so that this one is a line of its own. */
        if (write_once(log, fd, "\n", 1) != 1) {
            atomic_store(&log->torn, 1);
            return 0;
        }
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = write_once(log, fd, p + done, n - done);
        if (w <= 0) {
            /* EAGAIN (a non-blocking fd that is full) or an error: the line is given up, not waited for */
            if (done > 0)
                atomic_store(&log->torn, 1);
            return 0;
        }
        done += (size_t)w;
    }
    return 1;
}

/* The line to the log's destination; 0 when an fd destination dropped it. */
static int deliver(bw_log *log, bw_log_level level, line *l)
{
    /* The tail kept free: the newline (FILE, fd) and the NUL. */
    l->buf[l->len] = '\n';
    l->buf[l->len + 1] = '\0';
    if (log->o.sink) {
        l->buf[l->len] = '\0';
        log->o.sink(level, l->buf, l->len, log->o.sink_user);
    } else if (log->o.file) {
        flockfile(log->o.file);
        fwrite(l->buf, 1, l->len + 1, log->o.file);
        fflush(log->o.file);
        funlockfile(log->o.file);
    } else if (log->o.fd >= 0) {
        return write_fd(log, log->o.fd, l->buf, l->len + 1);
    } else if (log->o.syslog) {
        static const int prio[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR};
        l->buf[l->len] = '\0';
        syslog(prio[level], "%s", l->buf);
    }
    return 1;
}

static void on_event(const bw_event *e, void *user)
{
    bw_log *log = user;
    if (!e || !log)
        return;
    bw_log_level level = level_of(e->type, e->to, 0);
    if (level < log->o.min_level)
        return;
    uint64_t suppressed = 0;
    if (e->type == BW_EVENT_REJECTED && !admit_rejection(log, e, &suppressed))
        return;
    int saved_errno = errno; /* the caller's errno survives its listener */
    line l;
    l.len = 0;
    l.cap = LINE_BYTES - LINE_TAIL;
    l.json = log->o.format == BW_LOG_JSON;
    l.fields = 0;
    if (l.json)
        put(&l, "{", 1);
    field_ts(&l);
    field_word(&l, "level", level_name(level));
    field_word(&l, "event", event_name(e->type));
    field_str(&l, "name", e->name, LINE_BYTES);
    if (e->key)
        field_str(&l, "key", e->key, LINE_BYTES);
    /* fd: the lines dropped since the last one written, reported on this one (given back if it is dropped too) */
    uint64_t dropped = 0;
    if (log->o.fd >= 0 && atomic_load_explicit(&log->dropped, memory_order_relaxed))
        dropped = atomic_exchange(&log->dropped, 0);
    char m[MSG_BYTES];
    m[0] = '\0';
    event_fields(&l, e, suppressed, dropped, m, sizeof m);
    field_str(&l, "msg", m, LINE_BYTES);
    if (l.json)
        l.buf[l.len++] = '}'; /* from the tail */
    if (!deliver(log, level, &l))
        atomic_fetch_add(&log->dropped, dropped + 1);
    errno = saved_errno;
}

bw_listener bw_log_listener(bw_log *log)
{
    bw_listener l;
    memset(&l, 0, sizeof l);
    if (!log)
        return l; /* mask 0 and fn NULL: adding it fails with BW_EINVAL */
    l.mask = log->mask;
    l.fn = on_event;
    l.user = log;
    l.release = NULL;
    return l;
}
