/*
 * test_secrets.c — a store URL's secrets never reach a message (store.h,
 * "Secrets"): bw_store_url_redact on a table of URLs, and every error path
 * of bw_store_open (malformed, unknown scheme, an unknown option, a
 * connection refused, what libpq quotes of a connection string) with a URL
 * that carries a secret.
 *   test_secrets              no server: every path that needs none
 *   test_secrets redis        under tests/support/with_redis.sh: AUTH refused
 *   test_secrets postgresql   under tests/support/with_postgres.sh: a wrong
 *                             password, a missing database
 * A secret is written with letters no message uses (Zq7x...), and checked
 * by its 4-byte pieces: no message may hold any of them.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "harness.h"
#include "timeutil.h"

/* Whether s holds a 4-byte piece of secret (a piece not crossing one of the URL delimiters listed). */
static const char *leaked(const char *s, const char *secret)
{
    static char piece[5];
    size_t n = strlen(secret);
    for (size_t i = 0; i + 4 <= n; i++) {
        memcpy(piece, secret + i, 4);
        piece[4] = 0;
        if (strpbrk(piece, "/?#@:&=,;' %\\") == NULL && strstr(s, piece))
            return piece;
    }
    return NULL;
}

/* Open url (which must fail with want), and look for the secret in the error. */
static void open_hides(const char *url, const char *secret, int want)
{
    bw_store *s = NULL;
    bw_error e;
    memset(&e, 0, sizeof e);
    int rc = bw_store_open(url, &s, &e);
    if (s) {
        H_FAIL("%s opened", url);
        bw_store_close(s);
        return;
    }
    if (want && rc != want)
        H_FAIL("%s: got %d (%s: %s), want %d", url, rc, bw_strerror(rc), e.message, want);
    const char *p;
    if ((p = leaked(e.message, secret)) != NULL)
        H_FAIL("%s: the message shows '%s': %s", url, p, e.message);
    if ((p = leaked(e.field, secret)) != NULL)
        H_FAIL("%s: the field shows '%s': %s", url, p, e.field);
    if (e.message[0] == 0)
        H_FAIL("%s: no message", url);
}

static void test_redact_table(void)
{
    enum {
        PW = BW_STORE_URL_PASSWORD,
        PORT = BW_STORE_URL_PORT,
        KEY = BW_STORE_URL_KEYED,
        WORD = BW_STORE_URL_WORD,
        ALL = BW_STORE_URL_ALL
    };
    static const struct {
        const char *url, *want;
        unsigned masked; /* what bw_store_url_redact says it masked */
    } t[] = {
        /* userinfo */
        {"redis://:Zq7xPw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0", PW},
        {"redis://user:Zq7xPw@host", "redis://user:***@host", PW},
        {"redis://user@host", "redis://user@host", 0},
        {"redis://u:Zq7x@Pw@host:1", "redis://u:***@host:1", PW}, /* the last '@' ends the userinfo */
        {"redis://u:Zq7x/Pw@host", "redis://u:***@host", PW},
        {"redis://u:Zq7x?Pw@host?pool=2", "redis://u:***@host?pool=2", PW},
        {"postgresql://app:Zq7xPw@db.internal:5432/app?sslmode=require",
         "postgresql://app:***@db.internal:5432/app?sslmode=require", PW},
        {"postgres://app@db/app", "postgres://app@db/app", 0},
        {"redis:u:Zq7xPw@127.0.0.1", "redis:u:***@127.0.0.1", PW}, /* the '//' missing */
        /* a port that is not a number: a password without its '@' */
        {"redis://:Zq7xPw", "redis://:***", PORT},
        {"redis://host:Zq7xPw/0", "redis://host:***/0", PORT},
        {"redis://[::1]:6379", "redis://[::1]:6379", 0},
        {"redis://[::1]:Zq7x", "redis://[::1]:***", PORT},
        {"postgresql://h1:5432,h2:5433/app", "postgresql://h1:5432,h2:5433/app", 0},
        /* options */
        {"redis://host?password=Zq7xPw&pool=2", "redis://host?password=***&pool=2", KEY},
        {"postgresql://h/app?sslpassword=Zq7x&sslmode=verify-full",
         "postgresql://h/app?sslpassword=***&sslmode=verify-full", KEY},
        {"sqlite:/tmp/c.db?PASSWORD=Zq7x", "sqlite:/tmp/c.db?PASSWORD=***", KEY},
        {"redis://host?auth_token=Zq7x&pool=2", "redis://host?auth_token=***&pool=2", KEY},
        {"redis://host?password=Zq7x&Pw&pool=2", "redis://host?password=***&pool=2",
         KEY | WORD},                                          /* a '&' in the value */
        {"memory:?pool=1&Zq7xPw", "memory:?pool=1&***", WORD}, /* an option without '=' */
        {"sqlite://u:Zq7xsecret=1?password=x&pool=2", "sqlite://u:***?password=***&pool=2",
         PORT | KEY},                                                                        /* no key in "//" */
        {"postgresql:host=db Zq7xPw dbname=app", "postgresql:host=db *** dbname=app", WORD}, /* a word without '=' */
        /* libpq keyword strings */
        {"postgresql:host=db password=Zq7xPw dbname=app", "postgresql:host=db password=*** dbname=app", KEY},
        {"postgresql:password=Zq7xPw", "postgresql:password=***", KEY},
        {"postgresql:host=db password = Zq7xPw", "postgresql:host=db password = ***", KEY},
        {"postgresql:host=db password='Zq7x Pw\\' x' dbname=app", "postgresql:host=db password=*** dbname=app",
         KEY | WORD},
        {"postgresql:host=db password='Zq7x Pw", "postgresql:host=db password=***", KEY | WORD}, /* unterminated */
        {"postgresql:host=db password=Zq7x Pw dbname=app", "postgresql:host=db password=*** dbname=app", KEY | WORD},
        /* nothing to mask */
        {"memory:", "memory:", 0},
        {"shm:breakwater-1000?capacity=64", "shm:breakwater-1000?capacity=64", 0},
        {"sqlite:/home/me/My Documents/c.db", "sqlite:/home/me/My Documents/c.db", 0},
        {"redis://127.0.0.1:6379/2?prefix=app:&timeout=250ms", "redis://127.0.0.1:6379/2?prefix=app:&timeout=250ms", 0},
        /* not a URL: nothing of it is shown */
        {"Zq7xPw", "***", ALL},
        {":Zq7xPw@host", "***", ALL},
        {"Zq7 x:Pw", "***", ALL},
        {"", "", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char buf[256];
        unsigned masked = 0xdead;
        int n = bw_store_url_redact(t[i].url, buf, sizeof buf, &masked);
        CHECK_STR(buf, t[i].want);
        if (masked != t[i].masked)
            H_FAIL("%s: masked %#x, want %#x", t[i].url, masked, t[i].masked);
        CHECK_INT(n, strlen(t[i].want));
        CHECK(leaked(buf, "Zq7xPw") == NULL);
        /* The length alone, and a buffer too small: cut after the masking. */
        CHECK_INT(bw_store_url_redact(t[i].url, NULL, 0, NULL), strlen(t[i].want));
        char small[12];
        CHECK_INT(bw_store_url_redact(t[i].url, small, sizeof small, NULL), strlen(t[i].want));
        CHECK(strncmp(small, t[i].want, sizeof small - 1) == 0 && strlen(small) < sizeof small);
        /* The documented bound: 3 * strlen(url) + 1 bytes hold the whole. */
        CHECK(strlen(t[i].want) <= 3 * strlen(t[i].url));
    }
    char buf[8];
    CHECK_INT(bw_store_url_redact(NULL, buf, sizeof buf, NULL), BW_EINVAL);
    CHECK_INT(bw_store_url_redact("memory:", NULL, 4, NULL), BW_EINVAL);
    /* Many secrets: past what one scan keeps, the rest is masked whole. */
    char many[4096] = "sqlite:/x.db?";
    for (int i = 0; i < 60; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%spassword%d=Zq7x%02d", i ? "&" : "", i, i);
    char out[8192];
    bw_store_url_redact(many, out, sizeof out, NULL);
    CHECK(strstr(out, "Zq7x") == NULL);
    CHECK(strncmp(out, "sqlite:/x.db?password0=***&", 27) == 0);
}

/* Every error path that needs no server. */
static void test_open_errors(void)
{
    const char *sec = "Zq7xPw9k";
    /* Malformed before any backend: no ':', no scheme, a scheme that is not one, options. */
    open_hides("Zq7xPw9k", sec, BW_EINVAL);
    open_hides(":Zq7xPw9k@host", sec, BW_EINVAL);
    open_hides("Zq7xPw9k is not a URL:", sec, BW_EINVAL);
    open_hides("Zq7xPw9kZq7xPw9kZq7xPw9k:x", sec, BW_EINVAL);
    open_hides("bogus://u:Zq7xPw9k@host", sec, BW_EINVAL);
    open_hides("memory:?password=Zq7xPw9k", sec, BW_EINVAL);
    open_hides("memory:?pool=1&Zq7xPw9k", sec, BW_EINVAL);
    open_hides("memory:?Zq7xPw9k%2F=1", sec, BW_EINVAL);
    open_hides("shm:bw-secrets-test?password=Zq7xPw9k", sec, BW_EINVAL);
    /* Without the component, the URL is refused as a scheme this build lacks: its message too. */
    open_hides("sqlite:/proc/no/such/dir/c.db?password=Zq7xPw9k", sec,
               (bw_components() & BW_COMPONENT_SQLITE) ? BW_EINVAL : BW_ESTATE);
    open_hides("rediss://u:Zq7xPw9k@127.0.0.1:6380", sec, BW_ESTATE);
    if (bw_components() & BW_COMPONENT_REDIS) {
        /* The redis: parser: the password in every place a malformed URL may put it. */
        open_hides("redis://:Zq7xPw9k", sec, BW_EINVAL);
        open_hides("redis://u:Zq7x/Pw9k@127.0.0.1", "Zq7x/Pw9k", BW_EINVAL);
        open_hides("redis://h:1/Zq7xPw9k@x", sec, BW_EINVAL);
        open_hides("redis:Zq7xPw9k@127.0.0.1", sec, BW_EINVAL);
        open_hides("redis://u:Zq7x Pw9k@127.0.0.1", "Zq7x Pw9k", BW_EINVAL);
        open_hides("redis://u@Zq7x%Pw9k", "Zq7x%Pw9k", BW_EINVAL);
        open_hides("redis://:Zq7xPw9k@127.0.0.1:1?password=Zq7xPw9k", sec, BW_EINVAL);
        open_hides("redis://:Zq7xPw9k@127.0.0.1:1?bogus=1", sec, BW_EINVAL);
        open_hides("redis://:Zq7xPw9k@127.0.0.1:1?timeout=Zq7xPw9k", sec, BW_EINVAL); /* a value quoted: scrubbed */
        /* A connection refused (nobody on port 1). */
        open_hides("redis://:Zq7xPw9k@127.0.0.1:1?connect_timeout=200ms", sec, BW_ESYS);
        open_hides("redis://user:Zq7xPw9k@127.0.0.1:1/3?connect_timeout=200ms", sec, BW_ESYS);
    }
    if (bw_components() & BW_COMPONENT_POSTGRES) {
        /* What libpq quotes of a connection string it refuses, or of one it reads otherwise than meant. */
        open_hides("postgresql://u:Zq7x%zzPw9k@127.0.0.1:1/db", "Zq7x%zzPw9k", BW_EINVAL);
        open_hides("postgresql://u:Zq7xPw9k@[::1", sec, BW_EINVAL);
        open_hides("postgresql://u:Zq7x%00Pw9k@127.0.0.1:1/db", "Zq7x%00Pw9k", BW_EINVAL);
        open_hides("postgresql:host=127.0.0.1 password=Zq7x Pw9k", "Zq7x Pw9k", BW_EINVAL);
        open_hides("postgresql:host=127.0.0.1 password='Zq7x Pw9k", "Zq7x Pw9k", BW_EINVAL);
        open_hides("postgresql://u:Zq7x/Pw9k@127.0.0.1:1/db?connect_timeout=200ms", "Zq7x/Pw9k", 0);
        /* No credentials for libpq (a '/' before the '@'): the port "Zq7x%40Pw9k", quoted decoded ("Zq7x@Pw9k"). */
        open_hides("postgresql://u:Zq7x%40Pw9k/x@127.0.0.1:1/db?connect_timeout=200ms", "Zq7x%40Pw9k", 0);
        open_hides("postgresql://u:Zq7xPw9k@127.0.0.1:1/db?bogus=1", sec, BW_EINVAL);
        open_hides("postgresql://u:Zq7xPw9k@127.0.0.1:1/db?sslmode=bogus&connect_timeout=200ms", sec, 0);
        /* A connection refused. */
        open_hides("postgresql://u:Zq7xPw9k@127.0.0.1:1/db?connect_timeout=200ms", sec, BW_ESYS);
        open_hides("postgresql:host=127.0.0.1 port=1 user=u password=Zq7xPw9k connect_timeout=1", sec, BW_ESYS);
    }
}

/* Under with_redis.sh: the server refuses the password (it has none). */
static void test_redis_live(void)
{
    const char *port = getenv("BW_TEST_PORT");
    CHECK(port != NULL);
    if (!port)
        return;
    char u[200];
    snprintf(u, sizeof u, "redis://:Zq7xPw9k@127.0.0.1:%s", port);
    open_hides(u, "Zq7xPw9k", BW_ESYS);
    snprintf(u, sizeof u, "redis://someone:Zq7xPw9k@127.0.0.1:%s/5", port);
    open_hides(u, "Zq7xPw9k", BW_ESYS);
    snprintf(u, sizeof u, "redis://127.0.0.1:%s/100000?password=Zq7xPw9k", port);
    open_hides(u, "Zq7xPw9k", BW_EINVAL);
}

/* Under with_postgres.sh: the role bwpass (password bwsecret) with another password, and a missing database. */
static void test_postgres_live(void)
{
    const char *port = getenv("BW_TEST_PORT");
    CHECK(port != NULL);
    if (!port)
        return;
    char u[300];
    snprintf(u, sizeof u, "postgresql://bwpass:Zq7xPw9k@127.0.0.1:%s/postgres", port);
    open_hides(u, "Zq7xPw9k", BW_ESYS);
    snprintf(u, sizeof u, "postgresql:host=127.0.0.1 port=%s user=bwpass password='Zq7x Pw9k' dbname=postgres", port);
    open_hides(u, "Zq7x Pw9k", BW_ESYS);
    snprintf(u, sizeof u, "postgresql://bwpass:bwsecret@127.0.0.1:%s/no_such_db_Zq7x", port);
    open_hides(u, "bwsecret", BW_ESYS);
    /* A password of common words: its pieces are masked where they are words, not inside "password". */
    snprintf(u, sizeof u, "postgresql:host=127.0.0.1 port=%s user=bwpass password='pass word' dbname=postgres", port);
    bw_store *s = NULL;
    bw_error e;
    CHECK_RC(bw_store_open(u, &s, &e), BW_ESYS);
    if (!strstr(e.message, "password authentication failed for user \"bwpass\""))
        H_FAIL("'pass word' refused: %s", e.message);
    bw_store_close(s);
}

static bw_store_verdict keep(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)now;
    (void)cur;
    (void)next;
    return BW_STORE_KEEP;
}

/*
 * Under with_postgres.sh: the errors of an open store's later calls (bw_store_update, bw_store_read_circuit:
 * breakwater's own update, bw_store_scan, bw_store_sweep) are scrubbed as bw_store_open's are. The
 * password "bwsecret@Zq7xPw9k" holds an '@' that libpq takes for the userinfo's end (the scan masks up to the
 * last '@'): libpq connects with the password "bwsecret" to the hosts "Zq7xPw9k@127.0.0.1" (no such name) and
 * 127.0.0.1:PORT, the server. Killed, the server's connection breaks, and every reconnect's message (libpq's,
 * naming both hosts) quotes "Zq7xPw9k", a piece of the password, until the store scrubs it.
 */
static void test_postgres_after_open(void)
{
    const char *port = getenv("BW_TEST_PORT"), *sig = getenv("BW_TEST_SIGNAL"), *restart = getenv("BW_TEST_RESTART");
    CHECK(port && sig && restart);
    if (!port || !sig || !restart)
        return;
    char u[300], cmd[1200];
    snprintf(u, sizeof u,
             "postgresql://bwpass:bwsecret@Zq7xPw9k@127.0.0.1,127.0.0.1:%s/postgres"
             "?connect_timeout=2s&timeout=500ms&table=bw_secrets",
             port);
    bw_store *s = NULL;
    bw_error e;
    if (bw_store_open(u, &s, &e) != BW_OK) {
        H_FAIL("the store with a password holding '@' did not open: %s", e.message);
        return;
    }
    CHECK_OK(bw_store_update(s, "sec", keep, NULL, &e));
    snprintf(cmd, sizeof cmd, "sh '%s' KILL", sig);
    CHECK(system(cmd) == 0);
    int connecting = 0, failed = 0;
    for (int i = 0; i < 40 && connecting < 3; i++) { /* a reconnect's message (the first failure is the broken one) */
        memset(&e, 0, sizeof e);
        int rc = bw_store_update(s, "sec", keep, NULL, &e);
        if (rc == BW_OK)
            continue;
        failed++;
        const char *p = leaked(e.message, "Zq7xPw9k");
        if (p)
            H_FAIL("update after open: the message shows '%s': %s", p, e.message);
        connecting += strstr(e.message, "127.0.0.1") != NULL;
        bw_store_circuit x; /* an update by breakwater itself (the one breakers make) */
        memset(&e, 0, sizeof e);
        if (bw_store_read_circuit(s, "sec", &x, &e) != BW_OK && (p = leaked(e.message, "Zq7xPw9k")) != NULL)
            H_FAIL("reading a circuit after open: the message shows '%s': %s", p, e.message);
        bw_store_cursor cur;
        memset(&cur, 0, sizeof cur);
        bw_store_key keys[4];
        int n, del;
        memset(&e, 0, sizeof e);
        if (bw_store_scan(s, &cur, keys, 4, &n, &e) != BW_OK && (p = leaked(e.message, "Zq7xPw9k")) != NULL)
            H_FAIL("scan after open: the message shows '%s': %s", p, e.message);
        memset(&e, 0, sizeof e);
        if (bw_store_sweep(s, 10, &del, &e) != BW_OK && (p = leaked(e.message, "Zq7xPw9k")) != NULL)
            H_FAIL("sweep after open: the message shows '%s': %s", p, e.message);
        sleep_ms(100);
    }
    if (!connecting) /* else this test saw no message of a reconnect: it checked nothing */
        H_FAIL("no reconnect's message naming the hosts in %d failed calls", failed);
    bw_store_close(s);
    snprintf(cmd, sizeof cmd, "sh '%s' >/dev/null", restart);
    CHECK(system(cmd) == 0);
}

int main(int argc, char **argv)
{
    const char *live = argc > 1 ? argv[1] : "";
    if (strcmp(live, "redis") == 0) {
        RUN(test_redis_live);
    } else if (strcmp(live, "postgresql") == 0) {
        RUN(test_postgres_live);
        RUN(test_postgres_after_open);
    } else {
        RUN(test_redact_table);
        RUN(test_open_errors);
    }
    return TEST_SUMMARY();
}
