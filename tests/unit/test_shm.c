/*
 * test_shm.c — what only the shm:NAME store does, in one process
 * (tests/unit/; the store contract it shares with every store is
 * tests/contract/, processes dying inside a commit tests/integration/):
 * open, close and reopen; URL errors; a swept entry frees its slot; a full
 * table and its recovery; colliding names; a layout or capacity mismatch on
 * reopen; a segment of another user, or that others may open, refused.
 *
 * The segments of another user are made with fchown and opened by a child that
 * became another user, so that part needs root (as the tests run in CI): it is
 * its own ctest entry, test_shm_foreign_owner (test_shm test_foreign_owner),
 * which ctest shows as skipped when not run as root.
 *
 * Segments are named bwtest-<pid>-<test> and unlinked by the test that made
 * them.
 */
#define _GNU_SOURCE /* setgroups */
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "shm_seg.h"
#include "entries.h"

#define S BW_NS_PER_S

/* ---- helpers ---- */

/* ---- tests ---- */

static void test_open_reopen(void)
{
    const char *n = seg("reopen");
    unlink_seg(n);
    bw_store *s = NULL, *s2 = NULL;
    bw_error e;
    CHECK_OK(open_shm(n, 0, &s, &e));
    CHECK_STR(bw_store_scheme(s), "shm");
    CHECK_OK(entry_put(s, "alpha", 11, 16, BW_STORE_NEVER, &e));
    CHECK_OK(entry_put(s, "beta", 22, 1024, BW_STORE_NEVER, &e));
    /* A second handle in the same process sees the same segment. */
    CHECK_OK(open_shm(n, 1024, &s2, &e));
    CHECK_INT(entry_get(s2, "alpha"), 11);
    CHECK_OK(entry_put(s2, "gamma", 33, 100, BW_STORE_NEVER, &e));
    CHECK_INT(entry_get(s, "gamma"), 33);
    bw_store_close(s2);
    bw_store_close(s);
    s = NULL;
    CHECK_OK(open_shm(n, 0, &s, &e));
    CHECK_INT(entry_get(s, "alpha"), 11);
    CHECK_INT(entry_get(s, "beta"), 22);
    CHECK_INT(entry_get(s, "gamma"), 33);
    CHECK_INT(entry_get(s, "delta"), -2);
    bw_store_close(s);
    unlink_seg(n);
}

static void url_err(const char *url, int want, const char *field)
{
    bw_store *s = NULL;
    bw_error e;
    memset(&e, 0, sizeof e);
    int rc = bw_store_open(url, &s, &e);
    if (rc != want)
        H_FAIL("%.60s: got %s, want %s (%s)", url, bw_strerror(rc), bw_strerror(want), e.message);
    else if (strcmp(e.field, field) != 0)
        H_FAIL("%.60s: field '%s', want '%s' (%s)", url, e.field, field, e.message);
    CHECK(s == NULL);
    if (rc == BW_OK)
        bw_store_close(s);
}

static void test_url_errors(void)
{
    char url[400], name[260];
    bw_error e;
    url_err("shm:", BW_EINVAL, "name");
    url_err("shm:a/b", BW_EINVAL, "name");
    url_err("shm:a b", BW_EINVAL, "name");
    url_err("shm:caf\xc3\xa9", BW_EINVAL, "name");
    url_err("shm:..", BW_EINVAL, "name");
    url_err("shm:.", BW_EINVAL, "name");
    memset(name, 'x', 201);
    name[201] = '\0';
    snprintf(url, sizeof url, "shm:%s", name);
    url_err(url, BW_EINVAL, "name");
    const char *n = seg("url");
    unlink_seg(n);
    /* Bad options, each refused before anything is made: no segment is left behind. */
    static const struct {
        const char *opts, *field;
    } bad_opts[] = {
        {"capacity=0", "capacity"},
        {"capacity=1048577", "capacity"},
        {"capacity=12x", "capacity"},
        {"capacity=-1", "capacity"},
        {"colour=blue", "colour"},             /* unknown */
        {"capacity=4&capacity=8", "capacity"}, /* given twice */
        {"capacity= 5", "capacity"},           /* the configuration text's rule: no spaces */
        {"capacity=99999999999999999999", "capacity"},
        {"lock_timeout=0", "lock_timeout"},
        {"lock_timeout=2h", "lock_timeout"},
        {"lock_timeout=5", "lock_timeout"}, /* a bare number: 5 ms or 5 s? */
        {"group=2", "group"},
        {"group=yes", "group"},
    };
    for (size_t i = 0; i < sizeof bad_opts / sizeof bad_opts[0]; i++) {
        snprintf(url, sizeof url, "shm:%s?%s", n, bad_opts[i].opts);
        url_err(url, BW_EINVAL, bad_opts[i].field);
    }
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", n);
    CHECK(access(path, F_OK) != 0);
    bw_store *bad = NULL;
    memset(&e, 0, sizeof e);
    snprintf(url, sizeof url, "shm:%s?lock_timeout=2h", n);
    CHECK_RC(bw_store_open(url, &bad, &e), BW_EINVAL);
    CHECK(strstr(e.message, "[1ns, 1h]") != NULL); /* durations as configuration text writes them */
    snprintf(url, sizeof url, "shm:%s?lock_timeout=5", n);
    CHECK_RC(bw_store_open(url, &bad, &e), BW_EINVAL);
    CHECK(strstr(e.message, "5ms or 5s") != NULL); /* and as it refuses them: a duration needs its unit */
    snprintf(url, sizeof url, "shm:%s?capacity=4&capacity=8", n);
    CHECK_RC(bw_store_open(url, &bad, &e), BW_EINVAL);
    CHECK(strstr(e.message, "twice") != NULL);
    unlink_seg(n);

    /* The longest name (200 bytes) opens. */
    memset(name, 'y', 200);
    int k = snprintf(name, 40, "bw%ld-", (long)getpid());
    name[k] = 'y';
    name[200] = '\0';
    bw_store *s = NULL;
    CHECK_OK(open_shm(name, 4, &s, &e));
    CHECK_OK(entry_put(s, "k", 5, 16, BW_STORE_NEVER, &e));
    CHECK_INT(entry_get(s, "k"), 5);
    bw_store_close(s);
    unlink_seg(name);
}

/*
 * A swept entry gives its slot back (expiry and sweeps themselves are the
 * store contract's, tests/contract/): a table of 64 holding 10 expired and 5
 * held entries takes 59 new names after a sweep, and not one more.
 */
static void test_sweep_frees_slots(void)
{
    const char *n = seg("sweep");
    unlink_seg(n);
    bw_clock *c = NULL;
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_clock_manual_new(50 * S, &c));
    CHECK_OK(open_shm(n, 64, &s, &e));
    CHECK_OK(bw_store_set_clock(s, c));
    char name[32];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "exp%d", i);
        CHECK_OK(entry_put(s, name, i, 16, 60 * S, &e));
    }
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "keep%d", i);
        CHECK_OK(entry_put(s, name, 100 + i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_OK(bw_clock_manual_set(c, 60 * S));
    int d = -1;
    CHECK_OK(bw_store_sweep(s, 100, &d, &e));
    CHECK_INT(d, 10);
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "keep%d", i);
        CHECK_INT(entry_get(s, name), 100 + i);
    }
    /* The table has room for the 59 others. */
    for (int i = 0; i < 59; i++) {
        snprintf(name, sizeof name, "new%d", i);
        CHECK_OK(entry_put(s, name, i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_RC(entry_put(s, "one-too-many", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    bw_store_close(s);
    bw_clock_free(c);
    unlink_seg(n);
}

static void test_full(void)
{
    const char *n = seg("full");
    unlink_seg(n);
    bw_clock *c = NULL;
    bw_store *s = NULL;
    bw_error e;
    char name[32], want[96];
    CHECK_OK(bw_clock_manual_new(0, &c));
    CHECK_OK(open_shm(n, 8, &s, &e));
    CHECK_OK(bw_store_set_clock(s, c));
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "n%d", i);
        CHECK_OK(entry_put(s, name, i, 16, i == 0 ? 10 * S : BW_STORE_NEVER, &e));
    }
    memset(&e, 0, sizeof e);
    CHECK_RC(entry_put(s, "n8", 8, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    snprintf(want, sizeof want, "shm store '%s' is full (capacity 8 circuits)", n);
    CHECK_STR(e.message, want);
    CHECK_INT(entry_get(s, "n8"), -2);
    /* Entries that exist still update. */
    CHECK_OK(entry_put(s, "n3", 33, 16, BW_STORE_NEVER, &e));
    CHECK_INT(entry_get(s, "n3"), 33);
    /* A DELETE makes room. */
    CHECK_OK(entry_del(s, "n3"));
    CHECK_OK(entry_put(s, "n8", 8, 16, BW_STORE_NEVER, &e));
    CHECK_RC(entry_put(s, "n9", 9, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    /* So does an expiry, without a sweep. */
    CHECK_OK(bw_clock_manual_advance(c, 10 * S));
    CHECK_OK(entry_put(s, "n9", 9, 16, BW_STORE_NEVER, &e));
    CHECK_INT(entry_get(s, "n0"), -2);
    CHECK_RC(entry_put(s, "n0", 0, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    for (int i = 1; i < 10; i++) {
        snprintf(name, sizeof name, "n%d", i);
        CHECK_INT(entry_get(s, name), i == 3 ? -2 : i);
    }
    /* Capacity 1. */
    bw_store *one = NULL;
    const char *n1 = seg("one");
    unlink_seg(n1);
    CHECK_OK(open_shm(n1, 1, &one, &e));
    CHECK_OK(entry_put(one, "x", 1, 16, BW_STORE_NEVER, &e));
    CHECK_RC(entry_put(one, "y", 2, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    CHECK_OK(entry_del(one, "x"));
    CHECK_OK(entry_put(one, "y", 2, 16, BW_STORE_NEVER, &e));
    CHECK_INT(entry_get(one, "y"), 2);
    CHECK_INT(entry_get(one, "x"), -2);
    bw_store_close(one);
    unlink_seg(n1);
    bw_store_close(s);
    bw_clock_free(c);
    unlink_seg(n);
}

static void test_collisions(void)
{
    enum { CAP = 257 };
    const char *n = seg("coll");
    unlink_seg(n);
    bw_store *s = NULL;
    bw_error e;
    char name[64];
    CHECK_OK(open_shm(n, CAP, &s, &e));
    /* A full table: every name lives somewhere along some other name's chain. */
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_OK(entry_put(s, name, i, 16 + (uint32_t)i, BW_STORE_NEVER, &e));
    }
    CHECK_RC(entry_put(s, "extra", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_INT(entry_get(s, name), i);
    }
    /* Delete every other one (tombstones in the middle of chains), then refill. */
    for (int i = 0; i < CAP; i += 2) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_OK(entry_del(s, name));
    }
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_INT(entry_get(s, name), i % 2 ? i : -2);
    }
    for (int i = 0; i < CAP; i += 2) {
        snprintf(name, sizeof name, "other-%d", i);
        CHECK_OK(entry_put(s, name, 1000 + i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_RC(entry_put(s, "extra", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_INT(entry_get(s, name), i % 2 ? i : -2);
        snprintf(name, sizeof name, "other-%d", i);
        CHECK_INT(entry_get(s, name), i % 2 ? -2 : 1000 + i);
    }
    /* Empty it completely, then it holds a full table of new names again. */
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "circuit-%d", i);
        CHECK_OK(entry_del(s, name));
        snprintf(name, sizeof name, "other-%d", i);
        CHECK_OK(entry_del(s, name));
    }
    for (int i = 0; i < CAP; i++) {
        snprintf(name, sizeof name, "third-%d", i);
        CHECK_OK(entry_put(s, name, i, 16, BW_STORE_NEVER, &e));
    }
    CHECK_RC(entry_put(s, "extra", 1, 16, BW_STORE_NEVER, &e), BW_ELIMIT);
    bw_store_close(s);
    unlink_seg(n);
}

static void test_mismatch(void)
{
    const char *n = seg("mismatch");
    unlink_seg(n);
    bw_store *s = NULL, *s2 = NULL;
    bw_error e;
    CHECK_OK(open_shm(n, 16, &s, &e));
    CHECK_OK(entry_put(s, "k", 1, 16, BW_STORE_NEVER, &e));
    memset(&e, 0, sizeof e);
    CHECK_RC(open_shm(n, 32, &s2, &e), BW_ESTATE);
    CHECK_STR(e.field, "capacity");
    CHECK(strstr(e.message, "capacity 16") != NULL);
    CHECK(s2 == NULL);
    /* The default capacity (1024) does not match either. */
    CHECK_RC(open_shm(n, 0, &s2, &e), BW_ESTATE);
    bw_store_close(s);

    /* Another layout version: bump the version field (after the 8-byte magic). */
    char path[128];
    snprintf(path, sizeof path, "/%s", n);
    int fd = shm_open(path, O_RDWR, 0);
    CHECK(fd >= 0);
    if (fd >= 0) {
        unsigned char *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        CHECK(h != MAP_FAILED);
        if (h != MAP_FAILED) {
            uint32_t v;
            memcpy(&v, h + 8, 4);
            v += 1;
            memcpy(h + 8, &v, 4);
            memset(&e, 0, sizeof e);
            CHECK_RC(open_shm(n, 16, &s2, &e), BW_ESTATE);
            CHECK_STR(e.field, "version");
            CHECK(strstr(e.message, "layout version") != NULL);
            /* Not a breakwater segment at all. */
            memset(h, 0x11, 8);
            CHECK_RC(open_shm(n, 16, &s2, &e), BW_ESTATE);
            CHECK_STR(e.field, "magic");
            munmap(h, 4096);
        }
    }
    unlink_seg(n);
}

/* ---- ownership ---- */

#define NOBODY 65534

/* The mode bits of /dev/shm/n, or -1. */
static int seg_mode(const char *n)
{
    char path[300];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", n);
    return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static void seg_chmod(const char *n, mode_t mode)
{
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", n);
    CHECK_INT(chmod(path, mode), 0);
}

/* Open shm:n + opts: its status, and its message in msg. */
static int try_open(const char *n, const char *opts, char *msg, size_t len)
{
    char url[320];
    bw_store *s = NULL;
    bw_error e;
    memset(&e, 0, sizeof e);
    snprintf(url, sizeof url, "shm:%s%s", n, opts);
    int rc = bw_store_open(url, &s, &e);
    snprintf(msg, len, "%s", e.message);
    if (rc == BW_OK)
        bw_store_close(s);
    else if (strcmp(e.field, "name") != 0)
        H_FAIL("%s: field '%s', want 'name' (%s)", url, e.field, e.message);
    return rc;
}

#define CHECK_HAS(msg, part)                                                                                           \
    do {                                                                                                               \
        if (!strstr((msg), (part)))                                                                                    \
            H_FAIL("message '%s' lacks '%s'", (msg), (part));                                                          \
    } while (0)

/* Modes: made 0600, or 0660 with ?group=1, whatever the umask; an existing one that others may open refused. */
static void test_modes(void)
{
    const char *n = seg("modes"), *g = seg("modes-group");
    char msg[256], want[300];
    unlink_seg(n);
    unlink_seg(g);
    bw_store *s = NULL;
    bw_error e;
    mode_t old = umask(0);
    CHECK_OK(open_shm(n, 4, &s, &e));
    bw_store_close(s);
    CHECK_INT(seg_mode(n), 0600);
    umask(077); /* would take the group's bits off */
    CHECK_INT(try_open(g, "?capacity=4&group=1", msg, sizeof msg), BW_OK);
    umask(old);
    CHECK_INT(seg_mode(g), 0660);
    /* Its own maker, with ?group=1 again, uses it; without, it is refused: its group may open it. */
    CHECK_INT(try_open(g, "?capacity=4&group=1", msg, sizeof msg), BW_OK);
    CHECK_INT(try_open(g, "?capacity=4", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want,
             "shm segment '%s' has mode 0660: its group may open it, refused; remove it (rm "
             "/dev/shm/%s), or share it with its group: ?group=1",
             g, g);
    CHECK_STR(msg, want);
    /* A segment any user may open (another user's 0666, made first: here the same user's) is refused, group or not. */
    seg_chmod(n, 0666);
    CHECK_INT(try_open(n, "?capacity=4", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want,
             "shm segment '%s' has mode 0666: any user may open it, refused; remove it (rm "
             "/dev/shm/%s)",
             n, n);
    CHECK_STR(msg, want);
    CHECK_INT(try_open(n, "?capacity=4&group=1", msg, sizeof msg), BW_ESTATE);
    CHECK_HAS(msg, "mode 0666");
    seg_chmod(n, 0604);
    CHECK_INT(try_open(n, "?capacity=4&group=1", msg, sizeof msg), BW_ESTATE);
    seg_chmod(n, 0640); /* group read only: still the group's to open */
    CHECK_INT(try_open(n, "?capacity=4", msg, sizeof msg), BW_ESTATE);
    /* Back to 0600: used, with or without ?group=1. */
    seg_chmod(n, 0600);
    CHECK_INT(try_open(n, "?capacity=4", msg, sizeof msg), BW_OK);
    CHECK_INT(try_open(n, "?capacity=4&group=1", msg, sizeof msg), BW_OK);
    CHECK_INT(seg_mode(n), 0600);

    /* A symbolic link at /dev/shm/NAME is refused, not followed. */
    const char *l = seg("modes-link");
    char target[300], link[300];
    snprintf(target, sizeof target, "/dev/shm/%s", n);
    snprintf(link, sizeof link, "/dev/shm/%s", l);
    unlink(link);
    CHECK_INT(symlink(target, link), 0);
    CHECK_INT(try_open(l, "?capacity=4", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want, "shm segment '%s' is a symbolic link: refused; remove it (rm /dev/shm/%s)", l, l);
    CHECK_STR(msg, want);
    unlink(link);
    unlink_seg(n);
    unlink_seg(g);
}

/* Run open of shm:n + opts in a child that became uid (and gid): its status (or 100 + a setup failure). */
static int open_as(uid_t uid, gid_t gid, const char *n, const char *opts)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
            _exit(101);
        char msg[256];
        int rc = try_open(n, opts, msg, sizeof msg);
        _exit(rc == BW_OK ? 0 : rc == BW_ESTATE && strstr(msg, "refused") ? 7 : 102);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 103;
    return WEXITSTATUS(st);
}

/* Another user's segment: refused (needs root, to make one and to become another user). */
static void test_foreign_owner(void)
{
    if (geteuid() != 0) {
        H_SKIP("needs root, to make the segments of another user (fchown, setuid)");
        return;
    }
    const char *n = seg("foreign");
    char msg[256], want[300], path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", n);
    unlink_seg(n);
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(open_shm(n, 4, &s, &e));
    bw_store_close(s);
    /* Another user made it first, mode 0600: root may open it, and refuses it. */
    CHECK_INT(chown(path, NOBODY, NOBODY), 0);
    CHECK_INT(try_open(n, "?capacity=4", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want,
             "shm segment '%s' belongs to uid %d, not this user (uid 0): refused; remove it (rm /dev/shm/%s, as its "
             "owner or root) or use another name",
             n, NOBODY, n);
    CHECK_STR(msg, want);
    /* ... also with ?group=1, its group not being this process's. */
    CHECK_INT(try_open(n, "?capacity=4&group=1", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want,
             "shm segment '%s' belongs to uid %d, gid %d, neither this user (uid 0) nor its group (gid %lu): "
             "refused; remove it (rm /dev/shm/%s) or use another name",
             n, NOBODY, NOBODY, (unsigned long)getegid(), n);
    CHECK_STR(msg, want);
    /* Mode 0666, as the attacker made it: refused too (and before, shared). */
    CHECK_INT(chmod(path, 0666), 0);
    CHECK_INT(try_open(n, "?capacity=4", msg, sizeof msg), BW_ESTATE);
    CHECK_HAS(msg, "belongs to uid 65534");
    /* Its group is this process's, mode 0660: shared with ?group=1 only. */
    CHECK_INT(chown(path, NOBODY, getegid()), 0);
    CHECK_INT(chmod(path, 0660), 0);
    CHECK_INT(try_open(n, "?capacity=4", msg, sizeof msg), BW_ESTATE);
    CHECK_INT(try_open(n, "?capacity=4&group=1", msg, sizeof msg), BW_OK);
    CHECK_INT(chmod(path, 0666), 0);
    CHECK_INT(try_open(n, "?capacity=4&group=1", msg, sizeof msg), BW_ESTATE);

    /* The other way round: root's segment seen by another user. 0600: not theirs to open; 0666: not theirs to use. */
    CHECK_INT(chown(path, 0, 0), 0);
    CHECK_INT(chmod(path, 0600), 0);
    CHECK_INT(open_as(NOBODY, NOBODY, n, "?capacity=4"), 7);
    CHECK_INT(chmod(path, 0666), 0);
    CHECK_INT(open_as(NOBODY, NOBODY, n, "?capacity=4"), 7);
    /* Shared with a group: root's 0660 segment of group nogroup, used by nobody with ?group=1. */
    CHECK_INT(chown(path, 0, NOBODY), 0);
    CHECK_INT(chmod(path, 0660), 0);
    CHECK_INT(open_as(NOBODY, NOBODY, n, "?capacity=4&group=1"), 0);
    CHECK_INT(open_as(NOBODY, NOBODY, n, "?capacity=4"), 7);
    unlink_seg(n);
    /* A segment another user makes with ?group=1 is 0660 whatever its umask, and its own. */
    mode_t old = umask(077);
    CHECK_INT(open_as(NOBODY, NOBODY, n, "?capacity=4&group=1"), 0);
    umask(old);
    struct stat st;
    CHECK_INT(stat(path, &st), 0);
    CHECK_INT(st.st_uid, NOBODY);
    CHECK_INT(st.st_mode & 0777, 0660);
    unlink_seg(n);
}

int main(int argc, char **argv)
{
    H_ARGS(argc, argv);
    RUN(test_open_reopen);
    RUN(test_url_errors);
    RUN(test_sweep_frees_slots);
    RUN(test_full);
    RUN(test_collisions);
    RUN(test_mismatch);
    RUN(test_modes);
    RUN_ALONE(test_foreign_owner); /* as root: its own ctest entry, test_shm_foreign_owner */
    return TEST_SUMMARY();
}
