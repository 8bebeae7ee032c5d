/*
 * cli_bench.c — what the breakwater command costs a shell (make bench):
 *   cli_bench path/to/breakwater
 * prints BENCH lines:
 *   cli_true_ms            `true` run directly (fork + exec + wait), the baseline
 *   cli_run_ms             `breakwater run n -- true` on the default store (a SQLite file)
 *   cli_run_overhead_ms    the second minus the first, taken pair by pair in the same rounds
 *   cli_rejected_ms        `breakwater run held -- true` with `held` forced open: nothing runs
 * Each figure is the median of 7 rounds, each round the median of 41
 * alternated runs, so both sides see the same machine at the same moments.
 */
#define _POSIX_C_SOURCE 200809L
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define ROUNDS 7
#define PER 41

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run argv, wait, return the wall time in ms and the exit status in *status. */
static double timed(char *const argv[], int *status)
{
    pid_t pid;
    double t0 = now_ms();
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
        perror(argv[0]);
        exit(2);
    }
    int ws;
    waitpid(pid, &ws, 0);
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return now_ms() - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cli_bench path/to/breakwater\n");
        return 2;
    }
    char dir[] = "/tmp/cli_bench.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    setenv("XDG_STATE_HOME", dir, 1); /* the default store, in a directory of its own */
    unsetenv("BREAKWATER_STORE");
    unsetenv("BREAKWATER_CONFIG");
    char *bw = argv[1];
    char *t[] = {"true", NULL};
    char *run[] = {bw, "run", "n", "--", "true", NULL};
    char *hold[] = {bw, "force-open", "--create", "held", NULL}; /* a new circuit */
    char *rej[] = {bw, "run", "held", "--", "true", NULL};
    int st;
    timed(run, &st); /* makes the store */
    if (st != 0 || (timed(hold, &st), st != 0)) {
        fprintf(stderr, "cli_bench: %s did not run (status %d)\n", bw, st);
        return 1;
    }
    int fd = dup(2); /* the rejections' message: not on the terminal */
    freopen("/dev/null", "w", stderr);
    double r_true[ROUNDS], r_run[ROUNDS], r_over[ROUNDS], r_rej[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double a[PER], b[PER], d[PER], c[PER];
        for (int i = 0; i < PER; i++) {
            a[i] = timed(t, &st);
            b[i] = timed(run, &st);
            c[i] = timed(rej, &st);
            if (st != 75) {
                dprintf(fd, "cli_bench: a rejected run exited %d, not 75\n", st);
                return 1;
            }
            d[i] = b[i] - a[i];
        }
        r_true[r] = median(a, PER);
        r_run[r] = median(b, PER);
        r_over[r] = median(d, PER);
        r_rej[r] = median(c, PER);
    }
    printf("BENCH cli_true_ms %.3f ms\n", median(r_true, ROUNDS));
    printf("BENCH cli_run_ms %.3f ms\n", median(r_run, ROUNDS));
    printf("BENCH cli_run_overhead_ms %.3f ms\n", median(r_over, ROUNDS));
    printf("BENCH cli_rejected_ms %.3f ms\n", median(r_rej, ROUNDS));
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        dprintf(fd, "cli_bench: could not remove %s\n", dir);
    return 0;
}
