/*
 * procs.h — what the multi-process tests share (tests/support/): a forked
 * child that cannot outlive its test, and reaping one. Include it after
 * defining _POSIX_C_SOURCE.
 */
#ifndef BW_TEST_PROCS_H
#define BW_TEST_PROCS_H

#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* The first thing a child does: die with its parent, and on its own after `seconds`. */
static inline void procs_child_guard(unsigned seconds)
{
    signal(SIGALRM, SIG_DFL);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    alarm(seconds);
}

/* Wait for pid (the caller has a timeout armed): its exit status, 128 + the signal that killed it, or -1. */
static inline int procs_reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

#endif
