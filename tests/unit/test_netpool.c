/*
 * test_netpool.c — the network stores' connection pool (src/store/netpool.h)
 * on fake connections, without a server: reuse, a failed connect and the
 * backoff it starts (its doubling, read off the pool's own deadline rather
 * than slept through), a broken connection closing the idle ones, now_only,
 * the bounded wait for a busy pool, a forked child, done() handing an error
 * on, the call's deadline given to connect and checked before a command, and
 * a connection a call's deadline cut short going on with the next call.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "base/systime.h"
#include "store/netpool.h"

typedef struct fake {
    int connects, closes, closes_forked, fail_next; /* fail_next: the next connect fails */
    int calls;                                      /* of connect, made or not */
    int unfinished;                                 /* so many calls of connect leave it unfinished */
    int64_t deadline;                               /* the last connect's */
    int conns[8];                                   /* what a connection points at */
} fake;

static int fake_connect(void *backend, bw__netslot *s, int64_t deadline, bw_error *err)
{
    fake *f = backend;
    f->calls++;
    f->deadline = deadline;
    if (f->fail_next) {
        f->fail_next = 0;
        return bw__fail(err, BW_ESYS, "", "fake: connection refused");
    }
    if (!s->conn) {
        s->conn = &f->conns[f->connects++ % 8];
        s->connect_until = bw__mono_now() + BW_NS_PER_S;
        s->connect_step = 0;
    }
    if (f->unfinished > 0) {
        f->unfinished--;
        s->connect_step++;
        return bw__fail(err, BW_ETIMEDOUT, "", "fake: connecting: not done by the call's deadline");
    }
    s->connect_until = 0;
    return BW_OK;
}

static void fake_close(void *backend, void *conn, int forked)
{
    fake *f = backend;
    (void)conn;
    f->closes++;
    f->closes_forked += forked;
}

static const bw__netpool_ops fake_ops = {fake_connect, fake_close};

static void pool_make(bw__netpool *p, fake *f, int size, int64_t timeout_ns)
{
    memset(p, 0, sizeof *p);
    memset(f, 0, sizeof *f);
    CHECK_OK(bw__netpool_init(p, "fake", size, timeout_ns, &fake_ops, f, NULL));
}

static void test_reuse(void)
{
    bw__netpool p;
    fake f;
    pool_make(&p, &f, 2, 100 * BW_NS_PER_MS);
    bw__netslot *a, *b;
    CHECK_OK(bw__netpool_acquire(&p, 0, &a, NULL));
    CHECK_INT(f.connects, 1);
    CHECK(f.deadline == a->deadline); /* connect was given the call's deadline */
    bw__netpool_release(&p, a, 0, NULL);
    int64_t t_before = bw__mono_now();
    CHECK_OK(bw__netpool_acquire(&p, 0, &b, NULL));
    int64_t t_after = bw__mono_now();
    CHECK(b == a);
    CHECK_INT(f.connects, 1); /* the idle connection, not a new one */
    /* now_only: the connected slot is busy, the other has no connection: BW_ESTATE, *err untouched. */
    bw_error e = {12345, "", "untouched"};
    bw__netslot *c;
    CHECK_RC(bw__netpool_acquire(&p, 1, &c, &e), BW_ESTATE);
    CHECK_INT(e.code, 12345);
    CHECK_STR(e.message, "untouched");
    /* check(): fine while the call's deadline (timeout from the acquire) is ahead. */
    CHECK_OK(bw__netpool_check(&p, b, NULL));
    CHECK(b->deadline - t_before >= 100 * BW_NS_PER_MS && b->deadline - t_after <= 100 * BW_NS_PER_MS);
    b->deadline = bw__mono_now() - 1;
    bw_error late;
    CHECK_RC(bw__netpool_check(&p, b, &late), BW_ETIMEDOUT);
    CHECK(strstr(late.message, "fake: the call's deadline (timeout 100 ms) passed") == late.message);
    /* done: releases, and hands the call's error on only when it failed. */
    bw_error call = {BW_ESYS, "", "fake: reply malformed"}, out = {0, "", "before"};
    CHECK_RC(bw__netpool_done(&p, b, 0, BW_ESYS, &call, &out), BW_ESYS);
    CHECK_STR(out.message, "fake: reply malformed");
    CHECK_OK(bw__netpool_acquire(&p, 1, &b, NULL)); /* it was released: idle again */
    bw_error ok = {0, "", ""}, kept = {0, "", "kept"};
    CHECK_OK(bw__netpool_done(&p, b, 0, BW_OK, &ok, &kept));
    CHECK_STR(kept.message, "kept");
    bw__netpool_destroy(&p);
    CHECK_INT(f.closes, 1);
}

/* ms left of the backoff an acquire's message reports, or -1. */
static long backoff_ms(const bw_error *e)
{
    const char *m = strstr(e->message, "(not retried for ");
    return m ? strtol(m + strlen("(not retried for "), NULL, 10) : -1;
}

static void test_backoff(void)
{
    bw__netpool p;
    fake f;
    pool_make(&p, &f, 2, 100 * BW_NS_PER_MS);
    bw__netslot *s;
    bw_error e;
    f.fail_next = 1;
    CHECK_RC(bw__netpool_acquire(&p, 0, &s, &e), BW_ESYS);
    CHECK_STR(e.message, "fake: connection refused");
    /* During the backoff (10 ms) an acquire fails at once with the failure, connecting nothing. */
    CHECK_RC(bw__netpool_acquire(&p, 0, &s, &e), BW_ESYS);
    CHECK(strstr(e.message, "fake: connection refused (not retried for ") == e.message);
    long ms = backoff_ms(&e);
    CHECK(ms >= 1 && ms <= 11);
    CHECK_INT(f.connects, 0);
    /* Past it (the pool's deadline moved, not slept through), a connect is tried again; failing, the backoff
       doubles, up to 1 s. */
    int64_t want[] = {20, 40, 80, 160, 320, 640, 1000, 1000};
    for (int i = 0; i < 8; i++) {
        p.down_until = bw__mono_now() - 1;
        f.fail_next = 1;
        CHECK_RC(bw__netpool_acquire(&p, 0, &s, &e), BW_ESYS);
        CHECK_INT(p.backoff, want[i] * BW_NS_PER_MS);
    }
    /* A connect that works ends the backoff once the connection answers (a clean release). */
    p.down_until = bw__mono_now() - 1;
    CHECK_OK(bw__netpool_acquire(&p, 0, &s, &e));
    CHECK(p.backoff != 0);
    bw__netpool_release(&p, s, 0, NULL);
    CHECK_INT(p.backoff, 0);
    bw__netpool_destroy(&p);
}

static void test_broken_closes_idle(void)
{
    bw__netpool p;
    fake f;
    pool_make(&p, &f, 3, 100 * BW_NS_PER_MS);
    bw__netslot *a, *b, *c;
    CHECK_OK(bw__netpool_acquire(&p, 0, &a, NULL));
    CHECK_OK(bw__netpool_acquire(&p, 0, &b, NULL));
    CHECK_OK(bw__netpool_acquire(&p, 0, &c, NULL));
    bw__netpool_release(&p, a, 0, NULL);
    bw__netpool_release(&p, b, 0, NULL);
    CHECK_INT(f.closes, 0);
    bw_error e = {BW_ESYS, "", "fake: connection reset"};
    bw__netpool_release(&p, c, 1, &e); /* its own connection and both idle ones */
    CHECK_INT(f.closes, 3);
    CHECK(p.backoff == 10 * BW_NS_PER_MS);
    bw_error got;
    CHECK_RC(bw__netpool_acquire(&p, 0, &a, &got), BW_ESYS);
    CHECK(strstr(got.message, "fake: connection reset (not retried for ") == got.message);
    bw__netpool_destroy(&p);
    CHECK_INT(f.closes, 3);
}

/*
 * A release of a broken connection whose error says nothing (code 0: a
 * backend that set `broken` without filling the error) still starts a
 * backoff whose acquire fails: never BW_OK without a slot.
 */
static void test_broken_without_error(void)
{
    bw__netpool p;
    fake f;
    pool_make(&p, &f, 2, 100 * BW_NS_PER_MS);
    bw__netslot *a;
    CHECK_OK(bw__netpool_acquire(&p, 0, &a, NULL));
    bw_error empty = {0, "", ""};
    bw__netpool_release(&p, a, 1, &empty);
    bw__netslot *b = NULL;
    bw_error got = {0, "", ""};
    int rc = bw__netpool_acquire(&p, 0, &b, &got);
    CHECK_RC(rc, BW_ESYS);
    CHECK(got.code == BW_ESYS);
    CHECK(strstr(got.message, "fake: the connection failed (not retried for ") == got.message);
    if (rc == BW_OK && b)
        bw__netpool_release(&p, b, 0, NULL);
    bw__netpool_destroy(&p);
}

static void test_busy_waits_its_deadline(void)
{
    bw__netpool p;
    fake f;
    pool_make(&p, &f, 1, 30 * BW_NS_PER_MS);
    bw__netslot *a, *b;
    CHECK_OK(bw__netpool_acquire(&p, 0, &a, NULL));
    bw_error e;
    int64_t t0 = bw__mono_now();
    CHECK_RC(bw__netpool_acquire(&p, 0, &b, &e), BW_ETIMEDOUT);
    int64_t waited = bw__mono_now() - t0;
    CHECK(waited >= 29 * BW_NS_PER_MS); /* it waited for the slot, until its deadline (the upper bound is the
                                           fault tests', under load) */
    CHECK(strstr(e.message, "fake: all 1 connections of the pool stayed busy") == e.message);
    bw__netpool_release(&p, a, 0, NULL);
    bw__netpool_destroy(&p);
}

static void test_forked_child(void)
{
    bw__netpool p;
    fake f;
    pool_make(&p, &f, 2, 100 * BW_NS_PER_MS);
    bw__netslot *a, *b;
    CHECK_OK(bw__netpool_acquire(&p, 0, &a, NULL));
    CHECK_OK(bw__netpool_acquire(&p, 0, &b, NULL));
    bw__netpool_release(&p, b, 0, NULL);
    pid_t pid = fork();
    if (pid == 0) { /* a is busy (the parent's thread held it), b idle: both closed as the child's copies */
        bw_error e;
        bw__netslot *s;
        int bad = bw__netpool_acquire(&p, 0, &s, &e) != BW_ESTATE || !strstr(e.message, "another process");
        bw__netpool_destroy(&p);
        bad |= f.closes != 2 || f.closes_forked != 2;
        _exit(bad);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    bw__netpool_release(&p, a, 0, NULL);
    bw__netpool_destroy(&p);
    CHECK_INT(f.closes_forked, 0);
}

/*
 * A connection the call's deadline cut short stays in its slot: that call
 * fails (BW_ETIMEDOUT) without a backoff, the next acquire goes on with it
 * (not a new one) and now_only never takes it; closing idle ones closes it.
 */
static void test_connect_resumed(void)
{
    bw__netpool p;
    fake f;
    pool_make(&p, &f, 2, 100 * BW_NS_PER_MS);
    bw__netslot *a, *b;
    bw_error e;
    f.unfinished = 2;
    CHECK_RC(bw__netpool_acquire(&p, 0, &a, &e), BW_ETIMEDOUT);
    CHECK_STR(e.message, "fake: connecting: not done by the call's deadline");
    CHECK_INT(p.backoff, 0); /* no failure of the server */
    CHECK_INT(f.connects, 1);
    CHECK_RC(bw__netpool_acquire(&p, 1, &a, &e), BW_ESTATE); /* now_only: nothing made yet */
    CHECK_RC(bw__netpool_acquire(&p, 0, &a, &e), BW_ETIMEDOUT);
    CHECK_INT(f.connects, 1); /* the same connection, gone on with */
    CHECK_INT(f.calls, 2);
    int rc = bw__netpool_acquire(&p, 0, &a, &e);
    CHECK_OK(rc);
    if (rc != BW_OK) {
        bw__netpool_destroy(&p);
        return;
    }
    CHECK_INT(f.connects, 1);
    CHECK_INT(a->connect_step, 2);
    CHECK(a->connect_until == 0);
    bw__netpool_release(&p, a, 0, NULL);
    CHECK_OK(bw__netpool_acquire(&p, 1, &b, &e)); /* made: now_only takes it */
    CHECK(b == a);
    b = a;
    /* One being made in the other slot is closed with the idle ones on a failure. */
    f.unfinished = 1;
    bw__netslot *c;
    CHECK_RC(bw__netpool_acquire(&p, 0, &c, &e), BW_ETIMEDOUT);
    CHECK_INT(f.connects, 2);
    bw_error down = {BW_ESYS, "", "fake: connection reset"};
    bw__netpool_release(&p, b, 1, &down);
    CHECK_INT(f.closes, 2);
    for (int i = 0; i < p.size; i++)
        CHECK(p.slots[i].conn == NULL && p.slots[i].connect_until == 0);
    bw__netpool_destroy(&p);
    CHECK_INT(f.closes, 2);
}

int main(void)
{
    RUN(test_reuse);
    RUN(test_backoff);
    RUN(test_broken_closes_idle);
    RUN(test_broken_without_error);
    RUN(test_busy_waits_its_deadline);
    RUN(test_forked_child);
    RUN(test_connect_resumed);
    return TEST_SUMMARY();
}
