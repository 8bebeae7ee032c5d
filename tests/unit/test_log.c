/*
 * test_log.c (tests/unit/) — the logging listener (observe.h): every
 * destination (sink, fd, FILE *, syslog) and both formats for a real breaker
 * tripped on the manual clock; every event type and every reason with
 * synthetic events, checked line for line; JSON lines through a strict parser
 * written here; logfmt escaping and long values cut safely; keyed circuits
 * (name and key as separate fields); levels and the listener's mask; the
 * rejection rate limit with suppressed=N on the log's time hook (no sleep);
 * many threads at once; bad arguments; an fd that is full (the line dropped,
 * dropped=N on the next) or takes a line only in part (its fragment ended by a
 * newline before the next line), the latter on the log's write hook.
 *
 * Also the exposition's number formatter (metrics.c's fmt_double, through its
 * tests'-build hook): it is here because this is the observe layer's test that
 * links breakwater_internal (test_metrics links the shared library, which has
 * no hooks).
 */
#define _DEFAULT_SOURCE /* timegm, LOG_PERROR */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "clockfix.h"

/* The log's rate-limit clock, in the tests' build only (log.c): mono_ns, or the real clock when negative. */
extern void bw__log_set_now(bw_log *log, int64_t mono_ns);
/* The fd destination's write(2), in the tests' build only (log.c): fn, or write(2) again for NULL. */
extern void bw__log_set_write(bw_log *log, ssize_t (*fn)(int, const void *, size_t));
/* metrics.c's number formatter, in the tests' build only. */
extern size_t bw__metrics_fmt_double(char *dst, double v);

#define S BW_NS_PER_S
#define LINE_MAX_LEN 2048 /* log.c's line, newline and NUL included */
#define CAP_LINES 512

/* ---- a sink that keeps what it is given ---- */

typedef struct capture {
    pthread_mutex_t mu;
    int n;
    int overflow;
    int bad; /* a line that was not NUL-terminated at len, held a newline, or was too long */
    bw_log_level levels[CAP_LINES];
    char lines[CAP_LINES][LINE_MAX_LEN];
} capture;

static capture cap;

static void cap_reset(void)
{
    pthread_mutex_lock(&cap.mu);
    cap.n = 0;
    cap.overflow = 0;
    cap.bad = 0;
    pthread_mutex_unlock(&cap.mu);
}

static void sink(bw_log_level level, const char *line, size_t len, void *user)
{
    capture *c = user;
    pthread_mutex_lock(&c->mu);
    if (len >= LINE_MAX_LEN - 1 || line[len] != '\0' || strlen(line) != len || strchr(line, '\n'))
        c->bad++;
    if (c->n < CAP_LINES) {
        c->levels[c->n] = level;
        snprintf(c->lines[c->n], LINE_MAX_LEN, "%s", line);
        c->n++;
    } else {
        c->overflow++;
    }
    pthread_mutex_unlock(&c->mu);
}

/* ---- parsed lines: a strict JSON object parser and a logfmt parser ---- */

#define MAX_FIELDS 32
typedef struct field {
    char key[64];
    char val[LINE_MAX_LEN]; /* strings decoded; numbers and literals as written */
    char kind;              /* 's' string, 'n' number, 'b' true/false, 'z' null; logfmt: 'q' quoted, 'w' bare */
} field;
typedef struct record {
    int n;
    field f[MAX_FIELDS];
} record;

static record rec; /* the last parsed line (tests run on one thread) */

static const char *get(const record *r, const char *key)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->f[i].key, key) == 0)
            return r->f[i].val;
    return NULL;
}

static char kind_of(const record *r, const char *key)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->f[i].key, key) == 0)
            return r->f[i].kind;
    return 0;
}

/* The length of a valid UTF-8 sequence at p, or 0 (RFC 3629: no overlongs, surrogates or > U+10FFFF). */
static size_t t_utf8(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    uint32_t cp;
    size_t n;
    if ((p[0] & 0xe0) == 0xc0)
        n = 2, cp = p[0] & 0x1f;
    else if ((p[0] & 0xf0) == 0xe0)
        n = 3, cp = p[0] & 0x0f;
    else if ((p[0] & 0xf8) == 0xf0)
        n = 4, cp = p[0] & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static int hex4(const char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return 0;
        *v = *v << 4 | (uint32_t)d;
    }
    return 1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/*
 * A quoted string at *p (the opening quote), decoded into out (LINE_MAX_LEN).
 * `json`: JSON's escapes (\" \\ \/ \b \f \n \r \t \uXXXX with surrogate pairs);
 * else logfmt's (the same but \/ \b \f). Raw control characters and invalid
 * UTF-8 are errors. Returns 1 and moves *p past the closing quote, or 0.
 */
static int parse_string(const char **p, char *out, int json)
{
    const char *s = *p;
    size_t o = 0;
    if (*s++ != '"')
        return 0;
    for (;;) {
        unsigned char c = (unsigned char)*s;
        if (c == '"')
            break;
        if (c < 0x20 || (!json && c == 0x7f))
            return 0;
        if (o + 8 >= LINE_MAX_LEN)
            return 0;
        if (c == '\\') {
            char e = s[1];
            s += 2;
            switch (e) {
            case '"':
            case '\\':
                out[o++] = e;
                continue;
            case 'n':
                out[o++] = '\n';
                continue;
            case 'r':
                out[o++] = '\r';
                continue;
            case 't':
                out[o++] = '\t';
                continue;
            case '/':
            case 'b':
            case 'f':
                if (!json)
                    return 0;
                out[o++] = e == '/' ? '/' : e == 'b' ? '\b' : '\f';
                continue;
            case 'u': {
                uint32_t cp;
                if (!hex4(s, &cp))
                    return 0;
                s += 4;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    return 0;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    uint32_t lo;
                    if (s[0] != '\\' || s[1] != 'u' || !hex4(s + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                        return 0;
                    s += 6;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                o += put_utf8(out + o, cp);
                continue;
            }
            default:
                return 0;
            }
        }
        size_t k = t_utf8((const unsigned char *)s);
        if (k == 0)
            return 0;
        memcpy(out + o, s, k);
        o += k;
        s += k;
    }
    out[o] = '\0';
    *p = s + 1;
    return 1;
}

static int parse_number(const char **p, char *out)
{
    const char *s = *p, *b = s;
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return 0;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    memcpy(out, b, (size_t)(s - b));
    out[s - b] = '\0';
    *p = s;
    return 1;
}

static int duplicate(const record *r, const char *key)
{
    for (int i = 0; i < r->n - 1; i++)
        if (strcmp(r->f[i].key, key) == 0)
            return 1;
    return 0;
}

/* A JSON line: exactly one flat object (RFC 8259; no whitespace is needed and none is written), unique keys. */
static int parse_json(const char *line, record *r)
{
    const char *s = line;
    r->n = 0;
    if (*s++ != '{')
        return 0;
    if (*s == '}')
        return s[1] == '\0';
    for (;;) {
        if (r->n == MAX_FIELDS)
            return 0;
        field *f = &r->f[r->n++];
        char key[LINE_MAX_LEN];
        if (!parse_string(&s, key, 1) || strlen(key) >= sizeof f->key)
            return 0;
        strcpy(f->key, key);
        if (duplicate(r, f->key) || *s++ != ':')
            return 0;
        if (*s == '"') {
            f->kind = 's';
            if (!parse_string(&s, f->val, 1))
                return 0;
        } else if (strncmp(s, "true", 4) == 0 || strncmp(s, "null", 4) == 0) {
            f->kind = s[0] == 't' ? 'b' : 'z';
            memcpy(f->val, s, 4);
            f->val[4] = '\0';
            s += 4;
        } else if (strncmp(s, "false", 5) == 0) {
            f->kind = 'b';
            strcpy(f->val, "false");
            s += 5;
        } else {
            f->kind = 'n';
            if (!parse_number(&s, f->val))
                return 0;
        }
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == '}')
            return s[1] == '\0';
        return 0;
    }
}

/* A logfmt line: key=value pairs, one space apart; a value bare (no space, '"', '=', '\\' or control) or quoted. */
static int parse_logfmt(const char *line, record *r)
{
    const char *s = line;
    r->n = 0;
    while (*s) {
        if (r->n == MAX_FIELDS)
            return 0;
        field *f = &r->f[r->n++];
        size_t k = 0;
        while (*s && *s != '=' && *s != ' ' && *s != '"' && k + 1 < sizeof f->key)
            f->key[k++] = *s++;
        f->key[k] = '\0';
        if (k == 0 || *s++ != '=' || duplicate(r, f->key))
            return 0;
        if (*s == '"') {
            f->kind = 'q';
            if (!parse_string(&s, f->val, 0))
                return 0;
        } else {
            f->kind = 'w';
            size_t v = 0;
            while (*s && *s != ' ') {
                unsigned char c = (unsigned char)*s;
                if (c < 0x20 || c == 0x7f || c == '"' || c == '=' || c == '\\')
                    return 0;
                size_t u = t_utf8((const unsigned char *)s);
                if (u == 0)
                    return 0;
                memcpy(f->val + v, s, u);
                v += u;
                s += u;
            }
            f->val[v] = '\0';
            if (v == 0)
                return 0;
        }
        if (*s == ' ') {
            s++;
            if (*s == '\0')
                return 0;
        } else if (*s) {
            return 0;
        }
    }
    return r->n > 0;
}

static int parse(const char *line, int json, record *r)
{
    return json ? parse_json(line, r) : parse_logfmt(line, r);
}

/* Whether ts is RFC 3339 UTC with milliseconds, within a minute of now. */
static int good_ts(const char *ts)
{
    if (strlen(ts) != 24)
        return 0;
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (int i = 0; i < 24; i++)
        if (shape[i] == 'd' ? !(ts[i] >= '0' && ts[i] <= '9') : ts[i] != shape[i])
            return 0;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
               &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    time_t now = time(NULL);
    return t <= now + 60 && t >= now - 60;
}

/* What follows the ts field of a line (checked: first, well formed), or "" when it is not there. */
static const char *after_ts(const char *line, int json)
{
    const char *pre = json ? "{\"ts\":\"" : "ts=";
    size_t n = strlen(pre);
    char ts[32];
    if (strncmp(line, pre, n) != 0 || strlen(line) < n + 25)
        return "";
    memcpy(ts, line + n, 24);
    ts[24] = '\0';
    if (!good_ts(ts))
        return "";
    const char *rest = line + n + 24;
    if (json)
        return strncmp(rest, "\",", 2) == 0 ? rest + 2 : "";
    return rest[0] == ' ' ? rest + 1 : "";
}

/* ---- helpers ---- */

static bw_log *make_log(bw_log_format format, bw_log_level min, uint32_t rps)
{
    bw_log_options o;
    bw_log_options_init(&o);
    o.format = format;
    o.min_level = min;
    o.sink = sink;
    o.sink_user = &cap;
    o.rejections_per_second = rps;
    bw_log *log = NULL;
    bw_error err;
    CHECK_OK(bw_log_new(&o, &log, &err));
    return log;
}

/* One event through the log's listener, as a breaker would deliver it. */
static void deliver(bw_log *log, const bw_event *e)
{
    bw_listener l = bw_log_listener(log);
    if (l.mask & BW_EVENT_MASK(e->type))
        l.fn(e, l.user);
}

static bw_event ev(bw_event_type type)
{
    bw_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    e.name = "payments";
    e.retry_after_ns = BW_NO_TIME;
    return e;
}

static bw_breaker *make_breaker(bw_log *log, const char *name)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 4, &e));
    CHECK_OK(bw_config_set_min_calls(c, 4, &e));
    CHECK_OK(bw_config_set_failure_rate(c, 0.5, &e));
    CHECK_OK(bw_config_set_wait(c, 60 * S, &e));
    bw_listener l = bw_log_listener(log);
    CHECK_OK(bw_config_set_listener(c, l.mask, l.fn, l.user));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new(name, c, &b, &e));
    bw_config_free(c);
    return b;
}

/* The checks every state-change line of the real breaker must pass (the reason may not be wired in yet). */
static void check_trip(const char *line, int json)
{
    CHECK(parse(line, json, &rec));
    CHECK(good_ts(get(&rec, "ts") ? get(&rec, "ts") : ""));
    CHECK_STR(get(&rec, "level"), "error");
    CHECK_STR(get(&rec, "event"), "state_change");
    CHECK_STR(get(&rec, "name"), "payments");
    CHECK(get(&rec, "key") == NULL);
    CHECK_STR(get(&rec, "from"), "closed");
    CHECK_STR(get(&rec, "to"), "open");
    const char *reason = get(&rec, "reason");
    CHECK(reason != NULL);
    int known = 0;
    for (int r = 0; r <= BW_REASON_OPERATOR; r++)
        known |= reason && strcmp(reason, bw_reason_name((bw_reason)r)) == 0;
    CHECK(known);
    if (reason && strcmp(reason, "failure_rate") == 0) {
        CHECK_STR(get(&rec, "rate"), "1");
        CHECK_STR(get(&rec, "total"), "4");
    }
    const char *msg = get(&rec, "msg");
    CHECK(msg && strncmp(msg, "circuit payments: closed -> open", 32) == 0);
}

/* ---- tests ---- */

static void test_options_and_arguments(void)
{
    bw_log_options o;
    bw_log_options_init(&o);
    CHECK_INT(o.format, BW_LOG_LOGFMT);
    CHECK_INT(o.min_level, BW_LOG_INFO);
    CHECK(o.file == NULL && o.sink == NULL && o.sink_user == NULL);
    CHECK_INT(o.fd, -1);
    CHECK_INT(o.syslog, 0);
    CHECK_INT(o.rejections_per_second, 1);
    bw_log_options_init(NULL);

    bw_log *log = (bw_log *)&o; /* must be reset to NULL on error */
    bw_error err;
    memset(&err, 0, sizeof err);
    CHECK_RC(bw_log_new(NULL, &log, &err), BW_EINVAL);
    CHECK_STR(err.field, "o");
    CHECK(log == NULL);
    o.sink = sink;
    o.sink_user = &cap;
    CHECK_RC(bw_log_new(&o, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "out");
    CHECK_RC(bw_log_new(&o, NULL, NULL), BW_EINVAL);

    bw_log_options_init(&o); /* no destination */
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    CHECK_INT(err.code, BW_EINVAL);
    CHECK_STR(err.field, "destination");
    CHECK(strstr(err.message, "file") && strstr(err.message, "fd") && strstr(err.message, "sink"));
    CHECK(log == NULL);

    o.sink = sink;
    o.fd = 2; /* two */
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    CHECK_STR(err.field, "sink");
    CHECK(strstr(err.message, "fd") && strstr(err.message, "sink"));
    o.sink = NULL;
    o.file = stderr;
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    CHECK_STR(err.field, "fd");
    o.fd = -1;
    o.syslog = 1;
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    CHECK_STR(err.field, "syslog");
    o.file = NULL;
    o.syslog = 2;
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    CHECK_STR(err.field, "syslog");
    o.syslog = 0;
    o.sink = sink;
    o.sink_user = &cap;
    o.format = (bw_log_format)2;
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    CHECK_STR(err.field, "format");
    o.format = BW_LOG_JSON;
    o.min_level = (bw_log_level)4;
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    CHECK_STR(err.field, "min_level");
    o.min_level = (bw_log_level)-1;
    CHECK_RC(bw_log_new(&o, &log, &err), BW_EINVAL);
    o.min_level = BW_LOG_DEBUG;
    CHECK_OK(bw_log_new(&o, &log, NULL));
    CHECK(log != NULL);

    /* The listener of NULL can be added nowhere; the listener ignores NULL events. */
    bw_listener none = bw_log_listener(NULL);
    CHECK_INT(none.mask, 0);
    CHECK(none.fn == NULL && none.user == NULL && none.release == NULL);
    bw_listener l = bw_log_listener(log);
    CHECK(l.fn != NULL && l.user == log && l.release == NULL);
    cap_reset();
    l.fn(NULL, l.user);
    bw_event e = ev(BW_EVENT_RESET);
    l.fn(&e, NULL);
    CHECK_INT(cap.n, 0);
    bw_config *c = bw_config_new();
    CHECK_RC(bw_config_set_listener(c, none.mask, l.fn, l.user), BW_EINVAL);
    bw_config_free(c);

    /* The caller's errno survives a delivery. */
    errno = 4321;
    l.fn(&e, l.user);
    CHECK_INT(errno, 4321);
    CHECK_INT(cap.n, 1);

    bw_log_free(log);
    bw_log_free(NULL);
}

/* A real breaker tripped on the manual clock, through the sink in both formats. */
static void test_real_breaker_sink(void)
{
    for (int json = 0; json <= 1; json++) {
        cap_reset();
        bw_log *log = make_log(json ? BW_LOG_JSON : BW_LOG_LOGFMT, BW_LOG_INFO, 1);
        bw_breaker *b = make_breaker(log, "payments");
        h_calls(b, 3, BW_FAILURE);
        CHECK_INT(cap.n, 0); /* calls are DEBUG */
        h_calls(b, 1, BW_FAILURE);
        CHECK_STATE(b, BW_STATE_OPEN);
        CHECK_INT(cap.n, 1);
        CHECK_INT(cap.bad, 0);
        CHECK_INT(cap.levels[0], BW_LOG_ERROR);
        check_trip(cap.lines[0], json);
        /* A reset: closed again (warn) and the reset itself (info). */
        CHECK_OK(bw_breaker_reset(b));
        CHECK_INT(cap.n, 3);
        CHECK(parse(cap.lines[1], json, &rec));
        CHECK_STR(get(&rec, "level"), "warn");
        CHECK_STR(get(&rec, "from"), "open");
        CHECK_STR(get(&rec, "to"), "closed");
        CHECK_INT(cap.levels[1], BW_LOG_WARN);
        CHECK(parse(cap.lines[2], json, &rec));
        CHECK_STR(get(&rec, "event"), "reset");
        CHECK_STR(get(&rec, "level"), "info");
        CHECK_STR(get(&rec, "msg"), "circuit payments: reset");
        bw_breaker_free(b);
        bw_log_free(log);
    }
}

/* The fd destination: one write of the line and its newline, here into a pipe. */
static void test_real_breaker_fd(void)
{
    int p[2];
    CHECK(pipe(p) == 0);
    bw_log_options o;
    bw_log_options_init(&o);
    o.fd = p[1];
    bw_log *log = NULL;
    CHECK_OK(bw_log_new(&o, &log, NULL));
    bw_breaker *b = make_breaker(log, "payments");
    h_calls(b, 4, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN);
    close(p[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while ((r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    close(p[0]);
    buf[n] = '\0';
    CHECK(n > 0 && buf[n - 1] == '\n');
    CHECK(strchr(buf, '\n') == buf + n - 1); /* exactly one line */
    buf[n > 0 ? n - 1 : 0] = '\0';
    check_trip(buf, 0);
    bw_breaker_free(b);
    bw_log_free(log);
}

/* The FILE * destination (JSON into a tmpfile). */
static void test_real_breaker_file(void)
{
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    bw_log_options o;
    bw_log_options_init(&o);
    o.file = f;
    o.format = BW_LOG_JSON;
    bw_log *log = NULL;
    CHECK_OK(bw_log_new(&o, &log, NULL));
    bw_breaker *b = make_breaker(log, "payments");
    h_calls(b, 4, BW_FAILURE);
    CHECK_OK(bw_breaker_force_open(b));
    rewind(f);
    char line[4096];
    CHECK(fgets(line, sizeof line, f) != NULL);
    size_t n = strlen(line);
    CHECK(n > 0 && line[n - 1] == '\n');
    line[n - 1] = '\0';
    check_trip(line, 1);
    CHECK(fgets(line, sizeof line, f) != NULL); /* open -> forced_open: warn */
    line[strcspn(line, "\n")] = '\0';
    CHECK(parse_json(line, &rec));
    CHECK_STR(get(&rec, "to"), "forced_open");
    CHECK_STR(get(&rec, "level"), "warn");
    CHECK(fgets(line, sizeof line, f) == NULL);
    bw_breaker_free(b);
    bw_log_free(log);
    fclose(f);
}

/* syslog(3): the line with the level's priority; LOG_PERROR copies it to stderr, here a pipe. */
static void test_syslog(void)
{
    bw_log_options o;
    bw_log_options_init(&o);
    o.syslog = 1;
    o.min_level = BW_LOG_DEBUG;
    bw_log *log = NULL;
    CHECK_OK(bw_log_new(&o, &log, NULL));
#ifdef LOG_PERROR
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(p[1], 2);
    openlog("test_log", LOG_PERROR, LOG_USER);
    bw_event e = ev(BW_EVENT_STORE_RECOVERED);
    deliver(log, &e);
    closelog();
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    char buf[4096];
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    buf[n > 0 ? n : 0] = '\0';
    CHECK(strstr(buf, "level=info event=store_recovered name=payments msg=\"circuit payments: store recovered\"") !=
          NULL);
#endif
    bw_log_free(log);
}

/* Every reason of a state change: the fields it carries and its human text, in both formats. */
static void test_reasons(void)
{
    struct {
        bw_reason reason;
        bw_state from, to;
        double rate;
        uint64_t total;
        uint32_t count;
        const char *logfmt; /* after ts */
        const char *json;   /* after ts */
    } cases[] = {
        {BW_REASON_FAILURE_RATE, BW_STATE_CLOSED, BW_STATE_OPEN, 0.62, 50, 0,
         "level=error event=state_change name=payments from=closed to=open reason=failure_rate rate=0.62 total=50 "
         "msg=\"circuit payments: closed -> open (failure rate 0.62 of 50 calls)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"closed\",\"to\":\"open\","
         "\"reason\":\"failure_rate\",\"rate\":0.62,\"total\":50,"
         "\"msg\":\"circuit payments: closed -> open (failure rate 0.62 of 50 calls)\"}"},
        {BW_REASON_SLOW_RATE, BW_STATE_CLOSED, BW_STATE_OPEN, 0.8, 20, 0,
         "level=error event=state_change name=payments from=closed to=open reason=slow_rate rate=0.8 total=20 "
         "msg=\"circuit payments: closed -> open (slow-call rate 0.80 of 20 calls)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"closed\",\"to\":\"open\","
         "\"reason\":\"slow_rate\",\"rate\":0.8,\"total\":20,"
         "\"msg\":\"circuit payments: closed -> open (slow-call rate 0.80 of 20 calls)\"}"},
        {BW_REASON_CONSECUTIVE_FAILURES, BW_STATE_CLOSED, BW_STATE_OPEN, 0, 0, 5,
         "level=error event=state_change name=payments from=closed to=open reason=consecutive_failures count=5 "
         "msg=\"circuit payments: closed -> open (5 consecutive failures)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"closed\",\"to\":\"open\","
         "\"reason\":\"consecutive_failures\",\"count\":5,"
         "\"msg\":\"circuit payments: closed -> open (5 consecutive failures)\"}"},
        {BW_REASON_WAIT_ENDED, BW_STATE_OPEN, BW_STATE_HALF_OPEN, 0, 0, 0,
         "level=warn event=state_change name=payments from=open to=half_open reason=wait_ended "
         "msg=\"circuit payments: open -> half_open (open wait ended)\"",
         "\"level\":\"warn\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"open\",\"to\":\"half_open\","
         "\"reason\":\"wait_ended\",\"msg\":\"circuit payments: open -> half_open (open wait ended)\"}"},
        {BW_REASON_PROBES_PASSED, BW_STATE_HALF_OPEN, BW_STATE_CLOSED, 0.1, 10, 0,
         "level=warn event=state_change name=payments from=half_open to=closed reason=probes_passed rate=0.1 total=10 "
         "msg=\"circuit payments: half_open -> closed (probes passed: failure rate 0.10 of 10 probes)\"",
         "\"level\":\"warn\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"half_open\",\"to\":\"closed\","
         "\"reason\":\"probes_passed\",\"rate\":0.1,\"total\":10,"
         "\"msg\":\"circuit payments: half_open -> closed (probes passed: failure rate 0.10 of 10 probes)\"}"},
        {BW_REASON_PROBES_FAILED, BW_STATE_HALF_OPEN, BW_STATE_OPEN, 0.6, 10, 0,
         "level=error event=state_change name=payments from=half_open to=open reason=probes_failed rate=0.6 total=10 "
         "msg=\"circuit payments: half_open -> open (probes failed: rate 0.60 of 10 probes)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"half_open\",\"to\":\"open\","
         "\"reason\":\"probes_failed\",\"rate\":0.6,\"total\":10,"
         "\"msg\":\"circuit payments: half_open -> open (probes failed: rate 0.60 of 10 probes)\"}"},
        {BW_REASON_PROBES_FAILED, BW_STATE_HALF_OPEN, BW_STATE_OPEN, 0, 0, 2,
         "level=error event=state_change name=payments from=half_open to=open reason=probes_failed count=2 "
         "msg=\"circuit payments: half_open -> open (probes failed: 2 consecutive failures)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"half_open\",\"to\":\"open\","
         "\"reason\":\"probes_failed\",\"count\":2,"
         "\"msg\":\"circuit payments: half_open -> open (probes failed: 2 consecutive failures)\"}"},
        {BW_REASON_PROBES_INCONCLUSIVE, BW_STATE_HALF_OPEN, BW_STATE_OPEN, 0, 0, 3,
         "level=error event=state_change name=payments from=half_open to=open reason=probes_inconclusive count=3 "
         "msg=\"circuit payments: half_open -> open (3 probes inconclusive)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"half_open\",\"to\":\"open\","
         "\"reason\":\"probes_inconclusive\",\"count\":3,"
         "\"msg\":\"circuit payments: half_open -> open (3 probes inconclusive)\"}"},
        {BW_REASON_HALF_OPEN_TIMEOUT, BW_STATE_HALF_OPEN, BW_STATE_OPEN, 0, 0, 0,
         "level=error event=state_change name=payments from=half_open to=open reason=half_open_timeout "
         "msg=\"circuit payments: half_open -> open (half-open round timed out)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"half_open\",\"to\":\"open\","
         "\"reason\":\"half_open_timeout\",\"msg\":\"circuit payments: half_open -> open (half-open round timed "
         "out)\"}"},
        {BW_REASON_SHARED, BW_STATE_CLOSED, BW_STATE_OPEN, 0, 0, 0,
         "level=error event=state_change name=payments from=closed to=open reason=shared "
         "msg=\"circuit payments: closed -> open (shared state from the store)\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"closed\",\"to\":\"open\","
         "\"reason\":\"shared\",\"msg\":\"circuit payments: closed -> open (shared state from the store)\"}"},
        {BW_REASON_STORE_DOWN, BW_STATE_OPEN, BW_STATE_CLOSED, 0, 0, 0,
         "level=warn event=state_change name=payments from=open to=closed reason=store_down "
         "msg=\"circuit payments: open -> closed (the store failed: this process's own circuit until it answers)\"",
         "\"level\":\"warn\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"open\",\"to\":\"closed\","
         "\"reason\":\"store_down\",\"msg\":\"circuit payments: open -> closed (the store failed: this process's own "
         "circuit until it answers)\"}"},
        {BW_REASON_OPERATOR, BW_STATE_CLOSED, BW_STATE_FORCED_OPEN, 0, 0, 0,
         "level=warn event=state_change name=payments from=closed to=forced_open reason=operator "
         "msg=\"circuit payments: closed -> forced_open (operator)\"",
         "\"level\":\"warn\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"closed\",\"to\":\"forced_"
         "open\",\"reason\":\"operator\",\"msg\":\"circuit payments: closed -> forced_open (operator)\"}"},
        {BW_REASON_NONE, BW_STATE_CLOSED, BW_STATE_OPEN, 0.5, 9, 9,
         "level=error event=state_change name=payments from=closed to=open reason=none "
         "msg=\"circuit payments: closed -> open\"",
         "\"level\":\"error\",\"event\":\"state_change\",\"name\":\"payments\",\"from\":\"closed\",\"to\":\"open\","
         "\"reason\":\"none\",\"msg\":\"circuit payments: closed -> open\"}"},
    };
    for (int json = 0; json <= 1; json++) {
        bw_log *log = make_log(json ? BW_LOG_JSON : BW_LOG_LOGFMT, BW_LOG_DEBUG, 1);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            cap_reset();
            bw_event e = ev(BW_EVENT_STATE_CHANGE);
            e.from = cases[i].from;
            e.to = cases[i].to;
            e.reason = cases[i].reason;
            e.rate = cases[i].rate;
            e.total = cases[i].total;
            e.count = cases[i].count;
            deliver(log, &e);
            CHECK_INT(cap.n, 1);
            CHECK_STR(after_ts(cap.lines[0], json), json ? cases[i].json : cases[i].logfmt);
            CHECK(parse(cap.lines[0], json, &rec));
            CHECK_INT(cap.levels[0], cases[i].to == BW_STATE_OPEN ? BW_LOG_ERROR : BW_LOG_WARN);
        }
        /* A number JSON can hold: NaN becomes null. */
        cap_reset();
        bw_event e = ev(BW_EVENT_STATE_CHANGE);
        e.to = BW_STATE_OPEN;
        e.reason = BW_REASON_FAILURE_RATE;
        e.rate = NAN;
        deliver(log, &e);
        CHECK(parse(cap.lines[0], json, &rec));
        CHECK_STR(get(&rec, "rate"), json ? "null" : "nan");
        bw_log_free(log);
    }
}

/* Every other event type: exact lines in logfmt, and the same fields through the JSON parser. */
static void test_event_types(void)
{
    struct {
        bw_event e;
        bw_log_level level;
        const char *logfmt;
    } cases[12];
    int n = 0;
    bw_event e = ev(BW_EVENT_CALL);
    e.outcome = BW_FAILURE;
    e.slow = 1;
    e.duration_ns = 12345678;
    e.rc = 503;
    e.message = "upstream said no";
    cases[n].e = e, cases[n].level = BW_LOG_DEBUG;
    cases[n++].logfmt = "level=debug event=call name=payments outcome=failure slow=true stale=false "
                        "duration_ms=12.346 rc=503 message=\"upstream said no\" "
                        "msg=\"circuit payments: call failure in 12.346 ms (rc 503) (slow)\"";
    e = ev(BW_EVENT_CALL);
    e.outcome = BW_SUCCESS;
    e.stale = 1;
    e.duration_ns = 1400;
    cases[n].e = e, cases[n].level = BW_LOG_DEBUG;
    cases[n++].logfmt = "level=debug event=call name=payments outcome=success slow=false stale=true "
                        "duration_ms=0.001 msg=\"circuit payments: call success in 0.001 ms (stale, not counted)\"";
    e = ev(BW_EVENT_REJECTED);
    e.from = e.to = BW_STATE_OPEN;
    e.retry_after_ns = 1500 * BW_NS_PER_MS + 1;
    cases[n].e = e, cases[n].level = BW_LOG_DEBUG;
    cases[n++].logfmt = "level=debug event=rejected name=payments state=open retry_after_ms=1501 "
                        "msg=\"circuit payments: call rejected (open, retry after 1501 ms)\"";
    e = ev(BW_EVENT_REJECTED);
    e.breaker = (bw_breaker *)&cases; /* another breaker: its own rate limit */
    e.from = e.to = BW_STATE_FORCED_OPEN;
    cases[n].e = e, cases[n].level = BW_LOG_DEBUG;
    cases[n++].logfmt = "level=debug event=rejected name=payments state=forced_open "
                        "msg=\"circuit payments: call rejected (forced_open)\"";
    e = ev(BW_EVENT_RESET);
    cases[n].e = e, cases[n].level = BW_LOG_INFO;
    cases[n++].logfmt = "level=info event=reset name=payments msg=\"circuit payments: reset\"";
    e = ev(BW_EVENT_RETRY);
    e.name = "checkout";
    e.attempt = 2;
    e.delay_ns = 100 * BW_NS_PER_MS;
    e.status = BW_ETIMEDOUT;
    cases[n].e = e, cases[n].level = BW_LOG_INFO;
    cases[n++].logfmt = "level=info event=retry name=checkout attempt=2 delay_ms=100 status=\"call timed out\" "
                        "msg=\"pipeline checkout: attempt 2 failed (call timed out), retrying in 100 ms\"";
    e = ev(BW_EVENT_BULKHEAD_REJECTED);
    e.name = "checkout";
    e.status = BW_EFULL;
    cases[n].e = e, cases[n].level = BW_LOG_WARN;
    cases[n++].logfmt = "level=warn event=bulkhead_rejected name=checkout "
                        "status=\"no free slot (bulkhead or time limiter full)\" "
                        "msg=\"pipeline checkout: bulkhead full, call not made\"";
    e = ev(BW_EVENT_FALLBACK);
    e.name = "checkout";
    e.status = BW_OK;
    e.rc = 7;
    e.fallback_reason = (int)BW_FALLBACK_ON_FAILURE;
    cases[n].e = e, cases[n].level = BW_LOG_WARN;
    cases[n++].logfmt = "level=warn event=fallback name=checkout fallback_reason=failure status=success rc=7 "
                        "msg=\"pipeline checkout: fallback used (failure)\"";
    e = ev(BW_EVENT_STORE_DEGRADED);
    e.status = BW_ETIMEDOUT;
    e.message = "connect: connection refused";
    cases[n].e = e, cases[n].level = BW_LOG_WARN;
    cases[n++].logfmt = "level=warn event=store_degraded name=payments status=\"call timed out\" "
                        "message=\"connect: connection refused\" "
                        "msg=\"circuit payments: store degraded (call timed out), running on local state\"";
    e = ev(BW_EVENT_STORE_WRITE_DROPPED);
    cases[n].e = e, cases[n].level = BW_LOG_WARN;
    cases[n++].logfmt = "level=warn event=store_write_dropped name=payments "
                        "msg=\"circuit payments: store write dropped (queue full)\"";
    e = ev(BW_EVENT_STORE_CORRUPT);
    e.message = "bad magic";
    cases[n].e = e, cases[n].level = BW_LOG_WARN;
    cases[n++].logfmt = "level=warn event=store_corrupt name=payments message=\"bad magic\" "
                        "msg=\"circuit payments: stored entry malformed, replaced by a fresh circuit\"";
    e = ev(BW_EVENT_SHED);
    e.name = "checkout";
    e.status = BW_REJECTED;
    cases[n].e = e, cases[n].level = BW_LOG_DEBUG;
    cases[n++].logfmt = "level=debug event=shed name=checkout status=\"call rejected by the circuit breaker\" "
                        "msg=\"pipeline checkout: call shed (call rejected by the circuit breaker)\"";

    bw_log *text = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 0);
    bw_log *json = make_log(BW_LOG_JSON, BW_LOG_DEBUG, 0);
    record lf;
    for (int i = 0; i < n; i++) {
        cap_reset();
        deliver(text, &cases[i].e);
        deliver(json, &cases[i].e);
        CHECK_INT(cap.n, 2);
        CHECK_INT(cap.levels[0], cases[i].level);
        CHECK_INT(cap.levels[1], cases[i].level);
        CHECK_STR(after_ts(cap.lines[0], 0), cases[i].logfmt);
        /* The JSON line holds the same fields with the same values (numbers and booleans as such). */
        CHECK(parse_logfmt(cap.lines[0], &lf));
        CHECK(parse_json(cap.lines[1], &rec));
        CHECK_INT(rec.n, lf.n);
        for (int k = 0; k < lf.n && k < rec.n; k++) {
            CHECK_STR(rec.f[k].key, lf.f[k].key);
            if (k == 0) { /* ts: the two lines may be a millisecond apart */
                CHECK(good_ts(rec.f[k].val) && good_ts(lf.f[k].val));
                continue;
            }
            CHECK_STR(rec.f[k].val, lf.f[k].val);
            int number = strcmp(lf.f[k].key, "attempt") == 0 || strstr(lf.f[k].key, "_ms") != NULL ||
                         strcmp(lf.f[k].key, "rc") == 0;
            int boolean = strcmp(lf.f[k].key, "slow") == 0 || strcmp(lf.f[k].key, "stale") == 0;
            CHECK_INT(rec.f[k].kind, number ? 'n' : boolean ? 'b' : 's');
        }
    }
    /* An event type from a later version: logged, not dropped. */
    cap_reset();
    e = ev((bw_event_type)30);
    bw_listener l = bw_log_listener(json);
    l.fn(&e, l.user);
    CHECK_INT(cap.n, 1);
    CHECK(parse_json(cap.lines[0], &rec));
    CHECK_STR(get(&rec, "event"), "unknown");
    CHECK_STR(get(&rec, "type"), "30");
    bw_log_free(text);
    bw_log_free(json);
}

/* Escaping of every kind of byte a message may hold. */
static void test_escaping(void)
{
    static const char nasty[] = "a b\"c=d\\e\nf\r\tg\x01h\x7fi\xffj\xc3\xa9k\xe2\x82";
    bw_log *text = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 0);
    bw_log *json = make_log(BW_LOG_JSON, BW_LOG_DEBUG, 0);
    bw_event e = ev(BW_EVENT_STORE_CORRUPT);
    e.message = nasty;
    cap_reset();
    deliver(text, &e);
    deliver(json, &e);
    CHECK_INT(cap.bad, 0);
    CHECK(strstr(cap.lines[0],
                 " message=\"a b\\\"c=d\\\\e\\nf\\r\\tg\\u0001h\\u007fi\\ufffdj\xc3\xa9k\\ufffd\\ufffd\" ") != NULL);
    CHECK(strstr(cap.lines[1],
                 ",\"message\":\"a b\\\"c=d\\\\e\\nf\\r\\tg\\u0001h\\u007fi\\ufffdj\xc3\xa9k\\ufffd\\ufffd\",") !=
          NULL);
    /* Both parse back to the message, invalid bytes replaced by U+FFFD. */
    const char *want = "a b\"c=d\\e\nf\r\tg\x01h\x7fi\xef\xbf\xbdj\xc3\xa9k\xef\xbf\xbd\xef\xbf\xbd";
    CHECK(parse_logfmt(cap.lines[0], &rec));
    CHECK_STR(get(&rec, "message"), want);
    CHECK(parse_json(cap.lines[1], &rec));
    CHECK_STR(get(&rec, "message"), want);

    /* logfmt writes a value bare when it can, and quotes it when it must. */
    const struct {
        const char *message, *written;
    } lf[] = {
        {"boom", " message=boom "},
        {"", " msg="}, /* an empty message is left out */
        {"x=1", " message=\"x=1\" "},
        {"say \"hi\"", " message=\"say \\\"hi\\\"\" "},
        {"back\\slash", " message=\"back\\\\slash\" "},
        {"caf\xc3\xa9", " message=caf\xc3\xa9 "},
        {"tab\there", " message=\"tab\\there\" "},
        {"\xc3", " message=\"\\ufffd\" "},
    };
    for (size_t i = 0; i < sizeof lf / sizeof lf[0]; i++) {
        cap_reset();
        e.message = lf[i].message;
        deliver(text, &e);
        deliver(json, &e);
        CHECK(strstr(cap.lines[0], lf[i].written) != NULL);
        if (!lf[i].message[0])
            CHECK(strstr(cap.lines[0], "message=") == NULL);
        CHECK(parse_logfmt(cap.lines[0], &rec));
        CHECK(parse_json(cap.lines[1], &rec));
    }

    /* A name with characters that need escaping (printable ASCII, no space). */
    cap_reset();
    e = ev(BW_EVENT_RESET);
    e.name = "a\"b=c\\d";
    deliver(text, &e);
    deliver(json, &e);
    CHECK(parse_logfmt(cap.lines[0], &rec));
    CHECK_STR(get(&rec, "name"), "a\"b=c\\d");
    CHECK(parse_json(cap.lines[1], &rec));
    CHECK_STR(get(&rec, "name"), "a\"b=c\\d");
    CHECK_STR(get(&rec, "msg"), "circuit a\"b=c\\d: reset");
    bw_log_free(text);
    bw_log_free(json);
}

/* Every byte value alone in a message: what each format makes of it parses back strictly. */
static void test_every_byte(void)
{
    bw_log *text = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 0);
    bw_log *json = make_log(BW_LOG_JSON, BW_LOG_DEBUG, 0);
    for (int c = 1; c < 256; c++) {
        char message[4] = {'x', (char)c, 'y', '\0'};
        char want[8];
        if (c < 0x80)
            snprintf(want, sizeof want, "%s", message);
        else
            snprintf(want, sizeof want, "x\xef\xbf\xbdy"); /* a lone byte >= 0x80 is not UTF-8: U+FFFD */
        bw_event e = ev(BW_EVENT_STORE_CORRUPT);
        e.message = message;
        cap_reset();
        deliver(text, &e);
        deliver(json, &e);
        CHECK_INT(cap.n, 2);
        int ok = parse_logfmt(cap.lines[0], &rec);
        if (!ok)
            H_FAIL("byte 0x%02x: logfmt line does not parse: %s", c, cap.lines[0]);
        else
            CHECK_STR(get(&rec, "message"), want);
        ok = parse_json(cap.lines[1], &rec);
        if (!ok)
            H_FAIL("byte 0x%02x: JSON line does not parse: %s", c, cap.lines[1]);
        else
            CHECK_STR(get(&rec, "message"), want);
        /* Bare in logfmt exactly when nothing in it needs quoting. */
        int bare = c > ' ' && c != '"' && c != '=' && c != '\\' && c != 0x7f && c < 0x80;
        CHECK_INT(kind_of(&rec, "message"), 's');
        parse_logfmt(cap.lines[0], &rec);
        CHECK_INT(kind_of(&rec, "message"), bare ? 'w' : 'q');
    }
    bw_log_free(text);
    bw_log_free(json);
}

/* Long values are cut, never mid-escape or mid-character, and the line stays valid and bounded. */
static void test_long_values(void)
{
    static char huge[8192], name[256], key[256];
    /* "é", quotes and control characters, so a cut can fall inside a sequence or an escape. */
    for (size_t i = 0; i + 1 < sizeof huge;) {
        static const char pat[] = "\xc3\xa9\"\x01z";
        size_t k = sizeof pat - 1;
        if (i + k >= sizeof huge - 1)
            break;
        memcpy(huge + i, pat, k);
        i += k;
    }
    memset(name, '"', 255); /* the worst name: every byte escaped */
    memset(key, '\\', 255);
    for (int json = 0; json <= 1; json++) {
        bw_log *log = make_log(json ? BW_LOG_JSON : BW_LOG_LOGFMT, BW_LOG_DEBUG, 0);
        for (int worst = 0; worst <= 1; worst++) {
            cap_reset();
            bw_event e = ev(BW_EVENT_STORE_DEGRADED);
            e.status = BW_ESYS;
            e.message = huge;
            if (worst) {
                e.name = name;
                e.key = key;
            }
            deliver(log, &e);
            CHECK_INT(cap.n, 1);
            CHECK_INT(cap.bad, 0);
            CHECK(strlen(cap.lines[0]) <= LINE_MAX_LEN - 2);
            CHECK(parse(cap.lines[0], json, &rec));
            const char *m = get(&rec, "message");
            CHECK(m != NULL && strlen(m) > 100);
            CHECK(m && strlen(m) >= 3 && strcmp(m + strlen(m) - 3, "...") == 0);
            /* What was kept is a prefix of the message. */
            CHECK(m && strncmp(m, huge, strlen(m) - 3) == 0);
            CHECK_STR(get(&rec, "status"), "operating system error");
            CHECK(get(&rec, "msg") != NULL);
            if (worst) {
                CHECK_STR(get(&rec, "name"), name);
                CHECK_STR(get(&rec, "key"), key);
            } else {
                CHECK_STR(get(&rec, "msg"), "circuit payments: store degraded (operating system error), running on "
                                            "local state");
            }
        }
        bw_log_free(log);
    }
}

/* A keyed circuit's events: name and key as two fields, never "name:key". */
static void test_keyed(void)
{
    for (int json = 0; json <= 1; json++) {
        cap_reset();
        bw_log *log = make_log(json ? BW_LOG_JSON : BW_LOG_LOGFMT, BW_LOG_DEBUG, 1);
        bw_breaker *b = make_breaker(log, "payments");
        for (int i = 0; i < 4; i++) {
            bw_permit p;
            CHECK_OK(bw_keyed_acquire(b, "tenant-7", &p, NULL));
            CHECK_OK(bw_settle(b, &p, BW_FAILURE));
        }
        bw_permit p;
        bw_rejection why;
        CHECK_RC(bw_keyed_acquire(b, "tenant-7", &p, &why), BW_REJECTED);
        CHECK_INT(cap.n, 6); /* 4 calls, the trip, the rejection */
        CHECK_INT(cap.bad, 0);
        for (int i = 0; i < cap.n; i++) {
            CHECK(parse(cap.lines[i], json, &rec));
            CHECK_STR(get(&rec, "name"), "payments");
            CHECK_STR(get(&rec, "key"), "tenant-7");
            CHECK(strstr(cap.lines[i], "payments:tenant-7") == NULL);
        }
        CHECK(parse(cap.lines[0], json, &rec));
        CHECK_STR(get(&rec, "event"), "call");
        CHECK_STR(get(&rec, "outcome"), "failure");
        CHECK_STR(get(&rec, "msg"), "circuit payments key tenant-7: call failure in 0.000 ms");
        CHECK(parse(cap.lines[4], json, &rec));
        CHECK_STR(get(&rec, "event"), "state_change");
        CHECK_STR(get(&rec, "to"), "open");
        CHECK(parse(cap.lines[5], json, &rec));
        CHECK_STR(get(&rec, "event"), "rejected");
        CHECK_STR(get(&rec, "state"), "open");
        CHECK_STR(get(&rec, "retry_after_ms"), "60000");
        CHECK_STR(get(&rec, "msg"), "circuit payments key tenant-7: call rejected (open, retry after 60000 ms)");
        CHECK_STATE(b, BW_STATE_CLOSED); /* the breaker's own circuit */
        bw_breaker_free(b);
        bw_log_free(log);
    }
}

/* min_level filters lines, and the listener's mask holds only the types that can reach it. */
static void test_levels(void)
{
    const unsigned all = (1u << 12) - 1;
    const unsigned debug_only =
        BW_EVENT_MASK(BW_EVENT_CALL) | BW_EVENT_MASK(BW_EVENT_REJECTED) | BW_EVENT_MASK(BW_EVENT_SHED);
    const unsigned info_only =
        BW_EVENT_MASK(BW_EVENT_RESET) | BW_EVENT_MASK(BW_EVENT_RETRY) | BW_EVENT_MASK(BW_EVENT_STORE_RECOVERED);
    const unsigned want[4] = {all, all & ~debug_only, all & ~debug_only & ~info_only,
                              BW_EVENT_MASK(BW_EVENT_STATE_CHANGE)};
    for (int lv = BW_LOG_DEBUG; lv <= BW_LOG_ERROR; lv++) {
        bw_log *log = make_log(BW_LOG_LOGFMT, (bw_log_level)lv, 0);
        bw_listener l = bw_log_listener(log);
        CHECK_INT(l.mask, want[lv]);
        /* The listener filters too (it may be added with a wider mask). */
        cap_reset();
        for (int t = 0; t < 12; t++) {
            bw_event e = ev((bw_event_type)t);
            e.to = BW_STATE_HALF_OPEN;
            l.fn(&e, l.user);
        }
        bw_event trip = ev(BW_EVENT_STATE_CHANGE);
        trip.to = BW_STATE_OPEN;
        l.fn(&trip, l.user);
        static const int lines[4] = {13, 10, 7, 1};
        CHECK_INT(cap.n, lines[lv]);
        for (int i = 0; i < cap.n; i++)
            CHECK((int)cap.levels[i] >= lv);
        CHECK(parse_logfmt(cap.lines[cap.n - 1], &rec));
        CHECK_STR(get(&rec, "level"), "error");
        bw_log_free(log);
    }
    /* A real breaker at WARN: no call lines, the trip is there. */
    cap_reset();
    bw_log *log = make_log(BW_LOG_JSON, BW_LOG_WARN, 1);
    bw_breaker *b = make_breaker(log, "payments");
    h_calls(b, 4, BW_FAILURE);
    bw_permit p;
    CHECK_RC(bw_acquire(b, &p, NULL), BW_REJECTED);
    CHECK_INT(cap.n, 1);
    CHECK(parse_json(cap.lines[0], &rec));
    CHECK_STR(get(&rec, "event"), "state_change");
    bw_breaker_free(b);
    bw_log_free(log);
}

/* How many captured lines are rejections of `name`, and the sum of their suppressed= values. */
static int rejections(const char *name, uint64_t *suppressed)
{
    int n = 0;
    *suppressed = 0;
    for (int i = 0; i < cap.n; i++) {
        CHECK(parse_logfmt(cap.lines[i], &rec));
        const char *ev_name = get(&rec, "event"), *nm = get(&rec, "name");
        if (!ev_name || strcmp(ev_name, "rejected") != 0 || !nm || strcmp(nm, name) != 0)
            continue;
        n++;
        const char *s = get(&rec, "suppressed");
        if (s)
            *suppressed += strtoull(s, NULL, 10);
    }
    return n;
}

/* A rejection of breaker b (a fake pointer: only its address matters to the log). */
static bw_event rejection(const void *b, const char *name, const char *key)
{
    bw_event e = ev(BW_EVENT_REJECTED);
    e.breaker = (bw_breaker *)(uintptr_t)b;
    e.name = name;
    e.key = key;
    e.from = e.to = BW_STATE_OPEN;
    e.retry_after_ns = 5 * S;
    return e;
}

/* The rejection rate limit, on the log's time hook: per (breaker, key), suppressed=N on the next line. */
static void test_rate_limit(void)
{
    static char fakes[64];
    bw_log *log = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 2);
    int64_t t = 5 * S;
    bw__log_set_now(log, t);
    bw_event a = rejection(&fakes[0], "a", NULL);

    /* A breaker whose slot is not a's: the first fake whose first line gets through while a's budget is spent. */
    cap_reset();
    for (int i = 0; i < 3; i++)
        deliver(log, &a);
    CHECK_INT(cap.n, 2);
    bw_event b = rejection(NULL, "b", NULL);
    int found = 0;
    for (int i = 1; i < 64 && !found; i++) {
        b.breaker = (bw_breaker *)(uintptr_t)&fakes[i];
        int before = cap.n;
        deliver(log, &b);
        found = cap.n > before;
    }
    CHECK(found);
    /* Start over: a new log, the same pointers. */
    bw_log_free(log);
    log = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 2);
    bw__log_set_now(log, t);
    cap_reset();

    for (int i = 0; i < 5; i++)
        deliver(log, &a);
    for (int i = 0; i < 2; i++)
        deliver(log, &b);
    uint64_t sup;
    CHECK_INT(rejections("a", &sup), 2); /* 3 suppressed */
    CHECK_INT(sup, 0);
    CHECK_INT(rejections("b", &sup), 2); /* its own budget */
    CHECK_INT(cap.n, 4);

    /* Within the same second: still suppressed, with no sleep. */
    bw__log_set_now(log, t + S - 1);
    deliver(log, &a);
    CHECK_INT(cap.n, 4);
    /* The next second: a's next line says suppressed=4, the one after says nothing. */
    bw__log_set_now(log, t + S);
    deliver(log, &a);
    deliver(log, &a);
    deliver(log, &a);
    CHECK_INT(cap.n, 6);
    CHECK(parse_logfmt(cap.lines[4], &rec));
    CHECK_STR(get(&rec, "suppressed"), "4");
    CHECK_STR(get(&rec, "msg"), "circuit a: call rejected (open, retry after 5000 ms); 4 more suppressed");
    CHECK(parse_logfmt(cap.lines[5], &rec));
    CHECK(get(&rec, "suppressed") == NULL);
    /* b's slot was untouched. */
    bw__log_set_now(log, t + 3 * S);
    deliver(log, &b);
    CHECK(parse_logfmt(cap.lines[cap.n - 1], &rec));
    CHECK_STR(get(&rec, "name"), "b");
    CHECK(get(&rec, "suppressed") == NULL);
    /* The JSON line carries it as a number. */
    bw_log_free(log);

    log = make_log(BW_LOG_JSON, BW_LOG_DEBUG, 1);
    bw__log_set_now(log, t);
    cap_reset();
    bw_event k1 = rejection(&fakes[0], "a", "k1");
    deliver(log, &k1);
    deliver(log, &k1);
    deliver(log, &k1);
    bw__log_set_now(log, t + 2 * S);
    deliver(log, &k1);
    CHECK_INT(cap.n, 2);
    CHECK(parse_json(cap.lines[1], &rec));
    CHECK_STR(get(&rec, "suppressed"), "2");
    CHECK_INT(kind_of(&rec, "suppressed"), 'n');
    CHECK_STR(get(&rec, "key"), "k1");
    bw_log_free(log);

    /* 0: no limit. */
    log = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 0);
    bw__log_set_now(log, t);
    cap_reset();
    for (int i = 0; i < 100; i++)
        deliver(log, &a);
    CHECK_INT(cap.n, 100);
    bw_log_free(log);

    /* A real breaker: an OPEN breaker's rejections, one line a second (the default). */
    cap_reset();
    log = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 1);
    bw__log_set_now(log, t);
    bw_breaker *br = make_breaker(log, "payments");
    h_calls(br, 4, BW_FAILURE);
    int before = cap.n;
    for (int i = 0; i < 10; i++) {
        bw_permit p;
        CHECK_RC(bw_acquire(br, &p, NULL), BW_REJECTED);
    }
    CHECK_INT(cap.n, before + 1);
    bw__log_set_now(log, t + S);
    bw_permit p;
    CHECK_RC(bw_acquire(br, &p, NULL), BW_REJECTED);
    CHECK_INT(cap.n, before + 2);
    CHECK(parse_logfmt(cap.lines[cap.n - 1], &rec));
    CHECK_STR(get(&rec, "suppressed"), "9");
    CHECK_STR(get(&rec, "state"), "open");
    bw_breaker_free(br);
    bw_log_free(log);
}

/* Many threads at once: every rejection is a line or counted in a later line's suppressed. */
#define THREADS 8
#define PER_THREAD 2000
static bw_log *shared_log;
static char thread_breakers[THREADS];

static void *hammer(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof name, "t%d", id);
    bw_event e = rejection(&thread_breakers[id], name, NULL);
    bw_event change = ev(BW_EVENT_STATE_CHANGE);
    change.to = BW_STATE_OPEN;
    change.reason = BW_REASON_CONSECUTIVE_FAILURES;
    change.count = 3;
    bw_listener l = bw_log_listener(shared_log);
    for (int i = 0; i < PER_THREAD; i++) {
        l.fn(&e, l.user);
        if (i % 500 == 0)
            l.fn(&change, l.user);
    }
    return NULL;
}

static void test_threads(void)
{
    cap_reset();
    shared_log = make_log(BW_LOG_LOGFMT, BW_LOG_DEBUG, 1);
    bw__log_set_now(shared_log, 10 * S);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, hammer, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* One more rejection of each, a second apart: each takes its slot's count. */
    for (int i = 0; i < THREADS; i++) {
        bw__log_set_now(shared_log, (11 + i) * S);
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        bw_event e = rejection(&thread_breakers[i], name, NULL);
        deliver(shared_log, &e);
    }
    CHECK_INT(cap.overflow, 0);
    CHECK_INT(cap.bad, 0);
    uint64_t lines = 0, suppressed = 0;
    for (int i = 0; i < THREADS; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        uint64_t s;
        lines += (uint64_t)rejections(name, &s);
        suppressed += s;
    }
    CHECK_INT(lines + suppressed, THREADS * (PER_THREAD + 1));
    int changes = 0;
    for (int i = 0; i < cap.n; i++) {
        CHECK(parse_logfmt(cap.lines[i], &rec));
        changes += strcmp(get(&rec, "event") ? get(&rec, "event") : "", "state_change") == 0;
    }
    CHECK_INT(changes, THREADS * (PER_THREAD / 500));
    bw_log_free(shared_log);
}

/* ---- an fd that does not take a line ---- */

/* What is in the pipe's read end now (non-blocking), NUL-terminated, into buf (size bytes); its length. */
static size_t drain(int fd, char *buf, size_t size)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == size - 1)
            break;
    }
    buf[n] = '\0';
    return n;
}

/* A non-blocking pipe that is full: the line is dropped at once, and the next line written says dropped=1. */
static void test_fd_full(void)
{
    for (int json = 0; json < 2; json++) {
        int p[2];
        CHECK(pipe(p) == 0);
        CHECK(fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK) == 0);
        CHECK(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK) == 0);
        static char fill[65536];
        memset(fill, 'x', sizeof fill);
        size_t filled = 0;
        for (;;) {
            ssize_t w = write(p[1], fill, sizeof fill);
            if (w <= 0)
                break;
            filled += (size_t)w;
        }
        CHECK(filled > 0);
        bw_log_options o;
        bw_log_options_init(&o);
        o.fd = p[1];
        o.format = json ? BW_LOG_JSON : BW_LOG_LOGFMT;
        bw_log *log = NULL;
        CHECK_OK(bw_log_new(&o, &log, NULL));
        bw_event e = ev(BW_EVENT_STORE_RECOVERED);
        errno = 12345;
        deliver(log, &e); /* the pipe is full: dropped, not waited for */
        CHECK_INT(errno, 12345);
        deliver(log, &e); /* and again: 2 dropped */
        /* the pipe holds only what filled it */
        static char got[65536 + 8192];
        size_t n = 0;
        while (n < filled) {
            size_t k = drain(p[0], got, sizeof got);
            if (k == 0)
                break;
            CHECK(memchr(got, '\n', k) == NULL);
            n += k;
        }
        CHECK_INT(n, filled);
        /* room again: the next line is written, and counts the two dropped */
        deliver(log, &e);
        size_t k = drain(p[0], got, sizeof got);
        CHECK(k > 0 && got[k - 1] == '\n');
        CHECK(strchr(got, '\n') == got + k - 1);
        got[k > 0 ? k - 1 : 0] = '\0';
        CHECK(parse(got, json, &rec));
        CHECK_STR(get(&rec, "dropped"), "2");
        CHECK_STR(get(&rec, "event"), "store_recovered");
        if (!json)
            CHECK(strstr(got, " dropped=2 msg=") != NULL); /* after the event's fields, before msg */
        /* and the one after that has none */
        deliver(log, &e);
        k = drain(p[0], got, sizeof got);
        got[k > 0 ? k - 1 : 0] = '\0';
        CHECK(parse(got, json, &rec));
        CHECK(get(&rec, "dropped") == NULL);
        bw_log_free(log);
        close(p[0]);
        close(p[1]);
    }
}

/* The write hook's behaviour: 0 pass through, 1 take half of the next write then 2, 2 refuse (EAGAIN). */
static _Atomic int write_mode;
static atomic_int writes_seen;

static ssize_t partial_write(int fd, const void *p, size_t n)
{
    atomic_fetch_add(&writes_seen, 1);
    switch (atomic_load(&write_mode)) {
    case 1:
        atomic_store(&write_mode, 2);
        return write(fd, p, n / 2);
    case 2:
        errno = EAGAIN;
        return -1;
    default:
        return write(fd, p, n);
    }
}

/*
 * A line taken only in part, the rest refused: given up (counted), and the
 * next line written starts with a newline, so the fragment is a line of its
 * own and the next line is whole.
 */
static void test_fd_torn(void)
{
    for (int json = 0; json < 2; json++) {
        int p[2];
        CHECK(pipe(p) == 0);
        CHECK(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK) == 0);
        bw_log_options o;
        bw_log_options_init(&o);
        o.fd = p[1];
        o.format = json ? BW_LOG_JSON : BW_LOG_LOGFMT;
        bw_log *log = NULL;
        CHECK_OK(bw_log_new(&o, &log, NULL));
        bw__log_set_write(log, partial_write);
        bw_event e = ev(BW_EVENT_STORE_RECOVERED);
        atomic_store(&write_mode, 1);
        atomic_store(&writes_seen, 0);
        deliver(log, &e);                        /* half, then EAGAIN: torn */
        CHECK_INT(atomic_load(&writes_seen), 2); /* no spinning on EAGAIN */
        deliver(log, &e);                        /* the newline is refused too: dropped */
        CHECK_INT(atomic_load(&writes_seen), 3);
        atomic_store(&write_mode, 0);
        deliver(log, &e); /* "\n", then the line, whole */
        deliver(log, &e);
        char got[8192];
        size_t k = drain(p[0], got, sizeof got);
        /* the fragment (no newline of its own but the one that ends it), then two whole lines */
        char *nl1 = strchr(got, '\n');
        CHECK(nl1 != NULL);
        if (!nl1)
            break;
        *nl1 = '\0';
        CHECK(!parse(got, json, &rec) || !json); /* a fragment: half a JSON object does not parse */
        CHECK(strlen(got) > 0);
        char *l2 = nl1 + 1, *nl2 = strchr(l2, '\n');
        CHECK(nl2 != NULL);
        if (!nl2)
            break;
        *nl2 = '\0';
        CHECK(parse(l2, json, &rec));
        CHECK_STR(get(&rec, "dropped"), "2");
        CHECK_STR(get(&rec, "event"), "store_recovered");
        char *l3 = nl2 + 1, *nl3 = strchr(l3, '\n');
        CHECK(nl3 != NULL && (size_t)(nl3 + 1 - got) == k);
        if (!nl3)
            break;
        *nl3 = '\0';
        CHECK(parse(l3, json, &rec));
        CHECK(get(&rec, "dropped") == NULL);
        bw_log_free(log);
        close(p[0]);
        close(p[1]);
    }
}

/* ---- the exposition's numbers (metrics.c) ---- */

/* The digits of a decimal number's mantissa from its first nonzero one ("0.00012" 2, "1.5e-07" 2, "120" 3). */
static int sig_digits(const char *s)
{
    int n = 0, started = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9')
            continue;
        started |= *s != '0';
        n += started;
    }
    return n;
}

static void check_number(double v)
{
    char buf[64];
    memset(buf, 'Z', sizeof buf);
    size_t n = bw__metrics_fmt_double(buf, v);
    char shown[80];
    snprintf(shown, sizeof shown, "%.17g -> '%.*s'", v, (int)(n < 64 ? n : 64), buf);
    if (n == 0 || n > 32) {
        H_FAIL("%s: length %zu", shown, n);
        return;
    }
    CHECK(buf[n] == 'Z' || buf[n] == '\0'); /* at most a NUL after it */
    for (size_t i = n + 1; i < sizeof buf; i++)
        if (buf[i] != 'Z') {
            H_FAIL("%s: byte %zu written past the number", shown, i);
            break;
        }
    buf[n] = '\0';
    if (strspn(buf, "0123456789.-+e") != n)
        H_FAIL("%s: not a number's characters", shown);
    char *end = NULL;
    double back = strtod(buf, &end);
    if (end != buf + n)
        H_FAIL("%s: strtod stops at byte %td", shown, end - buf);
    if (!isfinite(v)) {
        CHECK_STR(buf, "0");
        return;
    }
    double a = fabs(v);
    if (a < 9007199254740992.0 && a == floor(a)) { /* an integer: exactly, as one */
        if (back != v || strpbrk(buf, ".e") != NULL)
            H_FAIL("%s: an integer, not written exactly", shown);
        if (v == 0 && buf[0] == '-')
            H_FAIL("%s: negative zero", shown);
    } else if (a >= 9007199254740992.0) {
        if (back != v)
            H_FAIL("%s: a large integer, not written exactly", shown);
    } else {
        if (!(fabs(back - v) <= a * 5.000001e-15))
            H_FAIL("%s: reads back as %.17g", shown, back);
        if (sig_digits(buf) > 15)
            H_FAIL("%s: more than 15 significant digits", shown);
    }
}

static void test_number_format(void)
{
    static const double fixed[] = {
        /* around 1e15: rounding a 15-digit mantissa up to 10^15 */
        999999999999999.5, 999999999999999.6, 999999999999999.75, 999999999999999.875, 999999999999999.4,
        999999999999998.5, 99999999999999.95, 99999999999999.99, 123456789012345.67, 1e15, 1e15 + 0.5, 1e15 + 1,
        1234567890123456.5, 4503599627370495.5, 9007199254740991.0, 9007199254740992.0, 9007199254740994.0,
        /* around 1, 0.1, 1e-5 */
        0.9999999999999999, 0.99999999999999994, 0.999999999999999, 0.9999999999999995, 1.0000000000000002, 0.1, 0.6,
        1.508, 0.1 + 0.2, 2.5, 0.05, 1e-4, 1.5e-5, 1e-5, 9.9999999999999995e-6, 0.000099999999999999999,
        0.00001234567890123456, 0.0000100000000000005,
        /* very small and very large */
        1e-6, 1.5e-7, 1e-300, 4.9406564584124654e-324, 2.2250738585072014e-308, 1e20, 1.5e300, 1.7976931348623157e308,
        3.0e18,
        /* signs, zero, non-finite */
        0.0, -0.0, -0.5, -1.0, -999999999999999.7, -1e-7, -1e20, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        check_number(fixed[i]);
    /* each side of every power of ten from 1e-7 to 1e16, by one ulp and by a little more */
    for (int e = -7; e <= 16; e++) {
        double p10 = pow(10, e);
        double around[] = {p10,
                           nextafter(p10, 0),
                           nextafter(p10, INFINITY),
                           p10 * (1 - 1e-15),
                           p10 * (1 - 4e-16),
                           p10 * (1 + 1e-15),
                           p10 * (1 - 5e-16)};
        for (size_t i = 0; i < sizeof around / sizeof around[0]; i++)
            check_number(around[i]);
    }
    /* a spread of values */
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double mant = (double)(x >> 11) / 9007199254740992.0;
        int e = (int)(x % 50) - 25;
        check_number(mant * pow(10, e));
    }
    char buf[64];
    CHECK_INT(bw__metrics_fmt_double(buf, -0.0), 1);
    buf[1] = '\0';
    CHECK_STR(buf, "0");
}

int main(void)
{
    pthread_mutex_init(&cap.mu, NULL);
    clock_fresh(CLOCKFIX_START);
    RUN(test_options_and_arguments);
    RUN(test_real_breaker_sink);
    RUN(test_real_breaker_fd);
    RUN(test_real_breaker_file);
    RUN(test_syslog);
    RUN(test_reasons);
    RUN(test_event_types);
    RUN(test_escaping);
    RUN(test_every_byte);
    RUN(test_long_values);
    RUN(test_keyed);
    RUN(test_levels);
    RUN(test_rate_limit);
    RUN(test_threads);
    RUN(test_fd_full);
    RUN(test_fd_torn);
    RUN(test_number_format);
    clock_done();
    pthread_mutex_destroy(&cap.mu);
    return TEST_SUMMARY();
}
