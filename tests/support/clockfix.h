/*
 * clockfix.h — the manual-clock fixture of the tests (tests/support/): one
 * manual clock per test program, `clk`, made at a fixed start, and the helpers
 * that move it. Advancing a manual clock runs whatever is due on it on the
 * advancing thread (auto-transition timers, a store's lane: its queued writes
 * and polls), so pump(dt) is "let dt pass and everything due in it happen".
 * Every helper checks its status.
 */
#ifndef BW_TEST_CLOCKFIX_H
#define BW_TEST_CLOCKFIX_H

#include "harness.h"

/* Where the fixture's clock starts unless a test says otherwise: far enough from 0 for "a second ago". */
#define CLOCKFIX_START (1000 * BW_NS_PER_S)

static bw_clock *clk; /* the fixture's clock; NULL until clock_fresh */

/* A new manual clock at `start` replaces the fixture's clock (the old one is freed: nothing may use it). */
static inline bw_clock *clock_fresh(int64_t start)
{
    bw_clock_free(clk);
    clk = NULL;
    if (bw_clock_manual_new(start, &clk) != BW_OK) {
        H_FAIL("bw_clock_manual_new(%lld) failed", (long long)start);
        exit(2);
    }
    return clk;
}

/* Free the fixture's clock (at the end of main). */
static inline void clock_done(void)
{
    bw_clock_free(clk);
    clk = NULL;
}

/* Let dt (>= 0) pass on the fixture's clock, running everything due. */
static inline void pump(int64_t dt)
{
    CHECK_OK(bw_clock_manual_advance(clk, dt));
}

/* Set the fixture's clock to t (never backwards), running everything due. */
static inline void clock_to(int64_t t)
{
    CHECK_OK(bw_clock_manual_set(clk, t));
}

static inline int64_t clock_now(void)
{
    return bw_clock_now(clk);
}

#endif
