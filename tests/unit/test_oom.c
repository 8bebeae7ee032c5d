/*
 * test_oom.c (tests/unit/) — every allocation the library makes may fail: fail
 * the 1st, 2nd, ... allocation of a scenario in turn and check that each call
 * either works or reports BW_ENOMEM / NULL (or BW_ESYS for a timer that cannot
 * be made), never crashes, and leaves the objects made before it usable. It
 * needs tests/support/alloc_hook.h, so it is built only without sanitizers
 * (their allocator cannot be replaced).
 */
#include "alloc_hook.h"
#include "harness.h"

#if !ALLOC_HOOK
#error "test_oom needs the allocation hook: build it without sanitizers"
#endif

/* One scenario touching every allocating entry point. Returns how far it got. */
/*
 * One scenario touching every allocating entry point. *steps_ok gets a bit per
 * step that worked: 0 config, 1 its copy, 2 the clock, 3 a breaker, 4 a
 * breaker with a timer on a striped window.
 */
static int scenario(int *steps_ok)
{
    int ok = 0;
    bw_config *cfg = bw_config_new();
    if (!cfg)
        return *steps_ok = ok, 0;
    ok |= 1 << 0;
    bw_config *copy = bw_config_copy(cfg);
    if (copy)
        ok |= 1 << 1;
    bw_error err;
    int rc = bw_config_parse(cfg, "min_calls=1 failure_rate=1 wait=1s auto_transition=true", &err);
    CHECK_OK(rc);
    bw_clock *clk = NULL;
    rc = bw_clock_manual_new(0, &clk);
    CHECK(rc == BW_OK || rc == BW_ENOMEM);
    if (rc == BW_OK) {
        ok |= 1 << 2;
        bw_config_set_clock(cfg, clk);
    }
    bw_breaker *b = NULL;
    rc = bw_breaker_new("oom", cfg, &b, &err);
    CHECK(rc == BW_OK || rc == BW_ENOMEM);
    if (rc == BW_ENOMEM) {
        CHECK_INT(err.code, BW_ENOMEM);
        CHECK(b == NULL);
    }
    if (rc == BW_OK) {
        ok |= 1 << 3;
        bw_permit p;
        CHECK_OK(bw_acquire(b, &p, NULL));
        CHECK_OK(bw_settle(b, &p, BW_FAILURE));
        CHECK_STATE(b, BW_STATE_OPEN);
        if (clk)
            bw_clock_manual_advance(clk, BW_NS_PER_S);
        bw_snapshot s;
        CHECK_OK(bw_breaker_snapshot(b, &s));
    }
    /* A system-clock breaker with a timer thread, on a time window (stripes). */
    bw_config_set_clock(cfg, NULL);
    CHECK_OK(bw_config_parse(cfg, "window=time:10s", NULL));
    bw_breaker *t = NULL;
    rc = bw_breaker_new("oom-timer", cfg, &t, NULL);
    CHECK(rc == BW_OK || rc == BW_ENOMEM || rc == BW_ESYS);
    if (rc == BW_OK) {
        ok |= 1 << 4;
        bw_permit p;
        CHECK_OK(bw_acquire(t, &p, NULL));
        CHECK_OK(bw_settle(t, &p, BW_FAILURE)); /* trips: starts the timer thread (may fail: lazy fallback) */
        CHECK_STATE(t, BW_STATE_OPEN);
    }
    bw_breaker_free(t);
    bw_breaker_free(b);
    bw_clock_free(clk);
    bw_config_free(copy);
    bw_config_free(cfg);
    *steps_ok = ok;
    return ok;
}

static void test_every_allocation_may_fail(void)
{
    int full = 0;
    alloc_fail_after(-1);
    unsigned long a0 = allocs_now();
    scenario(&full);
    unsigned long needed = allocs_now() - a0;
    CHECK(needed >= 4);
    CHECK_INT(full, 0x1f);
    /* Fail each allocation in turn; the checks inside the scenario hold every time. */
    int lost = 0;
    for (unsigned long n = 0; n < needed + 2; n++) {
        int got = 0;
        alloc_fail_after((long)n);
        scenario(&got);
        alloc_fail_after(-1);
        lost |= full & ~got;
    }
    /* Each step (config, its copy, the clock, both breakers) failed in some run. */
    CHECK_INT(lost, full);
}

static int zero(const bw_fallback_info *why, void *arg, void *user)
{
    (void)why;
    (void)arg;
    (void)user;
    return 0;
}

static int succeed(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return 0;
}

/* What a constructor may answer when an allocation (or a thread) fails. */
static int alloc_ok(int rc)
{
    return rc == BW_OK || rc == BW_ENOMEM || rc == BW_ESYS;
}

/* Every allocating entry point of the pipeline; a pipeline that got built still executes. */
static int pipeline_scenario(void)
{
    int ok = 0, rc; /* a bit per step that worked: retry, budget, bulkhead, limiter, pipeline, its layers */
    bw_retry *r = NULL;
    bw_retry_budget *budget = NULL;
    bw_bulkhead *bh = NULL;
    bw_limiter *lim = NULL;
    bw_pipeline *p = NULL;
    bw_error err;
    CHECK(alloc_ok(rc = bw_retry_new(&r)));
    ok |= (rc == BW_OK) << 0;
    CHECK(alloc_ok(rc = bw_retry_budget_new(10, 0.1, &budget, &err)));
    ok |= (rc == BW_OK) << 1;
    CHECK(alloc_ok(rc = bw_bulkhead_new(2, 0, &bh, &err)));
    ok |= (rc == BW_OK) << 2;
    CHECK(alloc_ok(rc = bw_limiter_new(2, &lim, &err)));
    ok |= (rc == BW_OK) << 3;
    CHECK(alloc_ok(rc = bw_pipeline_new("oom", &p, &err)));
    if (rc == BW_OK) {
        ok |= 1 << 4;
        int built = 1;
        CHECK(alloc_ok(rc = bw_pipeline_add_fallback(p, BW_FALLBACK_ON_ALL, zero, NULL, &err)));
        built &= rc == BW_OK;
        if (r) {
            bw_retry_set_budget(r, budget);
            CHECK_OK(bw_pipeline_add_retry(p, r, &err));
        }
        if (bh)
            CHECK_OK(bw_pipeline_add_bulkhead(p, bh, &err));
        CHECK(alloc_ok(rc = bw_pipeline_add_timeout(p, BW_NS_PER_S, lim, &err)));
        built &= rc == BW_OK;
        ok |= built << 5;
        int code = -1;
        CHECK_OK(bw_pipeline_execute(p, succeed, NULL, &code, NULL));
        CHECK_INT(code, 0);
    }
    bw_limiter_free(lim);
    bw_pipeline_free(p);
    bw_bulkhead_free(bh);
    bw_retry_budget_free(budget);
    bw_retry_free(r);
    return ok;
}

static void test_pipeline_allocations_may_fail(void)
{
    alloc_fail_after(-1);
    unsigned long a0 = allocs_now();
    int full = pipeline_scenario();
    unsigned long needed = allocs_now() - a0;
    CHECK_INT(full, 0x3f);
    CHECK(needed >= 7);
    int lost = 0;
    for (unsigned long n = 0; n < needed + 2; n++) {
        alloc_fail_after((long)n);
        int got = pipeline_scenario();
        alloc_fail_after(-1);
        lost |= full & ~got;
    }
    CHECK_INT(lost, full); /* each step failed in some run */
}

/* bw_config_new under OOM returns NULL; the other constructors report BW_ENOMEM. */
static void test_constructors_report_enomem(void)
{
    alloc_fail_after(0);
    CHECK(bw_config_new() == NULL);
    alloc_fail_after(0);
    bw_clock *c = NULL;
    CHECK_RC(bw_clock_manual_new(0, &c), BW_ENOMEM);
    CHECK(c == NULL);
    bw_error err;
    bw_breaker *b = NULL;
    alloc_fail_after(0);
    CHECK_RC(bw_breaker_new("x", NULL, &b, &err), BW_ENOMEM);
    CHECK_INT(err.code, BW_ENOMEM);
    alloc_fail_after(-1);
    CHECK_OK(bw_breaker_new("x", NULL, &b, &err));
    bw_breaker_free(b);
}

int main(void)
{
    RUN(test_every_allocation_may_fail);
    RUN(test_constructors_report_enomem);
    RUN(test_pipeline_allocations_may_fail);
    return TEST_SUMMARY();
}
