/*
 * test_components.c — the libraries as they ship (base/component.h): a program
 * linked with the core alone uses a store component through the component's
 * library, loaded on first use; a missing component library, or one of another
 * release, is a clear BW_ESTATE; linked statically, a component linked into
 * the program is found and one not linked says how to link it.
 *
 * Built three ways (tests/CMakeLists.txt):
 *   BW_T_SHARED        the shared core only; argv[1..3] are directories
 *                      holding a copy of the core alone, a copy beside a
 *                      sqlite component of another release, and a copy beside
 *                      a file of the component's name that does not load: the
 *                      test runs itself again on each (LD_LIBRARY_PATH).
 *   BW_T_STATIC_SQLITE the static core and the static sqlite component.
 *   BW_T_STATIC_CORE   the static core only.
 */
#define _GNU_SOURCE /* dladdr */
#include <breakwater/breakwater.h>
#include <dlfcn.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

static char dir[] = "/tmp/bw-components-XXXXXX";

static int open_sqlite(bw_store **s, bw_error *e)
{
    char url[256];
    snprintf(url, sizeof url, "sqlite:%s/c.db", dir);
    memset(e, 0, sizeof *e);
    return bw_store_open(url, s, e);
}

/* Put an entry of `byte`, or read one back into *(int *)arg (-1: none). */
static bw_store_verdict put(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    (void)cur;
    next->expires_at = BW_STORE_NEVER;
    next->len = 1;
    next->data[0] = (unsigned char)*(int *)arg;
    return BW_STORE_PUT;
}
static bw_store_verdict get(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    (void)next;
    *(int *)arg = cur ? cur->data[0] : -1;
    return BW_STORE_KEEP;
}

/* A store that works: an entry written through it is read back. */
static void check_store_works(bw_store *s)
{
    int v = 42, back = 0;
    CHECK_OK(bw_store_update(s, "components", put, &v, NULL));
    CHECK_OK(bw_store_update(s, "components", get, &back, NULL));
    CHECK_INT(back, 42);
}

#if defined(BW_T_STATIC_SQLITE) || defined(BW_T_SHARED)
static void test_store_component_used(void)
{
    CHECK(bw_components() & BW_COMPONENT_SQLITE);
    bw_store *s = NULL;
    bw_error e;
    int rc = open_sqlite(&s, &e);
    if (rc != BW_OK) {
        H_FAIL("open: %s (%s)", bw_strerror(rc), e.message);
        return;
    }
    check_store_works(s);
    bw_store_close(s);
}
#endif

#ifdef BW_T_STATIC_SQLITE
/* Only what is linked: a static program has no other component. */
static void test_only_linked(void)
{
    CHECK(!(bw_components() & BW_COMPONENT_REDIS));
    CHECK(!(bw_components() & BW_COMPONENT_POSTGRES));
}
#endif

#ifdef BW_T_STATIC_CORE
static void test_not_linked(void)
{
    CHECK(!(bw_components() & BW_COMPONENT_SQLITE));
    bw_store *s = NULL;
    bw_error e;
    CHECK_RC(open_sqlite(&s, &e), BW_ESTATE);
    CHECK(s == NULL);
    CHECK(strstr(e.message, "not linked into this program") != NULL);
    CHECK(strstr(e.message, "link libbreakwater-sqlite.a (pkg-config --static breakwater-sqlite)") != NULL);
    /* Every store's message is whole (bw_error's message has 216 bytes; postgresql: has the longest names). */
    const char *urls[] = {"redis://127.0.0.1:1/", "postgresql://127.0.0.1:1/x", "sqlite:/nonexistent/x.db"};
    for (int i = 0; i < 3; i++) {
        CHECK_RC(bw_store_open(urls[i], &s, &e), BW_ESTATE);
        if (strlen(e.message) >= sizeof e.message - 1)
            H_FAIL("%s: the message was cut: %s", urls[i], e.message);
    }
    /* The core's own stores need nothing else. */
    CHECK_OK(bw_store_open("memory:", &s, &e));
    check_store_works(s);
    bw_store_close(s);
}
#endif

#ifdef BW_T_SHARED
/* The directory the core this process runs was loaded from. */
static void core_dir(char *out, size_t n)
{
    Dl_info info;
    out[0] = 0;
    if (dladdr((void *)bw_store_open, &info) && info.dli_fname) {
        snprintf(out, n, "%s", info.dli_fname);
        char *slash = strrchr(out, '/');
        if (slash)
            *slash = 0;
    }
}

/* An integration counts only when the program links it (this one links the core alone): nothing is loaded to tell. */
static void test_integrations_only_linked(void)
{
    CHECK(!(bw_components() & BW_COMPONENT_CURL));
    CHECK(!(bw_components() & BW_COMPONENT_METRICS_HTTP));
}

/* This test again, as a child whose dynamic loader looks in `libdir` first, with BW_T_CHILD=mode. */
static int run_child(const char *libdir, const char *mode)
{
    char ld[4200], child[64], *env[] = {ld, child, NULL};
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", libdir);
    snprintf(child, sizeof child, "BW_T_CHILD=%s", mode);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = 0;
    char *argv[] = {self, NULL};
    pid_t pid;
    if (posix_spawn(&pid, self, NULL, NULL, argv, env) != 0)
        return -1;
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *alone_dir, *foreign_dir, *broken_dir;

static void test_missing_component(void)
{
    CHECK_INT(run_child(alone_dir, "missing"), 0);
}

static void test_foreign_component(void)
{
    CHECK_INT(run_child(foreign_dir, "foreign"), 0);
}

static void test_broken_component(void)
{
    CHECK_INT(run_child(broken_dir, "broken"), 0);
}

/* In the child: the core is the copy (else the test proves nothing), and sqlite: fails as `mode` says. */
static int child(const char *mode)
{
    h_current = mode;
    char where[4096];
    core_dir(where, sizeof where);
    const char *ld = getenv("LD_LIBRARY_PATH");
    if (!ld || strcmp(where, ld) != 0) {
        H_FAIL("the core was loaded from %s, not from %s", where, ld ? ld : "(unset)");
        return 1;
    }
    CHECK(!(bw_components() & BW_COMPONENT_SQLITE));
    bw_store *s = NULL;
    bw_error e;
    CHECK_RC(open_sqlite(&s, &e), BW_ESTATE);
    CHECK(s == NULL);
    if (strcmp(mode, "missing") == 0) {
        CHECK(strstr(e.message, "sqlite: store: install libbreakwater-sqlite0 (Debian), or put "
                                "libbreakwater-sqlite.so.0 where the dynamic loader finds it") == e.message);
    } else if (strcmp(mode, "broken") == 0) {
        /* The library is beside the core but does not load: its own error, not "not found". */
        CHECK(strstr(e.message, "the library beside the core did not load") != NULL);
        CHECK(strstr(e.message, "cannot open shared object file") == NULL);
    } else {
        CHECK(strstr(e.message, "another release of breakwater") != NULL);
    }
    /* The same answer again (nothing cached wrongly), and the core's own stores still work. */
    CHECK_RC(open_sqlite(&s, &e), BW_ESTATE);
    CHECK_OK(bw_store_open("memory:", &s, &e));
    check_store_works(s);
    bw_store_close(s);
    return h_failed_checks ? 1 : 0;
}
#endif

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int rc;
#ifdef BW_T_SHARED
    if (argc < 4 && !getenv("BW_T_CHILD")) {
        fprintf(stderr, "usage: test_components ALONE_DIR FOREIGN_DIR BROKEN_DIR\n");
        return 2;
    }
    const char *mode = getenv("BW_T_CHILD");
    if (mode) {
        rc = child(mode);
    } else {
        alone_dir = argv[1];
        foreign_dir = argv[2];
        broken_dir = argv[3];
        RUN(test_store_component_used);
        RUN(test_integrations_only_linked);
        RUN(test_missing_component);
        RUN(test_foreign_component);
        RUN(test_broken_component);
        rc = TEST_SUMMARY();
    }
#elif defined(BW_T_STATIC_SQLITE)
    RUN(test_store_component_used);
    RUN(test_only_linked);
    rc = TEST_SUMMARY();
#else
    RUN(test_not_linked);
    rc = TEST_SUMMARY();
#endif
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}
