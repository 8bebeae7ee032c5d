/*
 * test_model.c (tests/unit/) — model-based test of the pure state machine
 * (src/machine/machine.c).
 *
 * A second, deliberately naive implementation of docs/states.md (the "model")
 * is driven in lock step with the real machine by a seeded random walk over
 * many small configurations. The model keeps the window as a plain list of
 * recorded outcomes (the count window recounts the last N of them each time,
 * the time window filters them by second), recomputes the open-wait backoff
 * with a loop, and applies every rule exactly as the rule book words it.
 *
 * After every step the test compares: the admit/reject decision and the permit
 * generation, the settle result, state, generation, the window totals and rates,
 * the probe counters, the consecutive counters, failed_rounds, open_wait,
 * retry_after and the next deadline. On the first mismatch of a run it prints
 * the seed, the step, the configuration and the tail of the operation history,
 * and stops that run.
 *
 * Operations: acquire (permits kept in a pool with their generations, stale ones
 * included), settle of a random permit with any outcome and a random slow flag
 * (also after time passed, with no snapshot in between), clock moves (small,
 * large, to a second boundary, exactly to the deadline or 1 ns before it, and
 * short backward excursions), advance(), reset and the three overrides.
 *
 * The rule book's bounds are the model's too: a consecutive round admits at
 * most 1,000,000 probes and ends inconclusive at 1,000,000 completed, and an
 * outcome with no probe in flight is stale (test_doc_probe_cap and
 * test_doc_stale_without_probe_in_flight reach them; the walk does not).
 *
 * Readings where the rule book is silent (chosen, and checked, here):
 * - a reopen (HALF_OPEN -> OPEN) zeroes the consecutive counters, like a trip;
 *   the round's probe counters are kept, as at a trip;
 * - the window reads "standing still" against the latest clock reading; the
 *   walk never empties a window while the clock is behind.
 *
 * Replay: ./test_model --seed 0x...  (runs that seed once for every policy and
 * window kind; the failing kind reproduces). More runs: ./test_model --runs N
 */
#include <stdarg.h>

#include "harness.h"
#include "machine/machine.h"
#include "machine/image.h"
#include "machine/window.h"

#define NS_S INT64_C(1000000000)
#define NS_MS INT64_C(1000000)
#define NS_DAY (INT64_C(86400) * NS_S)
/* docs/states.md: a consecutive round admits at most this many probes, and ends inconclusive at as many completed. */
#define M_PROBES_MAX UINT32_C(1000000)
/* The random walk never moves the clock past this (keeps every sum far from overflow). */
#define CLOCK_LIMIT (INT64_MAX / 2)

/* ------------------------------------------------------------------------- */
/* PRNG: splitmix64 to seed, xorshift64* to draw.                             */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t splitmix64(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

static void rng_seed(rng *r, uint64_t seed)
{
    r->s = splitmix64(seed);
    if (r->s == 0)
        r->s = UINT64_C(0x2545F4914F6CDD1D);
}

static uint64_t rnext(rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * UINT64_C(0x2545F4914F6CDD1D);
}

static uint32_t rbelow(rng *r, uint32_t n)
{
    return (uint32_t)((rnext(r) >> 11) % n);
}
static int64_t rbelow64(rng *r, int64_t n)
{
    return n <= 0 ? 0 : (int64_t)((rnext(r) >> 1) % (uint64_t)n);
}
static int rchance(rng *r, uint32_t percent)
{
    return rbelow(r, 100) < percent;
}

/* ------------------------------------------------------------------------- */
/* The model: docs/states.md, written out as plainly as possible.             */

#define MAXREC 2048

/* Coverage counters (how often the walk reached each rule), printed at the end. */
static long cov_trip, cov_close, cov_failed_reopen, cov_inconclusive_reopen, cov_expired, cov_lazy, cov_timer,
    cov_ceiling, cov_capped;
static uint32_t cov_max_failed_rounds;

typedef struct mrec {
    int64_t sec; /* floor(t / 1s) of the record */
    int failed, slow;
} mrec;

typedef struct model {
    bw__mcfg c;
    int state;
    uint64_t gen;
    int64_t opened_at, open_wait, ho_since;
    int64_t latest; /* the latest clock reading seen: a clock that goes back stands still for the window */
    uint32_t failed_rounds;
    uint32_t admitted, in_flight, completed, pfail, pslow, inconcl;
    uint32_t cerr, csucc;
    mrec rec[MAXREC]; /* every outcome recorded since the window was last emptied */
    size_t nrec;
} model;

static int64_t floor_sec(int64_t t)
{
    int64_t q = t / NS_S;
    if (t % NS_S != 0 && t < 0)
        q -= 1;
    return q;
}

/* The time the window works at: a clock that went back is treated as standing still. */
static int64_t m_window_time(model *m, int64_t now)
{
    if (now > m->latest)
        m->latest = now;
    return m->latest;
}

/* Window totals at `now`: count window = the last N records; time window = the
 * records whose second lies in s-N+1 .. s. The consecutive policy has none. */
static void m_window(model *m, int64_t now, uint64_t *t, uint64_t *f, uint64_t *s)
{
    now = m_window_time(m, now);
    *t = *f = *s = 0;
    if (m->c.policy != BW_POLICY_RATE)
        return;
    size_t from = 0;
    if (m->c.window_kind == BW_WINDOW_COUNT && m->nrec > m->c.window_size)
        from = m->nrec - m->c.window_size;
    int64_t sec = floor_sec(now);
    for (size_t i = from; i < m->nrec; i++) {
        if (m->c.window_kind == BW_WINDOW_TIME &&
            !(m->rec[i].sec >= sec - (int64_t)m->c.window_size + 1 && m->rec[i].sec <= sec))
            continue;
        *t += 1;
        *f += (uint64_t)m->rec[i].failed;
        *s += (uint64_t)m->rec[i].slow;
    }
}

static double rate_of(uint64_t part, uint64_t total)
{
    return total ? (double)part / (double)total : 0.0;
}

/* min(wait_max, wait * multiplier ^ min(failed_rounds, 64)), uncapped up to the ceiling. */
static int64_t m_backoff(const bw__mcfg *c, uint32_t failed_rounds)
{
    uint32_t k = failed_rounds < 64 ? failed_rounds : 64;
    int64_t w = c->wait;
    for (uint32_t i = 0; i < k; i++) {
        double nw = (double)w * c->wait_multiplier;
        if (nw >= (double)BW__WAIT_CEILING) {
            w = BW__WAIT_CEILING;
            break;
        }
        w = (int64_t)nw;
    }
    if (w > BW__WAIT_CEILING)
        w = BW__WAIT_CEILING;
    if (c->wait_max > 0 && w > c->wait_max)
        w = c->wait_max;
    return w;
}

static void m_init(model *m, const bw__mcfg *c)
{
    memset(m, 0, sizeof *m);
    m->c = *c;
    m->state = c->initial_state;
    m->gen = 0;
    m->open_wait = c->wait;
    m->latest = INT64_MIN;
}

static void m_zero_probes(model *m)
{
    m->admitted = m->in_flight = m->completed = m->pfail = m->pslow = m->inconcl = 0;
}

/* CLOSED -> OPEN. */
static void m_trip(model *m, int64_t now)
{
    cov_trip++;
    m->state = BW_STATE_OPEN;
    m->opened_at = now;
    m->open_wait = m->c.wait;
    m->cerr = m->csucc = 0;
    m->gen++;
}

/*
 * HALF_OPEN -> OPEN; a failed round grows the backoff, an inconclusive one does
 * not. The probe counters of the round are kept (the OPEN snapshot shows them).
 * The rule book says what a reopen does to the wait but not to the consecutive
 * counters; like a trip (the other way into OPEN), it zeroes them.
 */
static void m_reopen(model *m, int64_t now, int failed_round)
{
    if (failed_round) {
        m->failed_rounds++;
        m->open_wait = m_backoff(&m->c, m->failed_rounds);
        cov_failed_reopen++;
        if (m->failed_rounds > cov_max_failed_rounds)
            cov_max_failed_rounds = m->failed_rounds;
        if (m->open_wait == BW__WAIT_CEILING)
            cov_ceiling++;
        if (m->c.wait_max > 0 && m->open_wait == m->c.wait_max && m->open_wait > m->c.wait)
            cov_capped++;
    } else {
        cov_inconclusive_reopen++;
    }
    m->state = BW_STATE_OPEN;
    m->opened_at = now;
    m->cerr = m->csucc = 0;
    m->gen++;
}

/* HALF_OPEN -> CLOSED (a passing round). */
static void m_close(model *m)
{
    cov_close++;
    m->state = BW_STATE_CLOSED;
    m->nrec = 0;
    m_zero_probes(m);
    m->cerr = m->csucc = 0;
    m->failed_rounds = 0;
    m->open_wait = m->c.wait;
    m->gen++;
}

/* OPEN -> HALF_OPEN. */
static void m_enter_half_open(model *m, int64_t now)
{
    m->state = BW_STATE_HALF_OPEN;
    m->gen++;
    m_zero_probes(m);
    m->cerr = m->csucc = 0;
    m->ho_since = now;
}

/* The half-open deadline: an undecided round at ho_since + max_wait_ho ends as a failed round. */
static int m_half_open_expired(model *m, int64_t now)
{
    if (m->state == BW_STATE_HALF_OPEN && m->c.max_wait_ho > 0 && now - m->ho_since >= m->c.max_wait_ho) {
        cov_expired++;
        m_reopen(m, now, 1);
        return 1;
    }
    return 0;
}

static int m_acquire(model *m, int64_t now, uint64_t *gen)
{
    m_half_open_expired(m, now);
    switch (m->state) {
    case BW_STATE_CLOSED:
    case BW_STATE_DISABLED:
    case BW_STATE_METRICS_ONLY:
        *gen = m->gen;
        return 1;
    case BW_STATE_FORCED_OPEN:
        return 0;
    case BW_STATE_OPEN:
        if (now - m->opened_at >= m->open_wait) {
            cov_lazy++;
            m_enter_half_open(m, now);
            m->admitted = 1;
            m->in_flight = 1;
            *gen = m->gen;
            return 1;
        }
        return 0;
    case BW_STATE_HALF_OPEN:
        if (m->c.policy == BW_POLICY_RATE) {
            if (m->in_flight >= m->c.max_concurrent || m->admitted >= m->c.permitted)
                return 0;
        } else {
            if (m->in_flight >= m->c.half_open_capacity || m->admitted >= M_PROBES_MAX)
                return 0;
        }
        m->admitted++;
        m->in_flight++;
        *gen = m->gen;
        return 1;
    }
    return -99;
}

static int m_record(model *m, uint64_t gen, int outcome, int slow, int64_t now)
{
    m_half_open_expired(m, now);
    if (gen != m->gen)
        return -1;
    int failed = outcome == BW_FAILURE || outcome == BW_UNREACHABLE;
    int rate = m->c.policy == BW_POLICY_RATE;
    switch (m->state) {
    case BW_STATE_CLOSED:
    case BW_STATE_METRICS_ONLY:
        if (outcome == BW_IGNORED || (outcome == BW_UNREACHABLE && m->c.ignore_unreachable))
            return 0;
        if (rate) {
            if (m->nrec >= MAXREC)
                return -98; /* the test's own limit; runs are far shorter */
            m->rec[m->nrec].sec = floor_sec(m_window_time(m, now));
            m->rec[m->nrec].failed = failed;
            m->rec[m->nrec].slow = slow;
            m->nrec++;
            if (m->state == BW_STATE_CLOSED) {
                uint64_t t, f, s;
                m_window(m, now, &t, &f, &s);
                if (t >= m->c.min_calls && (rate_of(f, t) >= m->c.failure_rate || rate_of(s, t) >= m->c.slow_rate))
                    m_trip(m, now);
            }
        } else {
            if (outcome == BW_SUCCESS) {
                m->csucc++;
                m->cerr = 0;
            } else {
                m->cerr++;
                m->csucc = 0;
                if (m->state == BW_STATE_CLOSED && m->cerr >= m->c.error_threshold)
                    m_trip(m, now);
            }
        }
        return 1;
    case BW_STATE_HALF_OPEN:
        if (m->in_flight == 0)
            return -1; /* no probe in flight: the outcome belongs to none of the round's, stale */
        m->in_flight--;
        if (outcome == BW_SUCCESS || outcome == BW_FAILURE) {
            m->completed++;
            m->pfail += (uint32_t)failed;
            if (rate)
                m->pslow += (uint32_t)slow;
            if (rate) {
                if (m->completed >= m->c.permitted) {
                    if (rate_of(m->pfail, m->completed) >= m->c.failure_rate ||
                        rate_of(m->pslow, m->completed) >= m->c.slow_rate)
                        m_reopen(m, now, 1);
                    else
                        m_close(m);
                }
            } else if (outcome == BW_SUCCESS) {
                m->csucc++;
                m->cerr = 0;
                if (m->csucc >= m->c.success_threshold)
                    m_close(m);
            } else {
                m->cerr++;
                m->csucc = 0;
                if (m->cerr >= m->c.error_threshold)
                    m_reopen(m, now, 1);
            }
            if (!rate && m->state == BW_STATE_HALF_OPEN && m->completed >= M_PROBES_MAX)
                m_reopen(m, now, 0); /* alternating for 1,000,000 probes: an inconclusive round */
        } else if (outcome == BW_IGNORED) {
            m->admitted--;
        } else { /* UNREACHABLE */
            m->admitted--;
            m->inconcl++;
            if (m->inconcl >= (rate ? m->c.permitted : m->c.success_threshold))
                m_reopen(m, now, 0);
        }
        return 1;
    default: /* DISABLED records nothing; OPEN and FORCED_OPEN hand out no current permit */
        return 0;
    }
}

static int m_advance(model *m, int64_t now)
{
    if (m->state == BW_STATE_OPEN && now - m->opened_at >= m->open_wait) {
        cov_timer++;
        m_enter_half_open(m, now);
        return 1;
    }
    return m_half_open_expired(m, now);
}

static int64_t m_deadline(const model *m)
{
    if (m->state == BW_STATE_OPEN)
        return m->opened_at + m->open_wait;
    if (m->state == BW_STATE_HALF_OPEN && m->c.max_wait_ho > 0)
        return m->ho_since + m->c.max_wait_ho;
    return INT64_MAX;
}

static int64_t m_retry_after(const model *m, int64_t now)
{
    if (m->state != BW_STATE_OPEN)
        return BW_NO_TIME;
    int64_t r = m->opened_at + m->open_wait - now;
    return r > 0 ? r : 0;
}

static void m_reset(model *m)
{
    m->state = BW_STATE_CLOSED;
    m->nrec = 0;
    m_zero_probes(m);
    m->cerr = m->csucc = 0;
    m->gen++;
    m->failed_rounds = 0;
    m->open_wait = m->c.wait;
}

static void m_override(model *m, int state)
{
    m->state = state;
    m_zero_probes(m);
    m->cerr = m->csucc = 0;
    m->gen++;
}

/* ------------------------------------------------------------------------- */
/* The lock-step driver.                                                      */

#define POOL 24
#define HIST 40
#define HISTLEN 200

typedef struct permit {
    uint64_t gen;
    int64_t at;
} permit;

typedef struct ctx {
    uint64_t seed;
    const char *name;
    long step;
    long ops;
    int slow_on;
    bw__mcfg cfg;
    bw__machine mach;
    void *mem;
    /*
     * Time windows are sometimes split into STRIPES stripes, as the engine does
     * for threads; each settle then records into a stripe chosen from the seed.
     * The model keeps one window: striping must not change any rule.
     */
    bw__window stripes[3];
    void *stripe_mem[3];
    uint32_t nstripes;
    uint64_t stripe_pick;
    model mod;
    int64_t now;
    int64_t tmax; /* the latest clock reading so far; now < tmax during a backward excursion */
    permit pool[POOL];
    int npool;
    char hist[HIST][HISTLEN];
    long nhist;
    int failed;
} ctx;

static long g_ops, g_steps, g_runs, g_failed_runs;
static long g_stat_state[6], g_stat_trips, g_stat_stale, g_stat_rejects, g_stat_back;

static const char *sname(int s)
{
    static const char *n[] = {"CLOSED", "OPEN", "HALF_OPEN", "FORCED_OPEN", "DISABLED", "METRICS_ONLY"};
    return s >= 0 && s < 6 ? n[s] : "?";
}

static const char *oname(int o)
{
    static const char *n[] = {"SUCCESS", "FAILURE", "IGNORED", "UNREACHABLE"};
    return o >= 0 && o < 4 ? n[o] : "?";
}

static void hist(ctx *x, const char *fmt, ...)
{
    char *h = x->hist[x->nhist % HIST];
    int n = snprintf(h, HISTLEN, "#%ld t=%" PRId64 " ", x->step, x->now);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && n < HISTLEN)
        vsnprintf(h + n, (size_t)(HISTLEN - n), fmt, ap);
    va_end(ap);
    x->nhist++;
}

static void print_cfg(const bw__mcfg *c, int slow_on)
{
    fprintf(stderr,
            "  config: policy=%s window=%s:%u min_calls=%u permitted=%u max_concurrent=%u error_threshold=%u "
            "success_threshold=%u half_open_capacity=%u failure_rate=%.17g slow_rate=%.17g slow_detection=%s "
            "wait=%" PRId64 "ns wait_multiplier=%g wait_max=%" PRId64 "ns max_wait_ho=%" PRId64 "ns initial=%s\n",
            c->policy == BW_POLICY_RATE ? "rate" : "consecutive", c->window_kind == BW_WINDOW_COUNT ? "count" : "time",
            c->window_size, c->min_calls, c->permitted, c->max_concurrent, c->error_threshold, c->success_threshold,
            c->half_open_capacity, c->failure_rate, c->slow_rate, slow_on ? "on" : "off", c->wait, c->wait_multiplier,
            c->wait_max, c->max_wait_ho, sname(c->initial_state));
}

static void dump_model(const ctx *x)
{
    const model *m = &x->mod;
    fprintf(stderr,
            "  model:   state=%s gen=%" PRIu64 " opened_at=%" PRId64 " open_wait=%" PRId64 " ho_since=%" PRId64
            " failed_rounds=%u admitted=%u in_flight=%u completed=%u pfail=%u pslow=%u inconclusive=%u cerr=%u "
            "csucc=%u records=%zu\n",
            sname(m->state), m->gen, m->opened_at, m->open_wait, m->ho_since, m->failed_rounds, m->admitted,
            m->in_flight, m->completed, m->pfail, m->pslow, m->inconcl, m->cerr, m->csucc, m->nrec);
    const bw__machine *r = &x->mach;
    fprintf(stderr,
            "  machine: state=%s gen=%" PRIu64 " opened_at=%" PRId64 " open_wait=%" PRId64 " ho_since=%" PRId64
            " failed_rounds=%u admitted=%u in_flight=%u completed=%u pfail=%u pslow=%u inconclusive=%u cerr=%u "
            "csucc=%u\n",
            sname(r->state), r->gen, r->opened_at, r->open_wait, r->ho_since, r->failed_rounds, r->admitted,
            r->in_flight, r->completed, r->probe_failures, r->probe_slows, r->inconclusive, r->cerr, r->csucc);
}

static void mismatch(ctx *x, const char *what, const char *fmt, ...)
{
    x->failed = 1;
    g_failed_runs++;
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    H_FAIL("model/machine mismatch in %s: seed=0x%016" PRIx64 " step=%ld now=%" PRId64 ": %s: %s", x->name, x->seed,
           x->step, x->now, what, detail);
    if (g_failed_runs > 5)
        return; /* enough detail already */
    print_cfg(&x->cfg, x->slow_on);
    dump_model(x);
    fprintf(stderr, "  history (oldest first):\n");
    long from = x->nhist > HIST ? x->nhist - HIST : 0;
    for (long i = from; i < x->nhist; i++)
        fprintf(stderr, "    %s\n", x->hist[i % HIST]);
}

#define CMP_I(what, model_v, machine_v)                                                                                \
    do {                                                                                                               \
        long long cm_ = (long long)(model_v), cr_ = (long long)(machine_v);                                            \
        if (cm_ != cr_) {                                                                                              \
            mismatch(x, what, "model=%lld machine=%lld", cm_, cr_);                                                    \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

#define CMP_U(what, model_v, machine_v)                                                                                \
    do {                                                                                                               \
        unsigned long long cm_ = (unsigned long long)(model_v), cr_ = (unsigned long long)(machine_v);                 \
        if (cm_ != cr_) {                                                                                              \
            mismatch(x, what, "model=%llu machine=%llu", cm_, cr_);                                                    \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

#define CMP_D(what, model_v, machine_v)                                                                                \
    do {                                                                                                               \
        double cm_ = (model_v), cr_ = (machine_v);                                                                     \
        if (cm_ != cr_) {                                                                                              \
            mismatch(x, what, "model=%.17g machine=%.17g", cm_, cr_);                                                  \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

/* Compare everything observable. */
/*
 * Every machine the walk reaches is something a store may hold: its image must
 * pass the decoder's checks (which accept only what the encoder can write) and
 * load back to the same bytes. Striped machines are never stored.
 */
static void image_round_trip(ctx *x)
{
    size_t n = bw__machine_image_bytes(&x->cfg), wb = bw__machine_window_bytes(&x->cfg);
    unsigned char *a = malloc(n), *b = malloc(n);
    void *mem = malloc(wb ? wb : 1);
    bw__machine m2;
    if (a && b && mem) {
        size_t la = bw__machine_save(&x->mach, a);
        if (la != n || bw__machine_load(&m2, &x->cfg, mem, a, la) != 0)
            mismatch(x, "image", "the machine's image (%zu bytes) does not load back", la);
        else if (bw__machine_save(&m2, b) != la || memcmp(a, b, la) != 0)
            mismatch(x, "image", "the machine's image loads back to different bytes");
    }
    free(a);
    free(b);
    free(mem);
}

static void check_all(ctx *x)
{
    if (x->failed)
        return;
    if (x->nstripes == 1)
        image_round_trip(x);
    model *m = &x->mod;
    bw_snapshot s;
    memset(&s, 0xAB, sizeof s);
    bw__now t = bw__now_at(x->now);
    bw__machine_snapshot(&x->mach, &t, &s);
    uint64_t tot, fl, sl;
    m_window(m, x->now, &tot, &fl, &sl);

    CMP_I("state", m->state, x->mach.state);
    CMP_I("snapshot.state", m->state, s.state);
    CMP_U("generation", m->gen, x->mach.gen);
    CMP_U("snapshot.generation", m->gen, s.generation);
    CMP_U("snapshot.total_calls", tot, s.total_calls);
    CMP_U("snapshot.failed_calls", fl, s.failed_calls);
    CMP_U("snapshot.slow_calls", sl, s.slow_calls);
    CMP_D("snapshot.failure_rate", rate_of(fl, tot), s.failure_rate);
    CMP_D("snapshot.slow_call_rate", rate_of(sl, tot), s.slow_call_rate);
    CMP_U("snapshot.consecutive_failures", m->cerr, s.consecutive_failures);
    CMP_U("snapshot.consecutive_successes", m->csucc, s.consecutive_successes);
    CMP_U("snapshot.probes_admitted", m->admitted, s.probes_admitted);
    CMP_U("snapshot.probes_in_flight", m->in_flight, s.probes_in_flight);
    CMP_U("snapshot.probes_completed", m->completed, s.probes_completed);
    CMP_U("snapshot.probes_inconclusive", m->inconcl, s.probes_inconclusive);
    CMP_U("snapshot.failed_rounds", m->failed_rounds, s.failed_rounds);
    CMP_I("snapshot.open_wait_ns", m->open_wait, s.open_wait_ns);
    CMP_I("snapshot.retry_after_ns", m_retry_after(m, x->now), s.retry_after_ns);
    CMP_I("bw__machine_retry_after", m_retry_after(m, x->now), bw__machine_retry_after(&x->mach, x->now));
    CMP_I("bw__machine_deadline", m_deadline(m), bw__machine_deadline(&x->mach));
    CMP_U("machine.probe_failures", m->pfail, x->mach.probe_failures);
    if (m->c.policy == BW_POLICY_RATE) /* "the consecutive policy ignores slowness" */
        CMP_U("machine.probe_slows", m->pslow, x->mach.probe_slows);
    if (m->state == BW_STATE_OPEN)
        CMP_I("machine.opened_at", m->opened_at, x->mach.opened_at);
    if (m->state == BW_STATE_HALF_OPEN)
        CMP_I("machine.ho_since", m->ho_since, x->mach.ho_since);
}

static void ctx_start(ctx *x, const char *name, uint64_t seed, const bw__mcfg *cfg, int slow_on, int64_t start)
{
    memset(x, 0, sizeof *x);
    x->name = name;
    x->seed = seed;
    x->cfg = *cfg;
    x->slow_on = slow_on;
    x->now = start;
    x->tmax = start;
    size_t bytes = bw__machine_window_bytes(cfg);
    x->mem = malloc(bytes ? bytes : 1);
    if (x->mem)
        memset(x->mem, 0xA5, bytes ? bytes : 1); /* init must not rely on zeroed memory */
    memset(&x->mach, 0xA5, sizeof x->mach);
    bw__machine_init(&x->mach, cfg, x->mem);
    x->nstripes = 1;
    if (cfg->policy == BW_POLICY_RATE && cfg->window_kind == BW_WINDOW_TIME && seed % 2 == 0) {
        x->nstripes = 3;
        for (int i = 0; i < 3; i++) {
            x->stripe_mem[i] = malloc(bytes);
            bw__window_init(&x->stripes[i], cfg->window_kind, cfg->window_size, x->stripe_mem[i]);
        }
        bw__machine_use_stripes(&x->mach, &x->stripes[0], sizeof x->stripes[0], 3);
    }
    x->stripe_pick = seed;
    m_init(&x->mod, cfg);
    g_runs++;
    check_all(x);
}

static void ctx_end(ctx *x)
{
    g_ops += x->ops;
    g_steps += x->step;
    free(x->mem);
    x->mem = NULL;
    for (uint32_t i = 0; x->nstripes > 1 && i < x->nstripes; i++)
        free(x->stripe_mem[i]);
}

/* --- operations (each applied to both sides, its own result compared) ------ */

/* Returns 1 when admitted (both sides agree), 0 otherwise. */
static int op_acquire(ctx *x)
{
    if (x->failed)
        return 0;
    x->ops++;
    int before = x->mod.state;
    uint64_t mg = UINT64_MAX, rg = UINT64_MAX - 1;
    int ma = m_acquire(&x->mod, x->now, &mg);
    bw__now t = bw__now_at(x->now);
    int ra = bw__machine_acquire(&x->mach, &t, &rg);
    hist(x, "acquire [%s] -> model %s gen=%" PRIu64 " / machine %s gen=%" PRIu64, sname(before),
         ma ? "ADMIT" : "REJECT", ma ? mg : 0, ra ? "ADMIT" : "REJECT", ra ? rg : 0);
    if (ma != ra) {
        mismatch(x, "acquire decision", "model=%s machine=%s", ma ? "admit" : "reject", ra ? "admit" : "reject");
        return 0;
    }
    if (!ma) {
        g_stat_rejects++;
        if (x->mod.state == BW_STATE_OPEN && m_retry_after(&x->mod, x->now) <= 0) {
            mismatch(x, "retry_after of an OPEN rejection", "must be > 0, model has %" PRId64,
                     m_retry_after(&x->mod, x->now));
            return 0;
        }
        return 0;
    }
    if (mg != rg) {
        mismatch(x, "permit generation", "model=%" PRIu64 " machine=%" PRIu64, mg, rg);
        return 0;
    }
    if (x->npool < POOL) {
        x->pool[x->npool].gen = mg;
        x->pool[x->npool].at = x->now;
        x->npool++;
    } else {
        /* abandon the oldest permit (never settled), keep the new one */
        memmove(&x->pool[0], &x->pool[1], sizeof x->pool[0] * (POOL - 1));
        x->pool[POOL - 1].gen = mg;
        x->pool[POOL - 1].at = x->now;
    }
    return 1;
}

static void op_settle(ctx *x, int idx, int outcome, int slow)
{
    if (x->failed || idx < 0 || idx >= x->npool)
        return;
    x->ops++;
    permit p = x->pool[idx];
    x->pool[idx] = x->pool[--x->npool];
    int before = x->mod.state;
    uint64_t gen_before = x->mod.gen;
    int mr = m_record(&x->mod, p.gen, outcome, slow, x->now);
    bw__now t = bw__now_at(x->now);
    x->stripe_pick = x->stripe_pick * 6364136223846793005u + 1442695040888963407u;
    uint32_t stripe = (uint32_t)(x->stripe_pick >> 33) % x->nstripes;
    int rr = bw__machine_record_in(&x->mach, stripe, p.gen, outcome, slow, &t);
    if (mr == -1)
        g_stat_stale++;
    if (before == BW_STATE_CLOSED && x->mod.state == BW_STATE_OPEN)
        g_stat_trips++;
    hist(x, "settle gen=%" PRIu64 " %s%s [%s gen=%" PRIu64 "] -> model %d [%s] / machine %d", p.gen, oname(outcome),
         slow ? " slow" : "", sname(before), gen_before, mr, sname(x->mod.state), rr);
    if (mr == -98) {
        mismatch(x, "test limit", "too many records for the model");
        return;
    }
    CMP_I("bw__machine_record result", mr, rr);
}

static void op_clock(ctx *x, int64_t to)
{
    if (x->failed)
        return;
    if (to < x->now || to > CLOCK_LIMIT)
        return;
    x->ops++;
    hist(x, "clock += %" PRId64 " -> %" PRId64, to - x->now, to);
    x->now = to;
    if (to > x->tmax)
        x->tmax = to;
}

/* The clock goes back (a custom clock may): the window must treat it as standing still. */
static void op_clock_back(ctx *x, int64_t to)
{
    if (x->failed || to > x->now || to < 0)
        return;
    x->ops++;
    g_stat_back++;
    hist(x, "clock -= %" PRId64 " -> %" PRId64 " (back)", x->now - to, to);
    x->now = to;
}

static void op_advance(ctx *x)
{
    if (x->failed)
        return;
    x->ops++;
    int before = x->mod.state;
    int mr = m_advance(&x->mod, x->now);
    int rr = bw__machine_advance(&x->mach, x->now);
    hist(x, "advance() [%s] -> model %d [%s] / machine %d", sname(before), mr, sname(x->mod.state), rr);
    CMP_I("bw__machine_advance result", mr, rr);
}

static void op_reset(ctx *x)
{
    if (x->failed)
        return;
    x->ops++;
    hist(x, "reset [%s]", sname(x->mod.state));
    m_reset(&x->mod);
    bw__machine_reset(&x->mach);
}

static void op_override(ctx *x, int state)
{
    if (x->failed)
        return;
    x->ops++;
    hist(x, "override %s [%s]", sname(state), sname(x->mod.state));
    m_override(&x->mod, state);
    bw__machine_override(&x->mach, state);
}

static void step_done(ctx *x)
{
    x->step++;
    check_all(x);
}

/* ------------------------------------------------------------------------- */
/* Random configurations and walks.                                           */

static const double k_rates[] = {0.25, 0.34, 0.5, 0.75, 1.0};

static void random_cfg(rng *r, int policy, int window_kind, bw__mcfg *c, int *slow_on)
{
    static const int64_t waits[] = {NS_MS,    250 * NS_MS, NS_S,       1500 * NS_MS, 2 * NS_S,
                                    3 * NS_S, 5 * NS_S,    1234567891, NS_DAY,       365 * NS_DAY};
    static const int64_t ho_waits[] = {500 * NS_MS, NS_S, 2 * NS_S, 3 * NS_S, 2500 * NS_MS + 1};
    static const uint8_t initials[] = {BW_STATE_CLOSED, BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY};
    memset(c, 0, sizeof *c);
    c->policy = (uint8_t)policy;
    c->window_kind = (uint8_t)window_kind;
    c->initial_state = rchance(r, 70) ? BW_STATE_CLOSED : initials[rbelow(r, 4)];
    c->window_size = 1 + rbelow(r, 8);
    c->min_calls = 1 + rbelow(r, 6);
    c->permitted = 1 + rbelow(r, 4);
    c->max_concurrent = 1 + rbelow(r, c->permitted);
    c->error_threshold = 1 + rbelow(r, 4);
    c->success_threshold = 1 + rbelow(r, 4);
    c->half_open_capacity = 1 + rbelow(r, 3);
    c->failure_rate = k_rates[rbelow(r, 5)];
    c->slow_rate = k_rates[rbelow(r, 5)];
    *slow_on = rchance(r, 60);
    c->wait_multiplier = rchance(r, 50) ? 1.0 : 2.0;
    /* long waits are rare: most runs should cycle through many rounds */
    c->wait = waits[rchance(r, 92) ? rbelow(r, 8) : 8 + rbelow(r, 2)];
    c->wait_max = 0;
    if (rchance(r, 50)) {
        static const int64_t mul[] = {1, 2, 3, 5, 8};
        int64_t wm = c->wait * mul[rbelow(r, 5)] + (rchance(r, 30) ? (int64_t)rbelow(r, 1000) : 0);
        if (wm > 365 * NS_DAY)
            wm = 365 * NS_DAY;
        c->wait_max = wm;
    }
    c->max_wait_ho = rchance(r, 35) ? 0 : ho_waits[rbelow(r, 5)];
    c->ignore_unreachable = rchance(r, 20);
}

/* One clock move of a random kind. */
static void random_clock(ctx *x, rng *r)
{
    int64_t now = x->now, to = now;
    int64_t dl = bw__machine_deadline(&x->mach);
    switch (rbelow(r, 10)) {
    case 0:
        to = now + 1 + rbelow64(r, NS_MS);
        break;
    case 1:
    case 2:
        to = now + rbelow64(r, 300 * NS_MS);
        break;
    case 3:
        to = now + rbelow64(r, 2 * NS_S);
        break;
    case 4: { /* to a second boundary, or one ns before it */
        int64_t b = (floor_sec(now) + 1 + (int64_t)rbelow(r, 3)) * NS_S;
        to = rchance(r, 50) ? b : b - 1;
        break;
    }
    case 5:
    case 6: /* exactly to the next deadline */
        to = dl != INT64_MAX ? dl : now + rbelow64(r, NS_S);
        break;
    case 7: /* one ns before it */
        to = dl != INT64_MAX ? dl - 1 : now + rbelow64(r, 100 * NS_MS);
        break;
    case 8: { /* large */
        int64_t span = x->mod.open_wait < NS_S ? NS_S : x->mod.open_wait;
        if (span > CLOCK_LIMIT / 4)
            span = CLOCK_LIMIT / 4;
        to = now + rbelow64(r, 3 * span);
        break;
    }
    default: /* past the deadline */
        to = dl != INT64_MAX ? dl + rbelow64(r, 2 * NS_S) : now + rbelow64(r, 10 * NS_S);
        break;
    }
    if (to < now)
        to = now; /* a deadline already behind us: stand still */
    op_clock(x, to);
}

static int random_outcome(rng *r, int fail_pct)
{
    uint32_t v = rbelow(r, 100);
    if (v < 12)
        return BW_IGNORED;
    if (v < 12 + 14)
        return BW_UNREACHABLE;
    return rchance(r, (uint32_t)fail_pct) ? BW_FAILURE : BW_SUCCESS;
}

static void random_settle(ctx *x, rng *r, int fail_pct)
{
    if (x->npool == 0) {
        op_acquire(x);
        return;
    }
    int idx = (int)rbelow(r, (uint32_t)x->npool);
    /* prefer current-generation permits most of the time */
    if (rchance(r, 70)) {
        for (int k = 0; k < x->npool; k++) {
            int j = (idx + k) % x->npool;
            if (x->pool[j].gen == x->mod.gen) {
                idx = j;
                break;
            }
        }
    }
    int slow = x->slow_on && rchance(r, 35);
    op_settle(x, idx, random_outcome(r, fail_pct), slow);
}

static void random_run(const char *name, uint64_t seed, int policy, int window_kind)
{
    rng r;
    rng_seed(&r, seed);
    bw__mcfg c;
    int slow_on;
    random_cfg(&r, policy, window_kind, &c, &slow_on);
    int64_t start = rchance(&r, 70) ? rbelow64(&r, 5 * NS_S) : INT64_C(1000000000000000) + rbelow64(&r, 10 * NS_S);
    static ctx x; /* large: keep off the stack */
    ctx_start(&x, name, seed, &c, slow_on, start);
    int fail_pct = 10 + (int)rbelow(&r, 81);
    int verb_pct = 1 + (int)rbelow(&r, 5);
    long nsteps = 60 + (long)rbelow(&r, 240);
    for (long i = 0; i < nsteps && !x.failed; i++) {
        uint32_t v = rbelow(&r, 100);
        int closed_like = x.mod.state == BW_STATE_CLOSED || x.mod.state == BW_STATE_METRICS_ONLY;
        if (x.now < x.tmax && !closed_like) {
            /* A backward excursion ends as soon as the breaker leaves CLOSED or
               METRICS_ONLY, so that no window is emptied while the clock is behind
               (which reading an emptied window would then take as "now" is not
               something the rule book settles). */
            op_clock(&x, x.tmax + rbelow64(&r, 2 * NS_S));
        } else if (v < 3 && closed_like) {
            op_clock_back(&x, x.now - rbelow64(&r, rchance(&r, 50) ? NS_S : 4 * NS_S));
        } else if (v < 28) {
            op_acquire(&x);
        } else if (v < 54) {
            random_settle(&x, &r, fail_pct);
        } else if (v < 62) { /* time passes during a call, then it settles: no snapshot in between */
            op_clock(&x, x.now + rbelow64(&r, rchance(&r, 50) ? 300 * NS_MS : 3 * NS_S));
            random_settle(&x, &r, fail_pct);
        } else if (v < 66) { /* time passes, then a caller arrives */
            random_clock(&x, &r);
            op_acquire(&x);
        } else if (v < 82) {
            random_clock(&x, &r);
        } else if (v < 87) {
            op_advance(&x);
        } else if (v < 91) { /* the timer: clock to the deadline, then advance() */
            random_clock(&x, &r);
            op_advance(&x);
        } else if (v < 91 + (uint32_t)verb_pct + (x.mod.state >= BW_STATE_FORCED_OPEN ? 6u : 0u)) {
            /* overrides only leave by a verb: prefer reset there, so the walk spends
               most of its time in the automatic lifecycle */
            int in_override = x.mod.state >= BW_STATE_FORCED_OPEN;
            int verb = in_override ? (rchance(&r, 60) ? 0 : 1 + (int)rbelow(&r, 3)) : (int)rbelow(&r, 4);
            if (verb == 0 && x.now < x.tmax)
                verb = 1 + (int)rbelow(&r, 3); /* no reset (it empties the window) while the clock is behind */
            switch (verb) {
            case 0:
                op_reset(&x);
                break;
            case 1:
                op_override(&x, BW_STATE_FORCED_OPEN);
                break;
            case 2:
                op_override(&x, BW_STATE_DISABLED);
                break;
            default:
                op_override(&x, BW_STATE_METRICS_ONLY);
                break;
            }
        } else {
            /* a burst of acquires (fills half-open caps) */
            int n = 1 + (int)rbelow(&r, 4);
            for (int k = 0; k < n; k++)
                op_acquire(&x);
        }
        step_done(&x);
        if (x.mod.state >= 0 && x.mod.state < 6)
            g_stat_state[x.mod.state]++;
    }
    ctx_end(&x);
}

static uint64_t g_base_seed = UINT64_C(0xB2EA7A7E20240601);
static long g_runs_per_kind = 700;
static int g_single; /* --seed: replay exactly one seed (for every kind) */

static uint64_t run_seed(long i, int kind)
{
    return g_base_seed + (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t)kind;
}

static void random_kind(const char *name, int kind, int policy, int window_kind)
{
    long n = g_single ? 1 : g_runs_per_kind;
    for (long i = 0; i < n; i++)
        random_run(name, g_single ? g_base_seed : run_seed(i, kind), policy, window_kind);
}

static void test_random_rate_count(void)
{
    random_kind("rate/count", 0, BW_POLICY_RATE, BW_WINDOW_COUNT);
}
static void test_random_rate_time(void)
{
    random_kind("rate/time", 1, BW_POLICY_RATE, BW_WINDOW_TIME);
}
static void test_random_consecutive(void)
{
    random_kind("consecutive/count", 2, BW_POLICY_CONSECUTIVE, BW_WINDOW_COUNT);
    random_kind("consecutive/time", 3, BW_POLICY_CONSECUTIVE, BW_WINDOW_TIME);
}

/* ------------------------------------------------------------------------- */
/* Directed walks through the rule book's own examples: they pin the model to */
/* docs/states.md and run the machine in lock step while doing so.            */

static bw__mcfg base_cfg(int policy)
{
    bw__mcfg c;
    memset(&c, 0, sizeof c);
    c.policy = (uint8_t)policy;
    c.window_kind = BW_WINDOW_COUNT;
    c.initial_state = BW_STATE_CLOSED;
    c.window_size = 4;
    c.min_calls = 1;
    c.permitted = 1;
    c.max_concurrent = 1;
    c.error_threshold = 1;
    c.success_threshold = 1;
    c.half_open_capacity = 1;
    c.failure_rate = 0.5;
    c.slow_rate = 1.0;
    c.wait_multiplier = 1.0;
    c.wait = 5 * NS_S;
    return c;
}

/* Settle the most recent permit. */
static void settle_last(ctx *x, int outcome, int slow)
{
    op_settle(x, x->npool - 1, outcome, slow);
}

static void test_doc_round_example(void)
{
    /* permitted=3, frt=srt=0.5: slow-failure, success, success -> 1/3, 1/3: close */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_RATE);
    c.permitted = 3;
    c.max_concurrent = 3;
    c.slow_rate = 0.5;
    ctx_start(&x, "doc round example", 0, &c, 1, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_OPEN);
    op_clock(&x, 5 * NS_S), step_done(&x);
    for (int i = 0; i < 3; i++)
        op_acquire(&x), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_HALF_OPEN);
    CHECK_INT(x.mod.admitted, 3);
    settle_last(&x, BW_FAILURE, 1), step_done(&x);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_HALF_OPEN);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_CLOSED);
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_doc_admission_example(void)
{
    /* permitted=2, maxconc=2: admit, settle, admit, and the third acquire is rejected */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_RATE);
    c.permitted = 2;
    c.max_concurrent = 2;
    ctx_start(&x, "doc admission example", 0, &c, 0, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    op_clock(&x, 5 * NS_S - 1), step_done(&x);
    CHECK_INT(op_acquire(&x), 0);
    step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_OPEN);
    CHECK_INT(m_retry_after(&x.mod, x.now), 1);
    op_clock(&x, 5 * NS_S), step_done(&x);
    CHECK_INT(op_acquire(&x), 1); /* inclusive: exactly `wait` after the trip */
    step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_HALF_OPEN);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x);
    CHECK_INT(op_acquire(&x), 1);
    step_done(&x);
    CHECK_INT(op_acquire(&x), 0);
    step_done(&x);
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_doc_backoff_example(void)
{
    /* wait=5s multiplier=2 max=120s: failed rounds wait 10, 20, 40, 80, 120, 120 s */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_RATE);
    c.wait_multiplier = 2.0;
    c.wait_max = 120 * NS_S;
    static const int64_t want[] = {10, 20, 40, 80, 120, 120, 120};
    for (uint32_t k = 0; k < 7; k++)
        CHECK_INT(m_backoff(&c, k + 1), want[k] * NS_S);
    CHECK_INT(m_backoff(&c, 0), 5 * NS_S);
    ctx_start(&x, "doc backoff example", 0, &c, 0, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    CHECK_INT(x.mod.open_wait, 5 * NS_S);
    for (int k = 0; k < 7; k++) {
        op_clock(&x, bw__machine_deadline(&x.mach)), step_done(&x);
        op_acquire(&x), step_done(&x);
        settle_last(&x, BW_FAILURE, 0), step_done(&x);
        CHECK_INT(x.mod.open_wait, want[k] * NS_S);
    }
    /* an inconclusive reopen neither grows nor resets the wait */
    op_clock(&x, bw__machine_deadline(&x.mach)), step_done(&x);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_UNREACHABLE, 0), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_OPEN);
    CHECK_INT(x.mod.failed_rounds, 7);
    CHECK_INT(x.mod.open_wait, 120 * NS_S);
    /* a passing round resets it */
    op_clock(&x, bw__machine_deadline(&x.mach)), step_done(&x);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_CLOSED);
    CHECK_INT(x.mod.failed_rounds, 0);
    CHECK_INT(x.mod.open_wait, 5 * NS_S);
    CHECK(!x.failed);
    ctx_end(&x);

    /* uncapped: the wait stops at the ceiling */
    c.wait_max = 0;
    c.wait = 365 * NS_DAY;
    CHECK_INT(m_backoff(&c, 3), 8 * 365 * NS_DAY);
    CHECK_INT(m_backoff(&c, 64), BW__WAIT_CEILING);
    CHECK_INT(m_backoff(&c, 1000), BW__WAIT_CEILING);
}

static void test_doc_time_window_example(void)
{
    /* time:3: outcomes at 0.0 s and 0.99 s still count at 2.99 s, both gone at 3.0 s */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_RATE);
    c.window_kind = BW_WINDOW_TIME;
    c.window_size = 3;
    c.min_calls = 5;
    ctx_start(&x, "doc time window example", 0, &c, 0, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    op_clock(&x, 990 * NS_MS), step_done(&x);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x);
    op_clock(&x, 2990 * NS_MS), step_done(&x);
    uint64_t t, f, s;
    m_window(&x.mod, x.now, &t, &f, &s);
    CHECK_INT(t, 2);
    CHECK_INT(f, 1);
    op_clock(&x, 3 * NS_S), step_done(&x);
    m_window(&x.mod, x.now, &t, &f, &s);
    CHECK_INT(t, 0);
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_doc_consecutive_example(void)
{
    /* error_threshold=5: a single failed probe does not reopen; UNREACHABLE counts in CLOSED */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_CONSECUTIVE);
    c.error_threshold = 5;
    c.success_threshold = 2;
    ctx_start(&x, "doc consecutive example", 0, &c, 1, 0);
    for (int i = 0; i < 5; i++) {
        op_acquire(&x), step_done(&x);
        settle_last(&x, i % 2 ? BW_UNREACHABLE : BW_FAILURE, 1), step_done(&x);
    }
    CHECK_INT(x.mod.state, BW_STATE_OPEN);
    op_clock(&x, 5 * NS_S), step_done(&x);
    op_advance(&x), step_done(&x); /* the timer moves it, admitting nobody */
    CHECK_INT(x.mod.state, BW_STATE_HALF_OPEN);
    CHECK_INT(x.mod.admitted, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_HALF_OPEN);
    /* max_wait_in_half_open=off: no deadline, the round may wait forever */
    CHECK_INT(bw__machine_deadline(&x.mach), INT64_MAX);
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_doc_stale_without_probe_in_flight(void)
{
    /* an outcome of the round's generation with no probe in flight belongs to no probe: dropped as stale */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_CONSECUTIVE);
    c.success_threshold = 3;
    c.half_open_capacity = 2;
    ctx_start(&x, "doc stale without a probe in flight", 0, &c, 0, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    op_clock(&x, 5 * NS_S), step_done(&x);
    op_acquire(&x), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_HALF_OPEN);
    x.pool[x.npool] = x.pool[x.npool - 1]; /* the same permit twice: a stored one, say, settled again */
    x.npool++;
    settle_last(&x, BW_SUCCESS, 0), step_done(&x);
    CHECK_INT(x.mod.in_flight, 0);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x); /* none in flight: stale, nothing counted */
    CHECK_INT(x.mod.in_flight, 0);
    CHECK_INT(x.mod.completed, 1);
    CHECK_INT(x.mod.csucc, 1);
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_doc_probe_cap(void)
{
    /*
     * Consecutive policy: a round admits at most 1,000,000 probes, and one
     * whose failures and successes alternate for 1,000,000 completed probes
     * reopens as an inconclusive round. One probe is held in flight all along,
     * so the cap on admission is met first, then the round's end.
     */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_CONSECUTIVE);
    c.error_threshold = 2;
    c.success_threshold = 2;
    c.half_open_capacity = 2;
    ctx_start(&x, "doc probe cap", 0, &c, 0, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_OPEN);
    op_clock(&x, 5 * NS_S), step_done(&x);
    op_acquire(&x), step_done(&x); /* held in flight */
    for (uint32_t i = 0; i < 999999 && !x.failed; i++) {
        op_acquire(&x), step_done(&x);
        settle_last(&x, i % 2 ? BW_SUCCESS : BW_FAILURE, 0), step_done(&x);
    }
    CHECK_INT(x.mod.state, BW_STATE_HALF_OPEN);
    CHECK_INT(x.mod.admitted, 1000000);
    CHECK_INT(op_acquire(&x), 0); /* the round's admissions are spent */
    step_done(&x);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x); /* the one held: the 1,000,000th completed */
    CHECK_INT(x.mod.state, BW_STATE_OPEN);
    CHECK_INT(x.mod.failed_rounds, 0); /* inconclusive: the wait does not grow */
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_doc_half_open_deadline(void)
{
    /* an undecided round ends at ho_since + max_wait_in_half_open as a failed round */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_RATE);
    c.permitted = 2;
    c.max_wait_ho = 2 * NS_S;
    c.wait_multiplier = 2.0;
    ctx_start(&x, "doc half-open deadline", 0, &c, 0, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    op_clock(&x, 5 * NS_S), step_done(&x);
    op_acquire(&x), step_done(&x);
    CHECK_INT(bw__machine_deadline(&x.mach), 7 * NS_S);
    op_clock(&x, 7 * NS_S), step_done(&x);
    CHECK_INT(op_acquire(&x), 0);
    step_done(&x);
    CHECK_INT(x.mod.state, BW_STATE_OPEN);
    CHECK_INT(x.mod.failed_rounds, 1);
    CHECK_INT(x.mod.open_wait, 10 * NS_S);
    settle_last(&x, BW_SUCCESS, 0), step_done(&x); /* the round's probe is stale now */
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_backoff_ceiling(void)
{
    /* uncapped doubling from wait=365d: the 7th failed round would wait 128 * 365 d,
       beyond the ceiling, so the wait is exactly BW__WAIT_CEILING ("the largest
       wait the backoff can reach when uncapped"; (double)BW__WAIT_CEILING rounds
       up to 2^61, one past it). The clock ends near 4e18 ns: no 8th round. */
    static ctx x;
    bw__mcfg c = base_cfg(BW_POLICY_RATE);
    c.window_size = 1;
    c.wait = 365 * NS_DAY;
    c.wait_multiplier = 2.0;
    ctx_start(&x, "backoff ceiling", 0, &c, 0, 0);
    op_acquire(&x), step_done(&x);
    settle_last(&x, BW_FAILURE, 0), step_done(&x);
    for (int k = 1; k <= 7 && !x.failed; k++) {
        op_clock(&x, bw__machine_deadline(&x.mach)), step_done(&x);
        op_acquire(&x), step_done(&x);
        settle_last(&x, BW_FAILURE, 0), step_done(&x);
        CHECK_INT(x.mod.failed_rounds, k);
        CHECK(x.mach.open_wait <= BW__WAIT_CEILING);
    }
    CHECK_INT(x.mod.open_wait, BW__WAIT_CEILING);
    CHECK(!x.failed);
    ctx_end(&x);
}

static void test_ops_total(void)
{
    CHECK(g_ops >= 100000);
}

static int parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            g_base_seed = strtoull(argv[++i], NULL, 0);
            g_single = 1;
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            g_runs_per_kind = strtol(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: %s [--seed S] [--runs N]\n", argv[0]);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (parse_args(argc, argv) != 0)
        return 2;
    RUN(test_doc_round_example);
    RUN(test_doc_admission_example);
    RUN(test_doc_backoff_example);
    RUN(test_doc_time_window_example);
    RUN(test_doc_consecutive_example);
    RUN(test_doc_half_open_deadline);
    RUN(test_doc_stale_without_probe_in_flight);
    RUN(test_doc_probe_cap);
    RUN(test_backoff_ceiling);
    RUN(test_random_rate_count);
    RUN(test_random_rate_time);
    RUN(test_random_consecutive);
    printf("model: %ld runs, %ld steps, %ld operations executed (%ld runs failed)\n", g_runs, g_steps, g_ops,
           g_failed_runs);
    printf("model: steps ending in closed=%ld open=%ld half_open=%ld forced_open=%ld disabled=%ld metrics_only=%ld; "
           "trips=%ld stale settles=%ld rejections=%ld clock_back=%ld\n",
           g_stat_state[0], g_stat_state[1], g_stat_state[2], g_stat_state[3], g_stat_state[4], g_stat_state[5],
           g_stat_trips, g_stat_stale, g_stat_rejects, g_stat_back);
    printf("model: rules reached: trip=%ld close=%ld failed_reopen=%ld inconclusive_reopen=%ld half_open_expired=%ld "
           "lazy_half_open=%ld timer_half_open=%ld wait_capped=%ld wait_at_ceiling=%ld max_failed_rounds=%u\n",
           cov_trip, cov_close, cov_failed_reopen, cov_inconclusive_reopen, cov_expired, cov_lazy, cov_timer,
           cov_capped, cov_ceiling, cov_max_failed_rounds);
    if (!g_single && g_runs_per_kind >= 700)
        RUN(test_ops_total);
    return TEST_SUMMARY();
}
