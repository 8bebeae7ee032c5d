/*
 * preload.c — an LD_PRELOAD helper of test_cli.sh (built there with cc, when
 * there is one): it watches the breakwater command from outside.
 *
 * - Between fork and exec a child of a multithreaded process may call only
 *   async-signal-safe functions: setenv, unsetenv, putenv and clearenv (which
 *   take a lock and allocate), and execvp and execvpe (not async-signal-safe:
 *   the child runs execve over paths made before fork) end the child with
 *   status 99 and a message.
 * - BWTEST_SNDBUF=N: every socket accept() returns gets SO_SNDBUF N (the
 *   kernel's buffer then fills with a few kilobytes, as a slow link does, so
 *   that a client that stops reading blocks a send at once).
 * - BWTEST_SLOW_READ=PATH: every read() of the file PATH waits 20 ms and
 *   reads at most one byte (a slow file system: reading a large file takes
 *   long, so a test can signal the command in the middle of it).
 * - BWTEST_HANG_READ=PATH: a read() of the file PATH never returns, as one
 *   on a hung NFS or FUSE file system: a caught signal does not end it (the
 *   kernel's killable wait goes on after a handler; here pause() is called
 *   again), only a signal whose action ends the process does.
 * - BWTEST_CLOCK_SHIFT=SECONDS: every clock (clock_gettime of any clock,
 *   gettimeofday, time) reads SECONDS later than it is, so that a test can
 *   run the command "5 minutes later" without waiting: the store's clock and
 *   the breaker's both move, as they would on a real schedule.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int in_child;

static void *next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

pid_t fork(void)
{
    pid_t (*real)(void) = (pid_t(*)(void))next("fork");
    pid_t pid = real();
    if (pid == 0)
        in_child = 1;
    return pid;
}

static void unsafe(const char *what)
{
    static const char a[] = "preload: ", b[] = " called between fork and exec\n";
    ssize_t w = write(2, a, sizeof a - 1);
    w = write(2, what, strlen(what));
    w = write(2, b, sizeof b - 1);
    (void)w;
    _exit(99);
}

int setenv(const char *name, const char *value, int overwrite)
{
    if (in_child)
        unsafe("setenv");
    int (*real)(const char *, const char *, int) = (int (*)(const char *, const char *, int))next("setenv");
    return real(name, value, overwrite);
}

int unsetenv(const char *name)
{
    if (in_child)
        unsafe("unsetenv");
    int (*real)(const char *) = (int (*)(const char *))next("unsetenv");
    return real(name);
}

int putenv(char *string)
{
    if (in_child)
        unsafe("putenv");
    int (*real)(char *) = (int (*)(char *))next("putenv");
    return real(string);
}

int clearenv(void)
{
    if (in_child)
        unsafe("clearenv");
    int (*real)(void) = (int (*)(void))next("clearenv");
    return real();
}

int execvp(const char *file, char *const argv[])
{
    if (in_child)
        unsafe("execvp");
    int (*real)(const char *, char *const[]) = (int (*)(const char *, char *const[]))next("execvp");
    return real(file, argv);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
    if (in_child)
        unsafe("execvpe");
    int (*real)(const char *, char *const[], char *const[]) =
        (int (*)(const char *, char *const[], char *const[]))next("execvpe");
    return real(file, argv, envp);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    int (*real)(int, struct sockaddr *, socklen_t *) = (int (*)(int, struct sockaddr *, socklen_t *))next("accept");
    int cfd = real(fd, addr, len);
    const char *sz = getenv("BWTEST_SNDBUF");
    if (cfd >= 0 && sz) {
        int n = atoi(sz);
        setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &n, sizeof n);
    }
    return cfd;
}

/* Whether fd is the file path names. */
static int is_file(int fd, const char *path)
{
    char link[64], got[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t l = readlink(link, got, sizeof got - 1);
    if (l <= 0)
        return 0;
    got[l] = 0;
    return strcmp(got, path) == 0;
}

ssize_t read(int fd, void *buf, size_t n)
{
    ssize_t (*real)(int, void *, size_t) = (ssize_t(*)(int, void *, size_t))next("read");
    const char *slow = getenv("BWTEST_SLOW_READ"), *hang = getenv("BWTEST_HANG_READ");
    if (hang && !in_child && is_file(fd, hang))
        for (;;)
            pause();
    if (slow && !in_child && n > 0 && is_file(fd, slow)) {
        usleep(20000);
        n = 1;
    }
    return real(fd, buf, n);
}

static long long shift(void)
{
    const char *v = getenv("BWTEST_CLOCK_SHIFT");
    return v ? atoll(v) : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int (*real)(clockid_t, struct timespec *) = (int (*)(clockid_t, struct timespec *))next("clock_gettime");
    int rc = real(id, ts);
    if (rc == 0)
        ts->tv_sec += (time_t)shift();
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz)
{
    int (*real)(struct timeval *, void *) = (int (*)(struct timeval *, void *))next("gettimeofday");
    int rc = real(tv, tz);
    if (rc == 0)
        tv->tv_sec += (time_t)shift();
    return rc;
}

time_t time(time_t *out)
{
    time_t (*real)(time_t *) = (time_t(*)(time_t *))next("time");
    time_t t = real(NULL) + (time_t)shift();
    if (out)
        *out = t;
    return t;
}
