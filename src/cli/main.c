/*
 * main.c — the breakwater command: dispatch, global options, configuration
 * precedence, the default store, help (cli layer; see cli.h).
 *
 * Configuration precedence, lowest first (docs/cli.md): the library's
 * defaults; a file (--config-file, else $BREAKWATER_CONFIG) of key=value
 * settings, any number a line, '#' starting a comment; the environment,
 * BREAKWATER_<NAME>_<KNOB>=VALUE for circuit NAME (bw_config_parse_env); and
 * --config 'key=value ...'. The store: --store URL, else $BREAKWATER_STORE,
 * else sqlite:$XDG_STATE_HOME/breakwater/circuits.db (~/.local/state when
 * XDG_STATE_HOME is unset or not absolute; that breakwater directory made
 * 0700, or narrowed so when it is the user's), or, in a build without SQLite,
 * shm:breakwater-UID (one per user and host, in shared memory); "@FILE" for
 * --store or $BREAKWATER_STORE reads the URL from FILE, so that a password
 * stays off the command line. Every message shows a store URL redacted
 * (bw_store_url_redact) and every message is escaped (cli_escape).
 *
 * Files (a configuration file, a store URL's file) are read by
 * cli_read_file only: regular files, bounded, and while one is read the
 * termination signals (blocked since main began) are unblocked with their
 * default action, so that one ends the command even in a read that blocks.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

/* ---- messages ---- */

const char *cli_escape(const char *s, char *buf, size_t n)
{
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (k + 8 > n) { /* room for this byte's escape, "..." and the NUL, or stop */
            snprintf(buf + k, n - k, "...");
            return buf;
        }
        if (*p == '\\') /* itself escaped: a literal "\x1b" must not read as an escaped ESC */
            k += (size_t)snprintf(buf + k, n - k, "\\\\");
        else
            k += (size_t)snprintf(buf + k, n - k, *p >= 0x20 && *p < 0x7f ? "%c" : "\\x%02x", *p);
    }
    buf[k] = 0;
    return buf;
}

static void vmsg(const cli *c, const char *fmt, va_list ap)
{
    char buf[1024], shown[4 * sizeof buf];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fprintf(stderr, "%s%s%s: %s\n", c->prog, c->cmd ? " " : "", c->cmd ? c->cmd : "",
            cli_escape(buf, shown, sizeof shown));
}

void cli_err(const cli *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(c, fmt, ap);
    va_end(ap);
}

void cli_info(const cli *c, const char *fmt, ...)
{
    if (!c->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg(c, fmt, ap);
    va_end(ap);
}

/* ---- durations ---- */

const char *cli_fmt_duration(int64_t ns, char *buf, size_t n)
{
    if (ns < 0)
        snprintf(buf, n, "-");
    else if (ns < BW_NS_PER_MS)
        snprintf(buf, n, "%lldus", (long long)(ns / 1000));
    else if (ns < BW_NS_PER_S)
        snprintf(buf, n, "%lldms", (long long)(ns / BW_NS_PER_MS));
    else if (ns < 60 * BW_NS_PER_S)
        snprintf(buf, n, "%.1fs", (double)ns / 1e9);
    else if (ns < 3600 * BW_NS_PER_S)
        snprintf(buf, n, "%lldm%02llds", (long long)(ns / (60 * BW_NS_PER_S)), (long long)(ns / BW_NS_PER_S % 60));
    else if (ns < 86400 * BW_NS_PER_S)
        snprintf(buf, n, "%lldh%02lldm", (long long)(ns / (3600 * BW_NS_PER_S)),
                 (long long)(ns / (60 * BW_NS_PER_S) % 60));
    else
        snprintf(buf, n, "%lldd%02lldh", (long long)(ns / (86400 * BW_NS_PER_S)),
                 (long long)(ns / (3600 * BW_NS_PER_S) % 24));
    return buf;
}

/* ---- options ---- */

int cli_is_opt(const char *arg, const char *opt)
{
    size_t n = strlen(opt);
    return strncmp(arg, opt, n) == 0 && (arg[n] == 0 || arg[n] == '=');
}

const char *cli_optval(const cli *c, int argc, char **argv, int *i, const char *opt)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (a[n] == '=')
        return a + n + 1;
    if (*i + 1 >= argc) {
        cli_err(c, "option %s needs a value (see: %s %s --help)", opt, c->prog, c->cmd ? c->cmd : "");
        return NULL;
    }
    return argv[++*i];
}

char *cli_redacted(const char *arg)
{
    size_t cap = 3 * strlen(arg) + 1;
    char *shown = malloc(cap);
    unsigned masked = 0;
    if (!shown)
        return NULL;
    if (bw_store_url_redact(arg, shown, cap, &masked) < 0)
        snprintf(shown, cap, "%s", cap > 12 ? "(not shown)" : "?");
    else if (!(masked & BW_STORE_URL_SECRET))
        memcpy(shown, arg, strlen(arg) + 1); /* no password in it: as given ("statuss" is no URL, not "***") */
    return shown;
}

void cli_unknown(const cli *c, const char *arg, const char *what)
{
    char see[64];
    snprintf(see, sizeof see, "see: %s %s%s--help", c->prog, c->cmd ? c->cmd : "", c->cmd ? " " : "");
    const char *eq = strchr(arg, '=');
    if (arg[0] != '-') {
        char *shown = cli_redacted(arg);
        cli_err(c, "unknown %s '%s' (%s)", what, shown ? shown : "?", see);
        free(shown);
    } else if (eq) {
        cli_err(c, "unknown option '%.*s' (its value not shown) (%s)", (int)(eq - arg), arg, see);
    } else {
        cli_err(c, "unknown option '%s' (%s)", arg, see);
    }
}

int cli_global_opt(cli *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
        c->verbose++;
        return 1;
    }
    if (cli_is_opt(a, "--store")) {
        const char *v = cli_optval(c, argc, argv, i, "--store");
        if (!v)
            return -1;
        c->store_spec = v;
        return 1;
    }
    if (cli_is_opt(a, "--config-file")) {
        const char *v = cli_optval(c, argc, argv, i, "--config-file");
        if (!v)
            return -1;
        c->config_file = v;
        return 1;
    }
    if (cli_is_opt(a, "--config")) {
        const char *v = cli_optval(c, argc, argv, i, "--config");
        if (!v)
            return -1;
        c->config_text = v;
        return 1;
    }
    return 0;
}

/* ---- the configuration's pieces ---- */

void cli_env_prefix(const char *name, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "BREAKWATER_");
    for (const char *p = name; *p && k + 2 < n; p++)
        buf[k++] = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    buf[k++] = '_';
    buf[k] = 0;
}

/* Whether text sets the policy or the window (so a verb must not take the entry's). */
static int sets_shape(const char *text)
{
    return text && (strstr(text, "policy=") || strstr(text, "window="));
}

/* ---- files ---- */

/*
 * The termination signals while a file is read: unblocked, with their default action (whatever was inherited,
 * as the rest of the command takes them), so that one ends the process even in a read the kernel does not
 * interrupt for a caught signal (a hung NFS mount or FUSE file system waits "killable": only a signal that ends
 * the process ends the wait, a handler never runs). One already pending ends it at once.
 */
static const int stop_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
enum { NSTOP = sizeof stop_sigs / sizeof stop_sigs[0] };

typedef struct stoppable {
    struct sigaction old[NSTOP];
    sigset_t mask;
} stoppable;

static void stoppable_begin(stoppable *st)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < NSTOP; i++) {
        sigaction(stop_sigs[i], &dfl, &st->old[i]);
        sigaddset(&set, stop_sigs[i]);
    }
    pthread_sigmask(SIG_UNBLOCK, &set, &st->mask);
}

static void stoppable_end(stoppable *st)
{
    pthread_sigmask(SIG_SETMASK, &st->mask, NULL); /* blocked again first: none is taken with the old action */
    for (int i = 0; i < NSTOP; i++)
        sigaction(stop_sigs[i], &st->old[i], NULL);
}

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

static int read_file(cli *c, const char *path, size_t max, const char *what, char **out, size_t *len)
{
    /* O_NONBLOCK: a FIFO without a writer does not stall the open (it is refused below, as any non-file is). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        cli_err(c, "cannot read the %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        cli_err(c, "cannot look at the %s %s: %s", what, path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        cli_err(c, "the %s %s must be a regular file, not %s", what, path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max) {
        cli_err(c, "the %s %s is larger than %zu bytes (%lld bytes)", what, path, max, (long long)st.st_size);
        close(fd);
        return -1;
    }
    size_t cap = (size_t)st.st_size + 2, got = 0; /* room to see it grew past its size */
    char *buf = malloc(cap);
    if (!buf)
        cli_err(c, "out of memory");
    while (buf) {
        if (got + 1 == cap) { /* it grew since fstat: read on, up to max + 1 bytes */
            if (got > max) {
                cli_err(c, "the %s %s is larger than %zu bytes", what, path, max);
                break;
            }
            size_t ncap = cap * 2 > max + 2 ? max + 2 : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                cli_err(c, "out of memory");
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cli_err(c, "cannot read the %s %s: %s", what, path, strerror(errno));
            break;
        }
        if (n == 0) {
            close(fd);
            buf[got] = 0;
            if (memchr(buf, 0, got)) {
                cli_err(c, "the %s %s holds a NUL byte: not a text file", what, path);
                free(buf);
                return -1;
            }
            *out = buf;
            *len = got;
            return 0;
        }
        got += (size_t)n;
    }
    free(buf);
    close(fd);
    return -1;
}

int cli_read_file(cli *c, const char *path, size_t max, const char *what, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    stoppable st;
    stoppable_begin(&st);
    int rc = read_file(c, path, max, what, out, len);
    stoppable_end(&st);
    return rc;
}

/* ---- configuration ---- */

/* The most bytes a configuration file may hold. */
#define CONFIG_FILE_MAX ((size_t)1 << 20)

/* Apply a file of settings, line by line, so that an error names its line. */
static int apply_file(cli *c, bw_config *cfg, const char *path)
{
    char *text;
    size_t len;
    if (cli_read_file(c, path, CONFIG_FILE_MAX, "configuration file", &text, &len) != 0)
        return -1;
    int no = 0, rc = 0;
    for (char *line = text, *next; line && line < text + len; line = next) {
        no++;
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        bw_error e;
        if (bw_config_parse(cfg, line, &e) != BW_OK) {
            size_t n = strlen(line);
            while (n && isspace((unsigned char)line[n - 1]))
                line[--n] = 0;
            cli_err(c, "%s:%d: %s (in '%.200s')", path, no, e.message, line);
            rc = -1;
            break;
        }
        c->config_set |= sets_shape(line);
    }
    free(text);
    return rc;
}

bw_config *cli_config(cli *c, const char *name)
{
    bw_config *cfg = bw_config_new();
    bw_error e;
    if (!cfg) {
        cli_err(c, "out of memory");
        return NULL;
    }
    const char *file = c->config_file ? c->config_file : getenv("BREAKWATER_CONFIG");
    if (file && *file && apply_file(c, cfg, file) != 0)
        goto bad;
    char prefix[600];
    if (name)
        cli_env_prefix(name, prefix, sizeof prefix);
    /* A name too long for an environment prefix (bw_config_parse_env takes 200 bytes) has no variables. */
    if (name && strlen(prefix) <= 200) {
        if (bw_config_parse_env(cfg, prefix, &e) != BW_OK) {
            cli_err(c, "%s", e.message);
            goto bad;
        }
        extern char **environ;
        for (char **v = environ; *v; v++)
            if (strncmp(*v, prefix, strlen(prefix)) == 0)
                c->config_set |= cli_is_opt(*v + strlen(prefix), "POLICY") || cli_is_opt(*v + strlen(prefix), "WINDOW");
    }
    if (c->config_text) {
        if (bw_config_parse(cfg, c->config_text, &e) != BW_OK) {
            cli_err(c, "--config: %s", e.message);
            goto bad;
        }
        c->config_set |= sets_shape(c->config_text);
    }
    if (bw_config_validate(cfg, &e) != BW_OK) {
        cli_err(c, "configuration: %s", e.message);
        goto bad;
    }
    return cfg;
bad:
    bw_config_free(cfg);
    return NULL;
}

/* ---- the store ---- */

/* mkdir -p with mode 0700 for each directory made (chmod: whatever the umask). */
static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        int rc = mkdir(path, 0700) == 0 ? chmod(path, 0700) : -1;
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return (mkdir(path, 0700) == 0 ? chmod(path, 0700) : -1) == 0 || errno == EEXIST ? 0 : -1;
}

/*
 * The default store's own directory ($XDG_STATE_HOME/breakwater): made 0700 by
 * mkdirs, and an existing one (an older breakwater, or a umask, made it 0755)
 * narrowed to its owner's bits when it is this user's directory, not a link.
 * The directories above it are the user's own (~/.local/state): left alone.
 * Best effort: the store's files are 0600 whatever their directory.
 */
static void narrow_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077))
        (void)fchmod(fd, st.st_mode & 0700);
    close(fd);
}

/* The default store URL; *dir is the directory it needs (made by cli_open_store), or "". */
static const char *default_store(cli *c, char *dir, size_t n)
{
    dir[0] = 0;
    if (!(bw_components() & BW_COMPONENT_SQLITE)) {
        snprintf(c->store_buf, sizeof c->store_buf, "shm:breakwater-%lu", (unsigned long)geteuid());
        c->store_fallback = 1;
        return c->store_buf;
    }
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (state && state[0] == '/')
        snprintf(dir, n, "%s/breakwater", state);
    else
        snprintf(dir, n, "%s/.local/state/breakwater", home && *home ? home : ".");
    snprintf(c->store_buf, sizeof c->store_buf, "sqlite:%s/circuits.db", dir);
    return c->store_buf;
}

/* The most bytes of a file a store URL is read from (--store @FILE): a URL is at most about 5 KiB. */
#define STORE_FILE_MAX ((size_t)16 << 10)

/* c->store_url from the file `path` (its trailing newline dropped); 0, or -1 after printing why. */
static int store_from_file(cli *c, const char *path)
{
    size_t len;
    if (cli_read_file(c, path, STORE_FILE_MAX, "store URL file", &c->store_read, &len) != 0)
        return -1;
    while (len && (c->store_read[len - 1] == '\n' || c->store_read[len - 1] == '\r'))
        c->store_read[--len] = 0;
    if (len == 0 || memchr(c->store_read, '\n', len)) {
        cli_err(c, "the store URL file %s must hold one URL on one line, %s", path,
                len ? "it holds more than one line" : "it holds none");
        return -1;
    }
    c->store_url = c->store_read;
    return 0;
}

/* What the store is given as: --store's value, else BREAKWATER_STORE's, else NULL (the default); *from says which. */
static const char *store_spec(const cli *c, const char **from)
{
    const char *env = getenv("BREAKWATER_STORE");
    *from = c->store_spec ? "--store" : env && *env ? "BREAKWATER_STORE" : "the default";
    return c->store_spec ? c->store_spec : env && *env ? env : NULL;
}

/*
 * The store's URL, from --store, else BREAKWATER_STORE, else the default (*dir: the directory it needs, or "");
 * `announce`: say what -v and the fallback's warning say (cli_open_store), else nothing (--version).
 */
static int resolve_store(cli *c, char *dir, size_t n, int announce)
{
    dir[0] = 0;
    const char *spec = store_spec(c, &c->store_from);
    if (spec && spec[0] == '@') {
        if (store_from_file(c, spec + 1) != 0)
            return -1;
    } else {
        c->store_url = spec ? spec : default_store(c, dir, n);
    }
    size_t cap = 3 * strlen(c->store_url) + 1; /* room for the whole (store.h) */
    char *masked = malloc(cap);
    if (!masked) {
        cli_err(c, "out of memory");
        return -1;
    }
    unsigned what = 0;
    bw_store_url_redact(c->store_url, masked, cap, &what);
    snprintf(c->store_shown, sizeof c->store_shown, "%s", masked); /* cut after the masking: no piece of a secret */
    if (strlen(masked) >= sizeof c->store_shown)
        memcpy(c->store_shown + sizeof c->store_shown - 4, "...", 4);
    free(masked);
    /* A password on the command line: every user of the host can read it (ps, /proc/PID/cmdline). Not for a
       part masked only because it might hold one (a malformed URL, a string that is no URL: "--store foo"). */
    if (announce && c->store_spec && c->store_spec[0] != '@' && (what & BW_STORE_URL_SECRET))
        cli_err(c,
                "warning: --store %s gives a password on the command line, where every user of this host can read "
                "it (ps): give it in a file only you can read (--store @FILE) or in $BREAKWATER_STORE",
                c->store_shown);
    if (announce && c->store_fallback) /* once: the URL is resolved once a process */
        cli_err(c,
                "warning: no SQLite store in this breakwater (libbreakwater-sqlite0 not installed, or left out of "
                "the build): the default store is %s, in shared memory (this host only, lost at reboot), not the "
                "file ~/.local/state/breakwater/circuits.db; give --store URL or BREAKWATER_STORE=URL to choose, "
                "and silence this warning",
                c->store_shown);
    if (announce) {
        char line[sizeof c->store_shown + 64];
        cli_info(c, "%s", cli_store_line(c, line, sizeof line));
    }
    return 0;
}

const char *cli_store_line(const cli *c, char *buf, size_t n)
{
    snprintf(buf, n, "store: %s (%s%s%s)", c->store_shown, strcmp(c->store_from, "the default") == 0 ? "" : "from ",
             c->store_from, c->store_fallback ? " of a build without SQLite" : "");
    return buf;
}

void cli_version(cli *c, FILE *f)
{
    unsigned comp = bw_components();
    fprintf(f, "breakwater %s (library %s; stores: memory shm%s%s%s)\n", BW_VERSION_STRING, bw_version_string(),
            comp & BW_COMPONENT_SQLITE ? " sqlite" : "", comp & BW_COMPONENT_REDIS ? " redis" : "",
            comp & BW_COMPONENT_POSTGRES ? " postgresql" : "");
    const char *from, *spec = store_spec(c, &from);
    char shown[4 * sizeof c->store_shown], line[sizeof c->store_shown + 64];
    if (spec && spec[0] == '@') { /* not read for --version: the file's name, which holds no secret */
        fprintf(f, "store: the URL in the file %s (from %s)\n", cli_escape(spec + 1, shown, sizeof shown), from);
        return;
    }
    char dir[4096];
    if (resolve_store(c, dir, sizeof dir, 0) != 0)
        return;
    fprintf(f, "%s\n", cli_escape(cli_store_line(c, line, sizeof line), shown, sizeof shown));
    if (c->store_fallback)
        fprintf(f, "(without SQLite: the documented default, a file in ~/.local/state/breakwater, is not available)\n");
}

int cli_open_store(cli *c, int quiet, bw_error *err)
{
    char dir[4096] = "";
    if (!c->store_url && resolve_store(c, dir, sizeof dir, 1) != 0) {
        snprintf(err->message, sizeof err->message, "the store URL could not be read");
        err->code = BW_ESYS;
        snprintf(c->store_shown, sizeof c->store_shown, "(unread)");
        return BW_ESYS;
    }
    if (dir[0] && mkdirs(dir) != 0) {
        int e = errno;
        snprintf(err->message, sizeof err->message, "cannot create the directory %.120s: %.60s", dir, strerror(e));
        err->code = BW_ESYS;
        if (!quiet)
            cli_err(c, "store %s: %s", c->store_shown, err->message);
        return BW_ESYS;
    }
    if (dir[0])
        narrow_dir(dir);
    int rc = bw_store_open(c->store_url, &c->store, err);
    if (rc != BW_OK && !quiet)
        cli_err(c, "cannot open the store %s: %s", c->store_shown, err->message);
    return rc;
}

/* ---- help ---- */

static const char *const usage_text =
    "usage: breakwater [-v] [--store URL|@FILE] [--config TEXT] [--config-file PATH] COMMAND [ARGS...]\n"
    "\n"
    "Circuit breakers for shells, cron and CI: every process that names a circuit\n"
    "shares it through a store.\n"
    "\n"
    "commands:\n"
    "  run NAME [options] -- CMD [ARGS...]   run CMD guarded by the circuit NAME\n"
    "  retry [options] -- CMD [ARGS...]      run CMD again on failure, with backoff\n"
    "  status [NAME...] [--json] [--watch]   the circuits in the store\n"
    "  force-open [--create] NAME            reject every call until reset (never expires)\n"
    "  disable [--create] NAME               admit every call, record nothing, until reset\n"
    "  metrics-only [--create] NAME          admit every call, record, never trip, until reset\n"
    "  reset [--create] NAME                 close the circuit with a fresh window\n"
    "  metrics [--serve ADDR] [--openmetrics] the Prometheus exposition of the store's circuits\n"
    "  sweep                                 delete the store's expired entries\n"
    "  forget [--missing-ok] NAME            delete the circuit's entry\n"
    "\n"
    "global options (before or after the command):\n"
    "  --store URL          memory:, shm:NAME, sqlite:PATH or redis://HOST (default: $BREAKWATER_STORE,\n"
    "                       else sqlite:$XDG_STATE_HOME/breakwater/circuits.db)\n"
    "  --store @FILE        the URL read from FILE: a URL with a password belongs there or in\n"
    "                       $BREAKWATER_STORE (also @FILE), never on the command line (ps shows it)\n"
    "  --config TEXT        settings, e.g. 'failure_rate=0.5 window=time:60s wait=30s'\n"
    "  --config-file PATH   settings from a regular file of at most 1 MiB (default: $BREAKWATER_CONFIG)\n"
    "  -v, --verbose        say what happens on stderr\n"
    "  --help, --version\n"
    "\n"
    "Precedence: defaults < file < BREAKWATER_<NAME>_<KNOB> variables < --config.\n"
    "Exit status: CMD's, or 64 usage, 66 no such circuit, 69 store unavailable, 75 rejected,\n"
    "124 timed out.\n"
    "See breakwater(1) and docs/cli.md.\n";

/* What the operator verbs' help says of a name the store does not hold. */
#define VERB_NOTE                                                                                                      \
    "\n"                                                                                                               \
    "A NAME the store does not hold (a typo, or a circuit never called, that recorded nothing\n"                       \
    "or expired) changes nothing and exits 66, with the nearest name it holds (did you mean?).\n"                      \
    "--create acts on it all the same.\n"

static const struct {
    const char *cmd, *text;
} cmd_help[] = {
    {"run", "usage: breakwater run NAME [options] -- CMD [ARGS...]\n"
            "\n"
            "Run CMD guarded by the circuit NAME, shared through the store by every process that\n"
            "names it. When the circuit rejects, nothing runs: the state and retry_after go to\n"
            "stderr and the exit status is 75, or --fallback runs instead.\n"
            "\n"
            "options:\n"
            "  --failure-exit LIST  exit codes that count as failures (default: every nonzero);\n"
            "                       others count as successes. LIST: 1,2,10-20\n"
            "  --ignore-exit LIST   exit codes that say nothing about the dependency (not recorded)\n"
            "  --timeout DUR        send SIGTERM after DUR, SIGKILL --kill-after later; recorded as a\n"
            "                       timeout (a slow failure); exit status 124. Outside a terminal's\n"
            "                       foreground CMD runs in a process group of its own, which gets\n"
            "                       the signals (its children end too)\n"
            "  --kill-after DUR     the grace after SIGTERM (default 5s)\n"
            "  --fallback CMD       run CMD (with sh -c) when the circuit rejects; its status is ours.\n"
            "                       It sees BREAKWATER_NAME, BREAKWATER_STATE, BREAKWATER_RETRY_AFTER_MS\n"
            "  --pass-store         give CMD (and the fallback) BREAKWATER_STORE, the store as given;\n"
            "                       without it they do not see it (a URL may hold a password)\n"
            "  -v                   report state changes and rejections\n"
            "\n"
            "A signal sent to breakwater (TERM, INT, HUP, QUIT, USR1, USR2) reaches CMD. Death by a\n"
            "signal is a failure. Exit status: CMD's; 75 rejected; 124 timed out; 126/127 CMD could\n"
            "not run (not recorded); 64 usage; 69 no circuit could be made at all.\n"},
    {"retry", "usage: breakwater retry [options] -- CMD [ARGS...]\n"
              "\n"
              "Run CMD again while it fails, waiting between attempts.\n"
              "\n"
              "options:\n"
              "  --attempts N         attempts in all, the first included (default 3, at most 1000)\n"
              "  --backoff KIND       constant, linear or exponential (default exponential)\n"
              "  --delay DUR          the base delay (default 1s)\n"
              "  --multiplier X       exponential growth (default 2)\n"
              "  --max-delay DUR      the cap of a delay (default 30s)\n"
              "  --jitter KIND        none, full, equal or decorrelated (default full)\n"
              "  --max-time DUR       an overall deadline: no wait that would end past it\n"
              "  --budget MAX:RATIO   a retry budget of MAX tokens refunded RATIO per success\n"
              "  --timeout DUR        bound each attempt (SIGTERM, then SIGKILL --kill-after later)\n"
              "  --kill-after DUR     the grace after SIGTERM (default 5s)\n"
              "  --failure-exit LIST, --ignore-exit LIST   as for run: which exits are retried\n"
              "  --pass-store         give CMD BREAKWATER_STORE, the store as given (not by default)\n"
              "  --breaker NAME       run each attempt inside the circuit NAME: a rejection is not\n"
              "                       retried (exit 75), unless --patient\n"
              "  --patient            with --breaker: after a rejection wait exactly retry_after, when\n"
              "                       that fits --max-time, and try again\n"
              "  --seed N             the jitter's random seed (for tests)\n"},
    {"status", "usage: breakwater status [NAME...] [--json] [--watch] [--interval DUR]\n"
               "\n"
               "The circuits in the store (all of them without NAME, when the store can list them):\n"
               "state, window (calls, failure and slow rates), consecutive counts, probes, retry_after,\n"
               "expiry, operator hold (and generation in JSON). An aligned table on a terminal, the\n"
               "store on its first line; JSON lines otherwise or with --json. In the table '-' is a\n"
               "figure that does not apply (the window under the consecutive policy, PROBES outside\n"
               "HALF_OPEN, RETRY IN outside OPEN); 'closed (nothing recorded)' a circuit without an entry.\n"
               "--watch redraws every --interval (default 1s) until interrupted.\n"
               "A NAME that is not a circuit name is skipped with a warning, the others reported;\n"
               "the exit status is then 1.\n"},
    {"force-open", "usage: breakwater force-open [--create] NAME\n"
                   "\n"
                   "Hold the circuit FORCED_OPEN: every process rejects every call, until reset.\n"
                   "A hold never expires.\n" VERB_NOTE},
    {"disable", "usage: breakwater disable [--create] NAME\n"
                "\n"
                "Hold the circuit DISABLED: every call is admitted and nothing recorded, until reset.\n" VERB_NOTE},
    {"metrics-only", "usage: breakwater metrics-only [--create] NAME\n"
                     "\n"
                     "Hold the circuit METRICS_ONLY: every call admitted and recorded, never tripping.\n" VERB_NOTE},
    {"reset", "usage: breakwater reset [--create] NAME\n"
              "\n"
              "Close the circuit with a fresh window, ending any hold; calls in flight settle as stale.\n" VERB_NOTE},
    {"metrics", "usage: breakwater metrics [--serve ADDR] [--openmetrics]\n"
                "\n"
                "Print the Prometheus text exposition of every circuit in the store (state, rates,\n"
                "window counts, consecutive failures, retry_after), or serve it on http://ADDR/metrics\n"
                "(ADDR: HOST:PORT, numeric IPv4) until interrupted: 16 connections at once, each with\n"
                "2s to send its request; when all are taken, a new one replaces the oldest that has\n"
                "not sent its request.\n"},
    {"sweep", "usage: breakwater sweep\n"
              "\n"
              "Delete the store's expired entries now; prints how many with -v.\n"},
    {"forget", "usage: breakwater forget [--missing-ok] NAME\n"
               "\n"
               "Delete the circuit's entry: every process sees a fresh circuit at its next call.\n"
               "A NAME the store does not hold changes nothing and exits 66, with the nearest name\n"
               "it holds (did you mean?); --missing-ok exits 0 then.\n"},
};

void cli_help(FILE *f, const char *cmd)
{
    if (cmd)
        for (size_t i = 0; i < sizeof cmd_help / sizeof cmd_help[0]; i++)
            if (strcmp(cmd_help[i].cmd, cmd) == 0) {
                fputs(cmd_help[i].text, f);
                fputs(
                    "\nglobal options: --store URL|@FILE, --config TEXT, --config-file PATH, -v (breakwater --help)\n",
                    f);
                return;
            }
    fputs(usage_text, f);
}

/* ---- main ---- */

static const struct {
    const char *name;
    int (*fn)(cli *, int, char **);
} commands[] = {
    {"run", cmd_run},      {"retry", cmd_retry},   {"status", cmd_status},     {"force-open", cmd_verb},
    {"disable", cmd_verb}, {"reset", cmd_verb},    {"metrics-only", cmd_verb}, {"metrics", cmd_metrics},
    {"sweep", cmd_sweep},  {"forget", cmd_forget},
};

int main(int argc, char **argv)
{
    static cli c;
    c.prog = "breakwater";
    /* Before anything may start a thread: the forwarded signals are taken by the main thread only. */
    sigemptyset(&c.forward);
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&c.forward, sigs[i]);
    sigset_t block = c.forward;
    sigaddset(&block, SIGCHLD);
    signal(SIGCHLD, SIG_DFL); /* an inherited SIG_IGN would reap the child with no SIGCHLD: the wait would hang */
    sigprocmask(SIG_BLOCK, &block, &c.orig_mask);
    if (!getenv("BW_CLOCK")) { /* no 2 ms TSC calibration for one call (cli.h) */
        setenv("BW_CLOCK", "monotonic", 1);
        c.clock_env = 1;
    }
    const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
    c.color = isatty(1) && !(nc && *nc) && !(term && strcmp(term, "dumb") == 0);

    int i = 1, version = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_help(stdout, NULL);
            return 0;
        }
        if (strcmp(a, "--version") == 0) { /* after every global option: the store --store names */
            version = 1;
            continue;
        }
        int g = cli_global_opt(&c, argc, argv, &i);
        if (g < 0)
            return EX_USAGE_;
        if (g == 0)
            break;
    }
    if (version) {
        cli_version(&c, stdout);
        return 0;
    }
    if (i >= argc) {
        cli_help(stderr, NULL);
        return EX_USAGE_;
    }
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (strcmp(argv[i], commands[k].name) == 0) {
            c.cmd = commands[k].name;
            for (int j = i + 1; j < argc && strcmp(argv[j], "--") != 0; j++)
                if (strcmp(argv[j], "--help") == 0 || strcmp(argv[j], "-h") == 0) {
                    cli_help(stdout, c.cmd);
                    return 0;
                }
            int rc = commands[k].fn(&c, argc - i, argv + i);
            bw_store_close(c.store);
            return rc;
        }
    cli_unknown(&c, argv[i], "command");
    return EX_USAGE_;
}
