/*
 * run.c — `breakwater run` and `breakwater retry`: a command guarded by a
 * circuit kept in the store (stored mode), its exit status mapped to an
 * outcome, a timeout, signals forwarded (cli layer; see cli.h).
 *
 * Design notes
 * - The child: fork, then execve with the original signal mask, over the
 *   paths and with the environment made before fork (prepared). A pipe with
 *   O_CLOEXEC tells the parent whether exec failed (the command could not
 *   run: not the dependency's fault, so IGNORED, and 126/127 as a shell).
 * - The parent waits with sigtimedwait on SIGCHLD and the forwarded signals
 *   (blocked since main began), so a signal cannot slip in between a check
 *   and a wait. A signal another process sent to breakwater (SI_USER, SI_QUEUE)
 *   is passed to the child; one the terminal sent (SI_KERNEL) already reached
 *   the child's process group, and is not sent twice.
 * - --timeout: SIGTERM at the deadline, SIGKILL --kill-after later; the call
 *   is settled with bw_settle_timeout (a failure, slow when slow-call
 *   detection is on) and breakwater exits 124, as timeout(1). Unless
 *   breakwater is in a terminal's foreground, the child leads a process group
 *   of its own, which the signals reach (its children end too) (run_child).
 * - A store that cannot be opened is not fatal: the run goes on with a local
 *   circuit (the library's degradation), saying so once on stderr.
 * - The child does not get BREAKWATER_STORE (its URL may hold a password)
 *   unless --pass-store: then it gets the store as breakwater was given it
 *   (--store's value, "@FILE" included, else the caller's BREAKWATER_STORE).
 */
#define _GNU_SOURCE /* SI_KERNEL, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

/* ---- exit-code lists ---- */

typedef struct codes {
    int set;
    unsigned char in[256];
} codes;

static int parse_codes(const cli *c, const char *opt, const char *s, codes *out)
{
    memset(out, 0, sizeof *out);
    out->set = 1;
    const char *p = s;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0 || a > 255)
            goto bad;
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a || b > 255)
                goto bad;
            p = end;
        }
        for (long k = a; k <= b; k++)
            out->in[k] = 1;
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
    }
    return 0;
bad:
    cli_err(c, "%s: expected exit codes such as 1,2,10-20 (0 to 255), got '%s'", opt, s);
    return -1;
}

/* ---- the child ---- */

typedef struct outcome {
    int status;    /* what breakwater exits with */
    int ran;       /* 0: exec failed */
    int timed_out; /* the timeout killed it */
    int signal;    /* the signal that ended it, or 0 */
    int code;      /* its exit code, when it exited */
    int stop;      /* a signal asking breakwater to stop (TERM, INT, HUP, QUIT) came while it ran, or 0 */
} outcome;

/* Wait up to ns (< 0: forever) for a forwarded signal or SIGCHLD; the signal, or 0 when the time ran out. */
static int wait_signal(const cli *c, int64_t ns, siginfo_t *si)
{
    sigset_t set = c->forward;
    sigaddset(&set, SIGCHLD);
    for (;;) {
        int sig;
        if (ns < 0) {
            sig = sigwaitinfo(&set, si);
        } else {
            struct timespec ts = {(time_t)(ns / BW_NS_PER_S), (long)(ns % BW_NS_PER_S)};
            sig = sigtimedwait(&set, si, &ts);
        }
        if (sig > 0)
            return sig;
        if (errno == EAGAIN)
            return 0;
        /* EINTR: a stop/continue signal; wait again (the deadline is rechecked by the caller) */
        return -1;
    }
}

/*
 * What the child needs, made before fork: between fork and exec a child of a
 * multithreaded process (the library may have started threads) may call only
 * async-signal-safe functions, so no setenv/unsetenv, no malloc, no PATH
 * search there (execvp is not on POSIX's list). The child runs execve over
 * the paths made here, as execvp would, with the environment made here.
 */
typedef struct prepared {
    char **envp;  /* environ without BW_CLOCK when main set it (cli.h), and BREAKWATER_STORE as --pass-store says */
    char *store;  /* "BREAKWATER_STORE=" --store's value, for --pass-store (malloc'd), or NULL */
    char **paths; /* where to look for the command, in PATH's order (NULL-terminated) */
    char **argv;  /* the command's arguments */
    char **sh;    /* "/bin/sh", PATH (set in the child), argv[1..]: a file without #! (ENOEXEC), as execvp */
} prepared;

static void prepared_free(prepared *x)
{
    if (x->paths)
        for (char **p = x->paths; *p; p++)
            free(*p);
    free(x->paths);
    free(x->envp);
    free(x->store);
    free(x->sh);
    memset(x, 0, sizeof *x);
}

/* Make x for running argv (with `sh -c` when shell); 0, or -1 out of memory. */
static int prepare(const cli *c, char **argv, int shell, prepared *x)
{
    extern char **environ;
    memset(x, 0, sizeof *x);
    size_t n = 0, k = 0;
    while (environ && environ[n])
        n++;
    if (!(x->envp = malloc((n + 2) * sizeof *x->envp)))
        return -1;
    /* The store's URL may hold a password: the child gets it only when asked (--pass-store), as it was given. */
    int keep_store = c->pass_store && !c->store_spec;
    for (size_t i = 0; i < n; i++)
        if (!(c->clock_env && strncmp(environ[i], "BW_CLOCK=", 9) == 0) &&
            !(!keep_store && strncmp(environ[i], "BREAKWATER_STORE=", 17) == 0))
            x->envp[k++] = environ[i];
    if (c->pass_store && c->store_spec) {
        size_t sz = strlen(c->store_spec) + 18;
        if (!(x->store = malloc(sz)))
            return -1;
        snprintf(x->store, sz, "BREAKWATER_STORE=%s", c->store_spec);
        x->envp[k++] = x->store;
    }
    x->envp[k] = NULL;
    static char sh_path[] = "/bin/sh", sh_c[] = "-c";
    if (shell) { /* sh -c TEXT: argv is {TEXT, NULL} */
        if (!(x->paths = calloc(2, sizeof *x->paths)) || !(x->paths[0] = strdup(sh_path)) ||
            !(x->sh = calloc(4, sizeof *x->sh)))
            return -1;
        x->sh[0] = sh_path;
        x->sh[1] = sh_c;
        x->sh[2] = argv[0];
        x->argv = x->sh; /* run as argv; no ENOEXEC retry for /bin/sh itself */
        return 0;
    }
    x->argv = argv;
    size_t argc = 0;
    while (argv[argc])
        argc++;
    if (!(x->sh = calloc(argc + 2, sizeof *x->sh)))
        return -1;
    x->sh[0] = sh_path;
    for (size_t i = 1; i < argc; i++)
        x->sh[i + 1] = argv[i];
    const char *file = argv[0];
    if (!*file || strchr(file, '/')) { /* a path: itself only ("" is not found) */
        if (!(x->paths = calloc(2, sizeof *x->paths)))
            return -1;
        return *file && !(x->paths[0] = strdup(file)) ? -1 : 0;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin"; /* as glibc's execvp without PATH */
    size_t dirs = 1;
    for (const char *p = path; *p; p++)
        dirs += *p == ':';
    if (!(x->paths = calloc(dirs + 1, sizeof *x->paths)))
        return -1;
    size_t d = 0;
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t sz = len + strlen(file) + 3;
        if (!(x->paths[d] = malloc(sz)))
            return -1;
        if (len == 0) /* an empty entry is the current directory (the name alone, as execvp) */
            snprintf(x->paths[d], sz, "%s", file);
        else
            snprintf(x->paths[d], sz, "%.*s/%s", (int)len, p, file);
        d++;
        if (!end)
            break;
        p = end;
    }
    return 0;
}

/* In the child: execve each path as execvp does; returns only on failure, with the errno to report. */
static int exec_prepared(const prepared *x)
{
    int eacces = 0, err = ENOENT;
    for (char *const *p = x->paths; *p; p++) {
        execve(*p, x->argv, x->envp);
        err = errno;
        if (err == ENOEXEC && x->argv != x->sh) { /* no #! line: a shell script, as execvp runs it */
            x->sh[1] = *p;
            execve("/bin/sh", x->sh, x->envp);
            return errno;
        }
        if (err == EACCES)
            eacces = 1;
        else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV && err != ETIMEDOUT)
            return err; /* found, but it cannot run: no further search */
    }
    return eacces ? EACCES : err;
}

/* Whether breakwater's process group is the foreground group of its controlling terminal (an interactive run). */
static int in_foreground(void)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int fg = tcgetpgrp(fd) == getpgrp();
    close(fd);
    return fg;
}

/*
 * Run argv[0..] (with `sh -c` when shell) and wait for it, forwarding signals,
 * within timeout_ns (0: none). Fills *o.
 *
 * With a timeout, unless breakwater is in the foreground of a terminal (cron,
 * CI, a script's or a background job), the child leads a process group of its
 * own, and the timeout's signals and the forwarded TERM, INT, HUP and QUIT go
 * to that group: the command's own children end with it, as with timeout(1).
 * In a terminal's foreground the child stays in breakwater's group, the job's:
 * job control is the shell's (Ctrl-C and Ctrl-Z reach both, fg and bg
 * continue both, the command reads the terminal), and the signals go to the
 * command alone, as with timeout --foreground. (Giving a group of its own the
 * terminal, as a shell does, broke bg, and a Ctrl-Z in an orphaned group hung.)
 * USR1 and USR2 go to the command alone (their default ends a process).
 */
static void run_child(const cli *c, char **argv, int shell, int64_t timeout_ns, int64_t kill_after_ns, outcome *o)
{
    memset(o, 0, sizeof *o);
    prepared x;
    if (prepare(c, argv, shell, &x) != 0) {
        prepared_free(&x);
        cli_err(c, "out of memory");
        o->status = EX_SOFTWARE_;
        return;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        cli_err(c, "pipe: %s", strerror(errno));
        prepared_free(&x);
        o->status = EX_SOFTWARE_;
        return;
    }
    int group = timeout_ns > 0 && !in_foreground();
    int64_t deadline = timeout_ns > 0 ? cli_now() + timeout_ns : -1, kill_at = -1; /* counted from the fork */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        cli_err(c, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        prepared_free(&x);
        o->status = EX_SOFTWARE_;
        return;
    }
    if (pid == 0) { /* async-signal-safe calls only, until exec (see prepared) */
        if (group)
            setpgid(0, 0);
        sigprocmask(SIG_SETMASK, &c->orig_mask, NULL);
        close(pfd[0]);
        int e = exec_prepared(&x);
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(e == ENOENT ? EX_NOTFOUND_ : EX_NOEXEC_);
    }
    if (group)
        setpgid(pid, pid);             /* both sides, so that neither signals a group not yet made */
    pid_t target = group ? -pid : pid; /* whom the timeout's and the forwarded signals reach */
    prepared_free(&x);
    close(pfd[1]);
    int e = 0;
    ssize_t got;
    do
        got = read(pfd[0], &e, sizeof e);
    while (got < 0 && errno == EINTR);
    close(pfd[0]);
    o->ran = got != (ssize_t)sizeof e;
    if (!o->ran)
        cli_err(c, "cannot run %s: %s", argv[0], strerror(e));

    int wstatus = 0, lost = 0;
    for (;;) {
        pid_t w = waitpid(pid, &wstatus, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) { /* the child is gone unseen (reaped elsewhere): its outcome is unknown */
            lost = errno;
            break;
        }
        int64_t now = cli_now(), until = -1;
        if (kill_at >= 0 && now >= kill_at) {
            kill(target, SIGKILL);
            kill_at = -1;
            deadline = -1;
        } else if (deadline >= 0 && now >= deadline && !o->timed_out) {
            cli_info(c, "%s ran past its timeout: SIGTERM", argv[0]);
            kill(target, SIGTERM);
            kill(target, SIGCONT); /* a stopped process takes SIGTERM only once continued (as timeout(1)) */
            o->timed_out = 1;
            kill_at = now + kill_after_ns;
        }
        if (kill_at >= 0)
            until = kill_at - now;
        else if (deadline >= 0 && !o->timed_out)
            until = deadline - now;
        siginfo_t si;
        int sig = wait_signal(c, until < 0 ? -1 : until, &si);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT)
            o->stop = sig; /* retry stops after this attempt */
        /* One sent to breakwater by a process is the child's to handle; one a terminal sent (SI_KERNEL) already
           reached the child's group, unless the child has a group of its own. */
        if (sig > 0 && sig != SIGCHLD && (si.si_code != SI_KERNEL || group))
            kill(sig == SIGUSR1 || sig == SIGUSR2 ? pid : target, sig);
    }
    if (lost) {
        cli_err(c, "lost track of %s (%s): nothing recorded", argv[0], strerror(lost));
        o->ran = 0;
        o->status = EX_SOFTWARE_;
        return;
    }
    if (WIFSIGNALED(wstatus)) {
        o->signal = WTERMSIG(wstatus);
        o->status = 128 + o->signal;
    } else {
        o->code = WEXITSTATUS(wstatus);
        o->status = o->code;
    }
    if (o->timed_out)
        o->status = EX_TIMEOUT_;
}

/* The outcome the circuit records for what the child did. */
static bw_outcome classify(const outcome *o, const codes *fail, const codes *ignore)
{
    if (!o->ran)
        return BW_IGNORED; /* it never reached the dependency: a caller's mistake */
    if (o->signal)
        return BW_FAILURE;
    if (ignore->set && ignore->in[o->code])
        return BW_IGNORED;
    if (fail->set)
        return fail->in[o->code] ? BW_FAILURE : BW_SUCCESS;
    return o->code == 0 ? BW_SUCCESS : BW_FAILURE;
}

/* ---- the circuit ---- */

typedef struct guard {
    bw_breaker *b;
    bw_store *store; /* NULL: a local circuit (the store failed) */
} guard;

static void on_event(const bw_event *ev, void *user)
{
    const cli *c = user;
    char extra[96] = "";
    bw_snapshot snap;
    if (ev->type == BW_EVENT_STATE_CHANGE && ev->total == 0 && ev->count == 0) {
        /* A transition the store's circuit made: its figures are not in the event; the window is in the store. */
        if ((ev->reason == BW_REASON_FAILURE_RATE || ev->reason == BW_REASON_SLOW_RATE) &&
            bw_breaker_snapshot(ev->breaker, &snap) == BW_OK && snap.total_calls)
            snprintf(extra, sizeof extra, " (%s %.2f of %llu calls)",
                     ev->reason == BW_REASON_FAILURE_RATE ? "failure rate" : "slow-call rate",
                     ev->reason == BW_REASON_FAILURE_RATE ? snap.failure_rate : snap.slow_call_rate,
                     (unsigned long long)snap.total_calls);
    } else if (ev->reason == BW_REASON_FAILURE_RATE || ev->reason == BW_REASON_SLOW_RATE)
        snprintf(extra, sizeof extra, " (%s %.2f of %llu calls)",
                 ev->reason == BW_REASON_FAILURE_RATE ? "failure rate" : "slow-call rate", ev->rate,
                 (unsigned long long)ev->total);
    else if (ev->reason == BW_REASON_PROBES_PASSED || ev->reason == BW_REASON_PROBES_FAILED)
        snprintf(extra, sizeof extra, " (%llu probes)", (unsigned long long)ev->total);
    else if (ev->reason == BW_REASON_CONSECUTIVE_FAILURES)
        snprintf(extra, sizeof extra, " (%u failures in a row)", ev->count);
    if (ev->type == BW_EVENT_STATE_CHANGE)
        cli_info(c, "circuit %s: %s -> %s: %s%s", ev->name, bw_state_name(ev->from), bw_state_name(ev->to),
                 bw_reason_name(ev->reason), extra);
    else if (ev->type == BW_EVENT_STORE_DEGRADED)
        cli_err(c, "circuit %s: the store failed (%s): protected by a local circuit for this call", ev->name,
                ev->message ? ev->message : "");
}

/*
 * Make the guard of circuit `name`; the exit status on failure (after printing), else 0. A bad name or
 * configuration is a usage error (64) whatever the store does: it is told before anything about the store, and
 * never as "protected by a local circuit" (no circuit is made, nothing runs). A store that cannot be opened, or
 * that the circuit cannot use, leaves a local circuit for this call, said once the local circuit exists.
 */
static int guard_new(cli *c, const char *name, guard *g)
{
    memset(g, 0, sizeof *g);
    bw_config *cfg = cli_config(c, name);
    if (!cfg)
        return EX_USAGE_;
    bw_error e, open_err;
    memset(&open_err, 0, sizeof open_err);
    int opened = cli_open_store(c, 1, &open_err) == BW_OK;
    /* CALL events too, though they are ignored: a breaker with a CALL listener reads the precise clock, so this
       process starts no coarse-clock ticker thread (breaker.h, TIME), which only pays for long-lived processes. */
    int rc = bw_config_set_listener(cfg,
                                    BW_EVENT_MASK(BW_EVENT_STATE_CHANGE) | BW_EVENT_MASK(BW_EVENT_STORE_DEGRADED) |
                                        BW_EVENT_MASK(BW_EVENT_CALL),
                                    on_event, c);
    char why[sizeof e.message + 64] = "";
    if (opened && rc == BW_OK)
        rc = bw_config_set_store(cfg, c->store, BW_STORE_STORED, &e);
    if (rc == BW_OK)
        rc = bw_breaker_new(name, cfg, &g->b, &e);
    if (rc != BW_OK && opened && rc != BW_EINVAL && rc != BW_ERANGE) {
        /* the store is there but the circuit cannot use it: a local one */
        snprintf(why, sizeof why, "%s", e.message);
        bw_config_set_store(cfg, NULL, 0, NULL);
        rc = bw_breaker_new(name, cfg, &g->b, &e);
    }
    bw_config_free(cfg);
    if (rc == BW_EINVAL || rc == BW_ERANGE) { /* a bad name (bw_breaker_new) or a window that fits no entry */
        cli_err(c, "circuit '%s': %s%s; nothing ran", name, e.message,
                rc == BW_EINVAL ? " (a circuit name is 1 to 255 printable ASCII bytes, '!' to '~': no space, no "
                                  "control byte)"
                                : "");
        return EX_USAGE_;
    }
    if (rc != BW_OK) {
        cli_err(c, "circuit %s: %s", name, e.message);
        return EX_UNAVAILABLE_;
    }
    if (!opened)
        cli_err(c, "cannot open the store %s: %s; %s is protected by a local circuit for this call only",
                c->store_shown, open_err.message, name);
    else if (why[0])
        cli_err(c, "circuit %s: %s; protected by a local circuit for this call only", name, why);
    g->store = opened && !why[0] ? c->store : NULL;
    return 0;
}

static void say_rejected(const cli *c, const char *name, const bw_rejection *why)
{
    char ra[32];
    if (why->retry_after_ns >= 0)
        cli_err(c, "circuit %s is %s: not running the command; retry after %s", name, bw_state_name(why->state),
                cli_fmt_duration(why->retry_after_ns, ra, sizeof ra));
    else
        cli_err(c, "circuit %s is %s: not running the command%s", name, bw_state_name(why->state),
                why->state == BW_STATE_FORCED_OPEN ? " (an operator hold: breakwater reset to end it)"
                                                   : " (its probes are all taken)");
}

/* ---- run ---- */

typedef struct run_opts {
    codes fail, ignore;
    int64_t timeout, kill_after;
    const char *fallback;
} run_opts;

/* Parse the options run and retry share; 1 consumed, 0 not one of them, -1 bad. */
static int shared_opt(cli *c, int argc, char **argv, int *i, run_opts *o)
{
    const char *a = argv[*i], *v;
    if (cli_is_opt(a, "--failure-exit") || cli_is_opt(a, "--ignore-exit")) {
        int fail = cli_is_opt(a, "--failure-exit");
        const char *opt = fail ? "--failure-exit" : "--ignore-exit";
        if (!(v = cli_optval(c, argc, argv, i, opt)))
            return -1;
        return parse_codes(c, opt, v, fail ? &o->fail : &o->ignore) == 0 ? 1 : -1;
    }
    if (strcmp(a, "--pass-store") == 0) {
        c->pass_store = 1;
        return 1;
    }
    if (cli_is_opt(a, "--timeout") || cli_is_opt(a, "--kill-after")) {
        int t = cli_is_opt(a, "--timeout");
        const char *opt = t ? "--timeout" : "--kill-after";
        if (!(v = cli_optval(c, argc, argv, i, opt)))
            return -1;
        int64_t ns;
        if (bw_duration_parse(v, BW_NS_PER_S, &ns, NULL) != BW_OK) {
            cli_err(c, "%s: expected a duration such as 30s or 1.5m, got '%s'", opt, v);
            return -1;
        }
        if (ns <= 0) {
            cli_err(c, "%s must be more than 0 (%s), got '%s'", opt,
                    t ? "leave it out for no time limit" : "default 5s", v);
            return -1;
        }
        *(t ? &o->timeout : &o->kill_after) = ns;
        return 1;
    }
    return cli_global_opt(c, argc, argv, i);
}

int cmd_run(cli *c, int argc, char **argv)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    o.kill_after = 5 * BW_NS_PER_S;
    const char *name = NULL;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int r = shared_opt(c, argc, argv, &i, &o);
        if (r < 0)
            return EX_USAGE_;
        if (r)
            continue;
        if (cli_is_opt(argv[i], "--fallback")) {
            if (!(o.fallback = cli_optval(c, argc, argv, &i, "--fallback")))
                return EX_USAGE_;
        } else if (argv[i][0] == '-') {
            cli_unknown(c, argv[i], "argument");
            return EX_USAGE_;
        } else if (!name) {
            name = argv[i];
        } else {
            cli_err(c, "one circuit NAME, then -- and the command (see: breakwater run --help)");
            return EX_USAGE_;
        }
    }
    if (!name || i + 1 >= argc) {
        cli_err(c, "usage: breakwater run NAME [options] -- CMD [ARGS...]");
        return EX_USAGE_;
    }
    char **cmd = argv + i + 1;
    guard g;
    int rc = guard_new(c, name, &g);
    if (rc)
        return rc;
    bw_permit p;
    bw_rejection why;
    if (bw_acquire(g.b, &p, &why) == BW_REJECTED) {
        say_rejected(c, name, &why);
        bw_breaker_free(g.b);
        if (!o.fallback)
            return EX_TEMPFAIL_;
        char ms[32];
        snprintf(ms, sizeof ms, "%lld", (long long)(why.retry_after_ns >= 0 ? why.retry_after_ns / BW_NS_PER_MS : -1));
        setenv("BREAKWATER_NAME", name, 1);
        setenv("BREAKWATER_STATE", bw_state_name(why.state), 1);
        setenv("BREAKWATER_RETRY_AFTER_MS", ms, 1);
        outcome fo;
        char *fb[] = {(char *)o.fallback, NULL};
        run_child(c, fb, 1, o.timeout, o.kill_after, &fo);
        return fo.status;
    }
    cli_info(c, "circuit %s admitted the call: running %s", name, cmd[0]);
    outcome out;
    run_child(c, cmd, 0, o.timeout, o.kill_after, &out);
    bw_outcome verdict = classify(&out, &o.fail, &o.ignore);
    if (out.timed_out)
        bw_settle_timeout(g.b, &p, EX_TIMEOUT_);
    else
        bw_settle_ex(g.b, &p, verdict, out.status);
    if (out.ran)
        cli_info(c, "%s %s %d: %s", cmd[0],
                 out.signal      ? "died of signal"
                 : out.timed_out ? "timed out, status"
                                 : "exited",
                 out.signal ? out.signal : out.status, out.timed_out ? "timeout" : bw_outcome_name(verdict));
    bw_breaker_free(g.b);
    return out.status;
}

/* ---- retry ---- */

/* Retry a call that ran and failed (the attempt's rc is 1 for a failure), and a timeout. */
static int retry_pred(const bw_attempt *a, void *user)
{
    (void)user;
    return (a->status == BW_OK && a->rc == 1) || a->status == BW_ETIMEDOUT;
}

static int parse_kind(const cli *c, const char *opt, const char *v, const char *const *names, int n, int *out)
{
    for (int k = 0; k < n; k++)
        if (strcmp(v, names[k]) == 0)
            return *out = k, 0;
    cli_err(c, "%s: unknown value '%s'", opt, v);
    return -1;
}

int cmd_retry(cli *c, int argc, char **argv)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    o.kill_after = 5 * BW_NS_PER_S;
    int attempts = 3, backoff = BW_BACKOFF_EXPONENTIAL, jitter = BW_JITTER_FULL, patient = 0, seeded = 0;
    int64_t base = BW_NS_PER_S, cap = 30 * BW_NS_PER_S, max_time = 0;
    double mult = 2, bmax = 0, bratio = 0;
    unsigned long long seed = 0;
    const char *bname = NULL;
    static const char *const backoffs[] = {"constant", "linear", "exponential"};
    static const char *const jitters[] = {"none", "full", "equal", "decorrelated"};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int r = shared_opt(c, argc, argv, &i, &o);
        if (r < 0)
            return EX_USAGE_;
        if (r)
            continue;
        const char *a = argv[i], *v = NULL;
        char *end;
        if (strcmp(a, "--patient") == 0) {
            patient = 1;
            continue;
        }
        static const char *const valued[] = {"--attempts", "--backoff",  "--delay",  "--multiplier", "--max-delay",
                                             "--jitter",   "--max-time", "--budget", "--breaker",    "--seed"};
        int which = -1;
        for (int k = 0; k < 10; k++)
            if (cli_is_opt(a, valued[k]))
                which = k;
        if (which < 0) {
            cli_unknown(c, a, "argument");
            return EX_USAGE_;
        }
        if (!(v = cli_optval(c, argc, argv, &i, valued[which])))
            return EX_USAGE_;
        int bad = 0;
        switch (which) {
        case 0: { /* a declaration after a label is C23: a block, for C11 compilers (clang rejects it) */
            long at = strtol(v, &end, 10);
            bad = *end || end == v || at < 1 || at > 1000;
            attempts = bad ? 1 : (int)at;
            break;
        }
        case 1:
            bad = parse_kind(c, valued[which], v, backoffs, 3, &backoff) != 0;
            break;
        case 2:
            bad = bw_duration_parse(v, BW_NS_PER_S, &base, NULL) != BW_OK;
            break;
        case 3:
            mult = strtod(v, &end);
            bad = *end || end == v;
            break;
        case 4:
            bad = bw_duration_parse(v, BW_NS_PER_S, &cap, NULL) != BW_OK;
            break;
        case 5:
            bad = parse_kind(c, valued[which], v, jitters, 4, &jitter) != 0;
            break;
        case 6:
            bad = bw_duration_parse(v, BW_NS_PER_S, &max_time, NULL) != BW_OK || max_time <= 0;
            break;
        case 7:
            bad = sscanf(v, "%lf:%lf", &bmax, &bratio) != 2;
            break;
        case 8:
            bname = v;
            break;
        case 9:
            seed = strtoull(v, &end, 10);
            bad = *end || end == v;
            seeded = 1;
            break;
        }
        if (bad) {
            cli_err(c, "%s: bad value '%s' (see: breakwater retry --help)", valued[which], v);
            return EX_USAGE_;
        }
    }
    if (i + 1 >= argc) {
        cli_err(c, "usage: breakwater retry [options] -- CMD [ARGS...]");
        return EX_USAGE_;
    }
    if (patient && !bname) {
        cli_err(c, "--patient needs --breaker NAME");
        return EX_USAGE_;
    }
    if (cap < base)
        cap = base;
    char **cmd = argv + i + 1;
    bw_retry *pol = NULL;
    bw_retry_budget *budget = NULL;
    bw_error e;
    if (bw_retry_new(&pol) != BW_OK) {
        cli_err(c, "out of memory");
        return EX_SOFTWARE_;
    }
    int rc = bw_retry_set_attempts(pol, attempts, &e);
    if (rc == BW_OK)
        rc = bw_retry_set_backoff(pol, (bw_backoff)backoff, base, mult, cap, &e);
    if (rc == BW_OK)
        rc = bw_retry_set_jitter(pol, (bw_jitter)jitter, &e);
    if (rc == BW_OK)
        rc = bw_retry_set_max_duration(pol, max_time, &e);
    if (rc == BW_OK)
        rc = bw_retry_set_predicate(pol, retry_pred, NULL);
    if (rc == BW_OK && patient)
        rc = bw_retry_set_patient(pol, 1, 0, &e);
    if (rc == BW_OK && bmax > 0) {
        rc = bw_retry_budget_new(bmax, bratio, &budget, &e);
        if (rc == BW_OK)
            rc = bw_retry_set_budget(pol, budget);
    }
    if (rc == BW_OK && seeded)
        bw_retry_set_seed(pol, seed);
    if (rc != BW_OK) {
        cli_err(c, "%s", e.message);
        bw_retry_free(pol);
        bw_retry_budget_free(budget);
        return EX_USAGE_;
    }
    guard g;
    memset(&g, 0, sizeof g);
    if (bname && (rc = guard_new(c, bname, &g)) != 0) {
        bw_retry_free(pol);
        bw_retry_budget_free(budget);
        return rc;
    }
    bw_retry_state st;
    bw_retry_begin(pol, &st);
    int status = 0;
    for (int n = 1;; n++) {
        bw_attempt a = {BW_OK, 0, BW_NO_TIME};
        bw_permit p;
        bw_rejection why;
        if (g.b && bw_acquire(g.b, &p, &why) == BW_REJECTED) {
            say_rejected(c, bname, &why);
            a.status = BW_REJECTED;
            a.retry_after_ns = why.retry_after_ns;
            status = EX_TEMPFAIL_;
        } else {
            outcome out;
            run_child(c, cmd, 0, o.timeout, o.kill_after, &out);
            bw_outcome verdict = classify(&out, &o.fail, &o.ignore);
            if (out.stop && out.signal == out.stop)
                verdict = BW_IGNORED; /* cancelled by the signal breakwater was sent: not the dependency's failure */
            if (out.stop) {
                if (g.b)
                    bw_settle_ex(g.b, &p, verdict, out.status);
                cli_info(c, "attempt %d stopped by signal %d: no more attempts", n, out.stop);
                status = out.signal ? out.status : 128 + out.stop;
                break;
            }
            if (g.b) {
                if (out.timed_out)
                    bw_settle_timeout(g.b, &p, EX_TIMEOUT_);
                else
                    bw_settle_ex(g.b, &p, verdict, out.status);
            }
            status = out.status;
            if (out.timed_out)
                a.status = BW_ETIMEDOUT;
            else
                a.rc = verdict == BW_FAILURE ? 1 : 0;
        }
        int64_t delay = 0;
        int v = bw_retry_next(&st, &a, &delay);
        if (v != BW_RETRY_AGAIN) {
            static const char *const why_end[] = {"done",
                                                  "again",
                                                  "attempts exhausted",
                                                  "retry budget spent",
                                                  "the next wait would pass --max-time",
                                                  "rejected by the circuit"};
            if (status != 0)
                cli_info(c, "giving up after attempt %d: %s", n, v >= 0 && v <= 5 ? why_end[v] : "error");
            break;
        }
        char d[32];
        cli_info(c, "attempt %d %s (status %d): next in %s", n, a.status == BW_REJECTED ? "rejected" : "failed", status,
                 cli_fmt_duration(delay, d, sizeof d));
        siginfo_t si;
        int64_t until = cli_now() + delay;
        int sig = 0;
        for (int64_t left = delay; left > 0 && sig == 0; left = until - cli_now()) {
            sig = wait_signal(c, left, &si);
            if (sig == SIGCHLD || sig < 0)
                sig = 0;
        }
        if (sig > 0) { /* interrupted while waiting: stop, as the command would have */
            status = 128 + sig;
            break;
        }
    }
    bw_breaker_free(g.b);
    bw_retry_free(pol);
    bw_retry_budget_free(budget);
    return status;
}
