/*
 * metrics.c — Prometheus 0.0.4 and OpenMetrics 1.0.0 exposition of breakers and
 * registries (observe.h), on the public API only.
 *
 * A write has two passes. The first collects: it lists every breaker of the
 * set (its own and its registries', each name once), and for each one reads
 * its counters without a lock (bw_breaker_counters plus bw_keyed_counters),
 * takes its snapshot (the breaker's lock, briefly) and escapes its name once
 * into a label arena; with keys_max, the circuits of keyed breakers join as
 * rows of their own. No lock is held from one breaker to the next. The second
 * pass emits family by family (every series of a family together, after its
 * HELP and TYPE), each sample line as three short copies (the sample head,
 * the row's labels, the series' tail) and a hand-rolled number.
 *
 * The output goes to one of two sinks: the caller's buffer (on overflow it
 * goes on counting, so BW_ELIMIT reports the exact length needed, and the
 * buffer ends with a NUL at the cut) or a FILE (through a 64 KiB buffer).
 *
 * Locking: `mu` protects the set's own arrays (breakers, registries and their
 * counts and capacities) and nothing else. It is held while an add appends to
 * them and while a write copies them (list_breakers), never while a registry
 * is listed or a breaker read, so an add may run at any time, also while the
 * set is written or served (a write exports the set as it was when it copied
 * the arrays). Everything else in a bw_metrics is written once by
 * bw_metrics_new. A write's own state (the rows, the arena, the sink) is its
 * own, so writes on one set may run at once.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/compiler.h"
#include "base/error.h"
#include "base/hash.h"
#include "breakwater/keyed.h"
#include "breakwater/observe.h"

#define PREFIX_MAX 100 /* bytes of a metric name prefix */
#define N_STATES 6     /* bw_state values */
#define FILE_CHUNK 65536

struct bw_metrics {
    char prefix[PREFIX_MAX + 1];
    size_t prefix_len;
    size_t keys_max;
    pthread_mutex_t mu; /* protects the four fields below and their counts */
    bw_breaker **breakers;
    size_t nbreakers, cap_breakers;
    bw_registry **registries;
    size_t nregistries, cap_registries;
};

/* ---- options ---- */

static int prefix_ok(const char *p, bw_error *err)
{
    size_t n = strlen(p);
    if (n == 0)
        return bw__fail(err, BW_EINVAL, "prefix", "prefix must not be empty (it matches [a-zA-Z_][a-zA-Z0-9_]*)");
    if (n > PREFIX_MAX)
        return bw__fail(err, BW_EINVAL, "prefix", "prefix must be at most %d bytes, got %zu", PREFIX_MAX, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        int digit = c >= '0' && c <= '9';
        if (!alpha && !(digit && i > 0)) {
            if (c >= 0x21 && c <= 0x7e)
                return bw__fail(err, BW_EINVAL, "prefix", "prefix must match [a-zA-Z_][a-zA-Z0-9_]*: byte %zu is '%c'",
                                i, (char)c);
            return bw__fail(err, BW_EINVAL, "prefix", "prefix must match [a-zA-Z_][a-zA-Z0-9_]*: byte %zu is 0x%02x", i,
                            (unsigned)c);
        }
    }
    return BW_OK;
}

int bw_metrics_new(const bw_metrics_options *o, bw_metrics **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    *out = NULL;
    const char *prefix = o && o->prefix ? o->prefix : "breakwater";
    int rc = prefix_ok(prefix, err);
    if (rc != BW_OK)
        return rc;
    bw_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return bw__fail(err, BW_ENOMEM, "", "out of memory for the metrics set");
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return bw__fail(err, BW_ESYS, "", "could not create the metrics set's mutex");
    }
    m->prefix_len = strlen(prefix);
    memcpy(m->prefix, prefix, m->prefix_len + 1);
    m->keys_max = o ? o->keys_max : 0;
    *out = m;
    return BW_OK;
}

void bw_metrics_free(bw_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->breakers);
    free(m->registries);
    free(m);
}

/* Append p to *arr (n used of *cap), growing it. */
static int push_ptr(void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        void **na = realloc(*arr, nc * sizeof *na);
        if (!na)
            return BW_ENOMEM;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return BW_OK;
}

int bw_metrics_add_breaker(bw_metrics *m, bw_breaker *b)
{
    if (!m || !b || bw_breaker_key(b) != NULL)
        return BW_EINVAL;
    pthread_mutex_lock(&m->mu);
    int rc = push_ptr((void ***)&m->breakers, &m->nbreakers, &m->cap_breakers, b);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int bw_metrics_add_registry(bw_metrics *m, bw_registry *r)
{
    if (!m || !r)
        return BW_EINVAL;
    pthread_mutex_lock(&m->mu);
    int rc = push_ptr((void ***)&m->registries, &m->nregistries, &m->cap_registries, r);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

const char *bw_metrics_content_type(bw_metrics_format format)
{
    switch (format) {
    case BW_METRICS_PROMETHEUS:
        return "text/plain; version=0.0.4; charset=utf-8";
    case BW_METRICS_OPENMETRICS:
        return "application/openmetrics-text; version=1.0.0; charset=utf-8";
    default:
        return NULL;
    }
}

/* ---- the output sink ---- */

enum { SINK_CALLER, SINK_FILE };

typedef struct sink {
    char *base, *p, *end; /* the buffer, the write position, the end of room */
    size_t extra;         /* SINK_CALLER: bytes that did not fit; SINK_FILE: bytes already written */
    int kind;
    int failed; /* BW_ENOMEM or BW_ESYS once something failed */
    FILE *f;
} sink;

static void sink_slow(sink *s, const char *src, size_t n)
{
    if (s->failed)
        return;
    switch (s->kind) {
    case SINK_CALLER:
        /* Past the end: count only (nothing more is copied, the text is not used). */
        s->extra += n;
        s->end = s->p; /* every later put takes this path */
        return;
    default: { /* SINK_FILE */
        size_t have = (size_t)(s->p - s->base);
        if (have && fwrite(s->base, 1, have, s->f) != have) {
            s->failed = BW_ESYS;
            return;
        }
        s->extra += have;
        s->p = s->base;
        if (n > (size_t)(s->end - s->base)) {
            if (fwrite(src, 1, n, s->f) != n)
                s->failed = BW_ESYS;
            s->extra += n;
            return;
        }
        break;
    }
    }
    memcpy(s->p, src, n);
    s->p += n;
}

static inline void put(sink *s, const char *src, size_t n)
{
    if ((size_t)(s->end - s->p) >= n) {
        memcpy(s->p, src, n);
        s->p += n;
    } else {
        sink_slow(s, src, n);
    }
}

static inline void puts_(sink *s, const char *str)
{
    put(s, str, strlen(str));
}

/*
 * Copy n bytes with a few fixed-size moves (overlapping at the end) instead of
 * a call: the pieces of a sample line are short, and memcpy of a run-time
 * length is a library call each.
 */
static BW_ALWAYS_INLINE void copy_small(char *d, const char *src, size_t n)
{
    if (n >= 16) {
        size_t i = 0;
        for (; i + 16 <= n; i += 16)
            memcpy(d + i, src + i, 16);
        if (i < n)
            memcpy(d + n - 16, src + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, src, 8);
        memcpy(d + n - 8, src + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, src, 4);
        memcpy(d + n - 4, src + n - 4, 4);
    } else if (n) { /* 1 to 3 bytes (written out: a loop here would become a memcpy call) */
        d[0] = src[0];
        d[n / 2] = src[n / 2];
        d[n - 1] = src[n - 1];
    }
}

/* ---- numbers ---- */

static const char digit_pairs[201] = "00010203040506070809"
                                     "10111213141516171819"
                                     "20212223242526272829"
                                     "30313233343536373839"
                                     "40414243444546474849"
                                     "50515253545556575859"
                                     "60616263646566676869"
                                     "70717273747576777879"
                                     "80818283848586878889"
                                     "90919293949596979899";

/* The decimal digits of v. */
static BW_ALWAYS_INLINE size_t ndigits(uint64_t v)
{
    size_t n = 1;
    for (;;) {
        if (v < 10)
            return n;
        if (v < 100)
            return n + 1;
        if (v < 1000)
            return n + 2;
        if (v < 10000)
            return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* v in decimal at dst (at most 20 bytes, no NUL), written in place from its end; returns the length. */
static BW_ALWAYS_INLINE size_t fmt_u64(char *dst, uint64_t v)
{
    if (v < 10) {
        dst[0] = (char)('0' + v);
        return 1;
    }
    size_t n = ndigits(v);
    char *q = dst + n;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        q -= 2;
        q[0] = digit_pairs[i];
        q[1] = digit_pairs[i + 1];
    }
    if (v >= 10) {
        unsigned i = (unsigned)v * 2;
        q[-2] = digit_pairs[i];
        q[-1] = digit_pairs[i + 1];
    } else {
        q[-1] = (char)('0' + v);
    }
    return n;
}

/* A duration in ns as seconds, exactly ("2.5", "0.001", "3"); negative as 0. At most 31 bytes. */
static size_t fmt_seconds_ns(char *dst, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    uint64_t sec = (uint64_t)ns / 1000000000u, frac = (uint64_t)ns % 1000000000u;
    size_t n = fmt_u64(dst, sec);
    if (frac) {
        char d[9];
        for (int i = 8; i >= 0; i--) {
            d[i] = (char)('0' + frac % 10);
            frac /= 10;
        }
        int k = 9;
        while (d[k - 1] == '0')
            k--;
        dst[n++] = '.';
        memcpy(dst + n, d, (size_t)k);
        n += (size_t)k;
    }
    return n;
}

static const double pow10_tab[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9, 1e10,
                                   1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20};

/*
 * A double in decimal, at most 32 bytes: integers below 2^53 exactly, others
 * to at most 15 significant digits without trailing zeros ("0.6", "1.508",
 * "1.5e-07"), which every Prometheus and OpenMetrics parser reads; a
 * magnitude of 2^53 or more (an integer) to 17 ("%.17g": exact). Negative
 * zero is "0". Never NaN or Inf: a non-finite value (none of the values
 * written can be one) is written as 0.
 */
static size_t fmt_double(char *dst, double v)
{
    if (!(v - v == 0)) /* NaN or +-Inf */
        return fmt_u64(dst, 0);
    size_t n = 0;
    if (v < 0) {
        dst[n++] = '-';
        v = -v;
    }
    if (v < 9007199254740992.0 && v == (double)(uint64_t)v)
        return n + fmt_u64(dst + n, (uint64_t)v);
    if (v >= 1e-5 && v < 1e15) {
        /* e: the decimal exponent, 10^e <= v < 10^(e+1), e in [-5, 14]. */
        int e = 14;
        if (v < 1) {
            e = -1;
            while (e > -5 && v * pow10_tab[-e] < 1)
                e--;
        } else {
            while (e > 0 && v < pow10_tab[e])
                e--;
        }
        uint64_t mant = (uint64_t)(v * pow10_tab[14 - e] + 0.5); /* 15 digits */
        if (mant >= UINT64_C(1000000000000000)) {
            mant /= 10;
            e++;
        }
        /* Rounded up to 10^15 (v in [999999999999999.5, 1e15)): 16 integer digits, more than d holds; the
           general branch below writes it ("1e+15"). */
        if (e <= 14) {
            char d[15];
            for (int i = 14; i >= 0; i--) {
                d[i] = (char)('0' + mant % 10);
                mant /= 10;
            }
            int k = 15;
            while (k > 1 && d[k - 1] == '0')
                k--;
            if (e >= 0) {
                memcpy(dst + n, d, (size_t)e + 1);
                n += (size_t)e + 1;
                if (k > e + 1) {
                    dst[n++] = '.';
                    memcpy(dst + n, d + e + 1, (size_t)(k - e - 1));
                    n += (size_t)(k - e - 1);
                }
            } else {
                dst[n++] = '0';
                dst[n++] = '.';
                for (int z = -1; z > e; z--)
                    dst[n++] = '0';
                memcpy(dst + n, d, (size_t)k);
                n += (size_t)k;
            }
            return n;
        }
    }
    int w = snprintf(dst + n, 32 - n, v >= 9007199254740992.0 ? "%.17g" : "%.15g", v);
    return n + (w > 0 ? (size_t)w : 0);
}

#ifdef BW_TESTING
/* The tests' build only: fmt_double itself (test_log.c checks its boundaries). Declared by the tests. */
size_t bw__metrics_fmt_double(char *dst, double v);
size_t bw__metrics_fmt_double(char *dst, double v)
{
    return fmt_double(dst, v);
}
#endif

/* ---- the collected rows ---- */

enum { ROW_COUNTING = 1, ROW_TIMED = 2, ROW_LAST_FAILURE = 4, ROW_KEY = 8 };

/* The numbers a write needs of one breaker, or of one keyed circuit (ROW_KEY: calls, rejected, state). */
typedef struct row {
    uint64_t calls[BW_CALL_KINDS];
    uint64_t rejected[3]; /* OPEN, HALF_OPEN, FORCED_OPEN */
    uint64_t rounds[2];   /* passed, failed */
    uint64_t store[3];    /* degraded, recovered, write_dropped */
    uint64_t resets;
    uint64_t buckets[BW_DURATION_BUCKETS]; /* per bucket */
    double sum_s;
    uint64_t window[3]; /* total, failed, slow */
    double failure_rate, slow_call_rate;
    int64_t last_failure_age_ns;
    uint64_t keyed; /* resident circuits */
    size_t label_off, label_len;
    uint32_t trans_off; /* its transitions: trans[trans_off .. trans_off + ntrans) */
    uint16_t ntrans;
    uint8_t flags;
    uint8_t state;
} row;

typedef struct trans {
    uint8_t from, to;
    uint64_t n;
} trans;

typedef struct collect {
    row *rows;
    size_t nrows, caprows;
    trans *trans;
    size_t ntrans, captrans;
    char *arena; /* labels: name="..." or name="...",key="..." */
    size_t alen, acap;
    int oom;
    const char *cur_label; /* keyed_each: the breaker's label (an offset may move: copied first) */
    size_t cur_label_len;
} collect;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np)
        return 0;
    *p = np;
    *cap = nc;
    return 1;
}

/* The label value escaped (\ " and newline) into the arena; returns 0 when out of memory. */
static int arena_escaped(collect *c, const char *s)
{
    size_t n = strlen(s);
    if (!grow((void **)&c->arena, &c->acap, c->alen + 2 * n + 1, 1))
        return 0;
    char *q = c->arena + c->alen;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\' || ch == '"') {
            *q++ = '\\';
            *q++ = ch;
        } else if (ch == '\n') {
            *q++ = '\\';
            *q++ = 'n';
        } else {
            *q++ = ch;
        }
    }
    c->alen = (size_t)(q - c->arena);
    return 1;
}

static int arena_put(collect *c, const char *s, size_t n)
{
    if (!grow((void **)&c->arena, &c->acap, c->alen + n, 1))
        return 0;
    memcpy(c->arena + c->alen, s, n);
    c->alen += n;
    return 1;
}

static row *new_row(collect *c)
{
    if (!grow((void **)&c->rows, &c->caprows, c->nrows + 1, sizeof(row))) {
        c->oom = 1;
        return NULL;
    }
    row *r = &c->rows[c->nrows++];
    memset(r, 0, sizeof *r);
    return r;
}

static void take_calls(row *r, const bw_counters *k)
{
    memcpy(r->calls, k->calls, sizeof r->calls);
    r->rejected[0] = k->rejected[BW_STATE_OPEN];
    r->rejected[1] = k->rejected[BW_STATE_HALF_OPEN];
    r->rejected[2] = k->rejected[BW_STATE_FORCED_OPEN];
    if (k->counting)
        r->flags |= ROW_COUNTING;
}

/* bw_keyed_each's callback: one row for the circuit, labelled name="...",key="...". */
static void key_row(bw_breaker *circuit, void *user)
{
    collect *c = user;
    const char *key = bw_breaker_key(circuit);
    if (c->oom || !key)
        return;
    bw_counters k;
    if (bw_breaker_counters(circuit, &k) != BW_OK)
        return;
    row *r = new_row(c);
    if (!r)
        return;
    r->label_off = c->alen;
    if (!arena_put(c, c->cur_label, c->cur_label_len) || !arena_put(c, ",key=\"", 6) || !arena_escaped(c, key) ||
        !arena_put(c, "\"", 1)) {
        c->oom = 1;
        c->nrows--;
        return;
    }
    r->label_len = c->alen - r->label_off;
    take_calls(r, &k);
    r->flags |= ROW_KEY;
    int st = bw_breaker_state(circuit);
    r->state = (uint8_t)(st >= 0 && st < N_STATES ? st : 0);
}

/* One breaker's row (and its circuits' with keys_max). */
static void breaker_row(collect *c, bw_breaker *b, size_t keys_max)
{
    bw_counters k, kc;
    bw_snapshot snap;
    if (bw_breaker_counters(b, &k) != BW_OK || bw_breaker_snapshot(b, &snap) != BW_OK)
        return;
    if (bw_keyed_counters(b, &kc) == BW_OK)
        bw_counters_add(&k, &kc);
    size_t nkeys = bw_keyed_count(b);

    row *r = new_row(c);
    if (!r)
        return;
    size_t idx = c->nrows - 1;
    r->label_off = c->alen;
    if (!arena_put(c, "name=\"", 6) || !arena_escaped(c, bw_breaker_name(b)) || !arena_put(c, "\"", 1)) {
        c->oom = 1;
        c->nrows--;
        return;
    }
    r->label_len = c->alen - r->label_off;
    take_calls(r, &k);
    r->rounds[0] = k.rounds_passed;
    r->rounds[1] = k.rounds_failed;
    r->store[0] = k.store_degraded;
    r->store[1] = k.store_recovered;
    r->store[2] = k.store_dropped;
    r->resets = k.resets;
    memcpy(r->buckets, k.duration_buckets, sizeof r->buckets);
    r->sum_s = k.duration_sum_s;
    if (k.timed)
        r->flags |= ROW_TIMED;
    if (k.has_last_failure) {
        r->flags |= ROW_LAST_FAILURE;
        r->last_failure_age_ns = k.last_failure_age_ns;
    }
    r->state = (uint8_t)((int)snap.state >= 0 && (int)snap.state < N_STATES ? snap.state : 0);
    r->window[0] = snap.total_calls;
    r->window[1] = snap.failed_calls;
    r->window[2] = snap.slow_calls;
    r->failure_rate = snap.failure_rate;
    r->slow_call_rate = snap.slow_call_rate;
    r->keyed = nkeys;
    r->trans_off = (uint32_t)c->ntrans;
    if (k.counting) {
        for (int from = 0; from < N_STATES; from++)
            for (int to = 0; to < N_STATES; to++)
                if (k.transitions[from][to]) {
                    if (!grow((void **)&c->trans, &c->captrans, c->ntrans + 1, sizeof(trans))) {
                        c->oom = 1;
                        return;
                    }
                    c->trans[c->ntrans++] = (trans){(uint8_t)from, (uint8_t)to, k.transitions[from][to]};
                    r->ntrans++;
                }
    }

    if (keys_max && nkeys) {
        /* Room first, so the callback (under b's map lock) rarely allocates. */
        size_t want = nkeys < keys_max ? nkeys : keys_max, label_len = r->label_len;
        if (!grow((void **)&c->rows, &c->caprows, c->nrows + want + 4, sizeof(row)) ||
            !grow((void **)&c->arena, &c->acap, c->alen + (want + 4) * (label_len + 24 + 64), 1)) {
            c->oom = 1;
            return;
        }
        /* The breaker's label, copied out of the arena (which key rows may move). */
        char label[6 + 2 * 255 + 2];
        r = &c->rows[idx];
        size_t ln = r->label_len < sizeof label ? r->label_len : sizeof label;
        memcpy(label, c->arena + r->label_off, ln);
        c->cur_label = label;
        c->cur_label_len = ln;
        bw_keyed_each(b, keys_max, key_row, c);
        c->cur_label = NULL;
    }
}

/* ---- listing the set's breakers, each name once ---- */

/*
 * A registry's breakers after all[*n] (cap entries in all): each registry is
 * listed at most twice, the second time with room for what the first said
 * plus some; a registry that grew past that meanwhile keeps what fits (its
 * first breakers in making order), the rest are in the next write.
 */
static int list_registry(bw_registry *r, bw_breaker ***all, size_t *n, size_t *cap)
{
    for (int tries = 0;; tries++) {
        size_t room = *cap - *n;
        size_t got = bw_registry_list(r, NULL, *all + *n, room);
        if (got <= room) {
            *n += got;
            return BW_OK;
        }
        if (tries == 1) {
            *n = *cap;
            return BW_OK;
        }
        size_t nc = *n + got + got / 8 + 16;
        bw_breaker **na = realloc(*all, nc * sizeof *na);
        if (!na)
            return BW_ENOMEM;
        *all = na;
        *cap = nc;
    }
}

static bw_breaker **list_breakers(bw_metrics *m, size_t *count)
{
    /* The set's arrays, copied under its mutex (an add may run meanwhile); the registries are listed after,
       without it (a registry's listener may add to the set while that registry's lock is held). */
    pthread_mutex_lock(&m->mu);
    size_t nown = m->nbreakers, nregs = m->nregistries;
    bw_breaker **all = malloc((nown + 16) * sizeof *all);
    bw_registry **regs = nregs ? malloc(nregs * sizeof *regs) : NULL;
    if (all && (regs || !nregs)) {
        if (nown)
            memcpy(all, m->breakers, nown * sizeof *all);
        if (nregs)
            memcpy(regs, m->registries, nregs * sizeof *regs);
    }
    pthread_mutex_unlock(&m->mu);
    if (!all || (nregs && !regs)) {
        free(all);
        free(regs);
        return NULL;
    }
    size_t cap = nown + 16, n = nown;
    if (nregs) {
        size_t want = nown + 16;
        for (size_t i = 0; i < nregs; i++)
            want += bw_registry_count(regs[i]);
        bw_breaker **na = realloc(all, want * sizeof *na);
        if (!na) {
            free(all);
            free(regs);
            return NULL;
        }
        all = na;
        cap = want;
    }
    for (size_t i = 0; i < nregs; i++) {
        if (list_registry(regs[i], &all, &n, &cap) != BW_OK) {
            free(all);
            free(regs);
            return NULL;
        }
    }
    free(regs);
    if (n > 1 && nregs + nown > 1) {
        /* Two sources may hold one name (the same breaker twice, or one name in two registries): the first wins,
           since a second series of the same labels would make the scrape fail. */
        size_t tcap = 16;
        while (tcap < 2 * n)
            tcap *= 2;
        size_t *table = malloc(tcap * sizeof *table);
        if (!table) {
            free(all);
            return NULL;
        }
        memset(table, 0xff, tcap * sizeof *table);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            const char *name = bw_breaker_name(all[i]);
            size_t len = strlen(name);
            size_t h = (size_t)bw__hash(0, name, len) & (tcap - 1);
            int dup = 0;
            while (table[h] != SIZE_MAX) {
                const char *other = bw_breaker_name(all[table[h]]);
                if (strcmp(other, name) == 0) {
                    dup = 1;
                    break;
                }
                h = (h + 1) & (tcap - 1);
            }
            if (dup)
                continue;
            all[kept] = all[i];
            table[h] = kept++;
        }
        free(table);
        n = kept;
    }
    *count = n;
    return all;
}

/* ---- emitting ---- */

/* The sample heads: "<prefix>_<suffix>{". */
enum {
    H_STATE,
    H_CALLS,
    H_REJECTED,
    H_TRANSITIONS,
    H_RESETS,
    H_ROUNDS,
    H_STORE,
    H_BUCKET,
    H_SUM,
    H_COUNT,
    H_FAILURE_RATE,
    H_SLOW_RATE,
    H_WINDOW,
    H_AGE,
    H_KEYED,
    H_N
};

static const char *const head_suffix[H_N] = {"state",
                                             "calls_total",
                                             "rejected_total",
                                             "transitions_total",
                                             "resets_total",
                                             "probe_rounds_total",
                                             "store_events_total",
                                             "call_duration_seconds_bucket",
                                             "call_duration_seconds_sum",
                                             "call_duration_seconds_count",
                                             "failure_rate",
                                             "slow_call_rate",
                                             "window_calls",
                                             "last_failure_age_seconds",
                                             "keyed_circuits"};

typedef struct emit {
    sink *s;
    int om;
    const bw_metrics *m;
    char head[H_N][PREFIX_MAX + 40];
    size_t head_len[H_N];
    const collect *c;
    /* The label tails the families share, made once per write (make_tail). */
    char tail_state[N_STATES][48], tail_kind[BW_CALL_KINDS][48], tail_le[BW_DURATION_BUCKETS][48];
    size_t tail_state_len[N_STATES], tail_kind_len[BW_CALL_KINDS], tail_le_len[BW_DURATION_BUCKETS];
} emit;

/* The HELP and TYPE lines of a family (`family` without _total; counters get it in Prometheus text). */
static void family_header(emit *e, const char *family, const char *type, const char *unit, const char *help)
{
    sink *s = e->s;
    int counter = strcmp(type, "counter") == 0;
    const char *suffix = counter && !e->om ? "_total" : "";
    if (e->om) {
        put(s, "# TYPE ", 7);
        put(s, e->m->prefix, e->m->prefix_len);
        put(s, "_", 1);
        puts_(s, family);
        put(s, " ", 1);
        puts_(s, type);
        put(s, "\n", 1);
        if (unit) {
            put(s, "# UNIT ", 7);
            put(s, e->m->prefix, e->m->prefix_len);
            put(s, "_", 1);
            puts_(s, family);
            put(s, " ", 1);
            puts_(s, unit);
            put(s, "\n", 1);
        }
    }
    put(s, "# HELP ", 7);
    put(s, e->m->prefix, e->m->prefix_len);
    put(s, "_", 1);
    puts_(s, family);
    puts_(s, suffix);
    put(s, " ", 1);
    puts_(s, help);
    put(s, "\n", 1);
    if (!e->om) {
        put(s, "# TYPE ", 7);
        put(s, e->m->prefix, e->m->prefix_len);
        put(s, "_", 1);
        puts_(s, family);
        puts_(s, suffix);
        put(s, " ", 1);
        puts_(s, type);
        put(s, "\n", 1);
    }
}

/* A sample line piece by piece, through put(): when the sink has no room for it at once (full or flushing). */
static void line_slow(emit *e, int h, const row *r, const char *tail, size_t tail_len, const char *num, size_t num_len)
{
    sink *s = e->s;
    put(s, e->head[h], e->head_len[h]);
    put(s, e->c->arena + r->label_off, r->label_len);
    put(s, tail, tail_len);
    put(s, num, num_len);
    put(s, "\n", 1);
}

/*
 * Where a sample line starts when the sink has room for it and a value of up
 * to NUM_MAX bytes: head ("<prefix>_<family>{") + the row's labels + tail
 * (",x=\"y\"} " or "} ") already copied; the caller writes the value and the
 * newline. NULL when there is no room (then line_slow).
 */
#define NUM_MAX 40
static BW_ALWAYS_INLINE char *line_head(emit *e, int h, const row *r, const char *tail, size_t tail_len)
{
    sink *s = e->s;
    size_t hl = e->head_len[h];
    if ((size_t)(s->end - s->p) < hl + r->label_len + tail_len + NUM_MAX + 1)
        return NULL;
    char *q = s->p;
    copy_small(q, e->head[h], hl);
    q += hl;
    copy_small(q, e->c->arena + r->label_off, r->label_len);
    q += r->label_len;
    copy_small(q, tail, tail_len);
    return q + tail_len;
}

static BW_ALWAYS_INLINE void line_end(emit *e, char *q)
{
    *q++ = '\n';
    e->s->p = q;
}

static BW_ALWAYS_INLINE void line_u64(emit *e, int h, const row *r, const char *tail, size_t tail_len, uint64_t v)
{
    char *q = line_head(e, h, r, tail, tail_len);
    if (q) {
        line_end(e, q + fmt_u64(q, v));
    } else {
        char num[24];
        line_slow(e, h, r, tail, tail_len, num, fmt_u64(num, v));
    }
}

static inline void line_dbl(emit *e, int h, const row *r, const char *tail, size_t tail_len, double v)
{
    char *q = line_head(e, h, r, tail, tail_len);
    if (q) {
        line_end(e, q + fmt_double(q, v));
    } else {
        char num[NUM_MAX];
        line_slow(e, h, r, tail, tail_len, num, fmt_double(num, v));
    }
}

static inline void line_seconds(emit *e, int h, const row *r, const char *tail, size_t tail_len, int64_t ns)
{
    char *q = line_head(e, h, r, tail, tail_len);
    if (q) {
        line_end(e, q + fmt_seconds_ns(q, ns));
    } else {
        char num[NUM_MAX];
        line_slow(e, h, r, tail, tail_len, num, fmt_seconds_ns(num, ns));
    }
}

#define TAIL(str) str, sizeof str - 1

/* A label tail ",NAME=\"VALUE\"} " built into buf (at most 64 bytes); returns its length. */
static size_t make_tail(char *buf, const char *label, const char *value)
{
    size_t n = 0, l = strlen(label), v = strlen(value);
    buf[n++] = ',';
    memcpy(buf + n, label, l);
    n += l;
    buf[n++] = '=';
    buf[n++] = '"';
    memcpy(buf + n, value, v);
    n += v;
    buf[n++] = '"';
    buf[n++] = '}';
    buf[n++] = ' ';
    return n;
}

/* ---- the families: one table, one loop (emit_all) ---- */

static void samples_state(emit *e, const row *r)
{
    for (int st = 0; st < N_STATES; st++)
        line_u64(e, H_STATE, r, e->tail_state[st], e->tail_state_len[st], st == r->state);
}

static void samples_calls(emit *e, const row *r)
{
    for (int k = 0; k < BW_CALL_KINDS; k++)
        line_u64(e, H_CALLS, r, e->tail_kind[k], e->tail_kind_len[k], r->calls[k]);
}

static void samples_rejected(emit *e, const row *r)
{
    static const bw_state by[3] = {BW_STATE_OPEN, BW_STATE_HALF_OPEN, BW_STATE_FORCED_OPEN};
    for (int k = 0; k < 3; k++)
        line_u64(e, H_REJECTED, r, e->tail_state[by[k]], e->tail_state_len[by[k]], r->rejected[k]);
}

static void samples_transitions(emit *e, const row *r)
{
    for (unsigned t = 0; t < r->ntrans; t++) {
        const trans *tr = &e->c->trans[r->trans_off + t];
        const char *f = bw_state_name((bw_state)tr->from), *to = bw_state_name((bw_state)tr->to);
        size_t fl = strlen(f), tol = strlen(to), tl = 0;
        char tail[96]; /* 7 + 12 + 6 + 12 + 3 at most */
        memcpy(tail, ",from=\"", 7);
        tl = 7;
        memcpy(tail + tl, f, fl);
        tl += fl;
        memcpy(tail + tl, "\",to=\"", 6);
        tl += 6;
        memcpy(tail + tl, to, tol);
        tl += tol;
        memcpy(tail + tl, "\"} ", 3);
        tl += 3;
        line_u64(e, H_TRANSITIONS, r, tail, tl, tr->n);
    }
}

static void samples_resets(emit *e, const row *r)
{
    line_u64(e, H_RESETS, r, TAIL("} "), r->resets);
}

static void samples_rounds(emit *e, const row *r)
{
    line_u64(e, H_ROUNDS, r, TAIL(",result=\"passed\"} "), r->rounds[0]);
    line_u64(e, H_ROUNDS, r, TAIL(",result=\"failed\"} "), r->rounds[1]);
}

static void samples_store(emit *e, const row *r)
{
    line_u64(e, H_STORE, r, TAIL(",event=\"degraded\"} "), r->store[0]);
    line_u64(e, H_STORE, r, TAIL(",event=\"recovered\"} "), r->store[1]);
    line_u64(e, H_STORE, r, TAIL(",event=\"write_dropped\"} "), r->store[2]);
}

static void samples_duration(emit *e, const row *r)
{
    uint64_t cum = 0;
    for (int b = 0; b < BW_DURATION_BUCKETS; b++) {
        cum += r->buckets[b];
        line_u64(e, H_BUCKET, r, e->tail_le[b], e->tail_le_len[b], cum);
    }
    line_dbl(e, H_SUM, r, TAIL("} "), r->sum_s);
    line_u64(e, H_COUNT, r, TAIL("} "), cum);
}

static void samples_failure_rate(emit *e, const row *r)
{
    line_dbl(e, H_FAILURE_RATE, r, TAIL("} "), r->failure_rate);
}

static void samples_slow_rate(emit *e, const row *r)
{
    line_dbl(e, H_SLOW_RATE, r, TAIL("} "), r->slow_call_rate);
}

static void samples_window(emit *e, const row *r)
{
    line_u64(e, H_WINDOW, r, TAIL(",kind=\"total\"} "), r->window[0]);
    line_u64(e, H_WINDOW, r, TAIL(",kind=\"failed\"} "), r->window[1]);
    line_u64(e, H_WINDOW, r, TAIL(",kind=\"slow\"} "), r->window[2]);
}

static void samples_age(emit *e, const row *r)
{
    line_seconds(e, H_AGE, r, TAIL("} "), r->last_failure_age_ns);
}

static void samples_keyed(emit *e, const row *r)
{
    line_u64(e, H_KEYED, r, TAIL("} "), r->keyed);
}

/*
 * A metric family: its metadata, which rows have series in it (every flag of
 * `need`, no flag of `skip`, and `some` > 0 when it names a count), and their
 * samples. A family no row has is left out.
 */
typedef struct family {
    const char *name, *type, *unit, *help;
    unsigned need, skip;
    int some; /* 0: none; SOME_TRANS: r->ntrans; SOME_KEYED: r->keyed */
    void (*samples)(emit *e, const row *r);
} family;

enum { SOME_TRANS = 1, SOME_KEYED = 2 };
#define COUNTED ROW_COUNTING
#define TIMED (ROW_COUNTING | ROW_TIMED)

static const family families[] = {
    {"state", "gauge", NULL, "The breaker's state: 1 for the state it is in, 0 for the other five.", 0, 0, 0,
     samples_state},
    {"calls", "counter", NULL, "Settled calls by kind (slow: at least slow_call_duration).", COUNTED, 0, 0,
     samples_calls},
    {"rejected", "counter", NULL, "Calls the breaker rejected, by the state that rejected them.", COUNTED, 0, 0,
     samples_rejected},
    {"transitions", "counter", NULL,
     "State changes by their from and to states, operator verbs included (pairs seen only).", 0, ROW_KEY, SOME_TRANS,
     samples_transitions},
    {"resets", "counter", NULL, "bw_breaker_reset calls.", COUNTED, ROW_KEY, 0, samples_resets},
    {"probe_rounds", "counter", NULL, "Half-open probe rounds that closed (passed) or reopened (failed) the breaker.",
     COUNTED, ROW_KEY, 0, samples_rounds},
    {"store_events", "counter", NULL,
     "Store events: degraded (the store failed), recovered, write_dropped (queue full).", COUNTED, ROW_KEY, 0,
     samples_store},
    {"call_duration_seconds", "histogram", "seconds", "Durations of settled calls, from acquire to settle.", TIMED,
     ROW_KEY, 0, samples_duration},
    {"failure_rate", "gauge", NULL,
     "Failed / all calls in the sliding window, 0..1 (also below min_calls; 0 when it is empty).", 0, ROW_KEY, 0,
     samples_failure_rate},
    {"slow_call_rate", "gauge", NULL,
     "Slow / all calls in the sliding window, 0..1 (also below min_calls; 0 when it is empty).", 0, ROW_KEY, 0,
     samples_slow_rate},
    {"window_calls", "gauge", NULL, "Calls in the sliding window: total, failed, slow.", 0, ROW_KEY, 0, samples_window},
    {"last_failure_age_seconds", "gauge", "seconds",
     "Seconds since the last failure was settled (breakers with one since their last reset).", ROW_LAST_FAILURE,
     ROW_KEY, 0, samples_age},
    {"keyed_circuits", "gauge", NULL, "Resident keyed circuits of the breaker.", 0, ROW_KEY, SOME_KEYED, samples_keyed},
};

/* The label tails every write shares: states, call kinds, histogram bounds. */
static void make_tails(emit *e)
{
    for (int i = 0; i < N_STATES; i++)
        e->tail_state_len[i] = make_tail(e->tail_state[i], "state", bw_state_name((bw_state)i));
    for (int k = 0; k < BW_CALL_KINDS; k++)
        e->tail_kind_len[k] = make_tail(e->tail_kind[k], "kind", bw_call_kind_name((bw_call_kind)k));
    static const int64_t bounds_ns[BW_DURATION_BUCKETS - 1] = BW_DURATION_BOUNDS_NS;
    for (int i = 0; i < BW_DURATION_BUCKETS; i++) {
        char v[40];
        size_t vl;
        if (i < BW_DURATION_BUCKETS - 1) {
            vl = fmt_seconds_ns(v, bounds_ns[i]);
            if (!memchr(v, '.', vl)) { /* OpenMetrics' canonical form of a whole number: "1.0" */
                v[vl++] = '.';
                v[vl++] = '0';
            }
        } else {
            memcpy(v, "+Inf", 4);
            vl = 4;
        }
        v[vl] = 0;
        e->tail_le_len[i] = make_tail(e->tail_le[i], "le", v);
    }
}

static void emit_all(emit *e)
{
    make_tails(e);
    const row *rows = e->c->rows;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        const family *fam = &families[f];
        int any = 0;
        for (size_t i = 0; i < e->c->nrows; i++) {
            const row *r = &rows[i];
            if ((r->flags & fam->need) != fam->need || (r->flags & fam->skip) ||
                (fam->some == SOME_TRANS && !r->ntrans) || (fam->some == SOME_KEYED && !r->keyed))
                continue;
            if (!any++)
                family_header(e, fam->name, fam->type, fam->unit, fam->help);
            fam->samples(e, r);
        }
    }
    if (e->om)
        put(e->s, "# EOF\n", 6);
}

/* Collect every row of m, then emit them into s. Returns BW_OK or BW_ENOMEM (s->failed says the sink's own). */
static int render(bw_metrics *m, bw_metrics_format format, sink *s)
{
    size_t nb = 0;
    bw_breaker **all = list_breakers(m, &nb);
    if (!all)
        return BW_ENOMEM;
    collect c;
    memset(&c, 0, sizeof c);
    int rc = BW_OK;
    if (nb && (!grow((void **)&c.rows, &c.caprows, nb, sizeof(row)) || !grow((void **)&c.arena, &c.acap, nb * 32, 1))) {
        rc = BW_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < nb && !c.oom; i++)
        breaker_row(&c, all[i], m->keys_max);
    if (c.oom) {
        rc = BW_ENOMEM;
        goto done;
    }
    emit e;
    e.s = s;
    e.om = format == BW_METRICS_OPENMETRICS;
    e.m = m;
    e.c = &c;
    for (int h = 0; h < H_N; h++) {
        size_t sl = strlen(head_suffix[h]);
        char *q = e.head[h];
        memcpy(q, m->prefix, m->prefix_len);
        q[m->prefix_len] = '_';
        memcpy(q + m->prefix_len + 1, head_suffix[h], sl);
        q[m->prefix_len + 1 + sl] = '{';
        e.head_len[h] = m->prefix_len + sl + 2;
    }
    emit_all(&e);
done:
    free(all);
    free(c.rows);
    free(c.trans);
    free(c.arena);
    return rc;
}

int bw_metrics_write(bw_metrics *m, bw_metrics_format format, char *buf, size_t size, size_t *len)
{
    if (!m || (!buf && size > 0) || !bw_metrics_content_type(format))
        return BW_EINVAL;
    sink s;
    char none[1]; /* the buffer of a length query (buf NULL, size 0): no room */
    memset(&s, 0, sizeof s);
    s.kind = SINK_CALLER;
    s.base = s.p = buf ? buf : none;
    s.end = size ? buf + size - 1 : s.base; /* room for the NUL */
    int rc = render(m, format, &s);
    if (size)
        *s.p = 0; /* at the end of the text, or at the cut (BW_ELIMIT, BW_ENOMEM): always NUL-terminated */
    if (rc != BW_OK)
        return rc;
    size_t n = (size_t)(s.p - s.base) + s.extra;
    if (len)
        *len = n;
    if (s.extra || n + 1 > size)
        return BW_ELIMIT;
    return BW_OK;
}

int bw_metrics_fwrite(bw_metrics *m, bw_metrics_format format, FILE *f)
{
    if (!m || !f || !bw_metrics_content_type(format))
        return BW_EINVAL;
    sink s;
    memset(&s, 0, sizeof s);
    s.kind = SINK_FILE;
    s.f = f;
    s.base = s.p = malloc(FILE_CHUNK);
    if (!s.base)
        return BW_ENOMEM;
    s.end = s.base + FILE_CHUNK;
    int rc = render(m, format, &s);
    if (rc == BW_OK && !s.failed) {
        size_t have = (size_t)(s.p - s.base);
        if ((have && fwrite(s.base, 1, have, f) != have) || fflush(f) != 0)
            s.failed = BW_ESYS;
    }
    free(s.base);
    return rc != BW_OK ? rc : s.failed ? s.failed : BW_OK;
}
