/*
 * script.h — the store script runner (tests/support/): ONE way to write what
 * a store must do, as a script of steps run on a store URL, so that any store
 * can be compared with memory: (the reference) step by step.
 *
 * A step is an update of one key (KEEP, PUT with a length, a lifetime and a
 * fill byte, DELETE, or a bad verdict), a clock advance, or a sweep. The
 * runner opens the store, gives it a manual clock of its own starting at
 * SC_START, runs the steps, and records what each one observed: the status
 * and the field at fault, how often the update function ran, whether it saw
 * an entry, its now, the entry's lifetime, length and bytes (by a hash, and
 * whether they are exactly the fill pattern some PUT wrote: "data=f<fill>"),
 * and a sweep's count. Times are relative to SC_START.
 *
 * sc_compare() fails a check per step where two runs differ. A step may also
 * carry `expect`: tokens its observation must show on the reference run
 * ("saw=0", "rc=einval field=len", "deleted=5", "data=f9 len=5 exp=10s"), so
 * that two stores cannot agree on a wrong answer.
 */
#ifndef BW_TEST_SCRIPT_H
#define BW_TEST_SCRIPT_H

#include "harness.h"

#define SC_START (1000 * BW_NS_PER_S)
#define SC_NEVER INT64_MAX /* a PUT's ttl: the entry never expires */

typedef enum sc_kind { SCK_UPDATE = 1, SCK_ADVANCE = 2, SCK_SWEEP = 3 } sc_kind;

typedef struct sc_step {
    sc_kind kind;
    const char *key;    /* UPDATE */
    int verdict;        /* UPDATE: BW_STORE_KEEP, _PUT, _DELETE, or anything else (a bad verdict) */
    int64_t ttl;        /* PUT: expires_at = now + ttl (SC_NEVER: never; <= 0: expired when written) */
    uint32_t len;       /* PUT: bytes (0 or past BW_STORE_DATA_MAX: a bad length) */
    unsigned char fill; /* PUT: byte i is fill + 7 i */
    int64_t arg;        /* ADVANCE: ns; SWEEP: max */
    const char *expect; /* tokens the reference run must observe, or NULL */
} sc_step;

/* The steps; the _IS forms carry an expectation (tokens of the reference's observation). */
#define SC_KEEP_IS(k, expect)                                                                                          \
    {                                                                                                                  \
        SCK_UPDATE, (k), BW_STORE_KEEP, 0, 0, 0, 0, (expect)                                                           \
    }
#define SC_PUT_IS(k, ttl, len, fill, expect)                                                                           \
    {                                                                                                                  \
        SCK_UPDATE, (k), BW_STORE_PUT, (ttl), (len), (fill), 0, (expect)                                               \
    }
#define SC_DEL_IS(k, expect)                                                                                           \
    {                                                                                                                  \
        SCK_UPDATE, (k), BW_STORE_DELETE, 0, 0, 0, 0, (expect)                                                         \
    }
#define SC_VERDICT_IS(k, v, expect)                                                                                    \
    {                                                                                                                  \
        SCK_UPDATE, (k), (v), 0, 0, 0, 0, (expect)                                                                     \
    }
#define SC_SWEEP_IS(max, expect)                                                                                       \
    {                                                                                                                  \
        SCK_SWEEP, NULL, 0, 0, 0, 0, (max), (expect)                                                                   \
    }
#define SC_KEEP(k) SC_KEEP_IS(k, NULL)
#define SC_PUT(k, ttl, len, fill) SC_PUT_IS(k, ttl, len, fill, NULL)
#define SC_DEL(k) SC_DEL_IS(k, NULL)
#define SC_SWEEP(max) SC_SWEEP_IS(max, NULL)
#define SC_ADVANCE(ns)                                                                                                 \
    {                                                                                                                  \
        SCK_ADVANCE, NULL, 0, 0, 0, 0, (ns), NULL                                                                      \
    }

/* What one step observed. */
typedef struct sc_obs {
    int rc;
    char field[40]; /* the error's field when rc != BW_OK */
    int calls;      /* times the update function ran */
    int saw;        /* it saw an entry */
    int64_t now;    /* its now - SC_START */
    int64_t exp;    /* the entry's expires_at - SC_START, or SC_NEVER */
    uint32_t len;
    uint64_t hash; /* FNV-1a of the entry's bytes */
    int fill;      /* the fill byte when the bytes are exactly a PUT's pattern, else -1 */
    int deleted;   /* SWEEP */
} sc_obs;

typedef struct sc_call {
    const sc_step *step;
    int64_t expires_at;
    sc_obs *obs;
} sc_call;

static inline bw_store_verdict sc_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    sc_call *c = arg;
    sc_obs *o = c->obs;
    o->calls++;
    o->now = now - SC_START;
    o->saw = cur != NULL;
    if (cur) {
        o->exp = cur->expires_at == BW_STORE_NEVER ? SC_NEVER : cur->expires_at - SC_START;
        o->len = cur->len;
        uint64_t h = UINT64_C(1469598103934665603);
        uint32_t n = cur->len <= BW_STORE_DATA_MAX ? cur->len : BW_STORE_DATA_MAX;
        for (uint32_t i = 0; i < n; i++)
            h = (h ^ cur->data[i]) * UINT64_C(1099511628211);
        o->hash = h;
        o->fill = n ? cur->data[0] : -1;
        for (uint32_t i = 0; i < n && o->fill >= 0; i++)
            if (cur->data[i] != (unsigned char)(o->fill + 7 * i))
                o->fill = -1;
    }
    if (c->step->verdict == BW_STORE_PUT) {
        next->expires_at = c->expires_at;
        next->len = c->step->len;
        for (uint32_t i = 0; i < c->step->len && i < BW_STORE_DATA_MAX; i++)
            next->data[i] = (unsigned char)(c->step->fill + 7 * i);
    }
    return (bw_store_verdict)c->step->verdict;
}

static inline const char *sc_rc_name(int rc)
{
    switch (rc) {
    case BW_OK:
        return "ok";
    case BW_EINVAL:
        return "einval";
    case BW_ESYS:
        return "esys";
    case BW_ESTATE:
        return "estate";
    case BW_ELIMIT:
        return "elimit";
    case BW_ETIMEDOUT:
        return "etimedout";
    default:
        return "other";
    }
}

/* A duration as "10s", "-1ns", "never". */
static inline const char *sc_dur(int64_t ns, char *buf, size_t n)
{
    if (ns == SC_NEVER)
        snprintf(buf, n, "never");
    else if (ns % BW_NS_PER_S == 0)
        snprintf(buf, n, "%llds", (long long)(ns / BW_NS_PER_S));
    else
        snprintf(buf, n, "%lldns", (long long)ns);
    return buf;
}

/* A step's observation as space-separated tokens. */
static inline const char *sc_describe(const sc_step *t, const sc_obs *o, char *buf, size_t n)
{
    char a[32], b[32];
    if (t->kind == SCK_SWEEP) {
        snprintf(buf, n, "rc=%s%s%s deleted=%d", sc_rc_name(o->rc), o->rc ? " field=" : "", o->rc ? o->field : "",
                 o->deleted);
    } else if (t->kind == SCK_ADVANCE) {
        snprintf(buf, n, "rc=%s", sc_rc_name(o->rc));
    } else if (!o->saw) {
        snprintf(buf, n, "rc=%s%s%s calls=%d now=%s saw=0", sc_rc_name(o->rc), o->rc ? " field=" : "",
                 o->rc ? o->field : "", o->calls, sc_dur(o->now, a, sizeof a));
    } else {
        char data[32];
        if (o->fill >= 0)
            snprintf(data, sizeof data, "f%d", o->fill);
        else
            snprintf(data, sizeof data, "h%016llx", (unsigned long long)o->hash);
        snprintf(buf, n, "rc=%s%s%s calls=%d now=%s saw=1 exp=%s len=%u data=%s", sc_rc_name(o->rc),
                 o->rc ? " field=" : "", o->rc ? o->field : "", o->calls, sc_dur(o->now, a, sizeof a),
                 sc_dur(o->exp, b, sizeof b), o->len, data);
    }
    return buf;
}

/* Run steps[0..n) on an open store whose clock is c (a manual clock at SC_START); obs[i] gets step i. */
static inline void sc_run_on(bw_store *s, bw_clock *c, const sc_step *steps, size_t n, sc_obs *obs)
{
    for (size_t i = 0; i < n; i++) {
        const sc_step *t = &steps[i];
        sc_obs *o = &obs[i];
        bw_error e;
        memset(o, 0, sizeof *o);
        memset(&e, 0, sizeof e);
        o->fill = -1;
        if (t->kind == SCK_ADVANCE) {
            o->rc = bw_clock_manual_advance(c, t->arg);
        } else if (t->kind == SCK_SWEEP) {
            o->rc = bw_store_sweep(s, (int)t->arg, &o->deleted, &e);
        } else {
            int64_t now = bw_clock_now(c);
            sc_call call = {t, 0, o};
            call.expires_at = t->ttl == SC_NEVER ? BW_STORE_NEVER : now + t->ttl;
            o->rc = bw_store_update(s, t->key, sc_fn, &call, &e);
        }
        if (o->rc != BW_OK)
            snprintf(o->field, sizeof o->field, "%s", e.field);
    }
}

/*
 * Run steps on a fresh store at url on a manual clock of its own at SC_START.
 * Returns 0 (and a failed check) when the store could not be opened.
 */
static inline int sc_run(const char *url, const sc_step *steps, size_t n, sc_obs *obs)
{
    bw_clock *c = NULL;
    bw_store *s = NULL;
    bw_error e;
    memset(obs, 0, n * sizeof *obs);
    if (bw_clock_manual_new(SC_START, &c) != BW_OK) {
        H_FAIL("sc_run: no manual clock");
        return 0;
    }
    int rc = bw_store_open(url, &s, &e);
    if (rc != BW_OK) {
        H_FAIL("sc_run: bw_store_open(%s): %s (%s)", url, bw_strerror(rc), e.message);
        bw_clock_free(c);
        return 0;
    }
    CHECK_OK(bw_store_set_clock(s, c));
    sc_run_on(s, c, steps, n, obs);
    bw_store_close(s);
    bw_clock_free(c);
    return 1;
}

/* Whether every space-separated token of `want` is a token of `got`. */
static inline int sc_tokens_in(const char *want, const char *got)
{
    char w[256];
    snprintf(w, sizeof w, "%s", want);
    for (char *save = NULL, *tok = strtok_r(w, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        size_t k = strlen(tok);
        const char *p = got;
        int found = 0;
        while ((p = strstr(p, tok)) != NULL && !found) {
            found = (p == got || p[-1] == ' ') && (p[k] == ' ' || p[k] == '\0');
            p++;
        }
        if (!found)
            return 0;
    }
    return 1;
}

/* Check each step's `expect` against a run (the reference's): a failed check per step that does not show it. */
static inline void sc_check_expect(const char *name, const sc_step *steps, size_t n, const sc_obs *obs)
{
    char d[256];
    for (size_t i = 0; i < n; i++)
        if (steps[i].expect && !sc_tokens_in(steps[i].expect, sc_describe(&steps[i], &obs[i], d, sizeof d)))
            H_FAIL("%s: step %zu (%s): observed '%s', expected '%s'", name, i, steps[i].key ? steps[i].key : "-", d,
                   steps[i].expect);
}

/*
 * Compare a run (got, on `name`) with the reference's (want) step by step: a
 * failed check per step that differs. A store that sweeps by itself
 * (self_sweeps) may find fewer expired entries for a sweep than the
 * reference; every other observation must be the same.
 */
static inline void sc_compare(const char *name, const sc_step *steps, size_t n, const sc_obs *want, const sc_obs *got,
                              int self_sweeps)
{
    char dw[256], dg[256];
    for (size_t i = 0; i < n; i++) {
        const sc_obs *w = &want[i], *g = &got[i];
        int same = w->rc == g->rc && strcmp(w->field, g->field) == 0;
        if (steps[i].kind == SCK_SWEEP)
            same = same && (self_sweeps ? g->deleted <= w->deleted : g->deleted == w->deleted);
        else if (steps[i].kind == SCK_UPDATE)
            same = same && w->calls == g->calls && w->saw == g->saw && w->now == g->now &&
                   (!w->saw || (w->exp == g->exp && w->len == g->len && w->hash == g->hash));
        if (!same)
            H_FAIL("step %zu (%s): memory: %s; %s: %s", i, steps[i].key ? steps[i].key : "-",
                   sc_describe(&steps[i], w, dw, sizeof dw), name, sc_describe(&steps[i], g, dg, sizeof dg));
    }
}

#endif
