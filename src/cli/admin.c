/*
 * admin.c — the commands that read and change the store's circuits: status,
 * the operator verbs, metrics, sweep, forget (cli layer; see cli.h).
 *
 * Design notes
 * - status reads each circuit with bw_store_read_circuit: the entry records
 *   its policy and window, so no configuration is needed to show it. Without
 *   names it lists the store's keys with bw_store_scan, in pages of 256; a
 *   store that cannot list (no scan operation) is told, and asked for names.
 * - A verb runs on a stored breaker made for the occasion, with the entry's
 *   own policy and window (unless the configuration sets them), so that a
 *   hold keeps the window the fleet recorded; the circuit is read back to
 *   check that the store took it (a breaker whose store fails only changes
 *   its local circuit).
 * - metrics writes the gauges of the library's exposition (observe.h) that a
 *   store holds (state, rates, window counts) plus consecutive failures and
 *   retry_after; cumulative counters are each process's own and are not in a
 *   store. --serve answers GET /metrics on a socket of its own, poll-based: at
 *   most 16 connections at once, each with 2 s to send its request and a
 *   bounded send, a new one taking the place of the oldest that has sent no
 *   request when all are taken (serve), so that idle or slow clients never
 *   hold a scrape.
 *   It is not the library's /metrics server (observe.h): that one serves a
 *   bw_metrics set of this process's breakers, not a store's circuits, and is
 *   in builds with libmicrohttpd only; the command's works in every build.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

/* ---- names ---- */

typedef struct names {
    char **v;
    size_t n, cap;
} names;

/* Append s (duplicates are dropped by names_dedup); 0, or -1 out of memory. */
static int names_add(names *ns, const char *s)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (!v)
            return -1;
        ns->v = v;
        ns->cap = cap;
    }
    if (!(ns->v[ns->n] = strdup(s)))
        return -1;
    ns->n++;
    return 0;
}

static void names_free(names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* By name, then by place: the first of equal names sorts first. */
static int cmp_name_at(const void *a, const void *b)
{
    char *const *x = *(char **const *)a, *const *y = *(char **const *)b;
    int r = strcmp(*x, *y);
    return r ? r : (x > y) - (x < y);
}

/*
 * Drop the repeated names (a scan may list a key twice; a user may name one
 * twice), keeping each name's first place: a sort of pointers into the list,
 * O(n log n). Sorted: the list is left sorted too. 0, or -1 out of memory.
 */
static int names_dedup(names *ns, int sorted)
{
    if (ns->n < 2)
        return 0;
    if (sorted) {
        qsort(ns->v, ns->n, sizeof *ns->v, cmp_name);
        size_t k = 1;
        for (size_t i = 1; i < ns->n; i++) {
            if (strcmp(ns->v[i], ns->v[k - 1]) == 0)
                free(ns->v[i]);
            else
                ns->v[k++] = ns->v[i];
        }
        ns->n = k;
        return 0;
    }
    char ***at = malloc(ns->n * sizeof *at);
    if (!at)
        return -1;
    for (size_t i = 0; i < ns->n; i++)
        at[i] = &ns->v[i];
    qsort(at, ns->n, sizeof *at, cmp_name_at);
    for (size_t i = 1; i < ns->n; i++)
        if (strcmp(*at[i], *at[i - 1]) == 0) { /* a later place of the same name: drop it */
            free(*at[i]);
            *at[i] = NULL;
            at[i] = at[i - 1]; /* the next equal name compares with a live one */
        }
    free(at);
    size_t k = 0;
    for (size_t i = 0; i < ns->n; i++)
        if (ns->v[i])
            ns->v[k++] = ns->v[i];
    ns->n = k;
    return 0;
}

/* Every key of the store, sorted; 0, or the exit status after printing the error. */
static int list_store(cli *c, names *out)
{
    bw_store_cursor cur;
    memset(&cur, 0, sizeof cur);
    enum { PAGE = 256 };
    bw_store_key *keys = malloc(PAGE * sizeof *keys);
    if (!keys) {
        cli_err(c, "out of memory");
        return EX_SOFTWARE_;
    }
    int status = 0;
    while (!cur.done) {
        int n = 0;
        bw_error e;
        int rc = bw_store_scan(c->store, &cur, keys, PAGE, &n, &e);
        if (rc == BW_ENOTSUP) {
            cli_err(c, "the store %s cannot list its circuits: name them (breakwater %s NAME...)", c->store_shown,
                    c->cmd);
            status = EX_USAGE_;
            break;
        }
        if (rc != BW_OK) {
            cli_err(c, "cannot list the store %s: %s", c->store_shown, e.message);
            status = EX_UNAVAILABLE_;
            break;
        }
        for (int i = 0; i < n; i++)
            if (names_add(out, keys[i].name) != 0) {
                cli_err(c, "out of memory");
                status = EX_SOFTWARE_;
                cur.done = 1;
                break;
            }
    }
    free(keys);
    if (names_dedup(out, 1) != 0 && status == 0) {
        cli_err(c, "out of memory");
        status = EX_SOFTWARE_;
    }
    return status;
}

/* The store key of argument `name`, checked as the library checks it (a read of it). */
static int open_for(cli *c)
{
    bw_error e;
    return cli_open_store(c, 0, &e) == BW_OK ? 0 : EX_UNAVAILABLE_;
}

/* ---- status ---- */

static const char *color_of(bw_state s)
{
    switch (s) {
    case BW_STATE_CLOSED:
        return "\033[32m";
    case BW_STATE_OPEN:
        return "\033[31m";
    case BW_STATE_HALF_OPEN:
        return "\033[33m";
    default:
        return "\033[35m";
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_ms(FILE *f, const char *key, int64_t ns)
{
    if (ns < 0)
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%lld", key, (long long)(ns / BW_NS_PER_MS));
}

static void print_json(FILE *f, const char *name, const bw_store_circuit *x)
{
    const bw_snapshot *s = &x->snap;
    fputs("{\"name\":", f);
    json_str(f, name);
    fprintf(f, ",\"found\":%s", x->found ? "true" : "false");
    if (!x->found)
        fputs(",\"state\":\"closed\"", f); /* no entry: a fresh circuit */
    if (x->found && !x->readable)
        fputs(",\"readable\":false", f);
    if (x->found && x->readable) {
        fprintf(f, ",\"state\":\"%s\",\"policy\":\"%s\"", bw_state_name(s->state),
                x->policy == BW_POLICY_RATE ? "rate" : "consecutive");
        if (x->policy == BW_POLICY_RATE)
            fprintf(f, ",\"window\":\"%s:%u%s\"", x->window == BW_WINDOW_COUNT ? "count" : "time", x->window_size,
                    x->window == BW_WINDOW_COUNT ? "" : "s");
        fprintf(f,
                ",\"calls\":%llu,\"failed\":%llu,\"slow\":%llu,\"failure_rate\":%.4f,\"slow_call_rate\":%.4f"
                ",\"consecutive_failures\":%u,\"consecutive_successes\":%u,\"probes_admitted\":%u"
                ",\"probes_in_flight\":%u,\"probes_completed\":%u,\"failed_rounds\":%u",
                (unsigned long long)s->total_calls, (unsigned long long)s->failed_calls,
                (unsigned long long)s->slow_calls, s->failure_rate, s->slow_call_rate, s->consecutive_failures,
                s->consecutive_successes, s->probes_admitted, s->probes_in_flight, s->probes_completed,
                s->failed_rounds);
        json_ms(f, "open_wait_ms", s->open_wait_ns);
        json_ms(f, "retry_after_ms", s->retry_after_ns);
        fprintf(f, ",\"generation\":%llu", (unsigned long long)s->generation);
        json_ms(f, "expires_in_ms", x->expires_in_ns);
        fprintf(f, ",\"hold\":%s,\"fence\":%s", x->hold ? "true" : "false", x->fence ? "true" : "false");
    }
    fputs("}\n", f);
}

/*
 * One row of the table: its cells, in an operator's words (docs/cli.md, status): "-" is a figure that does not
 * apply (the window's under the consecutive policy, PROBES outside HALF_OPEN, RETRY IN outside OPEN). A circuit
 * the store holds no entry for is CLOSED with nothing recorded: its counts are 0. The generation, a number for
 * programs (it grows by one at every transition and verb, from the entry's birth in ns), is in --json only.
 */
enum { COLS = 9 };
static const char *const heads[COLS] = {"NAME",       "STATE",  "CALLS",    "FAIL%",  "SLOW%",
                                        "CONSEC F/S", "PROBES", "RETRY IN", "EXPIRES"};

static void cells_of(const char *name, const bw_store_circuit *x, char cell[COLS][80])
{
    const bw_snapshot *s = &x->snap;
    char d[32];
    for (int k = 0; k < COLS; k++)
        snprintf(cell[k], 80, "-");
    snprintf(cell[0], 80, "%.79s", name);
    if (!x->found) { /* a fresh circuit: nothing recorded (never called, recovered, reset, forgotten or expired) */
        snprintf(cell[1], 80, "closed (nothing recorded)");
        for (int k = 2; k <= 4; k++)
            snprintf(cell[k], 80, "0");
        snprintf(cell[5], 80, "0/0");
        return;
    }
    if (!x->readable) {
        snprintf(cell[1], 80, "(unreadable)");
        return;
    }
    snprintf(cell[1], 80, "%s%s", bw_state_name(s->state), x->hold ? " (hold)" : "");
    if (x->policy == BW_POLICY_RATE) {
        snprintf(cell[2], 80, "%llu/%u%s", (unsigned long long)s->total_calls, x->window_size,
                 x->window == BW_WINDOW_TIME ? "s" : "");
        snprintf(cell[3], 80, "%.0f", s->failure_rate * 100);
        snprintf(cell[4], 80, "%.0f", s->slow_call_rate * 100);
    }
    snprintf(cell[5], 80, "%u/%u", s->consecutive_failures, s->consecutive_successes);
    if (s->state == BW_STATE_HALF_OPEN)
        snprintf(cell[6], 80, "%u run, %u done", s->probes_in_flight, s->probes_completed);
    if (s->retry_after_ns >= 0)
        cli_fmt_duration(s->retry_after_ns, cell[7], 80);
    snprintf(cell[8], 80, "%s", x->expires_in_ns < 0 ? "never" : cli_fmt_duration(x->expires_in_ns, d, sizeof d));
}

static void print_table(const cli *c, FILE *f, names *ns, bw_store_circuit *xs)
{
    size_t w[COLS];
    char(*cells)[COLS][80] = calloc(ns->n ? ns->n : 1, sizeof *cells);
    if (!cells)
        return;
    for (int k = 0; k < COLS; k++)
        w[k] = strlen(heads[k]);
    for (size_t i = 0; i < ns->n; i++) {
        cells_of(ns->v[i], &xs[i], cells[i]);
        for (int k = 0; k < COLS; k++)
            if (strlen(cells[i][k]) > w[k])
                w[k] = strlen(cells[i][k]);
    }
    char line[sizeof c->store_shown + 64], shown[4 * sizeof line];
    fprintf(f, "%s\n", cli_escape(cli_store_line(c, line, sizeof line), shown, sizeof shown));
    for (int k = 0; k < COLS; k++)
        fprintf(f, "%-*s%s", k + 1 < COLS ? (int)w[k] : 0, heads[k], k + 1 < COLS ? "  " : "\n");
    for (size_t i = 0; i < ns->n; i++)
        for (int k = 0; k < COLS; k++) {
            int col = c->color && k == 1 && xs[i].found && xs[i].readable;
            fprintf(f, "%s%-*s%s%s", col ? color_of(xs[i].snap.state) : "", k + 1 < COLS ? (int)w[k] : 0, cells[i][k],
                    col ? "\033[0m" : "", k + 1 < COLS ? "  " : "\n");
        }
    if (ns->n == 0) {
        char shown[4 * sizeof c->store_shown];
        fprintf(f, "(no circuits in %s)\n", cli_escape(c->store_shown, shown, sizeof shown));
    }
    free(cells);
}

int cmd_status(cli *c, int argc, char **argv)
{
    int json = !isatty(1), watch = 0;
    int64_t interval = BW_NS_PER_S;
    names ns = {0, 0, 0};
    int listed = 1, skipped = 0;
    for (int i = 1; i < argc; i++) {
        int g = cli_global_opt(c, argc, argv, &i);
        if (g < 0)
            return EX_USAGE_;
        if (g)
            continue;
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--table") == 0) {
            json = 0;
        } else if (strcmp(argv[i], "--watch") == 0) {
            watch = 1;
        } else if (cli_is_opt(argv[i], "--interval")) {
            const char *v = cli_optval(c, argc, argv, &i, "--interval");
            if (!v || bw_duration_parse(v, BW_NS_PER_S, &interval, NULL) != BW_OK || interval < BW_NS_PER_MS) {
                cli_err(c, "--interval: expected a duration of at least 1ms, such as 2s");
                return EX_USAGE_;
            }
            watch = 1;
        } else if (argv[i][0] == '-') {
            cli_unknown(c, argv[i], "option");
            names_free(&ns);
            return EX_USAGE_;
        } else {
            listed = 0;
            if (names_add(&ns, argv[i]) != 0) {
                cli_err(c, "out of memory");
                names_free(&ns);
                return EX_SOFTWARE_;
            }
        }
    }
    if (names_dedup(&ns, 0) != 0) { /* a name listed twice is shown once, at its first place */
        cli_err(c, "out of memory");
        names_free(&ns);
        return EX_SOFTWARE_;
    }
    int status = open_for(c);
    for (int round = 0; status == 0; round++) {
        if (listed) {
            names_free(&ns);
            if ((status = list_store(c, &ns)) != 0)
                break;
        }
        bw_store_circuit *xs = calloc(ns.n ? ns.n : 1, sizeof *xs);
        if (!xs) {
            status = EX_SOFTWARE_;
            break;
        }
        size_t k = 0;
        for (size_t i = 0; i < ns.n; i++) {
            bw_error e;
            int rc = bw_store_read_circuit(c->store, ns.v[i], &xs[k], &e);
            if (rc == BW_EINVAL) { /* skipped (once: it leaves the list), the others reported; exit 1 at the end */
                cli_err(c, "skipping '%.64s%s': not a circuit name: %s", ns.v[i], strlen(ns.v[i]) > 64 ? "..." : "",
                        e.message); /* escaped as every message is (once: an escape escaped again reads otherwise) */
                skipped = 1;
                free(ns.v[i]);
                continue;
            }
            if (rc != BW_OK) {
                cli_err(c, "cannot read %s from the store %s: %s", ns.v[i], c->store_shown, e.message);
                status = EX_UNAVAILABLE_;
            }
            ns.v[k++] = ns.v[i];
        }
        ns.n = k;
        if (status == 0) {
            if (json) {
                for (size_t i = 0; i < ns.n; i++)
                    print_json(stdout, ns.v[i], &xs[i]);
            } else {
                if (watch && isatty(1))
                    fputs("\033[H\033[J", stdout); /* redraw in place */
                print_table(c, stdout, &ns, xs);
            }
            fflush(stdout);
        }
        free(xs);
        if (!watch || status)
            break;
        siginfo_t si;
        struct timespec ts = {(time_t)(interval / BW_NS_PER_S), (long)(interval % BW_NS_PER_S)};
        int sig = sigtimedwait(&c->forward, &si, &ts);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
            break; /* interrupted: the end of watching, not an error */
    }
    names_free(&ns);
    return status == 0 && skipped ? EX_SKIPPED_ : status;
}

/* ---- operator verbs, forget, sweep ---- */

/*
 * The one NAME of a command that takes nothing else but its global options and the flag `flag` (--create,
 * --missing-ok: *flag_set says whether it was given): NULL after a usage error.
 */
static const char *one_name(cli *c, int argc, char **argv, const char *flag, int *flag_set)
{
    const char *name = NULL;
    *flag_set = 0;
    for (int i = 1; i < argc; i++) {
        int g = cli_global_opt(c, argc, argv, &i);
        if (g < 0)
            return NULL;
        if (g)
            continue;
        if (strcmp(argv[i], flag) == 0) {
            *flag_set = 1;
            continue;
        }
        if (argv[i][0] == '-') {
            cli_unknown(c, argv[i], "option");
            return NULL;
        }
        if (name) {
            cli_err(c, "one circuit NAME (see: breakwater %s --help)", c->cmd);
            return NULL;
        }
        name = argv[i];
    }
    if (!name)
        cli_err(c, "usage: breakwater %s [%s] NAME", c->cmd, flag);
    return name;
}

/*
 * Say that the store holds no circuit `name`, with the nearest one it holds (did you mean?), and how to act on it
 * all the same (`how`). The exit status: EX_NOINPUT_.
 */
static int no_such_circuit(cli *c, const char *name, const char *how)
{
    char near[NEAREST_LEN_MAX + 1];
    cli_nearest_name(c, name, near, sizeof near);
    char *shown = cli_redacted(name); /* a store URL given as the NAME (its --store forgotten) */
    if (near[0])
        cli_err(c, "the store %s holds no circuit '%s': did you mean %s? Nothing changed", c->store_shown,
                shown ? shown : "?", near);
    else
        cli_err(c, "the store %s holds no circuit '%s': nothing changed", c->store_shown, shown ? shown : "?");
    free(shown);
    cli_err(c, "%s", how);
    return EX_NOINPUT_;
}

int cmd_verb(cli *c, int argc, char **argv)
{
    int create;
    const char *name = one_name(c, argc, argv, "--create", &create);
    if (!name)
        return EX_USAGE_;
    bw_verb verb = strcmp(c->cmd, "reset") == 0        ? BW_VERB_RESET
                   : strcmp(c->cmd, "force-open") == 0 ? BW_VERB_FORCE_OPEN
                   : strcmp(c->cmd, "disable") == 0    ? BW_VERB_DISABLE
                                                       : BW_VERB_METRICS_ONLY;
    static const bw_state want[] = {BW_STATE_CLOSED, BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY};
    bw_config *cfg = cli_config(c, name);
    if (!cfg)
        return EX_USAGE_;
    int status = open_for(c);
    bw_error e;
    bw_store_circuit x;
    if (status == 0 && bw_store_read_circuit(c->store, name, &x, &e) != BW_OK) {
        cli_err(c, "%s: %s", name, e.message);
        status = e.code == BW_EINVAL ? EX_USAGE_ : EX_UNAVAILABLE_;
    }
    /* A name the store does not hold is most likely a typo ("paymnets"): acting on it would make a circuit no
       process uses, and leave the meant one as it was. Acted on only when asked. */
    if (status == 0 && !x.found && !create)
        status = no_such_circuit(c, name,
                                 "a circuit that was never called, has recorded nothing or expired has no entry: "
                                 "give --create to act on it all the same");
    bw_breaker *b = NULL;
    if (status == 0) {
        /* The entry's shape, unless the configuration says otherwise: a hold keeps the fleet's window. */
        if (x.found && x.readable && !c->config_set) {
            bw_config_set_policy(cfg, x.policy, NULL);
            if (x.policy == BW_POLICY_RATE)
                bw_config_set_window(cfg, x.window, x.window_size, NULL);
        }
        int rc = bw_config_set_store(cfg, c->store, BW_STORE_STORED, &e);
        if (rc == BW_OK)
            rc = bw_breaker_new(name, cfg, &b, &e);
        if (rc != BW_OK) {
            cli_err(c, "%s: %s", name, e.message);
            status = rc == BW_EINVAL || rc == BW_ERANGE ? EX_USAGE_ : EX_UNAVAILABLE_;
        }
    }
    if (status == 0) {
        int was = x.found;
        bw_breaker_apply(b, verb);
        if (bw_store_read_circuit(c->store, name, &x, &e) != BW_OK || !x.found || !x.readable ||
            x.snap.state != want[verb]) {
            cli_err(c, "the store %s did not take the %s of %s", c->store_shown, c->cmd, name);
            status = EX_UNAVAILABLE_;
        } else {
            cli_info(c, "circuit %s: %s%s%s", name, bw_state_name(x.snap.state),
                     x.hold ? " (a hold: it never expires; breakwater reset ends it)" : "",
                     was ? "" : " (a new circuit: --create)");
        }
    }
    bw_breaker_free(b);
    bw_config_free(cfg);
    return status;
}

static bw_store_verdict delete_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    (void)next;
    *(int *)arg = cur != NULL;
    return BW_STORE_DELETE;
}

int cmd_forget(cli *c, int argc, char **argv)
{
    int missing_ok;
    const char *name = one_name(c, argc, argv, "--missing-ok", &missing_ok);
    if (!name)
        return EX_USAGE_;
    int status = open_for(c);
    if (status)
        return status;
    int had = 0;
    bw_error e;
    int rc = bw_store_update(c->store, name, delete_fn, &had, &e);
    if (rc != BW_OK) {
        cli_err(c, "%s: %s", name, e.message);
        return rc == BW_EINVAL ? EX_USAGE_ : EX_UNAVAILABLE_;
    }
    if (!had && !missing_ok)
        return no_such_circuit(c, name, "give --missing-ok to exit 0 when there is none");
    cli_info(c, "circuit %s: %s", name, had ? "forgotten" : "had no entry");
    return 0;
}

int cmd_sweep(cli *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int g = cli_global_opt(c, argc, argv, &i);
        if (g < 0)
            return EX_USAGE_;
        if (!g) {
            cli_err(c, "usage: breakwater sweep");
            return EX_USAGE_;
        }
    }
    int status = open_for(c);
    if (status)
        return status;
    long total = 0;
    for (;;) {
        int n = 0;
        bw_error e;
        if (bw_store_sweep(c->store, 1000, &n, &e) != BW_OK) {
            cli_err(c, "sweep: %s", e.message);
            return EX_UNAVAILABLE_;
        }
        total += n;
        if (n < 1000)
            break;
    }
    cli_info(c, "deleted %ld expired entries", total);
    return 0;
}

/* ---- metrics ---- */

/* A label value, escaped (Prometheus: backslash, quote, newline). */
static void label(char *out, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        if (*s == '\\' || *s == '"')
            out[k++] = '\\';
        out[k++] = *s;
    }
    out[k] = 0;
}

/* The exposition text of the store's circuits into a malloc'd buffer (NULL after printing the error). */
static char *exposition(cli *c, int openmetrics, int *status)
{
    names ns = {0, 0, 0};
    if ((*status = list_store(c, &ns)) != 0)
        return NULL;
    size_t cap = 0, len = 0;
    char *buf = NULL;
    bw_store_circuit *xs = calloc(ns.n ? ns.n : 1, sizeof *xs);
    char(*lab)[1300] = calloc(ns.n ? ns.n : 1, sizeof *lab);
    if (!xs || !lab) {
        cli_err(c, "out of memory");
        *status = EX_SOFTWARE_;
        free(buf);
        free(xs);
        free(lab);
        names_free(&ns);
        return NULL;
    }
    for (size_t i = 0; i < ns.n; i++) {
        bw_error e;
        if (bw_store_read_circuit(c->store, ns.v[i], &xs[i], &e) != BW_OK)
            xs[i].found = 0;
        char nm[600], key[600];
        const char *sp = strchr(ns.v[i], ' ');
        if (sp) { /* a keyed circuit: "NAME KEY" */
            char base[600];
            snprintf(base, sizeof base, "%.*s", (int)(sp - ns.v[i]), ns.v[i]);
            label(nm, sizeof nm, base);
            label(key, sizeof key, sp + 1);
            snprintf(lab[i], sizeof lab[i], "name=\"%s\",key=\"%s\"", nm, key);
        } else {
            label(nm, sizeof nm, ns.v[i]);
            snprintf(lab[i], sizeof lab[i], "name=\"%s\"", nm);
        }
    }
    /* Room for every line a circuit writes (14 at most, each its label and at most 128 bytes more) and the headers. */
    cap = 8192;
    for (size_t i = 0; i < ns.n; i++)
        cap += 14 * (strlen(lab[i]) + 128);
    if (!(buf = malloc(cap))) {
        cli_err(c, "out of memory");
        *status = EX_SOFTWARE_;
        free(xs);
        free(lab);
        names_free(&ns);
        return NULL;
    }
#define OUT(...) (len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, __VA_ARGS__))
#define OK(i) (xs[i].found && xs[i].readable)
    OUT("# HELP breakwater_state The circuit's state: 1 for the state it is in, 0 for the other five.\n"
        "# TYPE breakwater_state gauge\n");
    for (size_t i = 0; i < ns.n; i++)
        for (int s = 0; OK(i) && s < 6; s++)
            OUT("breakwater_state{%s,state=\"%s\"} %d\n", lab[i], bw_state_name((bw_state)s),
                xs[i].snap.state == (bw_state)s);
    OUT("# HELP breakwater_failure_rate Failed / all calls in the sliding window, 0..1.\n"
        "# TYPE breakwater_failure_rate gauge\n");
    for (size_t i = 0; i < ns.n; i++)
        if (OK(i) && xs[i].policy == BW_POLICY_RATE)
            OUT("breakwater_failure_rate{%s} %.6g\n", lab[i], xs[i].snap.failure_rate);
    OUT("# HELP breakwater_slow_call_rate Slow / all calls in the sliding window, 0..1.\n"
        "# TYPE breakwater_slow_call_rate gauge\n");
    for (size_t i = 0; i < ns.n; i++)
        if (OK(i) && xs[i].policy == BW_POLICY_RATE)
            OUT("breakwater_slow_call_rate{%s} %.6g\n", lab[i], xs[i].snap.slow_call_rate);
    OUT("# HELP breakwater_window_calls Calls in the sliding window: total, failed, slow.\n"
        "# TYPE breakwater_window_calls gauge\n");
    for (size_t i = 0; i < ns.n; i++)
        if (OK(i) && xs[i].policy == BW_POLICY_RATE)
            OUT("breakwater_window_calls{%s,kind=\"total\"} %llu\nbreakwater_window_calls{%s,kind=\"failed\"} "
                "%llu\nbreakwater_window_calls{%s,kind=\"slow\"} %llu\n",
                lab[i], (unsigned long long)xs[i].snap.total_calls, lab[i], (unsigned long long)xs[i].snap.failed_calls,
                lab[i], (unsigned long long)xs[i].snap.slow_calls);
    OUT("# HELP breakwater_consecutive_failures Consecutive failures (consecutive policy).\n"
        "# TYPE breakwater_consecutive_failures gauge\n");
    for (size_t i = 0; i < ns.n; i++)
        if (OK(i))
            OUT("breakwater_consecutive_failures{%s} %u\n", lab[i], xs[i].snap.consecutive_failures);
    OUT("# HELP breakwater_retry_after_seconds Seconds until an OPEN circuit admits a probe.\n"
        "# TYPE breakwater_retry_after_seconds gauge\n");
    for (size_t i = 0; i < ns.n; i++)
        if (OK(i) && xs[i].snap.retry_after_ns >= 0)
            OUT("breakwater_retry_after_seconds{%s} %.3f\n", lab[i], (double)xs[i].snap.retry_after_ns / 1e9);
    if (openmetrics)
        OUT("# EOF\n");
#undef OUT
#undef OK
    if (len >= cap) { /* cannot happen (room for every line of every circuit); never send a cut text */
        cli_err(c, "the exposition did not fit");
        *status = EX_SOFTWARE_;
        free(buf);
        buf = NULL;
    }
    free(xs);
    free(lab);
    names_free(&ns);
    return buf;
}

/*
 * The server's bounds: at most CONNS connections at once; each has READ_MS
 * from its accept to send the head of its request (at most HEAD_MAX bytes);
 * its answer must move on every SEND_STALL_MS and be sent within
 * SEND_TOTAL_MS. Nothing blocks: one poll over the listening socket and every
 * connection, so a connection that sends nothing, or reads nothing, holds a
 * slot for a bounded time and never delays another's scrape.
 *
 * When every slot is taken, a new connection takes the slot of the oldest one
 * still without a whole request (as servers under pressure do: nginx reuses
 * its idle keep-alive connections, libmicrohttpd can drop the oldest idle
 * ones), once that one has been polled at least once and read a last time:
 * so idle connections, however many, delay a scrape by a few polls, where
 * waiting in the listen queue cost about READ_MS for every CONNS queued
 * before it (a scrape behind 100 idle connections took 7.7 s). Only when
 * every slot is sending an answer does a new connection wait in the queue.
 * When accept fails for want of a descriptor (EMFILE, ENFILE) or of memory,
 * the listening socket stays readable: it is not polled for a TICK_MS (and
 * the oldest connection without a request is closed to give one back), or
 * the loop would spin.
 */
enum { CONNS = 16, HEAD_MAX = 4096, READ_MS = 2000, SEND_STALL_MS = 5000, SEND_TOTAL_MS = 30000, TICK_MS = 200 };

typedef struct conn {
    int fd;           /* -1: a free slot */
    int fresh;        /* accepted since the last poll: not yet given a chance to send its request */
    int64_t since;    /* when it was accepted */
    int64_t deadline; /* reading: the end of its READ_MS; sending: the sooner of the stall's and the total's */
    int64_t total;    /* sending: when the whole answer must be sent */
    size_t got;       /* the request's bytes so far */
    char req[HEAD_MAX + 1];
    char *out; /* the answer being sent (NULL: the request is still being read) */
    size_t len, off;
} conn;

static int64_t now_ms(void)
{
    return cli_now() / BW_NS_PER_MS;
}

static void conn_close(conn *k)
{
    close(k->fd);
    free(k->out);
    k->fd = -1;
    k->out = NULL;
    k->got = k->len = k->off = 0;
}

/* Start sending text (len bytes, malloc'd, taken) on k. */
static void conn_send(conn *k, char *text, size_t len, int64_t now)
{
    k->out = text;
    k->len = len;
    k->off = 0;
    k->total = now + SEND_TOTAL_MS;
    k->deadline = now + SEND_STALL_MS;
}

/* Answer k's request, whose head is in k->req: the exposition for GET /metrics, else 404. -1 out of memory. */
static int answer(cli *c, conn *k, int openmetrics, int64_t now)
{
    const char *req = k->req;
    int om = openmetrics || strstr(req, "application/openmetrics-text") != NULL;
    char *text = NULL, h[256];
    const char *head = "HTTP/1.0 404 Not Found\r\nContent-Length: 10\r\n\r\nnot found\n";
    if (strncmp(req, "GET /metrics", 12) == 0 && (req[12] == ' ' || req[12] == '?')) {
        int st;
        text = exposition(c, om, &st);
        snprintf(h, sizeof h, "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                 text ? "200 OK" : "503 Service Unavailable",
                 om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                    : "text/plain; version=0.0.4; charset=utf-8",
                 text ? strlen(text) : 0);
        head = h;
    }
    size_t hl = strlen(head), tl = text ? strlen(text) : 0;
    char *out = malloc(hl + tl + 1);
    if (out) {
        memcpy(out, head, hl);
        if (text)
            memcpy(out + hl, text, tl);
        conn_send(k, out, hl + tl, now);
    }
    free(text);
    return out ? 0 : -1;
}

static void conn_read(cli *c, conn *k, int openmetrics);

/* The oldest connection that has been polled and has not sent a whole request: the one to give up; -1 none. */
static int oldest_reader(const conn *ks)
{
    int old = -1;
    for (int i = 0; i < CONNS; i++)
        if (ks[i].fd >= 0 && !ks[i].out && !ks[i].fresh && (old < 0 || ks[i].since < ks[old].since))
            old = i;
    return old;
}

/*
 * A slot for a new connection: a free one, else the oldest connection without a request (oldest_reader), read a
 * last time first (what it sent since the poll may complete its request), then closed. -1: every slot is sending.
 */
static int take_slot(cli *c, conn *ks, int openmetrics)
{
    for (;;) {
        for (int i = 0; i < CONNS; i++)
            if (ks[i].fd < 0)
                return i;
        int old = oldest_reader(ks);
        if (old < 0)
            return -1;
        conn_read(c, &ks[old], openmetrics);
        if (ks[old].fd >= 0 && !ks[old].out) {
            cli_info(c, "a client sent no request in %lldms, and every connection is taken: dropped for a new one",
                     (long long)(now_ms() - ks[old].since));
            conn_close(&ks[old]);
            return old;
        }
    }
}

/*
 * Take the connections waiting on the listening socket fd, each into take_slot's slot. 0, or -1 when accept
 * failed for want of a descriptor or memory (then the oldest connection without a request is closed: the next
 * try has its descriptor).
 */
static int accept_all(cli *c, int fd, conn *ks, int openmetrics)
{
    for (;;) {
        int room = oldest_reader(ks) >= 0;
        for (int i = 0; i < CONNS && !room; i++)
            room = ks[i].fd < 0;
        if (!room)
            return 0;                     /* every slot sending: the others wait in the listen queue */
        int cfd = accept(fd, NULL, NULL); /* first: a slot is given up only for a connection that came */
        if (cfd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            int e = errno, old = oldest_reader(ks);
            cli_info(c, "cannot accept a connection: %s%s", strerror(e),
                     old >= 0 ? ": the oldest one without a request dropped" : "");
            if (old >= 0)
                conn_close(&ks[old]);
            return -1;
        }
        if (cfd < 0)
            return 0; /* none waiting (EAGAIN), or an aborted one: the next poll tells */
        int fl = fcntl(cfd, F_GETFL);
        if (fl < 0 || fcntl(cfd, F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(cfd, F_SETFD, FD_CLOEXEC) != 0) {
            close(cfd);
            continue;
        }
        int i = take_slot(c, ks, openmetrics);
        if (i < 0) { /* the one to give up sent its request at the last read: now every slot is sending */
            close(cfd);
            return 0;
        }
        int64_t now = now_ms();
        ks[i].fd = cfd;
        ks[i].fresh = 1;
        ks[i].since = now;
        ks[i].got = 0;
        ks[i].req[0] = 0;
        ks[i].deadline = now + READ_MS;
    }
}

/* Read what k's client sent; answer once the head is in (an empty line ends it). */
static void conn_read(cli *c, conn *k, int openmetrics)
{
    ssize_t n = recv(k->fd, k->req + k->got, HEAD_MAX - k->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) { /* closed before asking, or broken */
        conn_close(k);
        return;
    }
    k->got += (size_t)n;
    k->req[k->got] = 0;
    int64_t now = now_ms();
    if (strstr(k->req, "\r\n\r\n") || strstr(k->req, "\n\n")) {
        if (answer(c, k, openmetrics, now) != 0) {
            cli_err(c, "out of memory: a request dropped");
            conn_close(k);
        }
    } else if (k->got == HEAD_MAX) {
        static const char big[] = "HTTP/1.0 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\r\n";
        char *out = malloc(sizeof big);
        if (!out) {
            conn_close(k);
            return;
        }
        memcpy(out, big, sizeof big);
        conn_send(k, out, sizeof big - 1, now);
    }
}

/* Send what k's client can take now; close it once all is sent. */
static void conn_write(conn *k)
{
    ssize_t n = send(k->fd, k->out + k->off, k->len - k->off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        conn_close(k);
        return;
    }
    k->off += (size_t)n;
    int64_t stall = now_ms() + SEND_STALL_MS; /* progress: a new stall bound, never past the total */
    k->deadline = stall < k->total ? stall : k->total;
    if (k->off == k->len)
        conn_close(k);
}

/* Serve GET /metrics on addr until a forwarded signal: CONNS connections at once, none blocking another. */
static int serve(cli *c, const char *addr, int openmetrics)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    char *pend = NULL;
    long port = colon ? strtol(colon + 1, &pend, 10) : -1;
    if (!colon || !colon[1] || *pend || (size_t)(colon - addr) >= sizeof host || port < 0 || port > 65535) {
        cli_err(c, "--serve: expected HOST:PORT with a numeric IPv4 host, got '%s'", addr);
        return EX_USAGE_;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        cli_err(c, "--serve: expected HOST:PORT with a numeric IPv4 host, got '%s'", addr);
        return EX_USAGE_;
    }
    sa.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0) {
        cli_err(c, "--serve: cannot listen on %s: %s", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        return EX_UNAVAILABLE_;
    }
    conn *ks = calloc(CONNS, sizeof *ks);
    if (!ks) {
        cli_err(c, "out of memory");
        close(fd);
        return EX_SOFTWARE_;
    }
    for (int i = 0; i < CONNS; i++)
        ks[i].fd = -1;
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    cli_info(c, "serving http://%s:%u/metrics", host, ntohs(sa.sin_port));
    int64_t paused = 0; /* the listening socket is not polled before (accept lacked a descriptor) */
    for (;;) {
        struct timespec zero = {0, 0};
        siginfo_t si;
        if (sigtimedwait(&c->forward, &si, &zero) > 0)
            break;
        int64_t now = now_ms();
        struct pollfd p[CONNS + 1];
        int at[CONNS + 1], np = 0, room = 0, wait = TICK_MS; /* TICK_MS: a signal is seen soon */
        for (int i = 0; i < CONNS; i++) {
            conn *k = &ks[i];
            if (k->fd >= 0 && now >= k->deadline) {
                if (k->out)
                    cli_info(c, "a client did not take its answer (%ds without progress, or %ds in all): dropped",
                             SEND_STALL_MS / 1000, SEND_TOTAL_MS / 1000);
                else
                    cli_info(c, "a client sent no request within %dms: dropped", READ_MS);
                conn_close(k);
            }
            if (k->fd < 0) {
                room = 1;
                continue;
            }
            room |= !k->out; /* a slot a new connection may take (take_slot) */
            p[np] = (struct pollfd){k->fd, k->out ? POLLOUT : POLLIN, 0};
            at[np++] = i;
            if (k->deadline - now < wait)
                wait = (int)(k->deadline - now);
        }
        if (room && now >= paused) { /* else new connections wait in the listen queue */
            p[np] = (struct pollfd){fd, POLLIN, 0};
            at[np++] = -1;
        } else if (room && paused - now < wait) {
            wait = (int)(paused - now);
        }
        int ready = poll(p, (nfds_t)np, wait);
        for (int j = 0; j < np; j++)
            if (at[j] >= 0)
                ks[at[j]].fresh = 0; /* polled: its request, if sent, is read below (or by take_slot) */
        if (ready <= 0)
            continue;
        for (int j = 0; j < np; j++) { /* the listening socket last: every connection read first */
            if (!p[j].revents)
                continue;
            if (at[j] < 0) {
                if (accept_all(c, fd, ks, openmetrics) != 0)
                    paused = now_ms() + TICK_MS;
            } else if (ks[at[j]].out)
                conn_write(&ks[at[j]]);
            else
                conn_read(c, &ks[at[j]], openmetrics);
        }
    }
    for (int i = 0; i < CONNS; i++)
        if (ks[i].fd >= 0)
            conn_close(&ks[i]);
    free(ks);
    close(fd);
    return 0;
}

int cmd_metrics(cli *c, int argc, char **argv)
{
    const char *addr = NULL;
    int openmetrics = 0;
    for (int i = 1; i < argc; i++) {
        int g = cli_global_opt(c, argc, argv, &i);
        if (g < 0)
            return EX_USAGE_;
        if (g)
            continue;
        if (strcmp(argv[i], "--openmetrics") == 0) {
            openmetrics = 1;
        } else if (cli_is_opt(argv[i], "--serve")) {
            if (!(addr = cli_optval(c, argc, argv, &i, "--serve")))
                return EX_USAGE_;
        } else {
            cli_unknown(c, argv[i], "argument");
            return EX_USAGE_;
        }
    }
    int status = open_for(c);
    if (status)
        return status;
    if (addr)
        return serve(c, addr, openmetrics);
    char *text = exposition(c, openmetrics, &status);
    if (text)
        fputs(text, stdout);
    free(text);
    return status;
}
