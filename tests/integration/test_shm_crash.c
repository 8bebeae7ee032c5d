/*
 * test_shm_crash.c — what only the shm:NAME store promises about processes
 * that die or stop inside a commit (tests/integration/; the multi-process
 * contract every shared store keeps is test_store_procs.c): a process
 * SIGKILLed at each point of a commit, through the fault hook of the tests'
 * build (store/shm/shm.h, BW_TESTING), leaves whole entries and the table's
 * bookkeeping intact; a process SIGSTOPped while it holds the lock delays the
 * others by at most lock_timeout, and a stored breaker degrades meanwhile.
 *
 * Segments are named bwtest-<pid>-<test> and unlinked by the test that made
 * them. Forked children arm alarm() and die with the parent, so none outlives
 * a failing run.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "harness.h"
#include "procs.h"
#include "shm_seg.h"
#include "entries.h"
#include "recorder.h"
#include "base/systime.h"
#include "store/shm/shm.h"

#define S BW_NS_PER_S

/* ---- helpers ---- */

/* ---- tests ---- */

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
    CHECK_OK(entry_put(s, "entry", 100, 1024, BW_STORE_NEVER, &e));
    for (int k = 0; k < 2; k++) {
        /* k = 0: a PUT over an entry; k = 1: a new name (the used count changes too). */
        pid_t pid = fork();
        if (pid == 0) {
            procs_child_guard(20);
            kill_at = point;
            bw__shm_fault = fault_kill;
            if (k == 0)
                entry_put(s, "entry", 200, 1024, BW_STORE_NEVER, NULL);
            else
                entry_put(s, "fresh", 300, 1000, BW_STORE_NEVER, NULL);
            _exit(6);
        }
        CHECK(pid > 0);
        alarm(10);
        CHECK_INT(procs_reap(pid), 128 + SIGKILL);
        if (k == 0)
            CHECK_INT(entry_get(s, "entry"), want_entry);
        else
            CHECK_INT(entry_get(s, "fresh"), want_fresh ? 300 : -2);
        alarm(0);
    }
    /* The table's bookkeeping survived: it still holds exactly 8 names. */
    int have = 1 + want_fresh, added = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "fill%d", i);
        if (entry_put(s, name, i, 16, BW_STORE_NEVER, &e) == BW_OK)
            added++;
    }
    CHECK_INT(have + added, 8);
    CHECK_OK(entry_del(s, "entry"));
    CHECK_OK(entry_put(s, "again", 1, 16, BW_STORE_NEVER, &e));
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
    CHECK_OK(entry_put(s, "entry", 41, 64, BW_STORE_NEVER, &e));
    pid_t pid = fork();
    if (pid == 0) {
        procs_child_guard(20);
        bw__shm_fault = fault_stop;
        entry_put(s, "entry", 42, 64, BW_STORE_NEVER, NULL);
        _exit(7);
    }
    CHECK(pid > 0);
    alarm(20);
    int st = 0;
    CHECK_INT(waitpid(pid, &st, WUNTRACED), pid);
    if (!WIFSTOPPED(st)) {
        H_FAIL("the child did not stop in the critical section (status 0x%x)", st);
        kill(pid, SIGKILL);
        procs_reap(pid);
        bw_store_close(s);
        unlink_seg(n);
        return;
    }
    int64_t t0 = bw__mono_now();
    CHECK_RC(entry_put(s, "entry", 43, 64, BW_STORE_NEVER, &e), BW_ETIMEDOUT);
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
    CHECK_INT(procs_reap(pid), 7);
    CHECK_INT(entry_get(s, "entry"), 42);
    alarm(0);
    bw_store_close(s);
    unlink_seg(n);
}

int main(void)
{
    RUN(test_kill_mid_commit);
    RUN(test_stopped_holder);
    return TEST_SUMMARY();
}
