/*
 * lifecycle.c — a flaky dependency goes down and recovers, and a breaker
 * protects its callers throughout. Every event is narrated by a listener. Time
 * is a manual clock, so the story is the same on every run.
 *
 * The dependency is healthy until t=10s, fails until t=60s, then recovers. A
 * request arrives every 2 s. Watch the breaker trip on the failure rate, reject
 * in nanoseconds with a retry_after, fail a probe round (which doubles its wait),
 * then pass one and close.
 *
 * Build and run: make demo
 */
#include <stdio.h>
#include <stdlib.h>

#include <breakwater/breakwater.h>

#define S BW_NS_PER_S
#define MS BW_NS_PER_MS

static bw_clock *clk;

static double secs(int64_t ns)
{
    return (double)ns / (double)S;
}

static void narrate(const bw_event *e, void *user)
{
    (void)user;
    double t = secs(bw_clock_now(clk));
    switch (e->type) {
    case BW_EVENT_CALL:
        printf("t=%5.1fs   call %-8s %s(%.2fs)\n", t, bw_outcome_name(e->outcome), e->slow ? "slow " : "",
               secs(e->duration_ns));
        break;
    case BW_EVENT_STATE_CHANGE: {
        /* The event says why; a listener may also call back into the breaker (no breakwater lock is held). */
        bw_snapshot s;
        bw_breaker_snapshot(e->breaker, &s);
        printf("t=%5.1fs   *** state %s -> %s: %s", t, bw_state_name(e->from), bw_state_name(e->to),
               bw_reason_name(e->reason));
        if (e->reason == BW_REASON_FAILURE_RATE || e->reason == BW_REASON_SLOW_RATE)
            printf(" %.0f%% of %llu calls", 100 * e->rate, (unsigned long long)e->total);
        else if (e->reason == BW_REASON_PROBES_FAILED || e->reason == BW_REASON_PROBES_PASSED)
            printf(" (%.0f%% of %llu probes failed)", 100 * e->rate, (unsigned long long)e->total);
        if (e->to == BW_STATE_OPEN)
            printf("; open for %.0fs", secs(s.open_wait_ns));
        printf("\n");
        break;
    }
    case BW_EVENT_REJECTED:
        printf("t=%5.1fs   rejected fast (%s), retry in %.2fs\n", t, bw_state_name(e->to), secs(e->retry_after_ns));
        break;
    case BW_EVENT_RESET:
        printf("t=%5.1fs   reset\n", t);
        break;
    default: /* pipeline events (pipeline.h); this demo has no pipeline */
        break;
    }
}

/* The dependency: healthy, then down from 10 s to 60 s. One call at t=4 s takes 1.5 s: slow. */
static bw_outcome dependency(int64_t now, int64_t *latency)
{
    *latency = now == 4 * S ? 1500 * MS : 40 * MS;
    return now >= 10 * S && now < 60 * S ? BW_FAILURE : BW_SUCCESS;
}

int main(void)
{
    bw_error err;
    if (bw_clock_manual_new(0, &clk) != BW_OK)
        return 1;
    bw_config *cfg = bw_config_new();
    const char *settings = "policy=rate window=count:10 min_calls=5 failure_rate=0.5 slow_call_duration=1s "
                           "wait=20s wait_multiplier=2 wait_max=80s permitted_probes=3 max_concurrent_probes=1";
    if (!cfg || bw_config_parse(cfg, settings, &err) != BW_OK) {
        fprintf(stderr, "config: %s\n", err.message);
        return 1;
    }
    bw_config_set_clock(cfg, clk);
    bw_config_set_listener(cfg, BW_EVENTS_ALL, narrate, NULL);
    bw_breaker *b;
    if (bw_breaker_new("payments", cfg, &b, &err) != BW_OK) {
        fprintf(stderr, "breaker: %s\n", err.message);
        return 1;
    }
    bw_config_free(cfg);

    printf("breakwater %s demo: breaker 'payments' (%s)\n\n", bw_version_string(), settings);
    int reached = 0, rejected = 0;
    for (int64_t t = 0; t <= 90 * S; t += 2 * S) {
        bw_clock_manual_set(clk, t);
        bw_permit p;
        bw_rejection why;
        if (bw_acquire(b, &p, &why) == BW_REJECTED) {
            rejected++;
            continue; /* the listener narrated it; a real service would serve a fallback */
        }
        int64_t latency;
        bw_outcome o = dependency(t, &latency);
        reached++;
        bw_clock_manual_advance(clk, latency);
        bw_settle_ex(b, &p, o, o == BW_FAILURE ? 503 : 0);
    }

    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    printf("\nend: state %s; %d calls reached the dependency and %d were rejected without touching it\n",
           bw_state_name(s.state), reached, rejected);
    /* The same story in the breaker's cumulative counters (what a metrics exporter reads). */
    bw_counters c;
    bw_breaker_counters(b, &c);
    printf("counters: calls success=%llu slow_success=%llu failure=%llu; rejected open=%llu half_open=%llu; "
           "trips %llu, probe rounds passed %llu failed %llu; last failure code %d\n",
           (unsigned long long)c.calls[BW_CALL_SUCCESS], (unsigned long long)c.calls[BW_CALL_SLOW_SUCCESS],
           (unsigned long long)c.calls[BW_CALL_FAILURE], (unsigned long long)c.rejected[BW_STATE_OPEN],
           (unsigned long long)c.rejected[BW_STATE_HALF_OPEN],
           (unsigned long long)c.transitions[BW_STATE_CLOSED][BW_STATE_OPEN], (unsigned long long)c.rounds_passed,
           (unsigned long long)c.rounds_failed, c.last_failure_code);
    bw_breaker_free(b);
    bw_clock_free(clk);
    return s.state == BW_STATE_CLOSED ? 0 : 1;
}
