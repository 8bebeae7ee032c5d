/*
 * test_shm.c — what only the shm:NAME store does (the store contract it
 * shares with every store is tests/contract/): open, close and reopen; URL
 * errors; a swept entry frees its slot; a full table and its recovery;
 * colliding names; processes incrementing one counter; a process SIGKILLed
 * while it holds the lock (inside the update function, and at each point of a
 * commit, through the fault hook) leaves the store usable with whole entries;
 * a layout or capacity mismatch on reopen.
 *
 * Segments are named bwtest-<pid>-<test> and unlinked by the test that made
 * them. Forked children arm alarm() and die with the parent, so none outlives
 * a failing run.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "harness.h"
#include "recorder.h"
#include "base/systime.h"
#include "store/shm/shm.h"

#define S BW_NS_PER_S

/* ---- helpers ---- */

static char *seg(const char *tag)
{
    static char buf[8][96];
    static int n;
    char *b = buf[n++ % 8];
    snprintf(b, sizeof buf[0], "bwtest-%ld-%s", (long)getpid(), tag);
    return b;
}

static void unlink_seg(const char *name)
{
    char path[256]; /* names are up to 200 bytes */
    snprintf(path, sizeof path, "/%s", name);
    shm_unlink(path);
}

static int open_shm(const char *name, int cap, bw_store **out, bw_error *e)
{
    char url[320];
    if (cap > 0)
        snprintf(url, sizeof url, "shm:%s?capacity=%d", name, cap);
    else
        snprintf(url, sizeof url, "shm:%s", name);
    return bw_store_open(url, out, e);
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(1099511628211);
    return h;
}

/* An entry of len bytes (>= 16) carrying value, with a checksum in its last 8 bytes. */
static void fill(bw_store_entry *e, int64_t value, uint32_t len, int64_t expires_at)
{
    e->expires_at = expires_at;
    e->len = len;
    memcpy(e->data, &value, 8);
    for (uint32_t i = 8; i < len - 8; i++)
        e->data[i] = (unsigned char)(value * 31 + i);
    uint64_t h = fnv(e->data, len - 8);
    memcpy(e->data + len - 8, &h, 8);
}

/* The value an entry carries, or -1 when it is torn. */
static int64_t value_of(const bw_store_entry *e)
{
    if (e->len < 16 || e->len > BW_STORE_DATA_MAX)
        return -1;
    uint64_t h;
    memcpy(&h, e->data + e->len - 8, 8);
    if (h != fnv(e->data, e->len - 8))
        return -1;
    int64_t v;
    memcpy(&v, e->data, 8);
    return v;
}

/* One update of the script: what fn returns and puts, and what it saw. */
typedef struct op {
    int verdict;
    int64_t value;
    uint32_t len;
    int64_t expires_at;
    /* observed */
    int calls, present;
    int64_t seen_now, seen_expires, seen_value;
    uint32_t seen_len;
} op;

static bw_store_verdict op_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    op *o = arg;
    o->calls++;
    o->seen_now = now;
    o->present = cur != NULL;
    if (cur) {
        o->seen_expires = cur->expires_at;
        o->seen_len = cur->len;
        o->seen_value = value_of(cur);
    }
    if (o->verdict == BW_STORE_PUT) {
        if (o->len >= 16)
            fill(next, o->value, o->len, o->expires_at);
        else {
            next->len = o->len;
            next->expires_at = o->expires_at;
            memset(next->data, 0x5a, o->len);
        }
    }
    return (bw_store_verdict)o->verdict;
}

/* Read name: its value, or -2 when absent (-1 when torn). */
static int64_t get(bw_store *s, const char *name)
{
    op o = {.verdict = BW_STORE_KEEP};
    bw_error e;
    int rc = bw_store_update(s, name, op_fn, &o, &e);
    if (rc != BW_OK) {
        H_FAIL("get %s: %s (%s)", name, bw_strerror(rc), e.message);
        return -3;
    }
    return o.present ? o.seen_value : -2;
}

static int put(bw_store *s, const char *name, int64_t value, uint32_t len, int64_t expires_at, bw_error *e)
{
    op o = {.verdict = BW_STORE_PUT, .value = value, .len = len, .expires_at = expires_at};
    return bw_store_update(s, name, op_fn, &o, e);
}

static int del(bw_store *s, const char *name)
{
    op o = {.verdict = BW_STORE_DELETE};
    return bw_store_update(s, name, op_fn, &o, NULL);
}

static bw_store_verdict incr_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)now;
    int64_t v = cur ? value_of(cur) : 0;
    if (v < 0)
        return BW_STORE_KEEP; /* torn: the check of the total catches it */
    fill(next, v + 1, 64, BW_STORE_NEVER);
    return BW_STORE_PUT;
}

/* A child process: dies with the parent and on its own after 20 s. */
static void child_guard(void)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    alarm(20);
}

/* Wait for pid (the caller has a timeout armed); its exit status or -1. */
static int reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- tests ---- */

static void test_open_reopen(void)
{
    const char *n = seg("reopen");
    unlink_seg(n);
    bw_store *s = NULL, *s2 = NULL;
    bw_error e;
    CHECK_OK(open_shm(n, 0, &s, &e));
    CHECK_STR(bw_store_scheme(s), "shm");
    CHECK_OK(put(s, "alpha", 11, 16, BW_STORE_NEVER, &e));
    CHECK_OK(put(s, "beta", 22, 1024, BW_STORE_NEVER, &e));
    /* A second handle in the same process sees the same segment. */
    CHECK_OK(open_shm(n, 1024, &s2, &e));
    CHECK_INT(get(s2, "alpha"), 11);
    CHECK_OK(put(s2, "gamma", 33, 100, BW_STORE_NEVER, &e));
    CHECK_INT(get(s, "gamma"), 33);
    bw_store_close(s2);
    bw_store_close(s);
    s = NULL;
    CHECK_OK(open_shm(n, 0, &s, &e));
    CHECK_INT(get(s, "alpha"), 11);
    CHECK_INT(get(s, "beta"), 22);
    CHECK_INT(get(s, "gamma"), 33);
    CHECK_INT(get(s, "delta"), -2);
    bw_store_close(s);
    unlink_seg(n);
}

static void url_err(const char *url, int want, const char *field)
{
    bw_store *s = NULL;
    bw_error e;
    memset(&e, 0, sizeof e);
    int rc = bw_store_open(url, &s, &e);
    if (rc != want)
        H_FAIL("%.60s: got %s, want %s (%s)", url, bw_strerror(rc), bw_strerror(want), e.message);
    else if (strcmp(e.field, field) != 0)
        H_FAIL("%.60s: field '%s', want '%s' (%s)", url, e.field, field, e.message);
    CHECK(s == NULL);
    if (rc == BW_OK)
        bw_store_close(s);
}

static void test_url_errors(void)
{
    char url[400], name[260];
    bw_error e;
    url_err("shm:", BW_EINVAL, "name");
    url_err("shm:a/b", BW_EINVAL, "name");
    url_err("shm:a b", BW_EINVAL, "name");
    url_err("shm:caf\xc3\xa9", BW_EINVAL, "name");
    url_err("shm:..", BW_EINVAL, "name");
    url_err("shm:.", BW_EINVAL, "name");
    memset(name, 'x', 201);
    name[201] = '\0';
    snprintf(url, sizeof url, "shm:%s", name);
    url_err(url, BW_EINVAL, "name");
    const char *n = seg("url");
    unlink_seg(n);
    /* Bad options, each refused before anything is made: no segment is left behind. */
    static const struct {
        const char *opts, *field;
    } bad_opts[] = {
        {"capacity=0", "capacity"},
        {"capacity=1048577", "capacity"},
        {"capacity=12x", "capacity"},
        {"capacity=-1", "capacity"},
        {"colour=blue", "colour"},             /* unknown */
        {"capacity=4&capacity=8", "capacity"}, /* given twice */
        {"capacity= 5", "capacity"},           /* the configuration text's rule: no spaces */
        {"capacity=99999999999999999999", "capacity"},
        {"lock_timeout=0", "lock_timeout"},
        {"lock_timeout=2h", "lock_timeout"},
    };
    for (size_t i = 0; i < sizeof bad_opts / sizeof bad_opts[0]; i++) {
        snprintf(url, sizeof url, "shm:%s?%s", n, bad_opts[i].opts);
        url_err(url, BW_EINVAL, bad_opts[i].field);
    }
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", n);
    CHECK(access(path, F_OK) != 0);
    bw_store *bad = NULL;
    memset(&e, 0, sizeof e);
    snprintf(url, sizeof url, "shm:%s?lock_timeout=2h", n);
    CHECK_RC(bw_store_open(url, &bad, &e), BW_EINVAL);
    CHECK(strstr(e.message, "[1ns, 1h]") != NULL); /* durations as configuration text writes them */
    snprintf(url, sizeof url, "shm:%s?capacity=4&capacity=8", n);
    CHECK_RC(bw_store_open(url, &bad, &e), BW_EINVAL);
    CHECK(strstr(e.message, "twice") != NULL);
    unlink_seg(n);

    /* The longest name (200 bytes) opens. */
    memset(name, 'y', 200);
    int k = snprintf(name, 40, "bw%ld-", (long)getpid());
    name[k] = 'y';
    name[200] = '\0';
    bw_store *s = NULL;
    CHECK_OK(open_shm(name, 4, &s, &e));
    CHECK_OK(put(s, "k", 5, 16, BW_STORE_NEVER, &e));
    CHECK_INT(get(s, "k"), 5);
    bw_store_close(s);
    unlink_seg(name);
}

/*
 * A swept entry gives its slot back (expiry and sweeps themselves are the
 * store contract's, tests/contract/): a table of 64 holding 10 expired and 5
 * held entries takes 59 new names after a sweep, and not one more.
 */
static void test_sweep_frees_slots(void)
{
    const char *n = seg("sweep");
    unlink_seg(n);
    bw_clock *c = NULL;
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_clock_manual_new(50 * S, &c));
    CHECK_OK(open_shm(n, 64, &s, &e));
    CHECK_OK(bw_store_set_clock(s, c));
    char name[32];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "exp%d", i);
        CHECK_OK(put(s, name, i, 16, 60 * S, &e));
    }
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "keep%d", i);
        CHECK_OK(put(s, name, 100 + i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_OK(bw_clock_manual_set(c, 60 * S));
    int d = -1;
    CHECK_OK(bw_store_sweep(s, 100, &d, &e));
    CHECK_INT(d, 10);
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "keep%d", i);
        CHECK_INT(get(s, name), 100 + i);
    }
    /* The table has room for the 59 others. */
    for (int i = 0; i < 59; i++) {
        snprintf(name, sizeof name, "new%d", i);
        CHECK_OK(put(s, name, i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_RC(put(s, "one-too-many", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    bw_store_close(s);
    bw_clock_free(c);
    unlink_seg(n);
}

static void test_full(void)
{
    const char *n = seg("full");
    unlink_seg(n);
    bw_clock *c = NULL;
    bw_store *s = NULL;
    bw_error e;
    char name[32], want[96];
    CHECK_OK(bw_clock_manual_new(0, &c));
    CHECK_OK(open_shm(n, 8, &s, &e));
    CHECK_OK(bw_store_set_clock(s, c));
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "n%d", i);
        CHECK_OK(put(s, name, i, 16, i == 0 ? 10 * S : BW_STORE_NEVER, &e));
    }
    memset(&e, 0, sizeof e);
    CHECK_RC(put(s, "n8", 8, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    snprintf(want, sizeof want, "shm store '%s' is full (capacity 8 circuits)", n);
    CHECK_STR(e.message, want);
    CHECK_INT(get(s, "n8"), -2);
    /* Entries that exist still update. */
    CHECK_OK(put(s, "n3", 33, 16, BW_STORE_NEVER, &e));
    CHECK_INT(get(s, "n3"), 33);
    /* A DELETE makes room. */
    CHECK_OK(del(s, "n3"));
    CHECK_OK(put(s, "n8", 8, 16, BW_STORE_NEVER, &e));
    CHECK_RC(put(s, "n9", 9, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    /* So does an expiry, without a sweep. */
    CHECK_OK(bw_clock_manual_advance(c, 10 * S));
    CHECK_OK(put(s, "n9", 9, 16, BW_STORE_NEVER, &e));
    CHECK_INT(get(s, "n0"), -2);
    CHECK_RC(put(s, "n0", 0, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    for (int i = 1; i < 10; i++) {
        snprintf(name, sizeof name, "n%d", i);
        CHECK_INT(get(s, name), i == 3 ? -2 : i);
    }
    /* Capacity 1. */
    bw_store *one = NULL;
    const char *n1 = seg("one");
    unlink_seg(n1);
    CHECK_OK(open_shm(n1, 1, &one, &e));
    CHECK_OK(put(one, "x", 1, 16, BW_STORE_NEVER, &e));
    CHECK_RC(put(one, "y", 2, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    CHECK_OK(del(one, "x"));
    CHECK_OK(put(one, "y", 2, 16, BW_STORE_NEVER, &e));
    CHECK_INT(get(one, "y"), 2);
    CHECK_INT(get(one, "x"), -2);
    bw_store_close(one);
    unlink_seg(n1);
    bw_store_close(s);
    bw_clock_free(c);
    unlink_seg(n);
}

static void test_collisions(void)
{
    enum { CAP = 257 };
    const char *n = seg("coll");
    unlink_seg(n);
    bw_store *s = NULL;
    bw_error e;
    char name[64];
    CHECK_OK(open_shm(n, CAP, &s, &e));
    /* A full table: every name lives somewhere along some other name's chain. */
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_OK(put(s, name, i, 16 + (uint32_t)i, BW_STORE_NEVER, &e));
    }
    CHECK_RC(put(s, "extra", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_INT(get(s, name), i);
    }
    /* Delete every other one (tombstones in the middle of chains), then refill. */
    for (int i = 0; i < CAP; i += 2) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_OK(del(s, name));
    }
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_INT(get(s, name), i % 2 ? i : -2);
    }
    for (int i = 0; i < CAP; i += 2) {
        snprintf(name, sizeof name, "other-%d", i);
        CHECK_OK(put(s, name, 1000 + i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_RC(put(s, "extra", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_INT(get(s, name), i % 2 ? i : -2);
        snprintf(name, sizeof name, "other-%d", i);
        CHECK_INT(get(s, name), i % 2 ? -2 : 1000 + i);
    }
    /* Empty it completely, then it holds a full table of new names again. */
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_OK(del(s, name));
        snprintf(name, sizeof name, "other-%d", i);
        CHECK_OK(del(s, name));
    }
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "third-%d", i);
        CHECK_OK(put(s, name, i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_RC(put(s, "extra", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    bw_store_close(s);
    unlink_seg(n);
}

static void test_processes(void)
{
    enum { P = 8, N = 5000 };
    const char *n = seg("procs");
    unlink_seg(n);
    pid_t pid[P];
    /* The children race to create the segment. */
    for (int i = 0; i < P; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            child_guard();
            bw_store *s = NULL;
            if (open_shm(n, 32, &s, NULL) != BW_OK)
                _exit(2);
            for (int k = 0; k < N; k++)
                if (bw_store_update(s, "counter", incr_fn, NULL, NULL) != BW_OK)
                    _exit(3);
            bw_store_close(s);
            _exit(0);
        }
        CHECK(pid[i] > 0);
    }
    alarm(20);
    for (int i = 0; i < P; i++)
        if (pid[i] > 0)
            CHECK_INT(reap(pid[i]), 0);
    alarm(0);
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(open_shm(n, 32, &s, &e));
    CHECK_INT(get(s, "counter"), P * N);
    bw_store_close(s);
    unlink_seg(n);
}

/* The child's update function: tell the parent it holds the lock, then hang. */
static int hang_fd = -1;

static bw_store_verdict hang_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)now;
    (void)cur;
    fill(next, 999, 1024, BW_STORE_NEVER);
    if (write(hang_fd, "x", 1) != 1)
        _exit(4);
    for (;;)
        pause();
}

static void test_kill_holding_lock(void)
{
    const char *n = seg("kill");
    unlink_seg(n);
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(open_shm(n, 16, &s, &e));
    CHECK_OK(put(s, "entry", 41, 1024, BW_STORE_NEVER, &e));
    int fds[2];
    CHECK_INT(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        child_guard();
        close(fds[0]);
        hang_fd = fds[1];
        bw_store_update(s, "entry", hang_fn, NULL, NULL);
        _exit(5);
    }
    close(fds[1]);
    CHECK(pid > 0);
    alarm(10); /* the guard: neither the pipe nor the lock below may hang the test */
    char x = 0;
    CHECK_INT(read(fds[0], &x, 1), 1);
    close(fds[0]);
    kill(pid, SIGKILL);
    CHECK_INT(reap(pid), -1);
    /* The lock's owner is dead: this update recovers it at once. */
    CHECK_INT(get(s, "entry"), 41);
    CHECK_OK(bw_store_update(s, "entry", incr_fn, NULL, &e));
    CHECK_INT(get(s, "entry"), 42);
    alarm(0);
    bw_store_close(s);
    unlink_seg(n);
}

/* The child stops itself while it holds the segment's lock (journal written, nothing applied). */
static void fault_stop(int point)
{
    if (point == BW__SHM_FAULT_JOURNAL)
        raise(SIGSTOP);
}

/*
 * A process stopped while it holds the lock delays the others by at most
 * lock_timeout: an update fails with BW_ETIMEDOUT, and a stored breaker on the
 * store degrades to its local circuit (its event says why) and carries on.
 */
static void test_stopped_holder(void)
{
    const char *n = seg("stop");
    unlink_seg(n);
    char url[300];
    snprintf(url, sizeof url, "shm:%s?capacity=16&lock_timeout=200ms", n);
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_store_open(url, &s, &e));
    CHECK_OK(put(s, "entry", 41, 64, BW_STORE_NEVER, &e));
    pid_t pid = fork();
    if (pid == 0) {
        child_guard();
        bw__shm_fault = fault_stop;
        put(s, "entry", 42, 64, BW_STORE_NEVER, NULL);
        _exit(7);
    }
    CHECK(pid > 0);
    alarm(20);
    int st = 0;
    CHECK_INT(waitpid(pid, &st, WUNTRACED), pid);
    if (!WIFSTOPPED(st)) {
        H_FAIL("the child did not stop in the critical section (status 0x%x)", st);
        kill(pid, SIGKILL);
        reap(pid);
        bw_store_close(s);
        unlink_seg(n);
        return;
    }
    int64_t t0 = bw__mono_now();
    CHECK_RC(put(s, "entry", 43, 64, BW_STORE_NEVER, &e), BW_ETIMEDOUT);
    int64_t took = bw__mono_now() - t0;
    CHECK(took >= 150 * BW_NS_PER_MS && took < 2 * BW_NS_PER_S);
    CHECK_STR(e.field, "lock_timeout");

    recorder *rec = rec_new();
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_STORED, &e));
    CHECK_OK(bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_STORE_DEGRADED), rec_listen, rec));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("svc-stopped", c, &b, &e));
    bw_config_free(c);
    for (int i = 0; i < 3; i++) {
        t0 = bw__mono_now();
        bw_permit p;
        CHECK_OK(bw_acquire(b, &p, NULL));
        CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
        took = bw__mono_now() - t0;
        CHECK(took < 2 * BW_NS_PER_S); /* the first waits out lock_timeout once; then it is degraded */
    }
    CHECK(rec_count(rec) >= 1);
    const bw_event *ev = rec_nth(rec, rec_count(rec) - 1);
    CHECK_INT(ev->status, BW_ETIMEDOUT);
    CHECK(ev->message && strstr(ev->message, "lock_timeout") != NULL);
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    bw_breaker_free(b);
    rec_free(rec);

    kill(pid, SIGCONT); /* it finishes its commit */
    CHECK_INT(reap(pid), 7);
    CHECK_INT(get(s, "entry"), 42);
    alarm(0);
    bw_store_close(s);
    unlink_seg(n);
}

/* Kill the child at one point of a commit, through the fault hook. */
static int kill_at;

static void fault_kill(int point)
{
    if (point == kill_at)
        raise(SIGKILL);
}

static void kill_mid_commit(int point, int64_t want_entry, int want_fresh)
{
    const char *n = seg("commit");
    unlink_seg(n);
    bw_store *s = NULL;
    bw_error e;
    char name[32];
    CHECK_OK(open_shm(n, 8, &s, &e));
    CHECK_OK(put(s, "entry", 100, 1024, BW_STORE_NEVER, &e));
    for (int k = 0; k < 2; k++) {
        /* k = 0: a PUT over an entry; k = 1: a new name (the used count changes too). */
        pid_t pid = fork();
        if (pid == 0) {
            child_guard();
            kill_at = point;
            bw__shm_fault = fault_kill;
            if (k == 0)
                put(s, "entry", 200, 1024, BW_STORE_NEVER, NULL);
            else
                put(s, "fresh", 300, 1000, BW_STORE_NEVER, NULL);
            _exit(6);
        }
        CHECK(pid > 0);
        alarm(10);
        CHECK_INT(reap(pid), -1);
        if (k == 0)
            CHECK_INT(get(s, "entry"), want_entry);
        else
            CHECK_INT(get(s, "fresh"), want_fresh ? 300 : -2);
        alarm(0);
    }
    /* The table's bookkeeping survived: it still holds exactly 8 names. */
    int have = 1 + want_fresh, added = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "fill%d", i);
        if (put(s, name, i, 16, BW_STORE_NEVER, &e) == BW_OK)
            added++;
    }
    CHECK_INT(have + added, 8);
    CHECK_OK(del(s, "entry"));
    CHECK_OK(put(s, "again", 1, 16, BW_STORE_NEVER, &e));
    bw_store_close(s);
    unlink_seg(n);
}

static void test_kill_mid_commit(void)
{
    /* The journal half written: discarded, the old value stays. */
    kill_mid_commit(BW__SHM_FAULT_JOURNAL, 100, 0);
    /* Pending, nothing applied yet: redone. */
    kill_mid_commit(BW__SHM_FAULT_PENDING, 200, 1);
    /* Half the data copied into the slot: redone. */
    kill_mid_commit(BW__SHM_FAULT_APPLY, 200, 1);
}

static void test_mismatch(void)
{
    const char *n = seg("mismatch");
    unlink_seg(n);
    bw_store *s = NULL, *s2 = NULL;
    bw_error e;
    CHECK_OK(open_shm(n, 16, &s, &e));
    CHECK_OK(put(s, "k", 1, 16, BW_STORE_NEVER, &e));
    memset(&e, 0, sizeof e);
    CHECK_RC(open_shm(n, 32, &s2, &e), BW_ESTATE);
    CHECK_STR(e.field, "capacity");
    CHECK(strstr(e.message, "capacity 16") != NULL);
    CHECK(s2 == NULL);
    /* The default capacity (1024) does not match either. */
    CHECK_RC(open_shm(n, 0, &s2, &e), BW_ESTATE);
    bw_store_close(s);

    /* Another layout version: bump the version field (after the 8-byte magic). */
    char path[128];
    snprintf(path, sizeof path, "/%s", n);
    int fd = shm_open(path, O_RDWR, 0);
    CHECK(fd >= 0);
    if (fd >= 0) {
        unsigned char *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        CHECK(h != MAP_FAILED);
        if (h != MAP_FAILED) {
            uint32_t v;
            memcpy(&v, h + 8, 4);
            v += 1;
            memcpy(h + 8, &v, 4);
            memset(&e, 0, sizeof e);
            CHECK_RC(open_shm(n, 16, &s2, &e), BW_ESTATE);
            CHECK_STR(e.field, "version");
            CHECK(strstr(e.message, "layout version") != NULL);
            /* Not a breakwater segment at all. */
            memset(h, 0x11, 8);
            CHECK_RC(open_shm(n, 16, &s2, &e), BW_ESTATE);
            CHECK_STR(e.field, "magic");
            munmap(h, 4096);
        }
    }
    unlink_seg(n);
}

int main(void)
{
    RUN(test_open_reopen);
    RUN(test_url_errors);
    RUN(test_sweep_frees_slots);
    RUN(test_full);
    RUN(test_collisions);
    RUN(test_processes);
    RUN(test_kill_holding_lock);
    RUN(test_kill_mid_commit);
    RUN(test_stopped_holder);
    RUN(test_mismatch);
    return TEST_SUMMARY();
}
