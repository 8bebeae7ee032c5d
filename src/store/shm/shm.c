/*
 * shm.c — the shm:NAME store: a fixed table of circuits in a POSIX
 * shared-memory segment ("/NAME"), behind one process-shared robust mutex, so
 * that the processes of one host share breaker state at memory speed.
 *
 * Layout (all offsets fixed by the capacity, so every process computes them):
 *
 *   header   magic, layout version, header and slot sizes, capacity, the
 *            "ready" flag (written last by the creator), the count of used
 *            slots, the robust mutex, and the journal (below).
 *   meta[]   capacity x {state, tag, expires_at}: 16 bytes a slot, so that
 *            probing and sweeping read a compact array, not the big slots.
 *   body[]   capacity x {entry (expires_at, len, data), key (up to 511 bytes + NUL)}.
 *
 * The table is open addressing with linear probing from the name's hash (a
 * fixed seed, so every process finds the same slot). A slot is EMPTY, USED or
 * a TOMBstone; a lookup stops at the first EMPTY slot. A deleted slot becomes a
 * tombstone, and tombstones that end a chain (followed by an EMPTY slot) turn
 * back into EMPTY slots, each with one aligned store. An insert reuses the
 * first tombstone or expired slot of its chain; when the whole table holds
 * live entries it fails with BW_ELIMIT.
 *
 * Crash recovery: a process may be killed at any instruction while it holds
 * the mutex. Every change of the table is one "commit" of one slot, written
 * ahead into the journal in the header:
 *   1. write the slot index, the new meta, the new body (when it has one) and
 *      the new count of used slots into the journal;
 *   2. set journal.pending = 1 (after a full fence for the writes of 1);
 *   3. copy the journal into the slot and the count (the "apply");
 *   4. set journal.pending = 0.
 * The next process to take the mutex gets EOWNERDEAD; before it marks the
 * mutex consistent it redoes the apply when pending is set (the apply only
 * reads the journal, so redoing it is idempotent) and clears pending; when
 * pending is clear, the dead process either had not reached step 2 (the slot
 * is untouched and the half-written journal is ignored) or had finished. The
 * update function itself writes only the caller's private copy of the entry,
 * so a process dying inside it leaves nothing to repair. Turning a tombstone
 * back into EMPTY is a single aligned 4-byte store, valid on its own, so it
 * needs no journal. An entry thus always reads as its old or its new value.
 *
 * The segment persists until shm_unlink("/NAME") (or a reboot): closing a
 * store only unmaps it. It is created with mode 0600 (the processes of one
 * user; 0660 with ?group=1, the processes of one group), set with fchmod
 * whatever the umask, and reserves its memory up front (posix_fallocate), so
 * that a full /dev/shm fails the open instead of killing a process with SIGBUS
 * later.
 *
 * Ownership: a segment that exists already is used only when it belongs to
 * the calling user (its effective uid) and grants nothing to its group or to
 * others (with ?group=1: when it belongs to the calling user or to its
 * effective group, and grants nothing to others); anything else fails with
 * BW_ESTATE, naming the owner and the file to remove. Otherwise another local
 * user who made /dev/shm/NAME first (mode 0666) would share this user's
 * circuits (force-open them) and could truncate the segment under it. Both
 * opens pass O_NOFOLLOW (glibc's shm_open adds it too): a symbolic link at
 * /dev/shm/NAME is refused, never followed.
 *
 * Every wait for the mutex is bounded by ?lock_timeout= (5 s, as sqlite:'s
 * busy_timeout): past it an update fails with BW_ETIMEDOUT, which a breaker
 * treats as any store error (it degrades to its local circuit), so a holder
 * that is stopped, or a lock word overwritten with garbage, delays each caller
 * by at most that much and blocks no one for good.
 *
 * Limit: the segment is mapped, not read through system calls. A process that
 * truncates it (ftruncate on /dev/shm/NAME, or removing and re-creating it
 * smaller) makes every process that touches a page past the new end die of
 * SIGBUS. Only a process that may write the segment can: one of the same user
 * (or of its group with ?group=1), or root, since a segment of anyone else is
 * refused at open. Detecting it would cost a system call per operation; like
 * SQLite's memory-mapped I/O, this store leaves the segment to breakwater and
 * documents the limit (store.h). Opening a segment of the wrong size fails
 * cleanly.
 *
 * Locking: the robust mutex in the header protects the whole segment after
 * initialisation (meta, bodies, used, journal); it is held across lookup, the
 * update function and the write. Before the ready flag is set only the creator
 * touches the segment; openers poll the flag (acquire) for up to 2 s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/spin.h"
#include "base/systime.h"
#include "store/backend.h"
#include "store/shm/shm.h"

#define SHM_MAGIC UINT64_C(0x316d656d68737762) /* "bwshmem1" little-endian */
#define SHM_VERSION 3u                         /* 3: keys of up to 511 bytes (keyed circuits) */
#define SHM_READY 0x52454459u                  /* "READY" */
#define SHM_SEED UINT64_C(0x62777368)
#define SHM_NAME_MAX 200
#define SHM_CAP_DEFAULT 1024
#define SHM_CAP_MAX 1048576
#define SHM_WAIT_NS (2 * BW_NS_PER_S)
#define SHM_LOCK_TIMEOUT_DEFAULT (5 * BW_NS_PER_S) /* as sqlite:'s busy_timeout */
#define SHM_LOCK_TIMEOUT_MAX (3600 * BW_NS_PER_S)

enum { SLOT_EMPTY = 0, SLOT_USED = 1, SLOT_TOMB = 2 };

typedef struct shm_meta {
    uint32_t state; /* SLOT_* */
    uint32_t tag;   /* the high half of the name's hash */
    int64_t expires_at;
} shm_meta;

typedef struct shm_body {
    bw_store_entry entry;
    char name[BW__STORE_KEY_MAX + 1];
} shm_body;

typedef struct shm_journal {
    _Atomic uint32_t pending; /* 1 while steps 3..4 of a commit run */
    uint32_t slot;
    uint32_t used;     /* the count of used slots after the commit */
    uint32_t has_body; /* copy body too, not only meta */
    shm_meta meta;
    shm_body body;
} shm_journal;

typedef struct shm_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t hdr_size;
    uint32_t slot_size;
    uint32_t capacity;
    _Atomic uint32_t ready;
    uint32_t used;
    _Atomic uint64_t wseq; /* odd while a writer changes slots (the lock-free read's seqlock) */
    pthread_mutex_t mu;
    shm_journal j;
} shm_hdr;

typedef struct shm {
    const bw__store_clock *clock;
    shm_hdr *hdr;
    shm_meta *meta;
    shm_body *body;
    void *base;
    size_t size;
    uint32_t cap;
    int64_t lock_timeout;        /* ns */
    int group;                   /* ?group=1: shared with the effective group */
    char name[SHM_NAME_MAX + 2]; /* "/" NAME */
} shm;

#ifdef BW_TESTING
/* The fault-injection hook of the tests (shm.h): only in the tests' build of the library. */
void (*bw__shm_fault)(int point);

static void fault(int point)
{
    void (*f)(int) = bw__shm_fault;
    if (f)
        f(point);
}
#else
#define fault(point) ((void)0)
#endif

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

static size_t meta_at(void)
{
    return ALIGN64(sizeof(shm_hdr));
}

static size_t body_at(uint32_t cap)
{
    return ALIGN64(meta_at() + (size_t)cap * sizeof(shm_meta));
}

static size_t seg_size(uint32_t cap)
{
    return body_at(cap) + (size_t)cap * sizeof(shm_body);
}

/* Copy a body's used bytes: the name up to its NUL and the entry's len bytes. */
static void body_copy(shm_body *dst, const shm_body *src, int with_fault)
{
    size_t nl = strnlen(src->name, sizeof src->name - 1);
    memcpy(dst->name, src->name, nl);
    dst->name[nl] = '\0';
    uint32_t len = src->entry.len <= BW_STORE_DATA_MAX ? src->entry.len : BW_STORE_DATA_MAX;
    dst->entry.expires_at = src->entry.expires_at;
    dst->entry.len = len;
    memcpy(dst->entry.data, src->entry.data, len / 2);
    if (with_fault)
        fault(BW__SHM_FAULT_APPLY);
    memcpy(dst->entry.data + len / 2, src->entry.data + len / 2, len - len / 2);
}

/*
 * The seqlock of lock-free reads (shm_read): a writer (holding the mutex) makes
 * wseq odd before it changes any slot and even after. A writer that dies in
 * between leaves it odd; the recovering process makes it even again.
 */
static void write_begin(shm *m)
{
    /* A full barrier: odd before any slot store (a fence would do; ThreadSanitizer knows no fences). */
    atomic_fetch_add_explicit(&m->hdr->wseq, 1, memory_order_seq_cst);
}

static void write_end(shm *m)
{
    atomic_fetch_add_explicit(&m->hdr->wseq, 1, memory_order_release);
}

/* Step 3 of a commit, and the redo of recovery: journal -> slot. Idempotent. */
static void apply(shm *m, int with_fault)
{
    shm_journal *j = &m->hdr->j;
    if (j->slot >= m->cap)
        return; /* cannot happen: commit checks it */
    if (j->has_body)
        body_copy(&m->body[j->slot], &j->body, with_fault);
    m->meta[j->slot] = j->meta;
    m->hdr->used = j->used;
}

/* Change one slot crash-safely (see the top of the file). */
static void commit(shm *m, uint32_t slot, const shm_meta *meta, const char *name, size_t nl, const bw_store_entry *e,
                   uint32_t used)
{
    shm_journal *j = &m->hdr->j;
    j->slot = slot;
    j->used = used;
    j->meta = *meta;
    j->has_body = e != NULL;
    if (e) {
        memcpy(j->body.name, name, nl + 1);
        bw__entry_copy(&j->body.entry, e);
    }
    fault(BW__SHM_FAULT_JOURNAL);
    atomic_thread_fence(memory_order_seq_cst);
    atomic_store_explicit(&j->pending, 1, memory_order_relaxed);
    /* Nothing of the apply may be done before pending is visibly set. */
    atomic_thread_fence(memory_order_seq_cst);
    fault(BW__SHM_FAULT_PENDING);
    write_begin(m);
    apply(m, 1);
    write_end(m);
    atomic_store_explicit(&j->pending, 0, memory_order_release);
}

/* Redo a commit a dead process left half done (the mutex is held). */
static void repair(shm *m)
{
    shm_journal *j = &m->hdr->j;
    uint64_t w = atomic_load_explicit(&m->hdr->wseq, memory_order_relaxed);
    if (w & 1) /* the dead writer was inside write_begin/write_end */
        atomic_store_explicit(&m->hdr->wseq, w + 1, memory_order_release);
    if (atomic_load_explicit(&j->pending, memory_order_acquire)) {
        write_begin(m);
        apply(m, 0);
        write_end(m);
        atomic_store_explicit(&j->pending, 0, memory_order_release);
    }
}

/* Spins before sleeping: glibc's robust mutexes go straight to a futex wait,
 * and the critical sections here last about 100 ns. */
#define SPIN_TRIES 20

static int lock(shm *m, bw_error *err)
{
    int rc = EBUSY;
    for (int i = 0; i < SPIN_TRIES && rc == EBUSY; i++) {
#ifdef __GLIBC__
        /* Test before test-and-set: watch the lock word, try only when it looks free. */
        for (int k = 0; k < 64 && __atomic_load_n(&m->hdr->mu.__data.__lock, __ATOMIC_RELAXED) != 0; k++)
            bw__cpu_relax();
#endif
        rc = pthread_mutex_trylock(&m->hdr->mu);
        if (rc == EBUSY)
            bw__cpu_relax();
    }
    if (rc == EBUSY) {
        /* Bounded: a holder that is stopped (SIGSTOP, a debugger) or a lock word
           overwritten with garbage must not stall every process. */
        rc = bw__mutex_lock_until(&m->hdr->mu, bw__mono_now() + m->lock_timeout);
        if (rc == ETIMEDOUT)
            return bw__fail(err, BW_ETIMEDOUT, "lock_timeout",
                            "shm store '%s': its lock was held longer than lock_timeout (%lld ms); is its holder "
                            "stopped?",
                            m->name + 1, (long long)(m->lock_timeout / BW_NS_PER_MS));
    }
    if (rc == EOWNERDEAD) {
        /* Its owner died holding it: finish or discard what it was doing. */
        repair(m);
        rc = pthread_mutex_consistent(&m->hdr->mu);
        if (rc != 0) {
            pthread_mutex_unlock(&m->hdr->mu);
            return bw__fail(err, BW_ESYS, "", "shm store '%s': cannot recover its lock: %s", m->name + 1, strerror(rc));
        }
        return BW_OK;
    }
    if (rc == ENOTRECOVERABLE)
        return bw__fail(err, BW_ESYS, "", "shm store '%s': its lock is not recoverable; remove the segment",
                        m->name + 1);
    if (rc != 0)
        return bw__fail(err, BW_ESYS, "", "shm store '%s': cannot take its lock: %s", m->name + 1, strerror(rc));
    if (BW_UNLIKELY(atomic_load_explicit(&m->hdr->j.pending, memory_order_relaxed)))
        repair(m); /* defensive: pending is only ever seen set after a crash */
    return BW_OK;
}

static uint32_t next_slot(const shm *m, uint32_t i)
{
    return i + 1 == m->cap ? 0 : i + 1;
}

/* A deleted slot: tombstones ending a chain become EMPTY again, from `i` back. */
static void reclaim(shm *m, uint32_t i)
{
    if (m->meta[next_slot(m, i)].state != SLOT_EMPTY)
        return;
    write_begin(m);
    for (uint32_t n = 0; n < m->cap && m->meta[i].state == SLOT_TOMB; n++) {
        m->meta[i].state = SLOT_EMPTY; /* one aligned store: valid whenever it lands */
        i = i == 0 ? m->cap - 1 : i - 1;
    }
    write_end(m);
}

static void delete_slot(shm *m, uint32_t i)
{
    const shm_meta tomb = {SLOT_TOMB, 0, 0};
    commit(m, i, &tomb, NULL, 0, NULL, m->hdr->used - 1);
    reclaim(m, i);
}

static int shm_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    shm *m = ctx;
    size_t nl = strlen(name);
    uint64_t h = bw__hash(SHM_SEED, name, nl);
    uint32_t tag = (uint32_t)(h >> 32);
    bw_store_entry next;
    int64_t now = bw__store_clock_now(m->clock); /* before the lock: a shorter critical section */
    int rc = lock(m, err);
    if (rc != BW_OK)
        return rc;

    /* Find name, and the first slot an insert may take: a tombstone, an expired entry, or the ending EMPTY. */
    int64_t found = -1, free_at = -1;
    uint32_t i = (uint32_t)(h % m->cap);
    for (uint32_t n = 0; n < m->cap; n++, i = next_slot(m, i)) {
        const shm_meta *mt = &m->meta[i];
        if (mt->state == SLOT_EMPTY) {
            if (free_at < 0)
                free_at = i;
            break;
        }
        if (mt->state == SLOT_USED) {
            if (mt->tag == tag && memcmp(m->body[i].name, name, nl + 1) == 0) {
                found = i;
                break;
            }
            if (mt->expires_at > now)
                continue;
        }
        if (free_at < 0)
            free_at = i;
    }
    const bw_store_entry *cur = NULL;
    if (found >= 0 && m->body[found].entry.expires_at > now)
        cur = &m->body[found].entry;

    switch (fn(arg, now, cur, &next)) {
    case BW_STORE_KEEP:
        break;
    case BW_STORE_PUT: { /* store.c checked the verdict and the length */
        const shm_meta mt = {SLOT_USED, tag, next.expires_at};
        uint32_t used = m->hdr->used;
        if (found < 0) {
            if (free_at < 0) {
                rc = bw__fail(err, BW_ELIMIT, "capacity", "shm store '%s' is full (capacity %u circuits)", m->name + 1,
                              m->cap);
                break;
            }
            found = free_at;
            if (m->meta[found].state != SLOT_USED)
                used++; /* else an expired entry of another name gives way */
        }
        commit(m, (uint32_t)found, &mt, name, nl, &next, used);
        break;
    }
    case BW_STORE_DELETE:
        if (found >= 0)
            delete_slot(m, (uint32_t)found);
        break;
    }
    pthread_mutex_unlock(&m->hdr->mu);
    return rc;
}

/*
 * A lock-free read (the ops table's optional read): a seqlock copy of name's
 * entry. Slots may change under it; the copy is used only when wseq was even
 * and unchanged around it, and every length read is bounded first, so a torn
 * read is discarded, never trusted. Copies go through volatile word loads
 * (not memcpy, which a sanitizer would intercept), and the function is not
 * instrumented by ThreadSanitizer: these races are the design.
 */
#if defined(__clang__) || defined(__GNUC__)
#define NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define NO_TSAN
#endif

NO_TSAN static void copy_words(void *dst, const volatile void *src, size_t n)
{
    const volatile unsigned char *s = src;
    unsigned char *d = dst;
    size_t i = 0;
    for (; i < n && ((uintptr_t)(s + i) & 7); i++) /* to an aligned word */
        d[i] = s[i];
    for (; i + 8 <= n; i += 8) {
        uint64_t w = *(const volatile uint64_t *)(s + i);
        memcpy(d + i, &w, 8);
    }
    for (; i < n; i++)
        d[i] = s[i];
}

NO_TSAN static int shm_read(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err)
{
    (void)err;
    shm *m = ctx;
    size_t nl = strlen(name);
    uint64_t h = bw__hash(SHM_SEED, name, nl);
    uint32_t tag = (uint32_t)(h >> 32);
    *now = bw__store_clock_now(m->clock);
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t s1 = atomic_load_explicit(&m->hdr->wseq, memory_order_acquire);
        if (s1 & 1) {
            bw__cpu_relax();
            continue;
        }
        int hit = 0, torn = 0;
        uint32_t i = (uint32_t)(h % m->cap);
        for (uint32_t n = 0; n < m->cap; n++, i = next_slot(m, i)) {
            shm_meta mt;
            copy_words(&mt, &m->meta[i], sizeof mt);
            if (mt.state == SLOT_EMPTY)
                break;
            if (mt.state != SLOT_USED || mt.tag != tag)
                continue;
            char nm[BW__STORE_KEY_MAX + 1];
            copy_words(nm, m->body[i].name, nl + 1);
            if (memcmp(nm, name, nl + 1) != 0)
                continue;
            bw_store_entry *e = &m->body[i].entry;
            out->expires_at = *(volatile int64_t *)&e->expires_at;
            out->len = *(volatile uint32_t *)&e->len;
            if (out->len < 1 || out->len > BW_STORE_DATA_MAX) {
                torn = 1;
                break;
            }
            copy_words(out->data, e->data, out->len);
            hit = 1;
            break;
        }
        atomic_thread_fence(memory_order_acquire); /* every load above before the second look at wseq */
        if (torn || atomic_load_explicit(&m->hdr->wseq, memory_order_relaxed) != s1)
            continue;
        *found = hit && out->expires_at > *now;
        return BW_OK;
    }
    return BW_ESTATE; /* writers kept it busy: the caller updates instead */
}

/* Many entries, each by the lock-free read (one instant each; writers never wait for it). */
static int shm_read_many(void *ctx, size_t n, const char *const *names, int64_t *now, bw_store_entry *out, int *found,
                         bw_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = shm_read(ctx, names[i], now, &out[i], &found[i], err);
        if (rc != BW_OK)
            return rc;
    }
    return BW_OK;
}

static int shm_sweep(void *ctx, int max, int *deleted, bw_error *err)
{
    shm *m = ctx;
    int n = 0;
    int rc = lock(m, err);
    if (rc != BW_OK) {
        *deleted = 0;
        return rc;
    }
    int64_t now = bw__store_clock_now(m->clock);
    /* Stop once every used slot was seen: a sparse table costs no full scan. */
    uint32_t left = m->hdr->used;
    for (uint32_t i = 0; i < m->cap && left > 0 && n < max; i++) {
        if (m->meta[i].state != SLOT_USED)
            continue;
        left--;
        if (m->meta[i].expires_at <= now) {
            delete_slot(m, i);
            n++;
        }
    }
    pthread_mutex_unlock(&m->hdr->mu);
    *deleted = n;
    return BW_OK;
}

/*
 * A page of keys in slot order, under the lock: from the cursor's slot (a
 * decimal index; "" = 0), looking at most SCAN_SLOTS slots. A key that moves
 * meanwhile (deleted and made again in another slot) may be missed or listed
 * twice, as the contract allows for keys changed during a listing.
 */
#define SCAN_SLOTS 65536u

static int shm_scan(void *ctx, const char *cursor, char *next, int max, bw_store_key *keys, int *n, bw_error *err)
{
    shm *m = ctx;
    uint64_t from = 0;
    for (const char *p = cursor; *p; p++) {
        if (*p < '0' || *p > '9' || from > m->cap)
            return bw__fail(err, BW_EINVAL, "cursor", "shm store '%s': not one of its scan cursors", m->name + 1);
        from = from * 10 + (uint64_t)(*p - '0');
    }
    if (from >= m->cap)
        return bw__fail(err, BW_EINVAL, "cursor", "shm store '%s': not one of its scan cursors", m->name + 1);
    int rc = lock(m, err);
    if (rc != BW_OK)
        return rc;
    int64_t now = bw__store_clock_now(m->clock);
    int got = 0;
    uint32_t i = (uint32_t)from, seen = 0;
    for (; i < m->cap && seen < SCAN_SLOTS && got < max; i++, seen++) {
        if (m->meta[i].state != SLOT_USED || m->meta[i].expires_at <= now)
            continue;
        const char *nm = m->body[i].name;
        size_t nl = strnlen(nm, BW__STORE_KEY_MAX);
        memcpy(keys[got].name, nm, nl);
        keys[got++].name[nl] = 0;
    }
    pthread_mutex_unlock(&m->hdr->mu);
    *n = got;
    next[0] = 0;
    if (i < m->cap)
        snprintf(next, BW_STORE_CURSOR_MAX, "%u", i);
    return BW_OK;
}

static void shm_close(void *ctx)
{
    shm *m = ctx;
    munmap(m->base, m->size);
    free(m);
}

/* ---- opening ---- */

static void nap(void)
{
    struct timespec ts = {0, 1000000}; /* 1 ms */
    nanosleep(&ts, NULL);
}

static int sys_fail(bw_error *err, const shm *m, const char *what, int e)
{
    return bw__fail(err, BW_ESYS, "name", "shm store '%s': %s failed: %s", m->name + 1, what, strerror(e));
}

/*
 * An existing segment is used only when it is this user's (or, with ?group=1,
 * its effective group's) and nobody else may open it (see the top of the file).
 */
static int check_owner(const shm *m, int fd, bw_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return sys_fail(err, m, "fstat", errno);
    unsigned long uid = (unsigned long)geteuid(), gid = (unsigned long)getegid();
    int mine = (unsigned long)st.st_uid == uid || (m->group && (unsigned long)st.st_gid == gid);
    unsigned mode = (unsigned)st.st_mode & 0777, extra = mode & (m->group ? 007u : 077u);
    const char *n = m->name + 1;
    if (!mine && m->group)
        return bw__fail(err, BW_ESTATE, "name",
                        "shm segment '%.60s' belongs to uid %lu, gid %lu, neither this user (uid %lu) nor its group "
                        "(gid %lu): refused; remove it (rm /dev/shm/%.60s) or use another name",
                        n, (unsigned long)st.st_uid, (unsigned long)st.st_gid, uid, gid, n);
    if (!mine)
        return bw__fail(err, BW_ESTATE, "name",
                        "shm segment '%.60s' belongs to uid %lu, not this user (uid %lu): refused; remove it (rm "
                        "/dev/shm/%.60s, as its owner or root) or use another name",
                        n, (unsigned long)st.st_uid, uid, n);
    if (extra)
        return bw__fail(err, BW_ESTATE, "name",
                        "shm segment '%.60s' has mode %04o: %s may open it, refused; remove it (rm /dev/shm/%.60s)%s",
                        n, mode, mode & 007 ? "any user" : "its group", n,
                        mode & 007 ? "" : ", or share it with its group: ?group=1");
    return BW_OK;
}

/* The creator: size, reserve and initialise a new segment, then set ready. */
static int create(shm *m, int fd, bw_error *err)
{
    if (ftruncate(fd, (off_t)m->size) != 0)
        return sys_fail(err, m, "ftruncate", errno);
    int e = posix_fallocate(fd, 0, (off_t)m->size);
    if (e != 0 && e != EINVAL && e != EOPNOTSUPP)
        return bw__fail(err, BW_ESYS, "capacity", "shm store '%s': cannot reserve %zu bytes for %u circuits: %s",
                        m->name + 1, m->size, m->cap, strerror(e));
    void *p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return sys_fail(err, m, "mmap", errno);
    m->base = p;
    shm_hdr *h = p;
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->hdr_size = sizeof(shm_hdr);
    h->slot_size = sizeof(shm_body);
    h->capacity = m->cap;
    h->used = 0;
    pthread_mutexattr_t a;
    if ((e = pthread_mutexattr_init(&a)) != 0)
        return sys_fail(err, m, "pthread_mutexattr_init", e);
    if ((e = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED)) == 0 &&
        (e = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST)) == 0)
        e = pthread_mutex_init(&h->mu, &a);
    pthread_mutexattr_destroy(&a);
    if (e != 0)
        return sys_fail(err, m, "robust process-shared mutex", e);
    atomic_store_explicit(&h->ready, SHM_READY, memory_order_release);
    return BW_OK;
}

/* An opener of an existing segment: wait for its creator, check its layout, map it. */
static int attach(shm *m, int fd, bw_error *err)
{
    int64_t deadline = bw__mono_now() + SHM_WAIT_NS;
    struct stat st;
    for (;;) {
        if (fstat(fd, &st) != 0)
            return sys_fail(err, m, "fstat", errno);
        if ((size_t)st.st_size >= sizeof(shm_hdr))
            break;
        if (bw__mono_now() > deadline)
            return bw__fail(err, BW_ESTATE, "name",
                            "shm segment '%s' was never initialised (its creator died?); remove it with shm_unlink",
                            m->name);
        nap();
    }
    shm_hdr *h = mmap(NULL, sizeof(shm_hdr), PROT_READ, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED)
        return sys_fail(err, m, "mmap", errno);
    int rc = BW_OK;
    while (atomic_load_explicit(&h->ready, memory_order_acquire) != SHM_READY) {
        if (bw__mono_now() > deadline) {
            rc = bw__fail(err, BW_ESTATE, "name",
                          "shm segment '%s' was never initialised (its creator died?); remove it with shm_unlink",
                          m->name);
            break;
        }
        nap();
    }
    if (rc != BW_OK) {
    } else if (h->magic != SHM_MAGIC) {
        rc = bw__fail(err, BW_ESTATE, "magic", "shm segment '%s' is not a breakwater store (bad magic)", m->name);
    } else if (h->version != SHM_VERSION || h->hdr_size != sizeof(shm_hdr) || h->slot_size != sizeof(shm_body)) {
        rc = bw__fail(err, BW_ESTATE, "version",
                      "shm segment '%s' has layout version %u (header %u, slot %u bytes); this build uses version "
                      "%u (header %zu, slot %zu bytes)",
                      m->name, h->version, h->hdr_size, h->slot_size, SHM_VERSION, sizeof(shm_hdr), sizeof(shm_body));
    } else if (h->capacity != m->cap) {
        rc = bw__fail(err, BW_ESTATE, "capacity", "shm segment '%s' has capacity %u, not the %u asked for", m->name,
                      h->capacity, m->cap);
    } else if (fstat(fd, &st) != 0) {
        rc = sys_fail(err, m, "fstat", errno);
    } else if ((size_t)st.st_size != m->size) {
        rc = bw__fail(err, BW_ESTATE, "size", "shm segment '%s' is %lld bytes, not the %zu of its layout", m->name,
                      (long long)st.st_size, m->size);
    }
    munmap(h, sizeof(shm_hdr));
    if (rc != BW_OK)
        return rc;
    void *p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return sys_fail(err, m, "mmap", errno);
    m->base = p;
    return BW_OK;
}

static int check_shm_name(const char *name, bw_error *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > SHM_NAME_MAX)
        return bw__fail(err, BW_EINVAL, "name", "shm store name must be 1 to %d bytes, got %zu", SHM_NAME_MAX, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return bw__fail(err, BW_EINVAL, "name",
                            "shm store name may hold only [A-Za-z0-9._-]; byte %zu is 0x%02x in '%.100s'", i, c, name);
    }
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return bw__fail(err, BW_EINVAL, "name", "shm store name must not be '%s'", name);
    return BW_OK;
}

static int shm_open_store(const bw__url *u, const bw__store_clock *clock, bw_store_ops *ops, void **ctx, bw_error *err)
{
    int rc = check_shm_name(u->path, err);
    int64_t cap = 0, lock_timeout = 0, group = 0;
    if (rc == BW_OK)
        rc = bw__url_int(u, "capacity", 1, SHM_CAP_MAX, SHM_CAP_DEFAULT, 0, &cap, err);
    if (rc == BW_OK)
        rc = bw__url_int(u, "lock_timeout", 1, SHM_LOCK_TIMEOUT_MAX, SHM_LOCK_TIMEOUT_DEFAULT, 1, &lock_timeout, err);
    if (rc == BW_OK)
        rc = bw__url_int(u, "group", 0, 1, 0, 0, &group, err);
    if (rc != BW_OK)
        return rc;
    shm *m = calloc(1, sizeof *m);
    if (!m)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    m->clock = clock;
    m->cap = (uint32_t)cap;
    m->lock_timeout = lock_timeout;
    m->group = (int)group;
    m->size = seg_size(m->cap);
    m->name[0] = '/';
    memcpy(m->name + 1, u->path, strlen(u->path) + 1);

    /* Create it, or open the one that exists; retry if it vanishes between the two. O_NOFOLLOW: a symbolic
       link at /dev/shm/NAME is refused (glibc's shm_open adds it, and O_CLOEXEC; they are said here for any libc). */
    const mode_t mode = m->group ? 0660 : 0600;
    for (int tries = 0;; tries++) {
        int fd = shm_open(m->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0) {
            /* Exactly `mode`, whatever the umask took off it. */
            rc = fchmod(fd, mode) != 0 ? sys_fail(err, m, "fchmod", errno) : create(m, fd, err);
            close(fd);
            if (rc != BW_OK) {
                if (m->base)
                    munmap(m->base, m->size);
                shm_unlink(m->name);
            }
            break;
        }
        if (errno != EEXIST) {
            rc = sys_fail(err, m, "shm_open", errno);
            break;
        }
        fd = shm_open(m->name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
        if (fd < 0) {
            int e = errno;
            if (e == ENOENT && tries < 10)
                continue;
            if (e == ELOOP)
                rc = bw__fail(err, BW_ESTATE, "name",
                              "shm segment '%.60s' is a symbolic link: refused; remove it (rm /dev/shm/%.60s)",
                              m->name + 1, m->name + 1);
            else if (e == EACCES)
                rc = bw__fail(err, BW_ESTATE, "name",
                              "shm segment '%.60s' exists and is not this user's (uid %lu) to open: refused; its "
                              "owner or root may remove it (rm /dev/shm/%.60s), or use another name",
                              m->name + 1, (unsigned long)geteuid(), m->name + 1);
            else
                rc = sys_fail(err, m, "shm_open", e);
            break;
        }
        rc = check_owner(m, fd, err);
        if (rc == BW_OK)
            rc = attach(m, fd, err);
        close(fd);
        break;
    }
    if (rc != BW_OK) {
        free(m);
        return rc;
    }
    m->hdr = m->base;
    m->meta = (shm_meta *)((char *)m->base + meta_at());
    m->body = (shm_body *)((char *)m->base + body_at(m->cap));
    static const bw_store_ops shm_ops = {BW_STORE_OPS_VERSION, "shm",   shm_update, shm_sweep, shm_close, shm_read,
                                         shm_read_many,        shm_scan};
    *ops = shm_ops;
    *ctx = m;
    return BW_OK;
}

const bw__backend bw__backend_shm = {
    "shm", {"capacity", "lock_timeout", "group", NULL}, BW__STORE_MONOTONIC, shm_open_store, NULL, NULL};
