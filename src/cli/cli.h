/*
 * cli.h — the breakwater command's shared pieces (cli layer: the public API
 * only, like nng's nngcat, to prove the API is enough).
 *
 * main.c parses the command line, builds the configuration (defaults, a file,
 * the environment, --config) and opens the store; run.c runs commands guarded
 * by a circuit (`run`, `retry`); admin.c reads and changes the store's
 * circuits (`status`, the operator verbs, `metrics`, `sweep`, `forget`).
 *
 * Design notes: the tool is one process for one call, so it uses the stored
 * mode (the circuit lives in the store; each acquire and settle is one store
 * update). Every process-directed signal the tool forwards is blocked from
 * the start of main, before the library starts any thread, so that only the
 * main thread ever takes them (sigtimedwait) and no library thread is killed
 * by one; a child gets the original mask back before exec. While a file is
 * read, TERM, INT, HUP and QUIT are unblocked with their default action
 * (cli_read_file), so that one ends a read that blocks. The tool reads
 * CLOCK_MONOTONIC (BW_CLOCK=monotonic, clock.h) unless told otherwise: the
 * calibration of the TSC clock costs about 2 ms, more than a one-call process
 * can win back.
 */
#ifndef BW_CLI_CLI_H
#define BW_CLI_CLI_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "breakwater/breakwater.h"

/* Exit statuses (sysexits.h, 1 as ls(1) and cat(1) for an operand skipped, and timeout(1)'s for a command that ran out
 * of time). */
enum {
    EX_OK_ = 0,
    EX_SKIPPED_ = 1,      /* status: a NAME was skipped (not a circuit name), the others reported (as ls, cat) */
    EX_USAGE_ = 64,       /* a bad option, argument or configuration */
    EX_NOINPUT_ = 66,     /* an operator verb or forget named a circuit the store does not hold (no --create) */
    EX_UNAVAILABLE_ = 69, /* the store is unavailable and nothing can be done without it */
    EX_SOFTWARE_ = 70,    /* breakwater itself failed (out of memory) */
    EX_TEMPFAIL_ = 75,    /* the circuit rejected the call: nothing ran */
    EX_TIMEOUT_ = 124,    /* the command ran past --timeout (as timeout(1)) */
    EX_NOEXEC_ = 126,     /* the command could not be executed */
    EX_NOTFOUND_ = 127    /* the command was not found */
};

/* What every command shares: global options, the configuration, the store. */
typedef struct cli {
    const char *prog;        /* "breakwater" */
    const char *cmd;         /* the command's name */
    int verbose;             /* -v: say what happens on stderr */
    int color;               /* colour on stderr and stdout: a terminal and no NO_COLOR */
    const char *store_url;   /* the URL opened: --store's, BREAKWATER_STORE's, read from their @FILE, or the default */
    const char *store_spec;  /* as given: --store's value, or NULL (then BREAKWATER_STORE, else the default) */
    char store_shown[600];   /* store_url for messages: its secrets masked (escaped as the message is) */
    const char *store_from;  /* where store_url came from: "--store", "BREAKWATER_STORE" or "the default" */
    int store_fallback;      /* the default is not the documented SQLite file (a build without SQLite) */
    char store_buf[4200];    /* the default URL */
    char *store_read;        /* the URL read from an @FILE (malloc'd) */
    const char *config_text; /* --config */
    const char *config_file; /* --config-file or BREAKWATER_CONFIG */
    int config_set;          /* --config or a file gave the policy or window (verbs keep the entry's otherwise) */
    bw_store *store;         /* opened by cli_open_store */
    sigset_t forward;        /* the signals the tool forwards (blocked from the start) */
    sigset_t orig_mask;      /* the mask to give a child */
    int clock_env;           /* main set BW_CLOCK=monotonic (a child does not inherit it) */
    int pass_store;          /* run, retry --pass-store: the child gets BREAKWATER_STORE */
} cli;

/*
 * Messages on stderr, prefixed "breakwater: " (and the command). Every
 * message has its control bytes and its bytes past ASCII escaped (\xHH, and
 * '\' as \\, so that an escape reads as one and only one), so
 * no name, key, file name or URL a user or a store gave can write a terminal
 * escape; a store URL is shown as c->store_shown (its secrets masked). A
 * text is escaped once, as the message is written: output on stdout that
 * shows one escapes it itself.
 */
void cli_err(const cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A message only with -v. */
void cli_info(const cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s with every byte outside printable ASCII written \xHH and '\' as \\, into buf (n bytes, cut short with "..."); buf.
 */
const char *cli_escape(const char *s, char *buf, size_t n);

/*
 * Read the regular file `path` (`what` names it in messages) into a malloc'd,
 * NUL-terminated *out of *len bytes: at most `max` bytes, no NUL byte. A
 * FIFO, a device or a directory is refused at once (opened without waiting
 * for a writer, checked with fstat). While it runs (open, read, close), TERM,
 * INT, HUP and QUIT are unblocked with their default action: one ends the
 * process, even in a read that blocks (NFS, FUSE), and one pending ends it at
 * once. 0, or -1 after printing why.
 */
int cli_read_file(cli *c, const char *path, size_t max, const char *what, char **out, size_t *len);

/* Monotonic nanoseconds for the command's deadlines: the library's system clock (clock.h). */
static inline int64_t cli_now(void)
{
    return bw_clock_now(bw_clock_system());
}
/* A duration for humans ("1.5s", "250ms", "3m20s"), into buf. */
const char *cli_fmt_duration(int64_t ns, char *buf, size_t n);

/*
 * The configuration for circuit `name` (NULL: no name), in precedence order:
 * the library's defaults, the file (--config-file, else BREAKWATER_CONFIG),
 * the environment (BREAKWATER_<NAME>_<KNOB>), --config. NULL after printing
 * the error (then exit 64).
 */
bw_config *cli_config(cli *c, const char *name);

/* The variables' prefix of a circuit's knobs: "BREAKWATER_" + NAME upper-cased (not [A-Z0-9] -> '_') + "_". */
void cli_env_prefix(const char *name, char *buf, size_t n);

/*
 * Open the store into c->store: the URL of --store, else of $BREAKWATER_STORE,
 * else the default; a value "@FILE" is read from FILE (cli_read_file, its
 * trailing newline dropped). Warns when --store gives a password on the command
 * line, and when the default is not the documented SQLite file (a build
 * without SQLite: once, saying how to silence it); -v names the store and
 * where its URL came from (always redacted). BW_OK, or the error after
 * printing it (`quiet`: print nothing of the store's own error).
 */
int cli_open_store(cli *c, int quiet, bw_error *err);

/* An option's value: "--opt=V" or "--opt V" (advances *i); NULL when absent (after printing the error). */
const char *cli_optval(const cli *c, int argc, char **argv, int *i, const char *opt);
/*
 * Report an argument the command does not take (then exit 64): an option by
 * its name only, never its value ("--stor=URL" may be a misspelt --store
 * with a password: "unknown option '--stor' (its value not shown)"), any
 * other argument as an unknown `what` ("argument", "command"), redacted
 * when it is a URL that gives a password (its --store forgotten).
 */
/* arg as a message may show it: a URL giving a password (a --store forgotten) redacted, anything else as given
 * (malloc'd: free it; NULL when out of memory). */
char *cli_redacted(const char *arg);
/* The longest name cli_nearest_name compares. */
enum { NEAREST_LEN_MAX = 511 };
/* The store's circuit nearest in spelling to `name` (did you mean?), into out (n bytes), or "" (nearest.c). */
void cli_nearest_name(cli *c, const char *name, char *out, size_t n);
void cli_unknown(const cli *c, const char *arg, const char *what);
/* Whether argv[*i] is option `opt` (with or without "=value"). */
int cli_is_opt(const char *arg, const char *opt);
/* A global option (--store, --config, --config-file, -v): 1 when argv[*i] was one, 0 not, -1 bad. */
int cli_global_opt(cli *c, int argc, char **argv, int *i);

/* Print --version to f: the version, the stores this build has, the store the command would use and why. */
void cli_version(cli *c, FILE *f);
/* "store: URL (from WHERE)", the header line of status's table and of -v, into buf (URL masked, not escaped). */
const char *cli_store_line(const cli *c, char *buf, size_t n);

/* Print the command's help (`cmd` NULL: the whole tool's) to f. */
void cli_help(FILE *f, const char *cmd);

/* The commands (argv[0] is the command's name). Each returns the exit status. */
int cmd_run(cli *c, int argc, char **argv);
int cmd_retry(cli *c, int argc, char **argv);
int cmd_status(cli *c, int argc, char **argv);
int cmd_verb(cli *c, int argc, char **argv);
int cmd_metrics(cli *c, int argc, char **argv);
int cmd_sweep(cli *c, int argc, char **argv);
int cmd_forget(cli *c, int argc, char **argv);

#endif
