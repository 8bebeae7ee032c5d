/*
 * test_store_contract.c — the store primitive contract (store.h), one suite
 * for every store (tests/contract/): run as `test_store_contract URL`; ctest
 * runs it once per URL a backend registered (bw_add_backend's TEST_URL), so a
 * new store gets the whole contract by adding its URL.
 * - one script of updates (put, keep, delete, lengths, lifetimes, bad verdicts
 *   and lengths, clock advances, sweeps, store keys "NAME" and "NAME KEY" up
 *   to 511 bytes, names SQL or a shell would choke on) observes the same on
 *   this store as on memory:, the reference, step by step (support/script.h);
 * - expiry to the nanosecond and sweeps bounded by max;
 * - threads incrementing one counter lose no update and never see a torn one;
 * - the optional read and read_many see what an update sees, consistent as of
 *   one instant (a store without them answers BW_ESTATE: then nothing else is
 *   asked of them).
 * What a store may do its own way is found out, not looked up by scheme: it
 * may sweep by itself (a probe finds out; its sweeps then may find fewer
 * expired entries than memory's), and it may lack the optional reads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "clockfix.h"
#include "entries.h"
#include "script.h"
#include "store/front.h"
#include "store_url.h"

#define S BW_NS_PER_S

static int self_sweeps; /* the store deletes expired entries by itself (probe_self_sweeps) */

/* ---- helpers ---- */

/* A fresh store on the fixture's clock (store_url.h). */
static bw_store *open_store(void)
{
    return store_open_fresh(clk);
}

/* Write value into key's 64-byte entry. */
static void put(bw_store *s, const char *key, int64_t value, int64_t expires_at)
{
    CHECK_OK(entry_put(s, key, value, 64, expires_at, NULL));
}

/* The store has the optional lock-free read: a quiet store answers it at once (else BW_ESTATE). */
static int has_read(bw_store *s)
{
    bw_store_entry e;
    int found;
    int64_t now;
    return bw__store_try_read(s, "probe-read", &now, &e, &found) != BW_ESTATE;
}

/*
 * Whether the store deletes expired entries by itself: an entry expired two
 * days ago, an update of another key (sqlite: runs its sweep when due), then
 * a sweep of one finds nothing to delete.
 */
static int probe_self_sweeps(void)
{
    clock_fresh(SC_START);
    bw_store *s = open_store();
    put(s, "probe", 1, clock_now() + 1);
    pump(2 * 86400 * S);
    CHECK_INT(entry_get(s, "probe-other"), -2);
    int deleted = -1;
    CHECK_OK(bw_store_sweep(s, 1, &deleted, NULL));
    CHECK(deleted == 0 || deleted == 1);
    bw_store_close(s);
    return deleted == 0;
}

/*
 * Sweep in batches of max until a batch deletes nothing, `expired` entries
 * being expired: each batch takes min(max, what is left). A store that sweeps
 * by itself may have taken some already: then the batches are full ones, then
 * one smaller, then nothing, and add up to no more than `expired`.
 */
static void check_sweeps(bw_store *s, int max, int expired)
{
    int total = 0, d = -1, short_seen = 0;
    for (int i = 0; i < expired / max + 3 && d != 0; i++) {
        CHECK_OK(bw_store_sweep(s, max, &d, NULL));
        if (!self_sweeps) {
            int left = expired - total;
            CHECK_INT(d, left < max ? left : max);
        } else {
            CHECK(d >= 0 && d <= max);
            CHECK(!short_seen || d == 0); /* after a short batch, nothing */
            short_seen |= d < max;
        }
        total += d;
    }
    CHECK_INT(d, 0);
    if (self_sweeps)
        CHECK(total <= expired);
    else
        CHECK_INT(total, expired);
}

/* ---- the store's name ---- */

static void test_scheme(void)
{
    clock_fresh(SC_START);
    bw_store *s = open_store();
    CHECK_STR(bw_store_scheme(s), store_url_scheme());
    bw_store_close(s);
}

/* ---- one script, the same observations as memory: ---- */

static void test_script_same_as_memory(void)
{
    /* Store keys at their limits: 255-byte names and keys, 511 bytes in all. */
    char name255[256], name256[257], longest[512], prefix510[511], key256[513];
    memset(name255, 'n', 255);
    name255[255] = 0;
    memset(name256, 'n', 256);
    name256[256] = 0;
    memset(longest, 'n', 255);
    longest[255] = ' ';
    memset(longest + 256, 'k', 255);
    longest[511] = 0;
    memcpy(prefix510, longest, 510);
    prefix510[510] = 0;
    memcpy(key256, longest, 511);
    key256[511] = 'k'; /* a 256-byte key */
    key256[512] = 0;
    const sc_step steps[] = {
        /* Absent, put, seen, overwritten; the store's clock is the one it was given. */
        SC_KEEP_IS("a", "rc=ok calls=1 now=0s saw=0"),
        SC_PUT("a", 10 * S, 5, 1),
        SC_KEEP_IS("a", "saw=1 exp=10s len=5 data=f1"),
        SC_ADVANCE(1 * S),
        SC_PUT("a", SC_NEVER, 16, 2),
        SC_KEEP_IS("a", "now=1s saw=1 exp=never len=16 data=f2"),
        SC_PUT("a", 10 * S, 1024, 3), /* the longest entry */
        SC_KEEP_IS("a", "saw=1 exp=11s len=1024 data=f3"),
        SC_PUT("a", 10 * S, 2, 4), /* shorter: no leftover bytes */
        SC_KEEP_IS("a", "len=2 data=f4"),
        /* Lifetimes: alive 1 ns before expires_at, absent at it. */
        SC_ADVANCE(5 * S),
        SC_KEEP_IS("a", "saw=1"),
        SC_ADVANCE(5 * S - 1),
        SC_KEEP_IS("a", "now=10999999999ns saw=1"),
        SC_ADVANCE(1),
        SC_KEEP_IS("a", "now=11s saw=0"),
        /* Delete; delete what is absent; delete what expired (it is seen as absent). */
        SC_PUT("a", 10 * S, 3, 5),
        SC_DEL_IS("a", "saw=1 data=f5"),
        SC_KEEP_IS("a", "saw=0"),
        SC_DEL_IS("a", "rc=ok saw=0"),
        SC_PUT("b", 2 * S, 40, 6),
        SC_ADVANCE(3 * S),
        SC_DEL_IS("b", "saw=0"),
        SC_KEEP_IS("b", "saw=0"),
        /* PUT over an expired entry; an entry expired when written; expires_at one ns ahead. */
        SC_PUT("c", 2 * S, 40, 7),
        SC_ADVANCE(3 * S),
        SC_PUT_IS("c", SC_NEVER, 17, 8, "saw=0"),
        SC_KEEP_IS("c", "saw=1 exp=never len=17 data=f8"),
        SC_PUT("c", -1, 16, 9),
        SC_KEEP_IS("c", "saw=0"),
        SC_PUT("c", 0, 16, 10),
        SC_KEEP_IS("c", "saw=0"),
        SC_PUT("c", 1, 1, 11),
        SC_KEEP_IS("c", "saw=1 len=1 data=f11"),
        /* Bad lengths and verdicts change nothing, and say which. */
        SC_PUT("d", SC_NEVER, 7, 12),
        SC_PUT_IS("d", SC_NEVER, 0, 13, "rc=einval field=len calls=1"),
        SC_PUT_IS("d", SC_NEVER, 1025, 14, "rc=einval field=len"),
        SC_VERDICT_IS("d", 7, "rc=einval field=verdict"),
        SC_VERDICT_IS("d", -1, "rc=einval field=verdict"),
        SC_KEEP_IS("d", "rc=ok saw=1 len=7 data=f12"),
        SC_PUT_IS("e", SC_NEVER, 0, 15, "rc=einval field=len saw=0"),
        SC_KEEP_IS("e", "saw=0"),
        /* A held entry outlives everything. */
        SC_ADVANCE(400 * 86400 * S),
        SC_KEEP_IS("d", "saw=1 exp=never data=f12"),
        /* Keys are stored verbatim: names SQL, a shell or printf would choke on. */
        SC_PUT("o'brien;--", SC_NEVER, 3, 20),
        SC_PUT("50%_off", SC_NEVER, 3, 21),
        SC_PUT("a\"b", SC_NEVER, 3, 22),
        SC_PUT("?1:$x", SC_NEVER, 3, 23),
        SC_PUT("bw_circuits", SC_NEVER, 3, 24),
        SC_PUT("a';DROP_TABLE_bw_circuits;--", SC_NEVER, 3, 25),
        SC_PUT("%s%n%%", SC_NEVER, 3, 26),
        SC_PUT("\\", SC_NEVER, 3, 27),
        SC_PUT("*", SC_NEVER, 3, 28),
        SC_PUT("a_", SC_NEVER, 3, 29),
        SC_PUT("o'b;--\"%", SC_NEVER, 2, 34),
        SC_KEEP_IS("o'brien;--", "data=f20"),
        SC_KEEP_IS("50%_off", "data=f21"),
        SC_KEEP_IS("a\"b", "data=f22"),
        SC_KEEP_IS("?1:$x", "data=f23"),
        SC_KEEP_IS("bw_circuits", "data=f24"),
        SC_KEEP_IS("a';DROP_TABLE_bw_circuits;--", "data=f25"),
        SC_KEEP_IS("%s%n%%", "data=f26"),
        SC_KEEP_IS("\\", "data=f27"),
        SC_KEEP_IS("*", "data=f28"),
        SC_KEEP_IS("a_", "data=f29"),
        SC_KEEP_IS("o'b;--\"%", "saw=1 len=2 data=f34"),
        SC_KEEP_IS("ab", "saw=0"), /* patterns are not patterns */
        SC_KEEP_IS("a%", "saw=0"),
        /* A store key is NAME, or NAME, one space and a KEY (a keyed circuit's): each its own entry. */
        SC_PUT("name key", SC_NEVER, 5, 30),
        SC_KEEP_IS("name key", "saw=1 data=f30"),
        SC_KEEP_IS("name", "saw=0"),
        SC_KEEP_IS("key", "saw=0"),
        SC_PUT("name", SC_NEVER, 5, 31),
        SC_KEEP_IS("name key", "data=f30"),
        SC_KEEP_IS("name", "data=f31"),
        SC_PUT(name255, SC_NEVER, 4, 32),
        SC_KEEP_IS(name255, "saw=1 data=f32"),
        SC_PUT(longest, SC_NEVER, 4, 33),
        SC_KEEP_IS(longest, "saw=1 data=f33"),
        SC_KEEP_IS(prefix510, "saw=0"), /* a different key */
        /* Keys that are none: refused before the store sees them. */
        SC_KEEP_IS("", "rc=einval field=name calls=0"),
        SC_KEEP_IS("two  spaces", "rc=einval field=name calls=0"),
        SC_KEEP_IS(" lead", "rc=einval field=name"),
        SC_KEEP_IS("trail ", "rc=einval field=name"),
        SC_KEEP_IS("a b c", "rc=einval field=name"),
        SC_KEEP_IS("tab\tkey", "rc=einval field=name"),
        SC_KEEP_IS("caf\xc3\xa9", "rc=einval field=name"),
        SC_KEEP_IS(name256, "rc=einval field=name"),
        SC_KEEP_IS(key256, "rc=einval field=name"),
        /* Sweeps: bounded by max, only expired entries; max < 1 refused. The first takes "c", expired long ago. */
        SC_SWEEP_IS(1000, "rc=ok deleted=1"),
        SC_KEEP_IS("c", "saw=0"),
        SC_PUT("s0", 1 * S, 16, 40),
        SC_PUT("s1", 1 * S, 16, 41),
        SC_PUT("s2", 1 * S, 16, 42),
        SC_PUT("s3", 1 * S, 16, 43),
        SC_PUT("s4", 1 * S, 16, 44),
        SC_PUT("s5", 2 * S, 16, 45),
        SC_PUT("s6", 2 * S, 16, 46),
        SC_SWEEP_IS(10, "rc=ok deleted=0"),
        SC_ADVANCE(1 * S),
        SC_SWEEP_IS(3, "deleted=3"),
        SC_SWEEP_IS(3, "deleted=2"),
        SC_SWEEP_IS(3, "deleted=0"),
        SC_ADVANCE(1 * S),
        SC_SWEEP_IS(1, "deleted=1"),
        SC_SWEEP_IS(10, "deleted=1"),
        SC_SWEEP_IS(10, "deleted=0"),
        SC_SWEEP_IS(0, "rc=einval field=max"),
        SC_KEEP_IS("s0", "saw=0"),
        SC_KEEP_IS("d", "saw=1 data=f12"),
        SC_KEEP_IS(longest, "data=f33"),
    };
    enum { N = sizeof steps / sizeof steps[0] };
    static sc_obs want[N], got[N];
    if (!sc_run("memory:", steps, N, want))
        return;
    sc_check_expect("memory:", steps, N, want);
    if (sc_run(store_url_fresh(), steps, N, got))
        sc_compare(store_url_scheme(), steps, N, want, got, self_sweeps);
}

/* ---- expiry and bounded sweeps ---- */

static void test_expiry_and_bounded_sweep(void)
{
    const int64_t t0 = 5000 * S;
    clock_fresh(t0);
    bw_store *s = open_store();
    char key[32];
    for (int i = 0; i < 250; i++) { /* expiring 1 to 7 s from now */
        snprintf(key, sizeof key, "dead-%d", i);
        put(s, key, i, t0 + (i % 7 + 1) * S);
    }
    for (int i = 0; i < 10; i++) { /* never, or at 6000 s */
        snprintf(key, sizeof key, "live-%d", i);
        put(s, key, 100 + i, i % 2 ? BW_STORE_NEVER : 6000 * S);
    }
    int d = -1;
    CHECK_OK(bw_store_sweep(s, 100, &d, NULL));
    CHECK_INT(d, 0); /* nothing expired yet */
    /* The boundary: alive 1 ns before expires_at, absent at it, on every store. */
    clock_to(t0 + 1 * S - 1);
    CHECK_INT(entry_get(s, "dead-0"), 0);
    CHECK_INT(entry_get(s, "dead-7"), 7);
    clock_to(t0 + 1 * S);
    CHECK_INT(entry_get(s, "dead-0"), -2);
    CHECK_INT(entry_get(s, "dead-1"), 1);
    clock_to(t0 + 8 * S); /* every dead-* expired */
    check_sweeps(s, 100, 250);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "live-%d", i);
        CHECK_INT(entry_get(s, key), 100 + i);
    }
    /* expires_at == now is expired: the five live-* of 6000 s go now. */
    clock_to(6000 * S);
    check_sweeps(s, 1000, 5);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "live-%d", i);
        CHECK_INT(entry_get(s, key), i % 2 ? 100 + i : -2);
    }
    CHECK_RC(bw_store_sweep(s, 0, &d, NULL), BW_EINVAL);
    CHECK_RC(bw_store_update(s, "x", NULL, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_store_update(NULL, "x", entry_incr, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_store_sweep(NULL, 1, &d, NULL), BW_EINVAL);
    bw_store_close(s);
}

/* ---- atomicity: threads incrementing one counter ---- */

enum { THREADS = 4, PER_THREAD = 10000 };

typedef struct tctx {
    bw_store *s;
    int errors;
    char message[216];
} tctx;

static void *incr_thread(void *arg)
{
    tctx *t = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        bw_error e;
        if (bw_store_update(t->s, "counter", entry_incr, NULL, &e) != BW_OK && t->errors++ == 0)
            snprintf(t->message, sizeof t->message, "%s", e.message);
    }
    return NULL;
}

static void test_threads_one_counter(void)
{
    clock_fresh(SC_START);
    bw_store *s = open_store();
    pthread_t th[THREADS];
    tctx t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        t[i] = (tctx){s, 0, ""};
        CHECK_INT(pthread_create(&th[i], NULL, incr_thread, &t[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        if (t[i].errors)
            H_FAIL("thread %d: %d updates failed, the first with: %s", i, t[i].errors, t[i].message);
    }
    CHECK_INT(entry_get(s, "counter"), THREADS * PER_THREAD);
    bw_store_close(s);
}

/* ---- the optional reads ---- */

/* The optional lock-free read sees what an update sees. */
static void test_read(void)
{
    clock_fresh(SC_START);
    bw_store *s = open_store();
    bw_store_entry e;
    int found = -1;
    int64_t now = 0;
    if (!has_read(s)) { /* none: it says so every time, whatever the store holds */
        put(s, "r-1", 1, BW_STORE_NEVER);
        CHECK_RC(bw__store_try_read(s, "r-1", &now, &e, &found), BW_ESTATE);
        printf("# %s: no lock-free read\n", store_url_scheme());
        bw_store_close(s);
        return;
    }
    CHECK_OK(bw__store_try_read(s, "r-1", &now, &e, &found));
    CHECK_INT(found, 0);
    CHECK_INT(now, clock_now()); /* the store's clock */
    put(s, "r-1", 41, clock_now() + 10 * S);
    put(s, "name key", 42, BW_STORE_NEVER);
    found = -1;
    CHECK_OK(bw__store_try_read(s, "r-1", &now, &e, &found));
    CHECK_INT(found, 1);
    CHECK_INT(e.len, 64);
    CHECK_INT(entry_value(&e), 41);
    CHECK_INT(e.expires_at, clock_now() + 10 * S);
    CHECK_OK(bw__store_try_read(s, "name key", &now, &e, &found));
    CHECK_INT(found, 1);
    CHECK_INT(entry_value(&e), 42);
    CHECK_INT(e.expires_at, BW_STORE_NEVER);
    CHECK_OK(bw__store_try_read(s, "name", &now, &e, &found));
    CHECK_INT(found, 0);
    pump(10 * S - 1);
    CHECK_OK(bw__store_try_read(s, "r-1", &now, &e, &found));
    CHECK_INT(found, 1);
    pump(1); /* expired: absent */
    CHECK_OK(bw__store_try_read(s, "r-1", &now, &e, &found));
    CHECK_INT(found, 0);
    CHECK_INT(now, clock_now());
    bw_store_close(s);
}

typedef struct torn {
    bw_store *s;
    atomic_int stop;
    atomic_long reads, bad;
} torn;

static bw_store_verdict fill_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    uint64_t v = 0;
    if (cur)
        memcpy(&v, cur->data, 8);
    v++;
    for (int i = 0; i < 32; i++) /* 256 bytes, every word the same */
        memcpy(next->data + 8 * i, &v, 8);
    next->len = 256;
    next->expires_at = now + 3600 * S;
    return BW_STORE_PUT;
}

static void *torn_writer(void *arg)
{
    torn *t = arg; /* writes until the readers have read 2,000 times meanwhile (or 2,000,000 writes) */
    for (int i = 0; i < 2000000 && atomic_load(&t->reads) < 2000; i++)
        bw_store_update(t->s, "torn", fill_fn, NULL, NULL);
    atomic_store(&t->stop, 1);
    return NULL;
}

static void *torn_reader(void *arg)
{
    torn *t = arg;
    bw_store_entry e;
    while (!atomic_load(&t->stop)) {
        int found = 0;
        int64_t now;
        if (bw__store_try_read(t->s, "torn", &now, &e, &found) != BW_OK || !found)
            continue;
        atomic_fetch_add(&t->reads, 1);
        uint64_t first;
        memcpy(&first, e.data, 8);
        for (int i = 1; i < 32; i++)
            if (e.len != 256 || memcmp(e.data + 8 * i, &first, 8) != 0) {
                atomic_fetch_add(&t->bad, 1);
                break;
            }
    }
    return NULL;
}

/* The lock-free read never returns a torn entry while a writer rewrites it. */
static void test_read_never_torn(void)
{
    clock_fresh(SC_START);
    torn t;
    memset(&t, 0, sizeof t);
    t.s = open_store();
    if (!has_read(t.s)) {
        printf("# %s: no lock-free read to tear\n", store_url_scheme());
        bw_store_close(t.s);
        return;
    }
    pthread_t w, r[2];
    pthread_create(&w, NULL, torn_writer, &t);
    for (int i = 0; i < 2; i++)
        pthread_create(&r[i], NULL, torn_reader, &t);
    pthread_join(w, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    CHECK_INT(atomic_load(&t.bad), 0);
    CHECK(atomic_load(&t.reads) > 0);
    bw_store_close(t.s);
}

/* read_many answers for each key what an update of that key sees, and the store's clock. */
static void test_read_many(void)
{
    clock_fresh(SC_START);
    bw_store *s = open_store();
    put(s, "m-1", 1, clock_now() + 10 * S);
    put(s, "m-2 key", 2, BW_STORE_NEVER);
    put(s, "m-3", 3, clock_now() + 1 * S);
    put(s, "m-4", 4, BW_STORE_NEVER);
    pump(1 * S); /* m-3 expired */
    static const char *const keys[] = {"m-1", "absent", "m-3", "m-2 key", "m-2", "m-4", "m-1"};
    enum { N = sizeof keys / sizeof keys[0] };
    static const int64_t want[N] = {1, -2, -2, 2, -2, 4, 1};
    bw_store_entry out[N];
    int found[N];
    int64_t now = -1;
    memset(found, 0xff, sizeof found);
    int rc = bw__store_read_many(s, N, keys, &now, out, found);
    if (rc == BW_ESTATE) {
        printf("# %s: no read_many\n", store_url_scheme());
        bw_store_close(s);
        return;
    }
    CHECK_OK(rc);
    CHECK_INT(now, clock_now());
    for (int i = 0; i < N; i++) {
        if (want[i] == -2) {
            CHECK_INT(found[i], 0);
        } else {
            CHECK_INT(found[i], 1);
            CHECK_INT(out[i].len, 64);
            CHECK_INT(entry_value(&out[i]), want[i]);
        }
        CHECK_INT(want[i], entry_get(s, keys[i])); /* what an update sees */
    }
    CHECK_INT(out[0].expires_at, clock_now() + 9 * S);
    CHECK_INT(out[3].expires_at, BW_STORE_NEVER);
    bw_store_close(s);
}

/*
 * bw_store_scan: pages of every size list every live key exactly as the store
 * holds them (keyed "NAME KEY" and 511-byte keys too), expired and deleted
 * keys not at all, and a store without scan says BW_ENOTSUP. Duplicates are
 * allowed by the contract and folded here.
 */
static int list_all(bw_store *s, int page, char names[][BW_STORE_KEY_MAX + 1], int cap)
{
    bw_store_cursor c;
    memset(&c, 0, sizeof c);
    bw_store_key *keys = calloc((size_t)page, sizeof *keys);
    int total = 0, calls = 0;
    while (!c.done && calls++ < 100000) {
        int n = -1;
        bw_error e;
        int rc = bw_store_scan(s, &c, keys, page, &n, &e);
        if (rc != BW_OK) {
            H_FAIL("bw_store_scan: %s: %s", bw_strerror(rc), e.message);
            break;
        }
        CHECK(n >= 0 && n <= page);
        for (int i = 0; i < n; i++) {
            int dup = 0;
            for (int j = 0; j < total && !dup; j++)
                dup = strcmp(names[j], keys[i].name) == 0;
            if (!dup && total < cap)
                memcpy(names[total++], keys[i].name, sizeof keys[i].name);
        }
    }
    free(keys);
    return total;
}

static int listed(char names[][BW_STORE_KEY_MAX + 1], int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], key) == 0)
            return 1;
    return 0;
}

static void test_scan(void)
{
    const int64_t t0 = 7000 * S;
    clock_fresh(t0);
    bw_store *s = open_store();
    static char names[400][BW_STORE_KEY_MAX + 1];
    char key[BW_STORE_KEY_MAX + 1];
    CHECK_INT(list_all(s, 5, names, 400), 0); /* an empty store: one page, done */
    for (int i = 0; i < 150; i++) {
        snprintf(key, sizeof key, "svc-%03d", i);
        put(s, key, i, i % 3 == 0 ? t0 + 5 * S : BW_STORE_NEVER);
    }
    put(s, "payments tenant-7", 1, BW_STORE_NEVER);
    memset(key, 'k', BW_STORE_KEY_MAX); /* the longest: a 255-byte name, a space, a 255-byte key */
    key[255] = ' ';
    key[BW_STORE_KEY_MAX] = 0;
    put(s, key, 2, BW_STORE_NEVER);
    const int pages[] = {1, 7, 64, 1000};
    for (size_t p = 0; p < sizeof pages / sizeof pages[0]; p++) {
        int n = list_all(s, pages[p], names, 400);
        CHECK_INT(n, 152);
        CHECK(listed(names, n, "svc-000") && listed(names, n, "svc-149") && listed(names, n, "payments tenant-7"));
        CHECK(listed(names, n, key));
    }
    /* A deleted key is not listed; an expired one may be (redis: with an injected clock the server keeps it an
       hour longer), every live one is. */
    clock_to(t0 + 5 * S);
    CHECK_OK(entry_del(s, "svc-001"));
    int n = list_all(s, 16, names, 400);
    CHECK(n >= 152 - 50 - 1 && n <= 152 - 1);
    CHECK(!listed(names, n, "svc-001"));
    for (int i = 2; i < 150; i++) {
        snprintf(key, sizeof key, "svc-%03d", i);
        if (i % 3 && !listed(names, n, key))
            H_FAIL("live key %s not listed", key);
    }
    /* Arguments. */
    bw_store_cursor c;
    memset(&c, 0, sizeof c);
    bw_store_key k1;
    int got;
    CHECK_RC(bw_store_scan(s, &c, &k1, 0, &got, NULL), BW_EINVAL);
    CHECK_RC(bw_store_scan(NULL, &c, &k1, 1, &got, NULL), BW_EINVAL);
    c.done = 1;
    CHECK_RC(bw_store_scan(s, &c, &k1, 1, &got, NULL), BW_EINVAL);
    bw_store_close(s);
}

int main(int argc, char **argv)
{
    store_url_init(argc, argv);
    self_sweeps = probe_self_sweeps();
    printf("# %s: %s\n", store_url_scheme(),
           self_sweeps ? "sweeps by itself (its sweeps may find fewer expired entries than memory:'s)"
                       : "never sweeps by itself");
    RUN(test_scheme);
    RUN(test_script_same_as_memory);
    RUN(test_expiry_and_bounded_sweep);
    RUN(test_threads_one_counter);
    RUN(test_read);
    RUN(test_read_never_torn);
    RUN(test_read_many);
    RUN(test_scan);
    clock_done();
    store_url_cleanup();
    return TEST_SUMMARY();
}
