/*
 * test_api.c (tests/unit/) — the library's identity: version macros agree with
 * bw_version(), every status has a distinct message, state and outcome names,
 * components; and its lifecycle: bw_fini ends the system clock's timer thread.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static void test_version(void)
{
    CHECK_INT(bw_version(), BW_VERSION_NUM);
    CHECK_INT(BW_VERSION_NUM, BW_VERSION_MAJOR * 10000 + BW_VERSION_MINOR * 100 + BW_VERSION_PATCH);
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d.%d", BW_VERSION_MAJOR, BW_VERSION_MINOR, BW_VERSION_PATCH);
    CHECK_STR(bw_version_string(), buf);
    CHECK_STR(BW_VERSION_STRING, buf);
    CHECK(bw_components() & BW_COMPONENT_CORE);
}

static void test_strerror(void)
{
    const int codes[] = {BW_OK,   BW_REJECTED, BW_EINVAL, BW_ERANGE,    BW_ENOMEM, BW_EPARSE,  BW_EPERMIT,
                         BW_ESYS, BW_ESTATE,   BW_ELIMIT, BW_ETIMEDOUT, BW_EFULL,  BW_ENOTSUP, BW_ECONFLICT};
    const int n = (int)(sizeof codes / sizeof codes[0]);
    for (int i = 0; i < n; i++) {
        CHECK(strcmp(bw_strerror(codes[i]), "unknown error") != 0);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(bw_strerror(codes[i]), bw_strerror(codes[j])) != 0);
    }
    CHECK_STR(bw_strerror(-9999), "unknown error");
    CHECK_STR(bw_strerror(BW_ERANGE), "value out of range");
}

static void test_names(void)
{
    CHECK_STR(bw_state_name(BW_STATE_CLOSED), "closed");
    CHECK_STR(bw_state_name(BW_STATE_OPEN), "open");
    CHECK_STR(bw_state_name(BW_STATE_HALF_OPEN), "half_open");
    CHECK_STR(bw_state_name(BW_STATE_FORCED_OPEN), "forced_open");
    CHECK_STR(bw_state_name(BW_STATE_DISABLED), "disabled");
    CHECK_STR(bw_state_name(BW_STATE_METRICS_ONLY), "metrics_only");
    CHECK_STR(bw_state_name((bw_state)6), "unknown");
    CHECK_STR(bw_state_name((bw_state)-1), "unknown");
    CHECK_STR(bw_outcome_name(BW_SUCCESS), "success");
    CHECK_STR(bw_outcome_name(BW_FAILURE), "failure");
    CHECK_STR(bw_outcome_name(BW_IGNORED), "ignored");
    CHECK_STR(bw_outcome_name(BW_UNREACHABLE), "unreachable");
    CHECK_STR(bw_outcome_name((bw_outcome)4), "unknown");
}

/* The append-only enum keeps its values: a renumbering breaks every compiled client. */
static void test_stable_values(void)
{
    CHECK_INT(BW_OK, 0);
    CHECK_INT(BW_REJECTED, 1);
    CHECK_INT(BW_EINVAL, -1);
    CHECK_INT(BW_ERANGE, -2);
    CHECK_INT(BW_ENOMEM, -3);
    CHECK_INT(BW_EPARSE, -4);
    CHECK_INT(BW_EPERMIT, -5);
    CHECK_INT(BW_ESYS, -6);
    CHECK_INT(BW_ESTATE, -7);
    CHECK_INT(BW_ELIMIT, -8);
    CHECK_INT(BW_ETIMEDOUT, -9);
    CHECK_INT(BW_EFULL, -10);
    CHECK_INT(BW_STATE_METRICS_ONLY, 5);
    CHECK_INT(BW_UNREACHABLE, 3);
    CHECK_INT(BW_EVENT_RESET, 3);
    CHECK_INT(BW_EVENT_RETRY, 4);
    CHECK_INT(BW_EVENT_BULKHEAD_REJECTED, 5);
    CHECK_INT(BW_EVENT_FALLBACK, 6);
}

/* The threads of this process. */
static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/*
 * The threads of this process once there are `want` (waiting 2 s at most): a
 * joined thread's task can stay listed a moment after pthread_join returns.
 */
static int threads_settle(int want)
{
    int n = threads();
    for (int i = 0; i < 2000 && n != want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        n = threads();
    }
    return n;
}

/* An auto_transition breaker on the system clock that trips on its first failure and times its wait out. */
static bw_breaker *timed_breaker(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_parse(c, "policy=consecutive error_threshold=1 wait=1ms auto_transition=true", &e));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("fini", c, &b, &e));
    bw_config_free(c);
    return b;
}

/* Wait (real time, at most 5 s) until b is in `state`: the timer thread moved it. */
static int reaches(bw_breaker *b, int state)
{
    for (int i = 0; i < 5000 && bw_breaker_state(b) != state; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return bw_breaker_state(b) == state;
}

static _Atomic long noop_tid;

static void *noop_thread(void *arg)
{
    noop_tid = (long)syscall(SYS_gettid);
    return arg;
}

static void test_fini(void)
{
    bw_fini(); /* nothing started yet: harmless */
    /* A first thread makes a sanitizer start its own helper thread now, not below (as in test_breaker). */
    pthread_t dummy;
    CHECK_INT(pthread_create(&dummy, NULL, noop_thread, NULL), 0);
    pthread_join(dummy, NULL);
    char task[64];
    snprintf(task, sizeof task, "/proc/self/task/%ld", (long)noop_tid);
    for (int i = 0; i < 2000 && access(task, F_OK) == 0; i++) { /* until it is gone from the list */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    int before = threads();
    bw_breaker *b = timed_breaker();
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_FAILURE));
    CHECK(reaches(b, BW_STATE_HALF_OPEN)); /* the timer thread ran */
    CHECK_INT(threads(), before + 2);      /* it, and the coarse clock's ticker (slow calls at 60 s) */
    bw_breaker_free(b);
    CHECK_INT(threads(), before + 2); /* the threads outlive their breakers... */
    bw_fini();
    CHECK_INT(threads_settle(before), before); /* ...until bw_fini */
    bw_fini();
    /* Usable again: the thread comes back with the next timer. */
    b = timed_breaker();
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_FAILURE));
    CHECK(reaches(b, BW_STATE_HALF_OPEN));
    bw_breaker_free(b);
    bw_fini();
    CHECK_INT(threads_settle(before), before);
}

static int rejected_events;

static void count_rejected(const bw_event *e, void *user)
{
    (void)user;
    if (e->type == BW_EVENT_REJECTED)
        rejected_events++;
}

/*
 * An OPEN rejection on the system clock, with and without a listener (without
 * one, bw_acquire answers from the coarse clock without a call): the state, a
 * retry_after within the open wait, the last failure, a settled permit.
 */
static void test_open_rejection_system_clock(void)
{
    for (int listen = 0; listen < 2; listen++) {
        bw_config *c = bw_config_new();
        bw_error err = {0};
        CHECK_OK(bw_config_parse(c, "min_calls=1 wait=1h", &err));
        if (listen)
            bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_REJECTED), count_rejected, NULL);
        bw_breaker *b = NULL;
        CHECK_OK(bw_breaker_new("sys", c, &b, &err));
        bw_config_free(c);
        bw_permit p;
        CHECK_OK(bw_acquire(b, &p, NULL));
        CHECK_OK(bw_settle_ex(b, &p, BW_FAILURE, 42));
        CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
        rejected_events = 0;
        bw_rejection why;
        memset(&why, 0xff, sizeof why);
        CHECK_INT(bw_acquire(b, &p, &why), BW_REJECTED);
        CHECK_INT(why.state, BW_STATE_OPEN);
        CHECK(why.retry_after_ns > 3600 * BW_NS_PER_S - 60 * BW_NS_PER_S);
        CHECK(why.retry_after_ns <= 3600 * BW_NS_PER_S);
        CHECK_INT(why.has_last_failure, 1);
        CHECK_INT(why.last_failure, 42);
        CHECK_INT(bw_settle(b, &p, BW_SUCCESS), BW_EPERMIT); /* a rejected permit is not live */
        CHECK_INT(bw_acquire(b, &p, NULL), BW_REJECTED);
        CHECK_INT(rejected_events, listen ? 2 : 0);
        bw_breaker_free(b);
    }
}

int main(void)
{
    RUN(test_version);
    RUN(test_strerror);
    RUN(test_names);
    RUN(test_stable_values);
    RUN(test_open_rejection_system_clock);
    RUN(test_fini);
    return TEST_SUMMARY();
}
