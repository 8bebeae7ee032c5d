/*
 * store_url.h — the store a contract or integration test runs on
 * (tests/support/): argv[1] is a store URL as a backend registered it
 * (bw_add_backend's TEST_URL, cmake/backends.cmake), with placeholders the
 * test expands so that runs never collide:
 *   %p  the test's process id (the first process: children share its URLs)
 *   %n  a counter: every store_url_fresh() names a store nobody used yet
 *   %d  a directory made with mkdtemp (under $TMPDIR or /tmp) at first use
 *   %P  the port of the server the backend's TEST_WRAPPER started for this
 *       test ($BW_TEST_PORT: tests/support/with_redis.sh); no port is an error
 *   %%  a percent sign
 * store_url_cleanup() removes what the expanded URLs made: the %d directory
 * with everything in it, and the segment of every shm: URL (the one thing
 * known here by scheme: what a store leaves behind outside the directory).
 * It is async-signal-safe (raw unlink, getdents64 and rmdir), so a test's
 * alarm handler may call it before it exits.
 */
#ifndef BW_TEST_STORE_URL_H
#define BW_TEST_STORE_URL_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"

#define SU_MAX_URLS 256
#define SU_URL_LEN 1024

static char su_template[SU_URL_LEN];
static char su_dir[256];              /* the %d directory, "" until made */
static long su_pid;                   /* %p */
static int su_counter;                /* the next %n */
static int su_nshm;                   /* shm: segments named so far */
static char su_shm[SU_MAX_URLS][300]; /* their /dev/shm paths */

/* Take the URL template from argv[1]; exits with a usage message when there is none. */
static inline void store_url_init(int argc, char **argv)
{
    if (argc < 2 || !argv[1][0] || strlen(argv[1]) >= sizeof su_template) {
        fprintf(stderr,
                "usage: %s STORE_URL [...]   (placeholders: %%p pid, %%n fresh store, %%d temp dir, %%P server port)\n",
                argc > 0 ? argv[0] : "test");
        exit(2);
    }
    snprintf(su_template, sizeof su_template, "%s", argv[1]);
    su_pid = (long)getpid();
}

/* The scheme of the template ("memory", "shm", ...), for messages. */
static inline const char *store_url_scheme(void)
{
    static char scheme[32];
    size_t n = strcspn(su_template, ":");
    snprintf(scheme, sizeof scheme, "%.*s", (int)(n < 31 ? n : 31), su_template);
    return scheme;
}

static inline const char *su_make_dir(void)
{
    if (!su_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(su_dir, sizeof su_dir, "%s/bwtest-XXXXXX", tmp && tmp[0] && strlen(tmp) < 160 ? tmp : "/tmp");
        if (!mkdtemp(su_dir)) {
            fprintf(stderr, "store_url: mkdtemp(%s) failed\n", su_dir);
            exit(2);
        }
    }
    return su_dir;
}

/* Remember what an expanded URL will make outside the %d directory. */
static inline void su_note(const char *url)
{
    if (strncmp(url, "shm:", 4) != 0 || su_nshm >= SU_MAX_URLS)
        return;
    size_t n = strcspn(url + 4, "?");
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%.*s", (int)(n < 200 ? n : 200), url + 4);
    for (int i = 0; i < su_nshm; i++)
        if (strcmp(su_shm[i], path) == 0)
            return;
    memcpy(su_shm[su_nshm++], path, sizeof path);
}

/*
 * The template expanded with %n as n and %P as `port` (NULL: $BW_TEST_PORT; a
 * fault test points a store at its proxy this way). Valid until the next call.
 */
static inline const char *store_url_expand(const char *port, int n)
{
    static char out[SU_URL_LEN];
    size_t at = 0;
    for (const char *t = su_template; *t && at < sizeof out - 1; t++) {
        char part[300];
        part[0] = 0;
        if (*t != '%') {
            out[at++] = *t;
            continue;
        }
        switch (*++t) {
        case 'p':
            snprintf(part, sizeof part, "%ld", su_pid);
            break;
        case 'n':
            snprintf(part, sizeof part, "%d", n);
            break;
        case 'd':
            snprintf(part, sizeof part, "%s", su_make_dir());
            break;
        case 'P': {
            if (!port)
                port = getenv("BW_TEST_PORT");
            if (!port || !port[0] || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port)) {
                fprintf(stderr,
                        "store_url: '%s' needs $BW_TEST_PORT, the port of the server its test wrapper "
                        "starts (run it through ctest)\n",
                        su_template);
                exit(2);
            }
            snprintf(part, sizeof part, "%s", port);
            break;
        }
        case '%':
            snprintf(part, sizeof part, "%%");
            break;
        default:
            fprintf(stderr, "store_url: unknown placeholder in '%s'\n", su_template);
            exit(2);
        }
        at += (size_t)snprintf(out + at, sizeof out - at, "%s", part);
    }
    out[at < sizeof out ? at : sizeof out - 1] = 0;
    su_note(out);
    return out;
}

/*
 * The template expanded with a new %n: a store no other call named (the same
 * string each time for a URL without %n), %P as `port` (NULL: $BW_TEST_PORT).
 * Valid until the next call.
 */
static inline const char *store_url_fresh_at(const char *port)
{
    return store_url_expand(port, su_counter++);
}

/* The same store as the last store_url_fresh_at, with %P as `port` (NULL: $BW_TEST_PORT). */
static inline const char *store_url_again_at(const char *port)
{
    return store_url_expand(port, su_counter > 0 ? su_counter - 1 : 0);
}

/* The template expanded with a new %n and the wrapper's port. */
static inline const char *store_url_fresh(void)
{
    return store_url_fresh_at(NULL);
}

/* Remove dir and everything under it, with system calls only (async-signal-safe). */
static inline void su_remove_tree(int parent, const char *name, int depth)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (int pass = 0, removed = 1; fd >= 0 && depth < 8 && removed && pass < 4; pass++) {
        char buf[4096];
        long got;
        removed = 0; /* another pass from the start while a pass removed something */
        lseek(fd, 0, SEEK_SET);
        while ((got = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < got;) {
                /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
                unsigned short reclen;
                memcpy(&reclen, buf + off + 16, sizeof reclen);
                unsigned char type = (unsigned char)buf[off + 18];
                const char *child = buf + off + 19;
                if (strcmp(child, ".") != 0 && strcmp(child, "..") != 0) {
                    if (type == 4 /* DT_DIR */)
                        su_remove_tree(fd, child, depth + 1);
                    else
                        unlinkat(fd, child, 0);
                    removed = 1;
                }
                off += reclen;
            }
        }
    }
    if (fd >= 0)
        close(fd);
    unlinkat(parent, name, AT_REMOVEDIR);
}

/* Remove what the expanded URLs made (async-signal-safe; harmless twice). */
static inline void store_url_cleanup(void)
{
    for (int i = 0; i < su_nshm; i++)
        unlink(su_shm[i]); /* shm_unlink("/NAME"), spelled with unlink */
    if (su_dir[0])
        su_remove_tree(AT_FDCWD, su_dir, 0);
}

/*
 * Open a fresh store of the URL under test on `clk` (NULL: the store's own
 * clock). A store that cannot be opened ends the test program: nothing else
 * of it could run.
 */
static inline bw_store *store_open_fresh(bw_clock *clk)
{
    const char *url = store_url_fresh();
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(url, &s, &e);
    if (rc != BW_OK) {
        H_FAIL("bw_store_open(%s): %s: %s", url, bw_strerror(rc), e.message);
        store_url_cleanup();
        exit(1);
    }
    if (clk)
        CHECK_OK(bw_store_set_clock(s, clk));
    return s;
}

#endif
