/*
 * test_machine.c (tests/unit/) — unit tests of the pure state machine
 * (machine.h) with explicit times, against docs/states.md: every transition,
 * every threshold at N-1/N/N+1, probe rounds, generations, backoff, the
 * half-open deadline and the verbs.
 */
#include "harness.h"
#include "machine/machine.h"

#define SEC INT64_C(1000000000)
#define MS INT64_C(1000000)
#define T0 (1000 * SEC)
#define REJECTED 9 /* call(): the acquire was rejected */

static unsigned char g_winmem[4096];

/* The library defaults; tests tweak a copy. */
static bw__mcfg defaults(void)
{
    bw__mcfg c;
    memset(&c, 0, sizeof c);
    c.policy = BW_POLICY_RATE;
    c.window_kind = BW_WINDOW_COUNT;
    c.initial_state = BW_STATE_CLOSED;
    c.window_size = 100;
    c.min_calls = 10;
    c.failure_rate = 0.5;
    c.slow_rate = 1.0;
    c.permitted = 10;
    c.max_concurrent = 1;
    c.wait = 60 * SEC;
    c.wait_multiplier = 1.0;
    c.wait_max = 0;
    c.max_wait_ho = 60 * SEC;
    c.error_threshold = 5;
    c.success_threshold = 2;
    c.half_open_capacity = 1;
    return c;
}

static bw__mcfg consecutive(void)
{
    bw__mcfg c = defaults();
    c.policy = BW_POLICY_CONSECUTIVE;
    return c;
}

/* Start a machine over the shared static window memory (one machine at a time). */
static void mk(bw__machine *m, const bw__mcfg *c)
{
    size_t need = bw__machine_window_bytes(c);
    if (need > sizeof g_winmem) {
        fprintf(stderr, "window of %zu bytes does not fit\n", need);
        abort();
    }
    memset(g_winmem, 0xa5, sizeof g_winmem);
    bw__machine_init(m, c, g_winmem);
}

static int acq(bw__machine *m, int64_t t, uint64_t *gen)
{
    bw__now n = bw__now_at(t);
    uint64_t g = UINT64_MAX;
    int r = bw__machine_acquire(m, &n, &g);
    if (gen)
        *gen = g;
    return r;
}

static int rec(bw__machine *m, uint64_t gen, int outcome, int slow, int64_t t)
{
    bw__now n = bw__now_at(t);
    return bw__machine_record(m, gen, outcome, slow, &n);
}

/* Acquire and settle at t: the record result, or REJECTED. */
static int call(bw__machine *m, int64_t t, int outcome, int slow)
{
    uint64_t g;
    if (!acq(m, t, &g))
        return REJECTED;
    return rec(m, g, outcome, slow, t);
}

static void calls(bw__machine *m, int64_t t, int n, int outcome, int slow)
{
    for (int i = 0; i < n; i++)
        CHECK_INT(call(m, t, outcome, slow), 1);
}

/* Record failures at t until the breaker trips. */
static void trip_at(bw__machine *m, int64_t t)
{
    for (int i = 0; i < 1000 && m->state == BW_STATE_CLOSED; i++)
        call(m, t, BW_FAILURE, 0);
    CHECK_INT(m->state, BW_STATE_OPEN);
    CHECK_INT(m->opened_at, t);
}

static int64_t open_until(const bw__machine *m)
{
    return m->opened_at + m->open_wait;
}

/* OPEN -> HALF_OPEN by the lazy probe exactly when the wait ends; returns its gen. */
static uint64_t probe1(bw__machine *m)
{
    uint64_t g = 0;
    CHECK_INT(m->state, BW_STATE_OPEN);
    CHECK_INT(acq(m, open_until(m), &g), 1);
    CHECK_INT(m->state, BW_STATE_HALF_OPEN);
    CHECK_INT(g, m->gen);
    return g;
}

static long long win_total(const bw__machine *m)
{
    return (long long)m->win.total;
}

static void check_probes_zero(const bw__machine *m)
{
    CHECK_INT(m->admitted, 0);
    CHECK_INT(m->in_flight, 0);
    CHECK_INT(m->completed, 0);
    CHECK_INT(m->probe_failures, 0);
    CHECK_INT(m->probe_slows, 0);
    CHECK_INT(m->inconclusive, 0);
}

/* ---------------------------------------------------------------- initial */

static void test_initial_states(void)
{
    static const int states[] = {BW_STATE_CLOSED, BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY};
    for (int p = 0; p < 2; p++) {
        for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
            bw__mcfg c = p ? consecutive() : defaults();
            c.initial_state = (uint8_t)states[i];
            bw__machine m;
            mk(&m, &c);
            CHECK_INT(m.state, states[i]);
            CHECK_INT(m.gen, 0);
            CHECK_INT(win_total(&m), 0);
            CHECK_INT(m.win.failed, 0);
            CHECK_INT(m.win.slow, 0);
            CHECK_INT(m.failed_rounds, 0);
            CHECK_INT(m.open_wait, c.wait);
            CHECK_INT(m.cerr, 0);
            CHECK_INT(m.csucc, 0);
            check_probes_zero(&m);
            CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
            CHECK_INT(bw__machine_retry_after(&m, T0), BW_NO_TIME);
            bw_snapshot s;
            bw__now n = bw__now_at(T0);
            bw__machine_snapshot(&m, &n, &s);
            CHECK_INT(s.state, states[i]);
            CHECK_INT(s.generation, 0);
            CHECK_INT(s.total_calls, 0);
            CHECK_DBL(s.failure_rate, 0.0);
            CHECK_DBL(s.slow_call_rate, 0.0);
            CHECK_INT(s.retry_after_ns, BW_NO_TIME);
            CHECK_INT(s.open_wait_ns, c.wait);
            /* Admission in the initial state. */
            uint64_t g = 77;
            int admitted = acq(&m, T0 + 1000 * SEC, &g);
            CHECK_INT(admitted, states[i] != BW_STATE_FORCED_OPEN);
            if (admitted)
                CHECK_INT(g, 0);
            CHECK_INT(m.state, states[i]);
            CHECK_INT(m.gen, 0);
        }
    }
    bw__mcfg c = consecutive();
    CHECK_INT(bw__machine_window_bytes(&c), 0);
    c = defaults();
    CHECK_INT(bw__machine_window_bytes(&c), 100);
    c.window_kind = BW_WINDOW_TIME;
    c.window_size = 3;
    CHECK_INT(bw__machine_window_bytes(&c), 3 * sizeof(bw__bucket));
}

/* ---------------------------------------------------------------- CLOSED */

/* Outcomes table, CLOSED column (rate policy). */
static void test_closed_records_outcomes(void)
{
    bw__mcfg c = defaults();
    c.min_calls = 100;
    bw__machine m;
    mk(&m, &c);
    CHECK_INT(call(&m, T0, BW_SUCCESS, 0), 1);
    CHECK_INT(win_total(&m), 1);
    CHECK_INT(m.win.failed, 0);
    CHECK_INT(call(&m, T0, BW_FAILURE, 0), 1);
    CHECK_INT(win_total(&m), 2);
    CHECK_INT(m.win.failed, 1);
    CHECK_INT(call(&m, T0, BW_IGNORED, 1), 0); /* not recorded at all */
    CHECK_INT(win_total(&m), 2);
    CHECK_INT(m.win.failed, 1);
    CHECK_INT(m.win.slow, 0);
    CHECK_INT(call(&m, T0, BW_UNREACHABLE, 0), 1); /* a failure */
    CHECK_INT(win_total(&m), 3);
    CHECK_INT(m.win.failed, 2);
    CHECK_INT(call(&m, T0, BW_SUCCESS, 1), 1); /* slow success: slow, not failed */
    CHECK_INT(win_total(&m), 4);
    CHECK_INT(m.win.failed, 2);
    CHECK_INT(m.win.slow, 1);
    CHECK_INT(call(&m, T0, BW_FAILURE, 1), 1); /* slow failure: both */
    CHECK_INT(m.win.failed, 3);
    CHECK_INT(m.win.slow, 2);
    bw_snapshot s;
    bw__now n = bw__now_at(T0);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.total_calls, 5);
    CHECK_INT(s.failed_calls, 3);
    CHECK_INT(s.slow_calls, 2);
    CHECK_DBL(s.failure_rate, 3.0 / 5.0);
    CHECK_DBL(s.slow_call_rate, 2.0 / 5.0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.gen, 0);
}

/* min_calls gate: N-1 failures do not trip, the Nth does; the gate comes first. */
static void test_min_calls_gate(void)
{
    bw__mcfg c = defaults(); /* min 10, frt 0.5 */
    bw__machine m;
    mk(&m, &c);
    calls(&m, T0, 9, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED); /* rate 1.0 but total 9 < 10 */
    CHECK_INT(m.gen, 0);
    CHECK_INT(call(&m, T0 + 1, BW_FAILURE, 0), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, 1);

    /* Mixed: 4 S + 5 F (5/9 >= 0.5, gated), 10th F trips at 6/10. */
    mk(&m, &c);
    calls(&m, T0, 4, BW_SUCCESS, 0);
    calls(&m, T0, 5, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* N+1: evaluated on every record once past the gate. 5 S + 4 F + S = 4/10;
     * F = 5/11; F = 6/12 trips. */
    mk(&m, &c);
    calls(&m, T0, 5, BW_SUCCESS, 0);
    calls(&m, T0, 4, BW_FAILURE, 0);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    calls(&m, T0, 1, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* min larger than the gate with the slow rate too. */
    c.slow_rate = 0.5;
    mk(&m, &c);
    calls(&m, T0, 9, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
}

/* failure_rate >= frt, inclusive, as IEEE doubles. */
static void test_failure_rate_boundary(void)
{
    bw__mcfg c = defaults(); /* min 10, frt 0.5 */
    bw__machine m;
    mk(&m, &c); /* 4/10 */
    calls(&m, T0, 6, BW_SUCCESS, 0);
    calls(&m, T0, 4, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    mk(&m, &c); /* 5/10 */
    calls(&m, T0, 5, BW_SUCCESS, 0);
    calls(&m, T0, 4, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    mk(&m, &c); /* 6/10 */
    calls(&m, T0, 4, BW_SUCCESS, 0);
    calls(&m, T0, 5, BW_FAILURE, 0);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* 1/2 >= 0.5 trips; 1/3 does not. */
    c.min_calls = 2;
    mk(&m, &c);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    c.min_calls = 3;
    mk(&m, &c);
    calls(&m, T0, 2, BW_SUCCESS, 0);
    calls(&m, T0, 1, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);

    /* 3/10 >= 0.3 and 2/8 >= 0.25. */
    c.min_calls = 10;
    c.failure_rate = 0.3;
    mk(&m, &c);
    calls(&m, T0, 7, BW_SUCCESS, 0);
    calls(&m, T0, 2, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    c.min_calls = 8;
    c.failure_rate = 0.25;
    mk(&m, &c);
    calls(&m, T0, 6, BW_SUCCESS, 0);
    calls(&m, T0, 1, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* failure_rate 1.0: only an all-failure window trips. */
    c.min_calls = 4;
    c.failure_rate = 1.0;
    mk(&m, &c);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    calls(&m, T0, 3, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
}

/* slow_call_rate >= srt, inclusive; default srt 1.0 trips on an all-slow window. */
static void test_slow_rate_boundary(void)
{
    bw__mcfg c = defaults();
    c.slow_rate = 0.5;
    bw__machine m;
    mk(&m, &c); /* 4/10 */
    calls(&m, T0, 6, BW_SUCCESS, 0);
    calls(&m, T0, 4, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    mk(&m, &c); /* 5/10 */
    calls(&m, T0, 5, BW_SUCCESS, 0);
    calls(&m, T0, 4, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    mk(&m, &c); /* 6/10 */
    calls(&m, T0, 4, BW_SUCCESS, 0);
    calls(&m, T0, 5, BW_SUCCESS, 1);
    call(&m, T0, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_OPEN);

    c = defaults(); /* srt 1.0 */
    mk(&m, &c);
    calls(&m, T0, 9, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    mk(&m, &c);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    calls(&m, T0, 9, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_CLOSED); /* 9/10 < 1.0 */
}

/* Either rate reaching its threshold trips; the rates are not added. */
static void test_either_rate_trips(void)
{
    bw__mcfg c = defaults();
    c.slow_rate = 0.5;
    bw__machine m;
    mk(&m, &c); /* failure 0.4, slow 0.4 */
    calls(&m, T0, 4, BW_FAILURE, 0);
    calls(&m, T0, 4, BW_SUCCESS, 1);
    calls(&m, T0, 2, BW_SUCCESS, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    mk(&m, &c); /* failure 0.4, slow 0.5 */
    calls(&m, T0, 4, BW_FAILURE, 0);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    calls(&m, T0, 4, BW_SUCCESS, 1);
    call(&m, T0, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    mk(&m, &c); /* failure 0.5, slow 0.4 */
    calls(&m, T0, 4, BW_SUCCESS, 1);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    calls(&m, T0, 4, BW_FAILURE, 0);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
}

/* UNREACHABLE in CLOSED counts as a failure and trips. */
static void test_unreachable_trips_closed(void)
{
    bw__mcfg c = defaults();
    bw__machine m;
    mk(&m, &c);
    calls(&m, T0, 9, BW_UNREACHABLE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.win.failed, 9);
    call(&m, T0, BW_UNREACHABLE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    /* IGNORED never trips, however many. */
    mk(&m, &c);
    for (int i = 0; i < 50; i++)
        CHECK_INT(call(&m, T0, BW_IGNORED, 1), 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(win_total(&m), 0);
}

/* A trip: opened_at = now, base wait, gen + 1, window kept, consecutive zeroed. */
static void test_trip_effects(void)
{
    bw__mcfg c = defaults();
    bw__machine m;
    mk(&m, &c);
    calls(&m, T0, 5, BW_SUCCESS, 0);
    calls(&m, T0 + 1, 4, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(call(&m, T0 + 7 * SEC, BW_FAILURE, 1), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.opened_at, T0 + 7 * SEC);
    CHECK_INT(m.open_wait, 60 * SEC);
    CHECK_INT(m.failed_rounds, 0);
    CHECK_INT(m.gen, 1);
    CHECK_INT(win_total(&m), 10);
    CHECK_INT(m.win.failed, 5);
    CHECK_INT(m.win.slow, 1);
    bw_snapshot s;
    bw__now n = bw__now_at(T0 + 8 * SEC);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.state, BW_STATE_OPEN);
    CHECK_INT(s.total_calls, 10); /* the window that tripped */
    CHECK_INT(s.failed_calls, 5);
    CHECK_DBL(s.failure_rate, 0.5);
    CHECK_INT(s.retry_after_ns, 59 * SEC);
    CHECK_INT(s.generation, 1);

    /* Consecutive: trip zeroes cerr. */
    c = consecutive();
    mk(&m, &c);
    calls(&m, T0, 5, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.cerr, 0);
    CHECK_INT(m.csucc, 0);
    CHECK_INT(m.gen, 1);
    CHECK_INT(m.opened_at, T0);
    CHECK_INT(m.open_wait, c.wait);
}

/* ---------------------------------------------------------------- OPEN */

/* OPEN rejects until now - opened_at >= wait; exactly wait admits as probe 1. */
static void test_open_wait_boundary(void)
{
    bw__mcfg c = defaults();
    bw__machine m;
    mk(&m, &c);
    int64_t t1 = T0 + 3 * SEC;
    trip_at(&m, t1);
    uint64_t g = 0;
    CHECK_INT(acq(&m, t1, &g), 0);
    CHECK_INT(acq(&m, t1 + 30 * SEC, &g), 0);
    CHECK_INT(acq(&m, t1 + 60 * SEC - 1, &g), 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, 1);
    check_probes_zero(&m);
    /* OPEN records nothing, even with the current generation. */
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 1, t1 + SEC), 0);
    CHECK_INT(rec(&m, m.gen, BW_SUCCESS, 0, t1 + SEC), 0);
    CHECK_INT(rec(&m, m.gen, BW_UNREACHABLE, 0, t1 + SEC), 0);
    CHECK_INT(win_total(&m), 10);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, 1);
    /* Exactly wait: admitted as probe 1 of a new round. */
    CHECK_INT(acq(&m, t1 + 60 * SEC, &g), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.gen, 2);
    CHECK_INT(g, 2); /* the permit carries the new generation */
    CHECK_INT(m.admitted, 1);
    CHECK_INT(m.in_flight, 1);
    CHECK_INT(m.completed, 0);
    CHECK_INT(m.ho_since, t1 + 60 * SEC);
    CHECK_INT(win_total(&m), 10); /* HALF_OPEN entry keeps the window */

    /* Long after the wait also admits. */
    mk(&m, &c);
    trip_at(&m, t1);
    CHECK_INT(acq(&m, t1 + 1000 * SEC, &g), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.ho_since, t1 + 1000 * SEC);
}

static void test_retry_after(void)
{
    bw__mcfg c = defaults();
    bw__machine m;
    mk(&m, &c);
    CHECK_INT(bw__machine_retry_after(&m, T0), BW_NO_TIME);
    trip_at(&m, T0);
    CHECK_INT(bw__machine_retry_after(&m, T0), 60 * SEC);
    CHECK_INT(bw__machine_retry_after(&m, T0 + SEC), 59 * SEC);
    CHECK_INT(bw__machine_retry_after(&m, T0 + 60 * SEC - 1), 1);
    CHECK_INT(bw__machine_retry_after(&m, T0 + 60 * SEC), 0);
    CHECK_INT(bw__machine_retry_after(&m, T0 + 65 * SEC), 0); /* max(0, ...) */
    /* Whenever OPEN rejects, retry_after > 0. */
    for (int64_t dt = 0; dt < 60 * SEC; dt += 7 * SEC + 1) {
        CHECK_INT(acq(&m, T0 + dt, NULL), 0);
        CHECK(bw__machine_retry_after(&m, T0 + dt) > 0);
    }
    bw_snapshot s;
    bw__now n = bw__now_at(T0 + 20 * SEC);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.retry_after_ns, 40 * SEC);
    probe1(&m);
    CHECK_INT(bw__machine_retry_after(&m, T0 + 60 * SEC), BW_NO_TIME);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.retry_after_ns, BW_NO_TIME);
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(bw__machine_retry_after(&m, T0), BW_NO_TIME);
    bw__machine_override(&m, BW_STATE_DISABLED);
    CHECK_INT(bw__machine_retry_after(&m, T0), BW_NO_TIME);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(bw__machine_retry_after(&m, T0), BW_NO_TIME);
    bw__machine_reset(&m);
    CHECK_INT(bw__machine_retry_after(&m, T0), BW_NO_TIME);
}

/* ---------------------------------------------------------------- HALF_OPEN */

static void test_probe_caps(void)
{
    bw__mcfg c = defaults(); /* permitted 10, maxconc 1 */
    bw__machine m;
    uint64_t g, g2;

    /* maxconc 1: a second probe waits for the first. */
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    int64_t t = open_until(&m);
    CHECK_INT(acq(&m, t, &g2), 0);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.admitted, 1);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t), 1);
    CHECK_INT(m.in_flight, 0);
    CHECK_INT(m.completed, 1);
    CHECK_INT(acq(&m, t, &g2), 1);
    CHECK_INT(g2, g);
    CHECK_INT(m.admitted, 2);
    CHECK_INT(m.in_flight, 1);

    /* permitted 2, maxconc 2: admit, settle, admit, and the third is rejected. */
    c.permitted = 2;
    c.max_concurrent = 2;
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    t = open_until(&m);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t), 1);
    CHECK_INT(acq(&m, t, &g2), 1);
    CHECK_INT(m.in_flight, 1);
    CHECK_INT(acq(&m, t, NULL), 0); /* a concurrency slot is free, the budget is not */
    CHECK_INT(m.admitted, 2);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);

    /* permitted 3 = maxconc 3: N-1, N admitted at once, N+1 rejected. */
    c.permitted = 3;
    c.max_concurrent = 3;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    t = open_until(&m);
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(m.in_flight, 3);
    CHECK_INT(acq(&m, t, NULL), 0);
    CHECK_INT(m.admitted, 3);

    /* maxconc 2 < permitted 10: N-1, N admitted, N+1 rejected until one settles. */
    c.permitted = 10;
    c.max_concurrent = 2;
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    t = open_until(&m);
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(acq(&m, t, NULL), 0);
    CHECK_INT(m.in_flight, 2);
    CHECK_INT(rec(&m, g, BW_FAILURE, 0, t), 1);
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(m.admitted, 3);
    CHECK_INT(m.in_flight, 2);
}

/* Settle `outcomes` as the probes of one round, each admitted then settled in turn. */
static void run_round(bw__machine *m, int n, const int *outcomes, const int *slows)
{
    int64_t t = open_until(m);
    uint64_t g = probe1(m);
    for (int i = 0; i < n; i++) {
        if (i > 0)
            CHECK_INT(acq(m, t, &g), 1);
        CHECK_INT(rec(m, g, outcomes[i], slows ? slows[i] : 0, t), 1);
    }
}

static void test_round_decision(void)
{
    bw__mcfg c = defaults();
    bw__machine m;

    /* permitted 3, frt = srt = 0.5: slow-failure, success, success -> 1/3, 1/3, closes. */
    c.permitted = 3;
    c.max_concurrent = 3;
    c.slow_rate = 0.5;
    mk(&m, &c);
    trip_at(&m, T0);
    int64_t t = open_until(&m);
    uint64_t g1 = probe1(&m), g2, g3;
    CHECK_INT(acq(&m, t, &g2), 1);
    CHECK_INT(acq(&m, t, &g3), 1);
    CHECK_INT(rec(&m, g1, BW_FAILURE, 1, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.probe_failures, 1);
    CHECK_INT(m.probe_slows, 1);
    CHECK_INT(rec(&m, g2, BW_SUCCESS, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN); /* completed 2 < permitted */
    CHECK_INT(m.completed, 2);
    uint64_t before = m.gen;
    CHECK_INT(rec(&m, g3, BW_SUCCESS, 0, t + 1), 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    /* Closing empties the window, zeroes counters, resets backoff, bumps gen. */
    CHECK_INT(m.gen, before + 1);
    CHECK_INT(win_total(&m), 0);
    CHECK_INT(m.win.failed, 0);
    CHECK_INT(m.win.slow, 0);
    check_probes_zero(&m);
    CHECK_INT(m.failed_rounds, 0);
    CHECK_INT(m.open_wait, c.wait);
    /* The next trip needs min_calls fresh outcomes. */
    calls(&m, t + 2, 9, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);

    /* The round is decided only when the permitted-th probe settles. */
    mk(&m, &c);
    trip_at(&m, T0);
    t = open_until(&m);
    g1 = probe1(&m);
    CHECK_INT(acq(&m, t, &g2), 1);
    CHECK_INT(acq(&m, t, &g3), 1);
    CHECK_INT(rec(&m, g1, BW_FAILURE, 0, t), 1);
    CHECK_INT(rec(&m, g2, BW_FAILURE, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN); /* 2 of 3 failed, still undecided */
    CHECK_INT(rec(&m, g3, BW_SUCCESS, 0, t + 5), 1);
    CHECK_INT(m.state, BW_STATE_OPEN); /* 2/3 >= 0.5: a failed round */
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.opened_at, t + 5);
    CHECK_INT(win_total(&m), 10); /* reopening keeps the window */

    /* 1/2 failures reopens (inclusive). */
    c = defaults();
    c.permitted = 2;
    mk(&m, &c);
    trip_at(&m, T0);
    {
        const int o[] = {BW_FAILURE, BW_SUCCESS};
        run_round(&m, 2, o, NULL);
    }
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.failed_rounds, 1);

    /* A slow round reopens through srt: 1/2 slow >= 0.5, no failures. */
    c.slow_rate = 0.5;
    mk(&m, &c);
    trip_at(&m, T0);
    {
        const int o[] = {BW_SUCCESS, BW_SUCCESS};
        const int s[] = {1, 0};
        run_round(&m, 2, o, s);
    }
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.failed_rounds, 1);

    /* min_calls (10) does not apply to the round: 2 successes close. */
    c = defaults();
    c.permitted = 2;
    mk(&m, &c);
    trip_at(&m, T0);
    {
        const int o[] = {BW_SUCCESS, BW_SUCCESS};
        run_round(&m, 2, o, NULL);
    }
    CHECK_INT(m.state, BW_STATE_CLOSED);

    /* Default permitted 10: 9 successes leave it undecided, the 10th closes. */
    c = defaults();
    mk(&m, &c);
    trip_at(&m, T0);
    {
        const int o[] = {BW_SUCCESS, BW_SUCCESS, BW_SUCCESS, BW_SUCCESS, BW_SUCCESS,
                         BW_SUCCESS, BW_SUCCESS, BW_SUCCESS, BW_SUCCESS};
        run_round(&m, 9, o, NULL);
    }
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.completed, 9);
    {
        uint64_t g;
        CHECK_INT(acq(&m, m.ho_since, &g), 1);
        CHECK_INT(rec(&m, g, BW_SUCCESS, 0, m.ho_since), 1);
    }
    CHECK_INT(m.state, BW_STATE_CLOSED);

    /* 4/10 failed probes close; 5/10 reopen. */
    mk(&m, &c);
    trip_at(&m, T0);
    {
        const int o[] = {BW_FAILURE, BW_FAILURE, BW_FAILURE, BW_FAILURE, BW_SUCCESS,
                         BW_SUCCESS, BW_SUCCESS, BW_SUCCESS, BW_SUCCESS, BW_SUCCESS};
        run_round(&m, 10, o, NULL);
    }
    CHECK_INT(m.state, BW_STATE_CLOSED);
    mk(&m, &c);
    trip_at(&m, T0);
    {
        const int o[] = {BW_FAILURE, BW_FAILURE, BW_FAILURE, BW_FAILURE, BW_FAILURE,
                         BW_SUCCESS, BW_SUCCESS, BW_SUCCESS, BW_SUCCESS, BW_SUCCESS};
        run_round(&m, 10, o, NULL);
    }
    CHECK_INT(m.state, BW_STATE_OPEN);
}

/* IGNORED hands back slot and budget; UNREACHABLE also counts as inconclusive. */
static void test_ignored_unreachable_half_open(void)
{
    bw__mcfg c = defaults();
    c.permitted = 1;
    bw__machine m;
    uint64_t g;
    mk(&m, &c);
    trip_at(&m, T0);
    int64_t t = open_until(&m);
    g = probe1(&m);
    uint64_t gen = m.gen;
    CHECK_INT(acq(&m, t, NULL), 0); /* budget 1 used */
    CHECK_INT(rec(&m, g, BW_IGNORED, 1, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.gen, gen);
    check_probes_zero(&m);        /* admitted and in_flight back to 0, nothing counted */
    CHECK_INT(acq(&m, t, &g), 1); /* slot and budget are back */
    CHECK_INT(m.admitted, 1);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);

    /* UNREACHABLE: permitted 2, one inconclusive (N-1) leaves the round open. */
    c.permitted = 2;
    mk(&m, &c);
    trip_at(&m, T0);
    t = open_until(&m);
    g = probe1(&m);
    CHECK_INT(rec(&m, g, BW_UNREACHABLE, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.admitted, 0);
    CHECK_INT(m.in_flight, 0);
    CHECK_INT(m.inconclusive, 1);
    CHECK_INT(m.completed, 0);
    CHECK_INT(m.probe_failures, 0);
    /* A verdict, then a second inconclusive: inconclusive 2 >= permitted reopens. */
    CHECK_INT(acq(&m, t, &g), 1);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t), 1);
    CHECK_INT(m.completed, 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(acq(&m, t, &g), 1);
    CHECK_INT(acq(&m, t, NULL), 0); /* maxconc 1 */
    uint64_t before = m.gen;
    CHECK_INT(rec(&m, g, BW_UNREACHABLE, 0, t + 9), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, before + 1);
    CHECK_INT(m.opened_at, t + 9);
    CHECK_INT(m.failed_rounds, 0);
    CHECK_INT(m.open_wait, c.wait);

    /* IGNORED and UNREACHABLE in CLOSED (rate): not recorded / a failure. */
    mk(&m, &c);
    CHECK_INT(call(&m, T0, BW_IGNORED, 0), 0);
    CHECK_INT(win_total(&m), 0);
    CHECK_INT(call(&m, T0, BW_UNREACHABLE, 0), 1);
    CHECK_INT(win_total(&m), 1);
    CHECK_INT(m.win.failed, 1);
}

/* An all-inconclusive round reopens without growing (or resetting) the backoff. */
static void test_inconclusive_round_keeps_backoff(void)
{
    bw__mcfg c = defaults();
    c.wait = 5 * SEC;
    c.wait_multiplier = 2.0;
    c.wait_max = 120 * SEC;
    c.permitted = 2;
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    /* Inconclusive right after a trip: base wait stays. */
    {
        const int o[] = {BW_UNREACHABLE, BW_UNREACHABLE};
        run_round(&m, 2, o, NULL);
    }
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.failed_rounds, 0);
    CHECK_INT(m.open_wait, 5 * SEC);
    /* A failed round: 10 s. */
    {
        const int o[] = {BW_FAILURE, BW_FAILURE};
        run_round(&m, 2, o, NULL);
    }
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 10 * SEC);
    /* Inconclusive: still 10 s, not 20 s and not 5 s. */
    int64_t t = open_until(&m);
    uint64_t before = m.gen;
    {
        const int o[] = {BW_UNREACHABLE, BW_UNREACHABLE};
        run_round(&m, 2, o, NULL);
    }
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, before + 2); /* to HALF_OPEN, back to OPEN */
    CHECK_INT(m.opened_at, t);
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 10 * SEC);
    CHECK_INT(acq(&m, t + 10 * SEC - 1, NULL), 0);
    /* The next failed round continues from 1: 20 s. */
    {
        const int o[] = {BW_FAILURE, BW_FAILURE};
        run_round(&m, 2, o, NULL);
    }
    CHECK_INT(m.failed_rounds, 2);
    CHECK_INT(m.open_wait, 20 * SEC);
}

/* ---------------------------------------------------------------- generations */

static void test_stale_generation_drops(void)
{
    bw__mcfg c = defaults();
    c.permitted = 2;
    c.max_concurrent = 2;
    bw__machine m;
    uint64_t old, g;

    /* A call admitted in CLOSED that settles after the trip is not counted. */
    mk(&m, &c);
    CHECK_INT(acq(&m, T0, &old), 1);
    CHECK_INT(old, 0);
    trip_at(&m, T0);
    CHECK_INT(rec(&m, old, BW_SUCCESS, 0, T0 + 1), -1);
    CHECK_INT(rec(&m, old, BW_IGNORED, 0, T0 + 1), -1);
    CHECK_INT(win_total(&m), 10);
    CHECK_INT(m.win.failed, 10);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, 1);

    /* A CLOSED-era call settling in HALF_OPEN is not a probe. */
    g = probe1(&m);
    CHECK_INT(rec(&m, old, BW_FAILURE, 1, open_until(&m)), -1);
    CHECK_INT(m.admitted, 1);
    CHECK_INT(m.in_flight, 1);
    CHECK_INT(m.completed, 0);
    CHECK_INT(m.probe_failures, 0);
    CHECK_INT(m.probe_slows, 0);
    CHECK_INT(rec(&m, old, BW_UNREACHABLE, 0, open_until(&m)), -1);
    CHECK_INT(m.inconclusive, 0);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);

    /* A probe of an earlier round settling in a later round is dropped: round 1
     * expires with g in flight, round 2 starts, then g settles. */
    CHECK_INT(bw__machine_advance(&m, m.ho_since + c.max_wait_ho), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    {
        uint64_t r2 = probe1(&m);
        CHECK(r2 != g);
        CHECK_INT(rec(&m, g, BW_SUCCESS, 0, m.ho_since), -1);
        CHECK_INT(rec(&m, g, BW_UNREACHABLE, 0, m.ho_since), -1);
        CHECK_INT(m.completed, 0);
        CHECK_INT(m.inconclusive, 0);
        CHECK_INT(m.admitted, 1);
        CHECK_INT(m.in_flight, 1);
        g = r2;
    }

    /* A probe settling after reset does not pollute the fresh window. */
    bw__machine_reset(&m);
    CHECK_INT(rec(&m, g, BW_FAILURE, 1, T0 + 500 * SEC), -1);
    CHECK_INT(win_total(&m), 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);

    /* An outcome admitted before an override does not land in METRICS_ONLY. */
    mk(&m, &c);
    calls(&m, T0, 3, BW_SUCCESS, 0);
    CHECK_INT(acq(&m, T0, &old), 1);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(rec(&m, old, BW_FAILURE, 0, T0), -1);
    CHECK_INT(win_total(&m), 3);
    CHECK_INT(m.win.failed, 0);
    /* Re-applying the same override drops in-flight outcomes too. */
    CHECK_INT(acq(&m, T0, &old), 1);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(rec(&m, old, BW_FAILURE, 0, T0), -1);
    CHECK_INT(win_total(&m), 3);

    /* A stale outcome is dropped whatever the state and outcome. */
    mk(&m, &c);
    CHECK_INT(acq(&m, T0, &old), 1);
    bw__machine_reset(&m);
    CHECK_INT(rec(&m, old, BW_FAILURE, 0, T0), -1);
    CHECK_INT(rec(&m, old + 5, BW_SUCCESS, 0, T0), -1);
    CHECK_INT(win_total(&m), 0);
}

/* Every transition and verb bumps the generation by exactly one. */
static void test_generation_bumps(void)
{
    bw__mcfg c = defaults();
    c.permitted = 1;
    bw__machine m;
    mk(&m, &c);
    uint64_t g = m.gen;
    trip_at(&m, T0);
    CHECK_INT(m.gen, g + 1); /* trip */
    probe1(&m);
    CHECK_INT(m.gen, g + 2); /* lazy OPEN -> HALF_OPEN */
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, m.ho_since), 1);
    CHECK_INT(m.gen, g + 3); /* failed round */
    CHECK_INT(bw__machine_advance(&m, open_until(&m)), 1);
    CHECK_INT(m.gen, g + 4); /* timer OPEN -> HALF_OPEN */
    CHECK_INT(bw__machine_advance(&m, m.ho_since + c.max_wait_ho), 1);
    CHECK_INT(m.gen, g + 5); /* half-open deadline */
    probe1(&m);
    CHECK_INT(rec(&m, m.gen, BW_SUCCESS, 0, m.ho_since), 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.gen, g + 7); /* HALF_OPEN, close */
    bw__machine_reset(&m);
    CHECK_INT(m.gen, g + 8);
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(m.gen, g + 9);
    bw__machine_override(&m, BW_STATE_DISABLED);
    CHECK_INT(m.gen, g + 10);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(m.gen, g + 11);
    /* Settling, admitting and rejecting without a transition does not bump it. */
    calls(&m, T0, 20, BW_FAILURE, 0);
    CHECK_INT(m.gen, g + 11);
}

/* ---------------------------------------------------------------- backoff */

/* Fail one round of permitted = 1 exactly when the wait ends; check wait-1 too. */
static void fail_round(bw__machine *m)
{
    int64_t until = open_until(m);
    CHECK_INT(acq(m, until - 1, NULL), 0);
    uint64_t g = probe1(m);
    CHECK_INT(rec(m, g, BW_FAILURE, 0, until), 1);
    CHECK_INT(m->state, BW_STATE_OPEN);
    CHECK_INT(m->opened_at, until);
}

static void test_backoff_multiplier_and_cap(void)
{
    bw__mcfg c = defaults();
    c.wait = 5 * SEC;
    c.wait_multiplier = 2.0;
    c.wait_max = 120 * SEC;
    c.permitted = 1;
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    CHECK_INT(m.open_wait, 5 * SEC); /* a trip starts at the base wait */
    CHECK_INT(bw__machine_retry_after(&m, T0), 5 * SEC);
    static const int64_t want[] = {10, 20, 40, 80, 120, 120, 120};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        fail_round(&m);
        CHECK_INT(m.failed_rounds, i + 1);
        CHECK_INT(m.open_wait, want[i] * SEC);
        CHECK_INT(bw__machine_retry_after(&m, m.opened_at), want[i] * SEC);
        CHECK_INT(bw__machine_deadline(&m), m.opened_at + want[i] * SEC);
    }
    bw_snapshot s;
    bw__now n = bw__now_at(m.opened_at);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.failed_rounds, 7);
    CHECK_INT(s.open_wait_ns, 120 * SEC);

    /* Multiplier 1 (the default): every OPEN period waits exactly wait. */
    c = defaults();
    c.permitted = 1;
    mk(&m, &c);
    trip_at(&m, T0);
    for (int i = 0; i < 4; i++) {
        fail_round(&m);
        CHECK_INT(m.open_wait, 60 * SEC);
    }
    CHECK_INT(m.failed_rounds, 4);

    /* A non-integer multiplier. */
    c.wait = 4 * SEC;
    c.wait_multiplier = 1.5;
    mk(&m, &c);
    trip_at(&m, T0);
    fail_round(&m);
    CHECK_INT(m.open_wait, 6 * SEC);
    fail_round(&m);
    CHECK_INT(m.open_wait, 9 * SEC);
}

/* Uncapped: growth stops after 64 failed rounds. */
static void test_backoff_stops_after_64_rounds(void)
{
    bw__mcfg c = defaults();
    c.wait = 1 * SEC;
    c.wait_multiplier = 1.25;
    c.wait_max = 0;
    c.permitted = 1;
    c.max_wait_ho = 0;
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    int64_t waits[67];
    waits[0] = m.open_wait;
    for (int k = 1; k <= 66; k++) {
        int64_t until = open_until(&m);
        CHECK_INT(acq(&m, until, NULL), 1);
        CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, until), 1);
        CHECK_INT(m.failed_rounds, k);
        waits[k] = m.open_wait;
        double want = 1e9 * pow(1.25, k < 64 ? k : 64);
        CHECK(fabs((double)waits[k] - want) <= 1e-9 * want);
    }
    CHECK(waits[64] > waits[63]);
    CHECK_INT(waits[65], waits[64]);
    CHECK_INT(waits[66], waits[64]);

    /* Uncapped growth saturates at about 73 years instead of overflowing:
     * 1e12, 1e15, 1e18 ns, then the ceiling (~2.3e18 ns) twice. */
    c.wait_multiplier = 1000.0;
    mk(&m, &c);
    trip_at(&m, T0);
    int64_t w[6];
    for (int k = 1; k <= 5; k++) {
        fail_round(&m);
        w[k] = m.open_wait;
    }
    CHECK_INT(w[3], INT64_C(1000000000000000000));
    CHECK(w[4] > w[3]);
    CHECK_INT(w[5], w[4]);
    CHECK_DBL((double)w[4], (double)BW__WAIT_CEILING);
    CHECK(w[4] > INT64_C(72) * 365 * 86400 * SEC);
    CHECK(w[4] < INT64_C(74) * 365 * 86400 * SEC);
    CHECK_INT(bw__machine_deadline(&m), m.opened_at + w[5]);
}

/* A passing round and reset set failed_rounds to 0; overrides keep the backoff. */
static void test_backoff_reset(void)
{
    bw__mcfg c = defaults();
    c.wait = 5 * SEC;
    c.wait_multiplier = 2.0;
    c.permitted = 1;
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    fail_round(&m);
    fail_round(&m);
    CHECK_INT(m.failed_rounds, 2);
    CHECK_INT(m.open_wait, 20 * SEC);
    /* A passing round. */
    uint64_t g = probe1(&m);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, m.ho_since), 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.failed_rounds, 0);
    CHECK_INT(m.open_wait, 5 * SEC);
    int64_t t = m.ho_since + SEC;
    trip_at(&m, t);
    CHECK_INT(m.open_wait, 5 * SEC);
    fail_round(&m);
    CHECK_INT(m.open_wait, 10 * SEC); /* growth starts over */
    fail_round(&m);
    CHECK_INT(m.failed_rounds, 2);

    /* Overrides keep it. */
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(m.failed_rounds, 2);
    CHECK_INT(m.open_wait, 20 * SEC);
    bw__machine_override(&m, BW_STATE_DISABLED);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(m.failed_rounds, 2);
    CHECK_INT(m.open_wait, 20 * SEC);

    /* reset resets it; the next trip uses the base wait. */
    bw__machine_reset(&m);
    CHECK_INT(m.failed_rounds, 0);
    CHECK_INT(m.open_wait, 5 * SEC);
    trip_at(&m, T0 + 9000 * SEC);
    CHECK_INT(m.open_wait, 5 * SEC);

    /* reset straight from OPEN with a grown backoff. */
    mk(&m, &c);
    trip_at(&m, T0);
    fail_round(&m);
    fail_round(&m);
    fail_round(&m);
    CHECK_INT(m.open_wait, 40 * SEC);
    bw__machine_reset(&m);
    trip_at(&m, T0 + 9000 * SEC);
    CHECK_INT(m.open_wait, 5 * SEC);
    CHECK_INT(m.failed_rounds, 0);
}

/* ---------------------------------------------------------------- half-open deadline */

static void test_max_wait_in_half_open(void)
{
    bw__mcfg c = defaults(); /* max_wait_ho 60 s */
    c.wait_multiplier = 2.0;
    bw__machine m;
    uint64_t g;

    /* Checked at acquire: deadline-1 keeps the round, the deadline ends it. */
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    int64_t h = m.ho_since;
    uint64_t gen = m.gen;
    CHECK_INT(acq(&m, h + 60 * SEC - 1, NULL), 0); /* probe in flight, maxconc 1 */
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.gen, gen);
    CHECK_INT(acq(&m, h + 60 * SEC, NULL), 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, gen + 1);
    CHECK_INT(m.opened_at, h + 60 * SEC);
    CHECK_INT(m.failed_rounds, 1); /* a failed round */
    CHECK_INT(m.open_wait, 120 * SEC);
    CHECK_INT(bw__machine_retry_after(&m, h + 60 * SEC), 120 * SEC);
    /* The hung probe settles late: stale. */
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, h + 61 * SEC), -1);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* Checked at settle, before anything else. */
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    h = m.ho_since;
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, h + 60 * SEC), -1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.opened_at, h + 60 * SEC);
    CHECK_INT(m.completed, 0);

    /* deadline-1 at settle: applied normally. */
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    h = m.ho_since;
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, h + 60 * SEC - 1), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.completed, 1);
    /* The deadline runs from half_open_since, not from the last probe. */
    CHECK_INT(acq(&m, h + 60 * SEC - 1, &g), 1);
    CHECK_INT(acq(&m, h + 60 * SEC, NULL), 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.failed_rounds, 1);

    /* It grows the backoff like any failed round (here through the timer). */
    int64_t until = open_until(&m);
    CHECK_INT(acq(&m, until, &g), 1);
    CHECK_INT(bw__machine_advance(&m, m.ho_since + 60 * SEC), 1);
    CHECK_INT(m.failed_rounds, 2);
    CHECK_INT(m.open_wait, 240 * SEC);

    /* off: a round waits for its probes forever. */
    c.max_wait_ho = 0;
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    h = m.ho_since;
    int64_t far = h + INT64_C(100) * 365 * 86400 * SEC;
    CHECK_INT(acq(&m, far, NULL), 0);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
    CHECK_INT(bw__machine_advance(&m, far), 0);
    CHECK_INT(rec(&m, g, BW_FAILURE, 0, far), 1);
    CHECK_INT(m.completed, 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
}

/* ---------------------------------------------------------------- timer */

static void test_advance_and_deadline(void)
{
    bw__mcfg c = defaults();
    c.wait_multiplier = 2.0;
    bw__machine m;
    mk(&m, &c);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
    CHECK_INT(bw__machine_advance(&m, T0 + 100000 * SEC), 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.gen, 0);

    int64_t t1 = T0 + 5 * SEC;
    trip_at(&m, t1);
    CHECK_INT(bw__machine_deadline(&m), t1 + 60 * SEC);
    CHECK_INT(bw__machine_advance(&m, t1 + 60 * SEC - 1), 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, 1);
    CHECK_INT(bw__machine_advance(&m, t1 + 60 * SEC), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.gen, 2);
    CHECK_INT(m.ho_since, t1 + 60 * SEC);
    check_probes_zero(&m);                                /* nobody admitted */
    CHECK_INT(bw__machine_advance(&m, t1 + 60 * SEC), 0); /* exactly once */
    CHECK_INT(m.gen, 2);
    int64_t hd = t1 + 120 * SEC;
    CHECK_INT(bw__machine_deadline(&m), hd);
    /* The first acquire after the timer is probe 1 of this round. */
    uint64_t g;
    CHECK_INT(acq(&m, t1 + 61 * SEC, &g), 1);
    CHECK_INT(g, 2);
    CHECK_INT(m.admitted, 1);
    CHECK_INT(m.gen, 2);
    CHECK_INT(bw__machine_advance(&m, hd - 1), 0);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(bw__machine_advance(&m, hd), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, 3);
    CHECK_INT(m.opened_at, hd);
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 120 * SEC);
    CHECK_INT(bw__machine_deadline(&m), hd + 120 * SEC);
    /* A late advance moves OPEN -> HALF_OPEN, never straight to a reopen. */
    CHECK_INT(bw__machine_advance(&m, hd + 1000 * SEC), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.ho_since, hd + 1000 * SEC);

    /* Overrides and reset cancel the pending deadline. */
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
    CHECK_INT(bw__machine_advance(&m, INT64_MAX - 1), 0);
    CHECK_INT(m.state, BW_STATE_FORCED_OPEN);
    bw__machine_override(&m, BW_STATE_DISABLED);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
    CHECK_INT(bw__machine_advance(&m, INT64_MAX - 1), 0);
    bw__machine_reset(&m);
    trip_at(&m, T0);
    bw__machine_override(&m, BW_STATE_DISABLED);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
    CHECK_INT(bw__machine_advance(&m, T0 + 1000 * SEC), 0);
    bw__machine_reset(&m);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);

    /* HALF_OPEN with max_wait_in_half_open off has no deadline. */
    c.max_wait_ho = 0;
    mk(&m, &c);
    trip_at(&m, T0);
    CHECK_INT(bw__machine_advance(&m, open_until(&m)), 1);
    CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
    CHECK_INT(bw__machine_advance(&m, INT64_MAX - 1), 0);
}

/* ---------------------------------------------------------------- operator verbs */

/* HALF_OPEN with a window of 10, one failed round behind it (open_wait 2w),
 * one probe settled and one in flight; returns the in-flight permit's gen. */
static uint64_t busy_half_open(bw__machine *m)
{
    bw__mcfg c = defaults();
    c.wait_multiplier = 2.0;
    c.permitted = 3;
    c.max_concurrent = 3;
    mk(m, &c);
    calls(m, T0, 2, BW_SUCCESS, 1);
    trip_at(m, T0);
    {
        const int o[] = {BW_FAILURE, BW_FAILURE, BW_FAILURE};
        run_round(m, 3, o, NULL);
    }
    CHECK_INT(m->failed_rounds, 1);
    CHECK_INT(m->open_wait, 120 * SEC);
    uint64_t g = probe1(m), g2;
    CHECK_INT(rec(m, g, BW_FAILURE, 1, m->ho_since), 1);
    CHECK_INT(acq(m, m->ho_since, &g2), 1);
    CHECK_INT(m->admitted, 2);
    CHECK_INT(m->in_flight, 1);
    CHECK_INT(m->completed, 1);
    CHECK_INT(win_total(m), 10); /* 2 slow S + 8 F tripped it */
    CHECK_INT(m->win.failed, 8);
    CHECK_INT(m->win.slow, 2);
    return g2;
}

static void test_verb_reset(void)
{
    bw__machine m;
    for (int from = 0; from < 2; from++) {
        uint64_t g = busy_half_open(&m);
        if (from == 1) { /* from OPEN */
            bw__machine_advance(&m, m.ho_since + 60 * SEC);
            CHECK_INT(m.state, BW_STATE_OPEN);
        }
        uint64_t gen = m.gen;
        bw__machine_reset(&m);
        CHECK_INT(m.state, BW_STATE_CLOSED);
        CHECK_INT(m.gen, gen + 1);
        CHECK_INT(win_total(&m), 0); /* emptied */
        CHECK_INT(m.win.failed, 0);
        CHECK_INT(m.win.slow, 0);
        check_probes_zero(&m);
        CHECK_INT(m.failed_rounds, 0); /* backoff reset */
        CHECK_INT(m.open_wait, 60 * SEC);
        CHECK_INT(bw__machine_deadline(&m), INT64_MAX);
        CHECK_INT(rec(&m, g, BW_SUCCESS, 0, T0), -1);
        CHECK_INT(win_total(&m), 0);
    }
    /* reset while CLOSED still empties the window and bumps the generation. */
    bw__mcfg c = defaults();
    mk(&m, &c);
    calls(&m, T0, 9, BW_FAILURE, 0);
    bw__machine_reset(&m);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.gen, 1);
    CHECK_INT(win_total(&m), 0);
    calls(&m, T0, 9, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED); /* 9 fresh failures, not 18 */
    /* reset leaves every override. */
    static const int ov[] = {BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY};
    for (int i = 0; i < 3; i++) {
        bw__machine_override(&m, ov[i]);
        bw__machine_reset(&m);
        CHECK_INT(m.state, BW_STATE_CLOSED);
        CHECK_INT(win_total(&m), 0);
    }
}

static void test_verb_force_open(void)
{
    bw__machine m;
    uint64_t g = busy_half_open(&m);
    uint64_t gen = m.gen;
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(m.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(m.gen, gen + 1);
    CHECK_INT(win_total(&m), 10); /* kept */
    CHECK_INT(m.win.failed, 8);
    CHECK_INT(m.win.slow, 2);
    check_probes_zero(&m);
    CHECK_INT(m.failed_rounds, 1); /* backoff kept */
    CHECK_INT(m.open_wait, 120 * SEC);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, m.ho_since), -1);
    /* Rejects always, no retry_after, records nothing. */
    CHECK_INT(acq(&m, T0 + 100000 * SEC, NULL), 0);
    CHECK_INT(bw__machine_retry_after(&m, T0), BW_NO_TIME);
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, T0), 0);
    CHECK_INT(win_total(&m), 10);
    CHECK_INT(m.state, BW_STATE_FORCED_OPEN);
    /* Re-applying bumps the generation again. */
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(m.gen, gen + 2);
    CHECK_INT(m.state, BW_STATE_FORCED_OPEN);
    /* Another override leaves it. */
    bw__machine_override(&m, BW_STATE_DISABLED);
    CHECK_INT(m.state, BW_STATE_DISABLED);
    CHECK_INT(m.gen, gen + 3);

    /* From OPEN: the wait no longer matters. */
    bw__mcfg c = defaults();
    mk(&m, &c);
    trip_at(&m, T0);
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(acq(&m, T0 + 61 * SEC, NULL), 0);
    CHECK_INT(m.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(win_total(&m), 10);
}

static void test_verb_disable(void)
{
    bw__machine m;
    uint64_t g = busy_half_open(&m);
    uint64_t gen = m.gen;
    bw__machine_override(&m, BW_STATE_DISABLED);
    CHECK_INT(m.state, BW_STATE_DISABLED);
    CHECK_INT(m.gen, gen + 1);
    CHECK_INT(win_total(&m), 10);
    check_probes_zero(&m);
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 120 * SEC);
    CHECK_INT(rec(&m, g, BW_FAILURE, 0, T0), -1);
    /* Admits everyone; records nothing: the window is frozen. */
    uint64_t p;
    for (int i = 0; i < 20; i++) {
        CHECK_INT(acq(&m, T0, &p), 1);
        CHECK_INT(p, m.gen);
        CHECK_INT(rec(&m, p, BW_FAILURE, 1, T0), 0);
    }
    CHECK_INT(call(&m, T0, BW_SUCCESS, 0), 0);
    CHECK_INT(call(&m, T0, BW_UNREACHABLE, 0), 0);
    CHECK_INT(win_total(&m), 10);
    CHECK_INT(m.win.failed, 8);
    CHECK_INT(m.state, BW_STATE_DISABLED);
    CHECK_INT(m.gen, gen + 1);
    bw__machine_override(&m, BW_STATE_DISABLED);
    CHECK_INT(m.gen, gen + 2);
    CHECK_INT(m.state, BW_STATE_DISABLED);
}

static void test_verb_metrics_only(void)
{
    bw__machine m;
    uint64_t g = busy_half_open(&m);
    uint64_t gen = m.gen;
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(m.state, BW_STATE_METRICS_ONLY);
    CHECK_INT(m.gen, gen + 1);
    CHECK_INT(win_total(&m), 10); /* kept */
    check_probes_zero(&m);
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 120 * SEC);
    CHECK_INT(rec(&m, g, BW_FAILURE, 0, T0), -1);
    CHECK_INT(win_total(&m), 10);
    /* Still filled (the tripped window keeps growing), never tested for a trip. */
    CHECK_INT(call(&m, T0, BW_SUCCESS, 0), 1);
    CHECK_INT(win_total(&m), 11);
    CHECK_INT(m.win.failed, 8);
    calls(&m, T0, 50, BW_FAILURE, 1);
    CHECK_INT(call(&m, T0, BW_UNREACHABLE, 0), 1);
    CHECK_INT(win_total(&m), 62);
    CHECK_INT(m.win.failed, 59);
    CHECK_INT(call(&m, T0, BW_IGNORED, 0), 0); /* still not recorded */
    CHECK_INT(win_total(&m), 62);
    CHECK_INT(m.state, BW_STATE_METRICS_ONLY);
    CHECK_INT(m.gen, gen + 1);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    CHECK_INT(m.gen, gen + 2);
    CHECK_INT(win_total(&m), 62);

    /* As an initial state it records into the construction-time window. */
    bw__mcfg c = defaults();
    c.initial_state = BW_STATE_METRICS_ONLY;
    mk(&m, &c);
    calls(&m, T0, 30, BW_FAILURE, 0);
    CHECK_INT(win_total(&m), 30);
    CHECK_INT(m.state, BW_STATE_METRICS_ONLY);
    CHECK_INT(m.gen, 0);
}

/* Every verb zeroes the consecutive counters. */
static void test_verbs_zero_consecutive_counters(void)
{
    static const int ov[] = {-1, BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY};
    bw__mcfg c = consecutive();
    bw__machine m;
    for (int i = 0; i < 4; i++) {
        mk(&m, &c);
        calls(&m, T0, 3, BW_FAILURE, 0);
        CHECK_INT(m.cerr, 3);
        if (ov[i] < 0)
            bw__machine_reset(&m);
        else
            bw__machine_override(&m, ov[i]);
        CHECK_INT(m.cerr, 0);
        CHECK_INT(m.csucc, 0);
        CHECK_INT(m.gen, 1);
        mk(&m, &c);
        calls(&m, T0, 1, BW_SUCCESS, 0);
        CHECK_INT(m.csucc, 1);
        if (ov[i] < 0)
            bw__machine_reset(&m);
        else
            bw__machine_override(&m, ov[i]);
        CHECK_INT(m.csucc, 0);
    }
    /* After reset, the trip needs error_threshold fresh failures. */
    mk(&m, &c);
    calls(&m, T0, 4, BW_FAILURE, 0);
    bw__machine_reset(&m);
    calls(&m, T0, 4, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    /* METRICS_ONLY counts but never trips. */
    mk(&m, &c);
    bw__machine_override(&m, BW_STATE_METRICS_ONLY);
    calls(&m, T0, 12, BW_FAILURE, 0);
    CHECK_INT(m.cerr, 12);
    CHECK_INT(m.state, BW_STATE_METRICS_ONLY);
    /* In HALF_OPEN too. */
    mk(&m, &c);
    trip_at(&m, T0);
    uint64_t g = probe1(&m);
    CHECK_INT(rec(&m, g, BW_FAILURE, 0, m.ho_since), 1);
    CHECK_INT(m.cerr, 1);
    bw__machine_override(&m, BW_STATE_FORCED_OPEN);
    CHECK_INT(m.cerr, 0);
}

/* ---------------------------------------------------------------- consecutive */

static void test_consecutive_trip(void)
{
    bw__mcfg c = consecutive(); /* error_threshold 5 */
    bw__machine m;
    mk(&m, &c);
    CHECK_INT(m.win.size, 0);
    calls(&m, T0, 4, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED); /* N-1 */
    CHECK_INT(m.cerr, 4);
    CHECK_INT(m.csucc, 0);
    bw_snapshot s;
    bw__now n = bw__now_at(T0);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.consecutive_failures, 4);
    CHECK_INT(s.total_calls, 0);
    CHECK_INT(call(&m, T0 + 2, BW_FAILURE, 0), 1); /* N */
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.opened_at, T0 + 2);
    CHECK_INT(m.gen, 1);
    CHECK_INT(call(&m, T0 + 3, BW_FAILURE, 0), REJECTED); /* N+1 is rejected */

    /* UNREACHABLE counts as an error. */
    mk(&m, &c);
    calls(&m, T0, 2, BW_FAILURE, 0);
    calls(&m, T0, 3, BW_UNREACHABLE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* A success in between resets cerr. */
    mk(&m, &c);
    calls(&m, T0, 4, BW_FAILURE, 0);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    CHECK_INT(m.cerr, 0);
    CHECK_INT(m.csucc, 1);
    calls(&m, T0, 4, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.csucc, 0);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* IGNORED changes nothing (it neither resets nor counts). */
    mk(&m, &c);
    calls(&m, T0, 4, BW_FAILURE, 0);
    CHECK_INT(call(&m, T0, BW_IGNORED, 0), 0);
    CHECK_INT(m.cerr, 4);
    calls(&m, T0, 1, BW_SUCCESS, 0);
    CHECK_INT(call(&m, T0, BW_IGNORED, 0), 0);
    CHECK_INT(m.csucc, 1);
    mk(&m, &c);
    calls(&m, T0, 4, BW_FAILURE, 0);
    CHECK_INT(call(&m, T0, BW_IGNORED, 0), 0);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* The consecutive policy ignores slowness. */
    mk(&m, &c);
    calls(&m, T0, 50, BW_SUCCESS, 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.csucc, 50);

    /* error_threshold 1: one failure trips. */
    c.error_threshold = 1;
    mk(&m, &c);
    call(&m, T0, BW_FAILURE, 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
}

static void test_consecutive_half_open_capacity(void)
{
    bw__mcfg c = consecutive();
    bw__machine m;
    uint64_t g, g2;
    mk(&m, &c); /* capacity 1 */
    trip_at(&m, T0);
    g = probe1(&m);
    int64_t t = m.ho_since;
    CHECK_INT(acq(&m, t, NULL), 0);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN); /* csucc 1 < 2 */
    CHECK_INT(acq(&m, t, &g), 1);

    /* capacity 2: N-1, N admitted, N+1 rejected until one settles. */
    c.half_open_capacity = 2;
    mk(&m, &c);
    trip_at(&m, T0);
    g = probe1(&m);
    t = m.ho_since;
    CHECK_INT(acq(&m, t, &g2), 1);
    CHECK_INT(acq(&m, t, NULL), 0);
    CHECK_INT(m.in_flight, 2);
    CHECK_INT(rec(&m, g, BW_FAILURE, 0, t), 1);
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(m.admitted, 3);

    /* permitted and max_concurrent do not apply to the consecutive policy. */
    c = consecutive();
    c.permitted = 1;
    c.max_concurrent = 1;
    c.half_open_capacity = 3;
    c.success_threshold = 4;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    t = m.ho_since;
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(acq(&m, t, NULL), 0);
    for (int i = 0; i < 3; i++)
        CHECK_INT(rec(&m, m.gen, BW_SUCCESS, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.completed, 3);
    CHECK_INT(acq(&m, t, &g), 1); /* no per-round budget */
    CHECK_INT(m.admitted, 4);
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
}

/* Serially admit and settle one probe at t. */
static int probe(bw__machine *m, int64_t t, int outcome)
{
    uint64_t g;
    if (!acq(m, t, &g))
        return REJECTED;
    return rec(m, g, outcome, 0, t);
}

static void test_consecutive_success_threshold_close(void)
{
    bw__mcfg c = consecutive(); /* success_threshold 2 */
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    int64_t t = m.ho_since;
    CHECK_INT(rec(&m, m.gen, BW_SUCCESS, 1, t), 1); /* slow is ignored */
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);         /* N-1 */
    CHECK_INT(m.csucc, 1);
    uint64_t gen = m.gen;
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1); /* N */
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.gen, gen + 1);
    CHECK_INT(m.csucc, 0);
    CHECK_INT(m.cerr, 0);
    CHECK_INT(m.failed_rounds, 0);
    check_probes_zero(&m);

    /* A failure in between resets csucc. */
    c.success_threshold = 3;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    t = m.ho_since;
    CHECK_INT(rec(&m, m.gen, BW_SUCCESS, 0, t), 1);
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1);
    CHECK_INT(probe(&m, t, BW_FAILURE), 1);
    CHECK_INT(m.csucc, 0);
    CHECK_INT(m.cerr, 1);
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1);
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);
}

static void test_consecutive_error_threshold_reopen(void)
{
    bw__mcfg c = consecutive(); /* error_threshold 5 */
    c.wait_multiplier = 2.0;
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    int64_t t = m.ho_since;
    /* A single failed probe does not reopen (grelmicro). */
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    for (int i = 0; i < 3; i++)
        CHECK_INT(probe(&m, t, BW_FAILURE), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN); /* N-1 */
    CHECK_INT(m.cerr, 4);
    CHECK_INT(probe(&m, t + 1, BW_FAILURE), 1); /* N */
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 2 * c.wait);
    CHECK_INT(m.opened_at, t + 1);
    CHECK_INT(m.cerr, 0);

    /* A success in between resets cerr. */
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    t = m.ho_since;
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, t), 1);
    for (int i = 0; i < 3; i++)
        CHECK_INT(probe(&m, t, BW_FAILURE), 1);
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1);
    CHECK_INT(m.cerr, 0);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    for (int i = 0; i < 4; i++)
        CHECK_INT(probe(&m, t, BW_FAILURE), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(m.cerr, 4);
    CHECK_INT(probe(&m, t, BW_FAILURE), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);

    /* error_threshold 1: one failed probe reopens. */
    c.error_threshold = 1;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, m.ho_since), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.failed_rounds, 1);
}

static void test_consecutive_inconclusive(void)
{
    bw__mcfg c = consecutive(); /* success_threshold 2 */
    c.error_threshold = 1;
    c.wait_multiplier = 2.0;
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, m.ho_since), 1); /* failed round */
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 2 * c.wait);
    probe1(&m);
    int64_t t = m.ho_since;
    CHECK_INT(rec(&m, m.gen, BW_UNREACHABLE, 0, t), 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN); /* N-1 */
    CHECK_INT(m.inconclusive, 1);
    CHECK_INT(m.admitted, 0);
    CHECK_INT(m.in_flight, 0);
    CHECK_INT(m.cerr, 0); /* no verdict */
    CHECK_INT(m.completed, 0);
    CHECK_INT(probe(&m, t + 1, BW_UNREACHABLE), 1); /* N: inconclusive 2 >= 2 */
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.opened_at, t + 1);
    CHECK_INT(m.failed_rounds, 1);
    CHECK_INT(m.open_wait, 2 * c.wait);

    /* IGNORED hands back the slot and changes no counter. */
    c = consecutive();
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    t = m.ho_since;
    CHECK_INT(rec(&m, m.gen, BW_SUCCESS, 0, t), 1);
    CHECK_INT(acq(&m, t, NULL), 1);
    CHECK_INT(acq(&m, t, NULL), 0);
    CHECK_INT(rec(&m, m.gen, BW_IGNORED, 0, t), 1);
    CHECK_INT(m.in_flight, 0);
    CHECK_INT(m.admitted, 1);
    CHECK_INT(m.csucc, 1);
    CHECK_INT(m.inconclusive, 0);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1);
    CHECK_INT(m.state, BW_STATE_CLOSED);

    /* UNREACHABLE does not reset csucc / cerr either. */
    c = consecutive();
    c.success_threshold = 3;
    mk(&m, &c);
    trip_at(&m, T0);
    probe1(&m);
    t = m.ho_since;
    CHECK_INT(rec(&m, m.gen, BW_FAILURE, 0, t), 1);
    CHECK_INT(probe(&m, t, BW_UNREACHABLE), 1);
    CHECK_INT(m.cerr, 1);
    CHECK_INT(probe(&m, t, BW_SUCCESS), 1);
    CHECK_INT(probe(&m, t, BW_UNREACHABLE), 1);
    CHECK_INT(m.csucc, 1);
    CHECK_INT(m.state, BW_STATE_HALF_OPEN);
}

/*
 * Every probe admitted is in flight until it settles, so an outcome that finds
 * none in flight is no probe of the round: dropped as stale, on the general
 * path and the engine's fast one (a stored entry counting it would claim more
 * probes completed than admitted, which the image decoder refuses).
 */
static void test_outcome_with_no_probe_in_flight(void)
{
    for (int pol = 0; pol < 2; pol++) {
        bw__mcfg c = pol ? consecutive() : defaults();
        c.permitted = 3;
        bw__machine m;
        mk(&m, &c);
        trip_at(&m, T0);
        uint64_t g = probe1(&m);
        int64_t t = m.ho_since;
        CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t), 1);
        CHECK_INT(m.in_flight, 0);
        CHECK_INT(bw__machine_probe_tally(&m, 0, 0), 0); /* the fast path leaves it to the general one */
        static const int outcomes[] = {BW_SUCCESS, BW_FAILURE, BW_IGNORED, BW_UNREACHABLE};
        for (int i = 0; i < 4; i++)
            CHECK_INT(rec(&m, g, outcomes[i], 1, t), -1);
        CHECK_INT(m.state, BW_STATE_HALF_OPEN);
        CHECK_INT(m.gen, g);
        CHECK_INT(m.admitted, 1);
        CHECK_INT(m.completed, 1);
        CHECK_INT(m.probe_failures, 0);
        CHECK_INT(m.probe_slows, 0);
        CHECK_INT(m.inconclusive, 0);
        CHECK_INT(m.csucc, pol ? 1 : 0);
        CHECK_INT(m.cerr, 0);
    }
}

/*
 * A consecutive round has no probe budget, but it admits at most
 * BW__PROBES_MAX probes (what a stored image may claim), and failures and
 * successes alternating that long end it as inconclusive: OPEN again, the
 * backoff unchanged.
 */
static void test_consecutive_round_bounded(void)
{
    bw__mcfg c = consecutive(); /* error_threshold 5, success_threshold 2 */
    c.half_open_capacity = 2 * BW__PROBES_MAX;
    c.max_wait_ho = 0;
    bw__machine m;
    mk(&m, &c);
    trip_at(&m, T0);
    uint64_t g = probe1(&m);
    int64_t t = m.ho_since;
    /* As if BW__PROBES_MAX - 2 probes had alternated (csucc 1), and two are in flight. */
    m.admitted = BW__PROBES_MAX;
    m.in_flight = 2;
    m.completed = BW__PROBES_MAX - 2;
    m.csucc = 1;
    CHECK_INT(acq(&m, t, NULL), 0); /* N + 1 refused, though in_flight < half_open_capacity */
    CHECK_INT(m.admitted, BW__PROBES_MAX);
    CHECK_INT(bw__machine_probe_tally(&m, 1, 0), 1); /* completed N - 1: the fast path may tally it */
    CHECK_INT(m.completed, BW__PROBES_MAX - 1);
    CHECK_INT(bw__machine_probe_tally(&m, 0, 0), 0); /* completed N would end the round: the general path */
    CHECK_INT(rec(&m, g, BW_SUCCESS, 0, t + 1), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.why, BW_REASON_PROBES_INCONCLUSIVE);
    CHECK_INT(m.failed_rounds, 0);
    CHECK_INT(m.open_wait, c.wait);
    CHECK_INT(m.opened_at, t + 1);
    CHECK_INT(m.gen, g + 1);
}

/* ---------------------------------------------------------------- misc */

/* A time window inside the machine: expiry feeds the min gate and the snapshot. */
static void test_time_window_machine(void)
{
    bw__mcfg c = defaults();
    c.window_kind = BW_WINDOW_TIME;
    c.window_size = 3;
    c.min_calls = 2;
    bw__machine m;
    mk(&m, &c);
    CHECK_INT(call(&m, 0, BW_FAILURE, 0), 1);
    CHECK_INT(call(&m, 3 * SEC, BW_FAILURE, 0), 1); /* the first has expired */
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(win_total(&m), 1);
    CHECK_INT(call(&m, 3500 * MS, BW_FAILURE, 0), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    bw_snapshot s;
    bw__now n = bw__now_at(5990 * MS);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.total_calls, 2);
    CHECK_DBL(s.failure_rate, 1.0);
    n = bw__now_at(6 * SEC);
    bw__machine_snapshot(&m, &n, &s);
    CHECK_INT(s.total_calls, 0);
    CHECK_DBL(s.failure_rate, 0.0);
    CHECK_INT(s.state, BW_STATE_OPEN);
}

static int g_reads;
static int64_t g_clock;
static int64_t fake_read(void *ctx)
{
    (void)ctx;
    g_reads++;
    return g_clock;
}

/* The clock is read lazily: a count-window call that trips nothing never reads it. */
static void test_lazy_clock(void)
{
    bw__mcfg c = defaults();
    bw__machine m;
    mk(&m, &c);
    g_clock = T0;
    g_reads = 0;
    for (int i = 0; i < 9; i++) {
        bw__now n = {0, 0, fake_read, NULL};
        uint64_t g;
        CHECK_INT(bw__machine_acquire(&m, &n, &g), 1);
        CHECK_INT(bw__machine_record(&m, g, BW_FAILURE, 0, &n), 1);
    }
    CHECK_INT(g_reads, 0);
    bw__now n = {0, 0, fake_read, NULL};
    uint64_t g;
    CHECK_INT(bw__machine_acquire(&m, &n, &g), 1);
    CHECK_INT(bw__machine_record(&m, g, BW_FAILURE, 0, &n), 1);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(g_reads, 1); /* read once, when the trip needed it */
    CHECK_INT(m.opened_at, T0);
    /* OPEN -> HALF_OPEN and the half-open check read it at most once per call. */
    g_clock = T0 + 60 * SEC;
    g_reads = 0;
    bw__now n2 = {0, 0, fake_read, NULL};
    CHECK_INT(bw__machine_acquire(&m, &n2, &g), 1);
    CHECK_INT(g_reads, 1);
}

/*
 * The fast path each policy takes is the machine's to say (bw__machine_fast_path):
 * the engine takes that one and no other, so a new policy takes none until
 * machine.c names one.
 */
static void test_fast_path_by_policy(void)
{
    bw__mcfg c = defaults();
    CHECK_INT(bw__machine_fast_path(&c), BW__FAST_COUNT);
    c.window_kind = BW_WINDOW_TIME;
    CHECK_INT(bw__machine_fast_path(&c), BW__FAST_TIME);
    c = consecutive();
    CHECK_INT(bw__machine_fast_path(&c), BW__FAST_CONSECUTIVE);
    c.window_kind = BW_WINDOW_TIME; /* the window kind means nothing to the consecutive policy */
    CHECK_INT(bw__machine_fast_path(&c), BW__FAST_CONSECUTIVE);
    /* A policy the machine has no fast record for (a third one, before machine.c gives it one): none, on either
       window, where the engine once picked the rate policy's count record for it. */
    for (int kind = BW_WINDOW_COUNT; kind <= BW_WINDOW_TIME; kind++) {
        c = defaults();
        c.policy = BW_POLICY_CONSECUTIVE + 1;
        c.window_kind = (uint8_t)kind;
        CHECK_INT(bw__machine_fast_path(&c), BW__FAST_NONE);
    }
}

/* A CLOSED record through the fast path `path` at t, as the engine runs it (core/breaker.c). */
static void fast_record(bw__machine *m, int path, int failed, int slow, int64_t t)
{
    bw__now n = bw__now_at(t);
    switch (path) {
    case BW__FAST_COUNT:
        if (bw__machine_closed_count(m, failed, slow))
            bw__machine_evaluate(m, &n);
        break;
    case BW__FAST_CONSECUTIVE:
        if (bw__machine_closed_consecutive(m, failed))
            bw__machine_trip(m, t);
        break;
    case BW__FAST_TIME:
        bw__window_time_record(bw__machine_stripe(m, 0), (unsigned)failed, (unsigned)slow, t);
        bw__machine_evaluate(m, &n);
        break;
    default:
        H_FAIL("no fast path to take (%d)", path);
    }
}

/*
 * The fast path the machine names for a configuration records as
 * bw__machine_record does: two machines, one on the general record and one on
 * the fast path, given the same pseudo-random CLOSED outcomes (failed, slow,
 * successes; reset after each trip), stay equal call by call: state,
 * generation, why, when opened, and the window's counts.
 */
static void test_fast_path_records_as_machine(void)
{
    bw__mcfg cfgs[4];
    cfgs[0] = defaults();
    cfgs[0].window_size = 20;
    cfgs[0].min_calls = 8;
    cfgs[0].slow_rate = 0.6;
    cfgs[1] = cfgs[0];
    cfgs[1].window_kind = BW_WINDOW_TIME;
    cfgs[1].window_size = 3;
    cfgs[2] = consecutive();
    cfgs[2].error_threshold = 4;
    cfgs[3] = cfgs[2];
    cfgs[3].window_kind = BW_WINDOW_TIME;
    for (int k = 0; k < 4; k++) {
        const bw__mcfg *c = &cfgs[k];
        int path = bw__machine_fast_path(c);
        CHECK(path != BW__FAST_NONE);
        size_t bytes = bw__machine_window_bytes(c);
        void *mem_g = calloc(1, bytes + 1), *mem_f = calloc(1, bytes + 1);
        bw__machine g, f;
        bw__machine_init(&g, c, mem_g);
        bw__machine_init(&f, c, mem_f);
        uint32_t x = 12345u + (uint32_t)k;
        int trips = 0;
        int64_t t = T0;
        int failed_before = h_failed_checks; /* stop at the first difference: the rest would repeat it */
        for (int i = 0; i < 3000 && h_failed_checks == failed_before; i++) {
            x = x * 1103515245u + 12345u;
            int failed = (x >> 16) % 100 < 35, slow = (x >> 24) % 100 < 20;
            t += (int64_t)((x >> 8) % 400) * MS;
            bw__now n = bw__now_at(t);
            CHECK_INT(bw__machine_record(&g, g.gen, failed ? BW_FAILURE : BW_SUCCESS, slow, &n), 1);
            fast_record(&f, path, failed, slow, t);
            CHECK_INT(f.state, g.state);
            CHECK_INT(f.gen, g.gen);
            CHECK_INT(f.why, g.why);
            CHECK_INT(f.opened_at, g.opened_at);
            bw_snapshot sg, sf;
            bw__machine_snapshot(&g, &n, &sg);
            bw__machine_snapshot(&f, &n, &sf);
            CHECK_INT(sf.total_calls, sg.total_calls);
            CHECK_INT(sf.failed_calls, sg.failed_calls);
            CHECK_INT(sf.slow_calls, sg.slow_calls);
            CHECK_INT(sf.consecutive_failures, sg.consecutive_failures);
            if (g.state != BW_STATE_CLOSED) {
                trips++;
                bw__machine_reset(&g);
                bw__machine_reset(&f);
            }
        }
        CHECK(trips > 10); /* the sequence trips each configuration, again and again */
        free(mem_g);
        free(mem_f);
    }
}

int main(void)
{
    RUN(test_initial_states);
    RUN(test_closed_records_outcomes);
    RUN(test_min_calls_gate);
    RUN(test_failure_rate_boundary);
    RUN(test_slow_rate_boundary);
    RUN(test_either_rate_trips);
    RUN(test_unreachable_trips_closed);
    RUN(test_trip_effects);
    RUN(test_open_wait_boundary);
    RUN(test_retry_after);
    RUN(test_probe_caps);
    RUN(test_round_decision);
    RUN(test_ignored_unreachable_half_open);
    RUN(test_inconclusive_round_keeps_backoff);
    RUN(test_stale_generation_drops);
    RUN(test_generation_bumps);
    RUN(test_backoff_multiplier_and_cap);
    RUN(test_backoff_stops_after_64_rounds);
    RUN(test_backoff_reset);
    RUN(test_max_wait_in_half_open);
    RUN(test_advance_and_deadline);
    RUN(test_verb_reset);
    RUN(test_verb_force_open);
    RUN(test_verb_disable);
    RUN(test_verb_metrics_only);
    RUN(test_verbs_zero_consecutive_counters);
    RUN(test_consecutive_trip);
    RUN(test_consecutive_half_open_capacity);
    RUN(test_consecutive_success_threshold_close);
    RUN(test_consecutive_error_threshold_reopen);
    RUN(test_consecutive_inconclusive);
    RUN(test_outcome_with_no_probe_in_flight);
    RUN(test_consecutive_round_bounded);
    RUN(test_time_window_machine);
    RUN(test_lazy_clock);
    RUN(test_fast_path_by_policy);
    RUN(test_fast_path_records_as_machine);
    return TEST_SUMMARY();
}
