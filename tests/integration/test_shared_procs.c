/*
 * test_shared_procs.c — the shared modes across real processes on the real
 * clock (tests/integration/): what tests/contract/test_shared_modes.c checks
 * deterministically in one process, here with fork()ed children that each
 * open their own store and breaker. Run as `test_shared_procs URL MODE`, once
 * per backend registered with PROCS (bw_add_backend), MODE saying whether a
 * process may keep its store open across fork() (keep-across-fork) or must
 * open it again in each process (reopen-after-fork).
 * - the half-open race: 10 processes released at once on a tripped circuit
 *   whose wait is over, with a budget of 2 probes, get exactly 2 permits
 *   (stored mode) or 2 leases (coordinated mode) between them;
 * - a trip in one process rejects in another: within a bounded time through
 *   the polls (coordinated), at the very next acquire (stored); and so does
 *   a bw_breaker_open_for (a Retry-After), for its wait, not the configured one;
 * - quorum tripping (coordinated, store_quorum 2, three processes): one
 *   process's trip leaves the others serving; a second process's trip opens
 *   the fleet's circuit for the third within a bounded time;
 * - a process SIGKILLed at random moments of an acquire/settle loop on a
 *   stored breaker (so, now and then, while it holds the store's lock) leaves
 *   the store usable and the circuit consistent for the others.
 *
 * Only the public API. Children never share a store or a breaker with the
 * parent: each opens its own after fork. The parent forks only while it runs
 * no thread of its own but, possibly, the coarse clock's ticker (breaker.h,
 * TIME): no coordinated breaker alive, every store closed or without a lane.
 * Children start threads, which ThreadSanitizer refuses after a multi-threaded
 * fork unless die_after_fork=0 (the Makefile's tsan leg sets it). Results come back through a
 * pipe as fixed-size records; children are released together by closing a
 * pipe. Every wait is bounded: the parent arms alarm() around each test and,
 * when it fires, kills every child, removes the store and exits; children die
 * with the parent (PR_SET_PDEATHSIG) and on their own alarm. Each test kills
 * and reaps whatever child is still there when it ends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "harness.h"
#include "procs.h"
#include "timeutil.h"
#include "recorder.h"
#include "store_url.h"

#define MS BW_NS_PER_MS
#define S BW_NS_PER_S

enum { RACERS = 10, MAXKIDS = 16, TEST_ALARM = 20, CHILD_ALARM = 15 };

static char url[SU_URL_LEN]; /* the one store every process of every test opens */
static int keep;             /* the store may stay open across fork() */
static pid_t parent_pid;

/* ---- children: tracking, guards, and the alarm that ends a hung test ---- */

static volatile pid_t kids[MAXKIDS];
static volatile sig_atomic_t nkids;

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_shared_procs: a test timed out; killing its children\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to say */
    }
    for (int i = 0; i < nkids; i++)
        if (kids[i] > 0)
            kill(kids[i], SIGKILL);
    store_url_cleanup(); /* async-signal-safe */
    _exit(3);
}

/* The first thing a child does: die with the parent, and on its own after a while. */
static void child_guard(void)
{
    procs_child_guard(CHILD_ALARM);
    if (getppid() != parent_pid) /* the parent died before the guard was set */
        _exit(9);
}

/* Fork a child that runs fn(arg, idx) and exits with its status; -1 if fork failed. */
static pid_t spawn(int (*fn)(void *arg, int idx), void *arg, int idx)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        child_guard();
        _exit(fn(arg, idx));
    }
    if (pid > 0 && nkids < MAXKIDS)
        kids[nkids++] = pid;
    if (pid < 0)
        H_FAIL("fork: %s", strerror(errno));
    return pid;
}

/* Wait for pid (alarm armed by the caller), and forget it: procs_reap's status. */
static int reap(pid_t pid)
{
    int st = procs_reap(pid);
    for (int i = 0; i < nkids; i++)
        if (kids[i] == pid)
            kids[i] = 0;
    return st;
}

/* Reap every child with exit status 0 expected. */
static void reap_all_ok(void)
{
    for (int i = 0; i < nkids; i++) {
        pid_t pid = kids[i];
        if (pid > 0) {
            int st = reap(pid);
            if (st != 0)
                H_FAIL("child %ld exited with status %d", (long)pid, st);
        }
    }
}

/* End of a test: kill and reap whatever child is left (none when it passed), disarm the alarm. */
static void end_test(void)
{
    for (int i = 0; i < nkids; i++) {
        pid_t pid = kids[i];
        if (pid > 0) {
            kill(pid, SIGKILL);
            reap(pid);
        }
    }
    nkids = 0;
    alarm(0);
}

static void begin_test(void)
{
    nkids = 0;
    alarm(TEST_ALARM);
}

/* ---- pipes and messages ---- */

enum { MSG_READY = 1, MSG_READY2 = 2, MSG_RESULT = 3, MSG_TRIPPED = 4, MSG_FAIL = 5 };

typedef struct msg {
    int32_t kind, idx, rc, state;
    int64_t retry_after;
} msg; /* smaller than PIPE_BUF: each write is atomic */

typedef struct pipes {
    int start[2]; /* closed by the parent: releases every child at once */
    int fin[2];   /* closed by the parent: children may finish */
    int res[2];   /* children -> parent */
} pipes;

static int pipes_open(pipes *p)
{
    return pipe(p->start) == 0 && pipe(p->fin) == 0 && pipe(p->res) == 0 ? 0 : -1;
}

/* The child's ends: read start and fin, write res. */
static void pipes_child(pipes *p)
{
    close(p->start[1]);
    close(p->fin[1]);
    close(p->res[0]);
}

/* The parent's ends, once every child is forked: write start and fin, read res. */
static void pipes_parent(pipes *p)
{
    close(p->start[0]);
    close(p->fin[0]);
    close(p->res[1]);
}

static void pipes_close_parent(pipes *p)
{
    if (p->start[1] >= 0)
        close(p->start[1]);
    if (p->fin[1] >= 0)
        close(p->fin[1]);
    close(p->res[0]);
}

static void send_msg(int fd, int kind, int idx, int rc, int state, int64_t retry_after)
{
    msg m = {kind, idx, rc, state, retry_after};
    if (write(fd, &m, sizeof m) != (ssize_t)sizeof m)
        _exit(20);
}

/* Read one message; 0 on EOF (every child gone) or error. */
static int recv_msg(int fd, msg *m)
{
    size_t got = 0;
    while (got < sizeof *m) {
        ssize_t n = read(fd, (char *)m + got, sizeof *m - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
    return 1;
}

/* Block until the parent closes the pipe's write end. */
static void wait_closed(int fd)
{
    char c;
    ssize_t n;
    while ((n = read(fd, &c, 1)) != 0)
        if (n < 0 && errno != EINTR)
            break;
}

/* Receive `count` messages of `kind`; a MSG_FAIL or EOF fails the test. Returns how many came. */
static int collect(int fd, int kind, int count, msg *out)
{
    int n = 0;
    while (n < count) {
        msg m;
        if (!recv_msg(fd, &m)) {
            H_FAIL("the children's pipe closed after %d of %d messages (kind %d)", n, count, kind);
            return n;
        }
        if (m.kind == MSG_FAIL) {
            H_FAIL("child %d failed at step %d: %s", m.idx, m.state, bw_strerror(m.rc));
            return n;
        }
        if (m.kind != kind) {
            H_FAIL("child %d sent message kind %d, want %d", m.idx, m.kind, kind);
            return n;
        }
        if (out)
            out[n] = m;
        n++;
    }
    return n;
}

/* ---- time ---- */

static void sleep_until(int64_t at)
{
    int64_t left = at - mono_ns();
    if (left > 0)
        sleep_ns(left);
}

/* ---- stores and breakers ---- */

static bw_store *open_store(void)
{
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(url, &s, &e);
    if (rc != BW_OK) {
        H_FAIL("bw_store_open(%s): %s: %s", url, bw_strerror(rc), e.message);
        return NULL;
    }
    return s;
}

typedef struct knobs {
    bw_store_mode mode;
    int64_t wait, poll;
    int probes;
    int window, min_calls;
    int quorum;         /* store_quorum when not 0 */
    recorder *degraded; /* hears BW_EVENT_STORE_DEGRADED when not NULL */
} knobs;

/*
 * A breaker on store s: rate policy, failure rate 0.5 over the last `window`
 * calls (4 when 0) with `min_calls` (2 when 0), `probes` probes a round all
 * at once, rounds expire after 5 s.
 */
static int make(const char *name, bw_store *s, const knobs *k, bw_breaker **out)
{
    bw_config *c = bw_config_new();
    bw_error e;
    memset(&e, 0, sizeof e);
    int rc = c ? BW_OK : BW_ENOMEM;
    int window = k->window ? k->window : 4, min_calls = k->min_calls ? k->min_calls : 2;
    int probes = k->probes ? k->probes : 1;
    if (rc == BW_OK)
        rc = bw_config_set_failure_rate(c, 0.5, &e);
    if (rc == BW_OK)
        rc = bw_config_set_window(c, BW_WINDOW_COUNT, window, &e);
    if (rc == BW_OK)
        rc = bw_config_set_min_calls(c, min_calls, &e);
    if (rc == BW_OK)
        rc = bw_config_set_wait(c, k->wait ? k->wait : 10 * S, &e);
    if (rc == BW_OK)
        rc = bw_config_set_permitted_probes(c, probes, &e);
    if (rc == BW_OK)
        rc = bw_config_set_max_concurrent_probes(c, probes, &e);
    if (rc == BW_OK)
        rc = bw_config_set_max_wait_in_half_open(c, 5 * S, &e);
    if (rc == BW_OK && k->poll)
        rc = bw_config_set_store_poll(c, k->poll, &e);
    if (rc == BW_OK && k->quorum)
        rc = bw_config_set_store_quorum(c, k->quorum, &e);
    if (rc == BW_OK)
        rc = bw_config_set_store_close_timeout(c, 2 * S, &e);
    if (rc == BW_OK && k->degraded)
        rc = bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_STORE_DEGRADED), rec_listen, k->degraded);
    if (rc == BW_OK)
        rc = bw_config_set_store(c, s, k->mode, &e);
    if (rc == BW_OK)
        rc = bw_breaker_new(name, c, out, &e);
    if (rc != BW_OK && getpid() == parent_pid)
        H_FAIL("making breaker %s: %s: %s", name, bw_strerror(rc), e.message);
    bw_config_free(c);
    return rc;
}

/* acquire + settle(outcome); the acquire's status. */
static int call(bw_breaker *b, bw_outcome o, bw_rejection *why)
{
    bw_permit p;
    int rc = bw_acquire(b, &p, why);
    if (rc == BW_OK) {
        int rs = bw_settle(b, &p, o);
        if (rs != BW_OK)
            return rs;
    }
    return rc;
}

/* In a child: its own store handle and breaker, or a MSG_FAIL to the parent. */
static int child_open(const char *name, const knobs *k, int out, int idx, bw_store **s, bw_breaker **b)
{
    int rc = bw_store_open(url, s, NULL);
    if (rc != BW_OK) {
        send_msg(out, MSG_FAIL, idx, rc, 1, 0);
        return rc;
    }
    if ((rc = make(name, *s, k, b)) != BW_OK)
        send_msg(out, MSG_FAIL, idx, rc, 2, 0);
    return rc;
}

/* ---- 1. the half-open race ---- */

typedef struct race {
    const char *name;
    knobs k;
    pipes p;
} race;

/* A racer: its own store and breaker; ready; (coordinated: sees the shared trip;) one acquire at the start signal. */
static int racer(void *arg, int idx)
{
    race *r = arg;
    pipes_child(&r->p);
    int out = r->p.res[1];
    bw_store *s = NULL;
    bw_breaker *b = NULL;
    if (child_open(r->name, &r->k, out, idx, &s, &b) != BW_OK)
        return 1;
    send_msg(out, MSG_READY, idx, 0, bw_breaker_state(b), 0);
    if (r->k.mode == BW_STORE_COORDINATED) {
        /* The parent trips the shared circuit now: wait until this breaker's polls show it. */
        int64_t until = mono_ns() + 5 * S;
        int st;
        while ((st = bw_breaker_state(b)) == BW_STATE_CLOSED && mono_ns() < until)
            sleep_ns(1 * MS);
        send_msg(out, MSG_READY2, idx, 0, st, 0);
    }
    wait_closed(r->p.start[0]);
    bw_permit p;
    bw_rejection why;
    memset(&why, 0, sizeof why);
    int rc = bw_acquire(b, &p, &why);
    send_msg(out, MSG_RESULT, idx, rc, rc == BW_OK ? -1 : (int)why.state, rc == BW_OK ? 0 : why.retry_after_ns);
    wait_closed(r->p.fin[0]); /* hold the permit until every racer has answered */
    int status = 0;
    if (rc == BW_OK && bw_settle(b, &p, BW_SUCCESS) != BW_OK)
        status = 3;
    bw_breaker_free(b);
    bw_store_close(s);
    return status;
}

static void run_race(bw_store_mode mode)
{
    begin_test();
    race r;
    memset(&r, 0, sizeof r);
    r.name = mode == BW_STORE_STORED ? "race-stored" : "race-coordinated";
    r.k.mode = mode;
    r.k.wait = 200 * MS;
    r.k.probes = 2;
    r.k.poll = 20 * MS;
    if (pipes_open(&r.p) != 0) {
        H_FAIL("pipe: %s", strerror(errno));
        end_test();
        return;
    }
    bw_store *s = NULL;
    bw_breaker *b = NULL;
    int forked = 0;
    for (int i = 0; i < RACERS; i++)
        forked += spawn(racer, &r, i) > 0;
    pipes_parent(&r.p);
    int in = r.p.res[0];
    if (forked != RACERS || collect(in, MSG_READY, RACERS, NULL) != RACERS)
        goto out;
    /* Every child is forked: the parent may open its store (and start a lane) now. Trip. */
    s = open_store();
    if (!s || make(r.name, s, &r.k, &b) != BW_OK)
        goto out;
    CHECK_OK(call(b, BW_FAILURE, NULL));
    CHECK_OK(call(b, BW_FAILURE, NULL));
    CHECK_STATE(b, BW_STATE_OPEN);
    if (mode == BW_STORE_COORDINATED) {
        bw_breaker_free(b); /* waits for the queued trip to be written */
        b = NULL;
    }
    int64_t tripped = mono_ns(); /* the shared OPEN began no later than this */
    if (mode == BW_STORE_COORDINATED) {
        msg m[RACERS];
        if (collect(in, MSG_READY2, RACERS, m) != RACERS)
            goto out;
        for (int i = 0; i < RACERS; i++)
            if (m[i].state != BW_STATE_OPEN && m[i].state != BW_STATE_HALF_OPEN)
                H_FAIL("racer %d never saw the shared trip (state %s)", m[i].idx, bw_state_name((bw_state)m[i].state));
    }
    /* The wait (200 ms) is over: release every racer at once. */
    sleep_until(tripped + 250 * MS);
    close(r.p.start[1]);
    r.p.start[1] = -1;
    msg m[RACERS];
    if (collect(in, MSG_RESULT, RACERS, m) == RACERS) {
        int admitted = 0, rejected = 0;
        for (int i = 0; i < RACERS; i++) {
            if (m[i].rc == BW_OK) {
                admitted++;
            } else if (m[i].rc == BW_REJECTED) {
                rejected++;
                if (m[i].state != BW_STATE_HALF_OPEN)
                    H_FAIL("racer %d rejected in state %s, want half_open", m[i].idx,
                           bw_state_name((bw_state)m[i].state));
            } else {
                H_FAIL("racer %d: bw_acquire returned %s", m[i].idx, bw_strerror(m[i].rc));
            }
        }
        CHECK_INT(admitted, 2);
        CHECK_INT(rejected, RACERS - 2);
    }
    close(r.p.fin[1]); /* the two probes settle (SUCCESS): the round passes */
    r.p.fin[1] = -1;
    reap_all_ok();
    if (mode == BW_STORE_STORED && b) {
        bw_snapshot snap;
        CHECK_OK(bw_breaker_snapshot(b, &snap));
        CHECK_INT(snap.state, BW_STATE_CLOSED);
        CHECK_OK(call(b, BW_SUCCESS, NULL));
    }
out:
    end_test();
    pipes_close_parent(&r.p);
    bw_breaker_free(b);
    bw_store_close(s);
}

static void test_race_stored(void)
{
    run_race(BW_STORE_STORED);
}

static void test_race_coordinated(void)
{
    run_race(BW_STORE_COORDINATED);
}

/* ---- 2. a trip in one process rejects in the others ---- */

typedef struct tripper {
    const char *name;
    knobs k;
    pipes p;
    int staged;    /* child 1 waits for `second` to close after the start signal */
    int second[2]; /* when staged */
    int64_t open;  /* > 0: the child opens its circuit with bw_breaker_open_for(open) instead of failing */
} tripper;

/* Ready; at the start signal fail until the circuit is OPEN here; tell; hold until told to finish. */
static int trip_child(void *arg, int idx)
{
    tripper *t = arg;
    pipes_child(&t->p);
    int out = t->p.res[1];
    bw_store *s = NULL;
    bw_breaker *b = NULL;
    if (child_open(t->name, &t->k, out, idx, &s, &b) != BW_OK)
        return 1;
    send_msg(out, MSG_READY, idx, 0, 0, 0);
    wait_closed(t->p.start[0]);
    if (t->staged) {
        close(t->second[1]);
        if (idx == 1)
            wait_closed(t->second[0]);
    }
    int rc;
    if (t->open > 0 && (rc = bw_breaker_open_for(b, t->open)) != BW_OK) {
        send_msg(out, MSG_FAIL, idx, rc, 3, 0);
        return 1;
    }
    for (int i = 0; i < 4 && bw_breaker_state(b) != BW_STATE_OPEN; i++)
        if ((rc = call(b, BW_FAILURE, NULL)) != BW_OK) {
            send_msg(out, MSG_FAIL, idx, rc, 3, 0);
            return 1;
        }
    send_msg(out, MSG_TRIPPED, idx, 0, bw_breaker_state(b), 0);
    wait_closed(t->p.fin[0]);
    bw_breaker_free(b);
    bw_store_close(s);
    return 0;
}

/* A trip in the child rejects here; with open > 0 the child opens its circuit for that long (a Retry-After). */
static void run_trip(bw_store_mode mode, int64_t open)
{
    begin_test();
    tripper t;
    memset(&t, 0, sizeof t);
    t.open = open;
    t.name = mode == BW_STORE_STORED ? (open ? "open-for-stored" : "trip-stored")
                                     : (open ? "open-for-coordinated" : "trip-coordinated");
    t.k.mode = mode;
    t.k.wait = 10 * S;
    t.k.poll = 100 * MS;
    bw_store *s = NULL;
    bw_breaker *b = NULL;
    if (pipes_open(&t.p) != 0) {
        H_FAIL("pipe: %s", strerror(errno));
        end_test();
        return;
    }
    pid_t pid = spawn(trip_child, &t, 0); /* before the parent has a lane */
    pipes_parent(&t.p);
    int in = t.p.res[0];
    msg m;
    if (pid < 0 || collect(in, MSG_READY, 1, NULL) != 1)
        goto out;
    s = open_store();
    if (!s || make(t.name, s, &t.k, &b) != BW_OK)
        goto out;
    CHECK_OK(call(b, BW_SUCCESS, NULL)); /* CLOSED here too */
    if (mode == BW_STORE_COORDINATED)
        sleep_ns(150 * MS); /* the first poll (at once) has found nothing shared */
    close(t.p.start[1]);
    t.p.start[1] = -1;
    if (collect(in, MSG_TRIPPED, 1, &m) != 1)
        goto out;
    CHECK_INT(m.state, BW_STATE_OPEN);
    int64_t t0 = mono_ns();
    bw_rejection why;
    memset(&why, 0, sizeof why);
    int rc = BW_OK;
    if (mode == BW_STORE_STORED) {
        rc = call(b, BW_SUCCESS, &why); /* the very next acquire */
    } else {
        while ((rc = call(b, BW_SUCCESS, &why)) == BW_OK && mono_ns() - t0 < 2 * S)
            sleep_ns(1 * MS);
        printf("# %s: the coordinated %s rejected here after %.1f ms (store_poll 100 ms)\n", url,
               open ? "open_for" : "trip", (double)(mono_ns() - t0) / 1e6);
    }
    CHECK_RC(rc, BW_REJECTED);
    if (rc == BW_REJECTED) {
        CHECK_INT(why.state, BW_STATE_OPEN);
        CHECK(why.retry_after_ns > (open ? open - 2 * S : 0)); /* the child's open wait, not the configured 10 s */
        CHECK(why.retry_after_ns <= (open ? open : 10 * S));
        CHECK_STATE(b, BW_STATE_OPEN);
    }
    close(t.p.fin[1]);
    t.p.fin[1] = -1;
    reap_all_ok();
out:
    end_test();
    pipes_close_parent(&t.p);
    bw_breaker_free(b);
    bw_store_close(s);
}

static void test_trip_coordinated(void)
{
    run_trip(BW_STORE_COORDINATED, 0);
}

static void test_trip_stored(void)
{
    run_trip(BW_STORE_STORED, 0);
}

/* bw_breaker_open_for (a Retry-After of 5 s) in one process rejects in another, for that long. */
static void test_open_for_coordinated(void)
{
    run_trip(BW_STORE_COORDINATED, 5 * S);
}

static void test_open_for_stored(void)
{
    run_trip(BW_STORE_STORED, 5 * S);
}

/* ---- quorum: three processes, store_quorum 2 ---- */

static void test_quorum_coordinated(void)
{
    begin_test();
    tripper t;
    memset(&t, 0, sizeof t);
    t.name = "quorum";
    t.k.mode = BW_STORE_COORDINATED;
    t.k.wait = 10 * S;
    t.k.poll = 50 * MS;
    t.k.quorum = 2;
    t.staged = 1;
    bw_store *s = NULL;
    bw_breaker *b = NULL;
    if (pipes_open(&t.p) != 0 || pipe(t.second) != 0) {
        H_FAIL("pipe: %s", strerror(errno));
        end_test();
        return;
    }
    pid_t p0 = spawn(trip_child, &t, 0), p1 = spawn(trip_child, &t, 1); /* before the parent has a lane */
    pipes_parent(&t.p);
    close(t.second[0]);
    int in = t.p.res[0];
    msg m;
    if (p0 < 0 || p1 < 0 || collect(in, MSG_READY, 2, NULL) != 2)
        goto out;
    s = open_store();
    if (!s || make(t.name, s, &t.k, &b) != BW_OK)
        goto out;
    CHECK_OK(call(b, BW_SUCCESS, NULL));
    sleep_ns(150 * MS);  /* the first poll (at once) has found nothing shared */
    close(t.p.start[1]); /* child 0 trips; child 1 waits */
    t.p.start[1] = -1;
    if (collect(in, MSG_TRIPPED, 1, &m) != 1)
        goto out;
    CHECK_INT(m.idx, 0);
    CHECK_INT(m.state, BW_STATE_OPEN); /* OPEN there, on its own */
    /* One instance's trip is not the fleet's: here calls go on for 12 polls (without a quorum: rejected in ~50 ms). */
    int64_t t0 = mono_ns();
    int rc = BW_OK;
    while (rc == BW_OK && mono_ns() - t0 < 600 * MS) {
        rc = call(b, BW_SUCCESS, NULL);
        sleep_ns(5 * MS);
    }
    CHECK_OK(rc);
    CHECK_STATE(b, BW_STATE_CLOSED);
    close(t.second[1]); /* child 1 trips: the second instance */
    t.second[1] = -1;
    if (collect(in, MSG_TRIPPED, 1, &m) != 1)
        goto out;
    CHECK_INT(m.idx, 1);
    t0 = mono_ns();
    bw_rejection why;
    memset(&why, 0, sizeof why);
    while ((rc = call(b, BW_SUCCESS, &why)) == BW_OK && mono_ns() - t0 < 3 * S)
        sleep_ns(1 * MS);
    printf("# %s: the quorum's trip rejected here after %.1f ms (store_poll 50 ms)\n", url,
           (double)(mono_ns() - t0) / 1e6);
    CHECK_RC(rc, BW_REJECTED);
    if (rc == BW_REJECTED) {
        CHECK_INT(why.state, BW_STATE_OPEN);
        CHECK(why.retry_after_ns > 0 && why.retry_after_ns <= 10 * S);
    }
    close(t.p.fin[1]);
    t.p.fin[1] = -1;
    reap_all_ok();
out:
    end_test();
    pipes_close_parent(&t.p);
    if (t.second[1] >= 0)
        close(t.second[1]);
    bw_breaker_free(b);
    bw_store_close(s);
}

/* ---- 3. a process killed at random moments, now and then holding the store's lock ---- */

typedef struct looper {
    const char *name;
    knobs k;
    int res[2];
} looper;

/* Acquire/settle forever (until SIGKILL); tell the parent once the loop runs. */
static int loop_child(void *arg, int idx)
{
    looper *l = arg;
    close(l->res[0]);
    bw_store *s = NULL;
    int rc = bw_store_open(url, &s, NULL);
    if (rc != BW_OK) {
        send_msg(l->res[1], MSG_FAIL, idx, rc, 1, 0);
        return 1;
    }
    bw_breaker *b = NULL;
    if ((rc = make(l->name, s, &l->k, &b)) != BW_OK) {
        send_msg(l->res[1], MSG_FAIL, idx, rc, 2, 0);
        return 1;
    }
    for (long i = 0;; i++) {
        if ((rc = call(b, BW_SUCCESS, NULL)) != BW_OK) {
            send_msg(l->res[1], MSG_FAIL, idx, rc, 3, 0);
            return 1;
        }
        if (i == 100)
            send_msg(l->res[1], MSG_READY, idx, 0, 0, 0);
    }
}

static void test_killed_mid_loop(void)
{
    enum { ROUNDS = 6, WINDOW = 50 };
    begin_test();
    looper l;
    memset(&l, 0, sizeof l);
    l.name = "killed-mid-loop";
    l.k.mode = BW_STORE_STORED;
    l.k.window = WINDOW;
    l.k.min_calls = WINDOW;
    recorder *degraded = rec_new();
    knobs pk = l.k;
    pk.degraded = degraded;
    /*
     * A store that may stay open across fork() (shm:) is kept by the parent,
     * with one breaker, across every kill (the children never touch it). One
     * that may not (a SQLite connection: its per-process lock bookkeeping
     * would be inherited) is opened afresh after each kill.
     */
    bw_store *s = NULL;
    bw_breaker *b = NULL;
    if (keep && (!(s = open_store()) || make(l.name, s, &pk, &b) != BW_OK))
        goto out;
    unsigned seed = (unsigned)getpid();
    for (int round = 0; round < ROUNDS; round++) {
        if (pipe(l.res) != 0) {
            H_FAIL("pipe: %s", strerror(errno));
            break;
        }
        pid_t pid = spawn(loop_child, &l, round);
        close(l.res[1]);
        int got = pid > 0 && collect(l.res[0], MSG_READY, 1, NULL) == 1;
        close(l.res[0]);
        if (!got)
            break;
        sleep_ns((int64_t)(rand_r(&seed) % 3000) * 1000); /* 0 to 3 ms into the loop */
        kill(pid, SIGKILL);
        CHECK_INT(reap(pid), 128 + SIGKILL);
        /* The survivor's breaker works at once: the store recovered the lock (if held) and its entry. */
        int64_t t0 = mono_ns();
        if (!keep && (!(s = open_store()) || make(l.name, s, &pk, &b) != BW_OK))
            break;
        CHECK_OK(call(b, BW_SUCCESS, NULL));
        CHECK(mono_ns() - t0 < 1 * S);
        CHECK_INT(rec_count(degraded), 0);
        bw_snapshot snap;
        CHECK_OK(bw_breaker_snapshot(b, &snap));
        CHECK_INT(snap.state, BW_STATE_CLOSED);
        CHECK_INT(snap.failed_calls, 0);
        CHECK_INT(snap.total_calls, WINDOW); /* the child filled the window (100 calls and more) */
        if (!keep) {
            bw_breaker_free(b);
            bw_store_close(s);
            b = NULL;
            s = NULL;
        }
    }
    if (!keep && (!(s = open_store()) || make(l.name, s, &pk, &b) != BW_OK))
        goto out;
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.state, BW_STATE_CLOSED);
    CHECK_INT(snap.failed_calls, 0);
    CHECK_INT(snap.total_calls, WINDOW); /* the stored window is whole: full of successes */
    for (int i = 0; i < 100; i++)
        CHECK_OK(call(b, BW_SUCCESS, NULL));
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.state, BW_STATE_CLOSED);
    CHECK_INT(snap.total_calls, WINDOW);
    CHECK_INT(rec_count(degraded), 0);
out:
    end_test();
    bw_breaker_free(b);
    bw_store_close(s);
    rec_free(degraded);
}

int main(int argc, char **argv)
{
    store_url_init(argc, argv);
    if (argc < 3 || (strcmp(argv[2], "keep-across-fork") != 0 && strcmp(argv[2], "reopen-after-fork") != 0)) {
        fprintf(stderr, "usage: test_shared_procs URL keep-across-fork|reopen-after-fork\n");
        return 2;
    }
    keep = strcmp(argv[2], "keep-across-fork") == 0;
    parent_pid = getpid();
    snprintf(url, sizeof url, "%s", store_url_fresh());
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a child's write to a parent gone away fails instead */
    RUN(test_race_stored);
    RUN(test_race_coordinated);
    RUN(test_trip_coordinated);
    RUN(test_trip_stored);
    RUN(test_open_for_coordinated);
    RUN(test_open_for_stored);
    RUN(test_quorum_coordinated);
    RUN(test_killed_mid_loop);
    store_url_cleanup();
    return TEST_SUMMARY();
}
