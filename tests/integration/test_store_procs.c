/*
 * test_store_procs.c — the store primitive across processes, on every store
 * processes share (tests/integration/): run as `test_store_procs URL MODE`,
 * once per backend registered with PROCS (bw_add_backend), MODE saying
 * whether a process may keep its store open across fork()
 * (keep-across-fork) or must open it again in each process
 * (reopen-after-fork).
 * - 8 processes race to create a fresh store and increment one counter 5,000
 *   times each: no increment is lost, no entry is torn;
 * - a process SIGKILLed inside an update (so while it holds whatever the store
 *   locks) leaves the store usable at once, with the entry as it was.
 * Forked children die with the parent (PR_SET_PDEATHSIG) and on their own
 * alarm; the parent's alarm ends a hung test, removing what the URL made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "harness.h"
#include "procs.h"
#include "entries.h"
#include "store_url.h"

enum { PROCS = 8, PER_PROC = 5000, TEST_ALARM = 60, CHILD_ALARM = 50 };

static int keep; /* the store may stay open across fork() */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_store_procs: a test timed out\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to say */
    }
    store_url_cleanup(); /* async-signal-safe; the children die with this process */
    _exit(3);
}

static bw_store *open_url(const char *url)
{
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(url, &s, &e);
    if (rc != BW_OK)
        H_FAIL("bw_store_open(%s): %s (%s)", url, bw_strerror(rc), e.message);
    return s;
}

/* ---- processes incrementing one counter ---- */

static void test_processes_one_counter(void)
{
    char url[SU_URL_LEN];
    snprintf(url, sizeof url, "%s", store_url_fresh()); /* nobody made it yet: the children race to */
    pid_t pid[PROCS];
    fflush(NULL);
    for (int i = 0; i < PROCS; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            procs_child_guard(CHILD_ALARM);
            bw_store *s = NULL;
            bw_error e;
            int rc = bw_store_open(url, &s, &e);
            if (rc != BW_OK) {
                fprintf(stderr, "child %d: open: %s (%s)\n", i, bw_strerror(rc), e.message);
                _exit(2);
            }
            for (int k = 0; k < PER_PROC; k++)
                if ((rc = bw_store_update(s, "counter", entry_incr, NULL, &e)) != BW_OK) {
                    fprintf(stderr, "child %d: update %d: %s (%s)\n", i, k, bw_strerror(rc), e.message);
                    _exit(3);
                }
            bw_store_close(s);
            _exit(0);
        }
        CHECK(pid[i] > 0);
    }
    alarm(TEST_ALARM);
    for (int i = 0; i < PROCS; i++)
        if (pid[i] > 0)
            CHECK_INT(procs_reap(pid[i]), 0);
    alarm(0);
    bw_store *s = open_url(url);
    if (s) {
        CHECK_INT(entry_get(s, "counter"), PROCS * PER_PROC);
        bw_store_close(s);
    }
}

/* ---- a process killed holding the lock ---- */

/* The child's update function: tell the parent it is inside the update, then hang there. */
static int hang_fd = -1;

static bw_store_verdict hang_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)now;
    (void)cur;
    entry_fill(next, 999, 1024, BW_STORE_NEVER);
    if (write(hang_fd, "x", 1) != 1)
        _exit(4);
    for (;;)
        pause();
}

static void test_killed_holding_the_lock(void)
{
    char url[SU_URL_LEN];
    snprintf(url, sizeof url, "%s", store_url_fresh());
    bw_error e;
    bw_store *s = open_url(url);
    if (!s)
        return;
    CHECK_OK(entry_put(s, "entry", 41, 1024, BW_STORE_NEVER, &e));
    if (!keep) { /* not open across the fork: the child opens its own, and so will this process again */
        bw_store_close(s);
        s = NULL;
    }
    int fds[2];
    CHECK_INT(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        procs_child_guard(CHILD_ALARM);
        close(fds[0]);
        hang_fd = fds[1];
        bw_store *cs = keep ? s : open_url(url);
        if (!cs)
            _exit(2);
        bw_store_update(cs, "entry", hang_fn, NULL, NULL);
        _exit(5);
    }
    close(fds[1]);
    CHECK(pid > 0);
    alarm(10); /* the guard: neither the pipe nor the lock below may hang the test */
    char x = 0;
    CHECK_INT(read(fds[0], &x, 1), 1);
    close(fds[0]);
    kill(pid, SIGKILL);
    CHECK_INT(procs_reap(pid), 128 + SIGKILL);
    /* The update's holder is dead: this update gets in at once and finds the entry as it was. */
    if (!keep)
        s = open_url(url);
    if (s) {
        CHECK_INT(entry_get(s, "entry"), 41);
        CHECK_OK(bw_store_update(s, "entry", entry_incr, NULL, &e));
        CHECK_INT(entry_get(s, "entry"), 42);
        bw_store_close(s);
    }
    alarm(0);
}

int main(int argc, char **argv)
{
    store_url_init(argc, argv);
    if (argc < 3 || (strcmp(argv[2], "keep-across-fork") != 0 && strcmp(argv[2], "reopen-after-fork") != 0)) {
        fprintf(stderr, "usage: test_store_procs URL keep-across-fork|reopen-after-fork\n");
        return 2;
    }
    keep = strcmp(argv[2], "keep-across-fork") == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    RUN(test_processes_one_counter);
    RUN(test_killed_holding_the_lock);
    store_url_cleanup();
    return TEST_SUMMARY();
}
