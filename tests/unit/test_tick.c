/*
 * test_tick.c (tests/unit/) — the coarse clock's lease (base/tick.h): a
 * breaker that asks for the tick gets a word that moves with the system clock
 * and never runs ahead of it; once the lease lapses the word reads 0 and calls
 * read the system clock (and still time, trip and reject correctly); a thread
 * that then calls often enough asks for a new lease. The lapse is the tests'
 * hook (bw__tick_lapse), not a sleep.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>

#include "harness.h"

#include "base/systime.h"
#include "base/tick.h"

static bw_breaker *make(const char *text)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_parse(c, text, &e));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("tick", c, &b, &e));
    bw_config_free(c);
    return b;
}

static int64_t word(void)
{
    return atomic_load_explicit(&bw__tick_word, memory_order_relaxed);
}

static void call(bw_breaker *b, bw_outcome o)
{
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, o));
}

static void test_lease(void)
{
    bw_breaker *b = make("min_calls=1 wait=1h"); /* slow_call_duration 60 s: the coarse clock */
    int64_t w = word();
    CHECK(w != 0);             /* asked at creation: ticking */
    CHECK(w <= bw__sys_now()); /* never ahead of the system clock */
    bw__tick_lapse();
    CHECK_INT(word(), 0);
    for (int i = 0; i < 10; i++) /* a few calls read the system clock, and ask for nothing */
        call(b, BW_SUCCESS);
    CHECK_INT(word(), 0);
    /* A thread that keeps calling asks for a new lease (a thousand reads within 10 ms). */
    int calls = 0;
    while (word() == 0 && calls < 1000000) {
        call(b, BW_SUCCESS);
        calls++;
    }
    CHECK(word() != 0);
    CHECK(calls >= 400); /* two reads a call: not before some 500 calls */
    bw_breaker_free(b);
}

/* With the word clear, an OPEN breaker rejects with a retry_after from the system clock. */
static void test_rejection_without_lease(void)
{
    bw_breaker *b = make("min_calls=1 wait=1h");
    bw__tick_lapse();
    call(b, BW_FAILURE);
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    bw_rejection why;
    bw_permit p;
    CHECK_INT(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK(why.retry_after_ns > 3590 * BW_NS_PER_S && why.retry_after_ns <= 3600 * BW_NS_PER_S);
    bw_breaker_free(b);
}

int main(void)
{
    RUN(test_lease);
    RUN(test_rejection_without_lease);
    return TEST_SUMMARY();
}
