/*
 * redis.c — the redis:// store: processes on any number of hosts share
 * circuits through one Redis server (hiredis, non-blocking contexts waited
 * on with poll()).
 *
 * Design notes
 * - URL: redis://[user:password@]host[:port][/db] or, for a unix socket,
 *   redis://[user:password@][/db]?socket=/path (no host then). Options:
 *   prefix (default "breakwater:"), connect_timeout (1s), timeout (100ms),
 *   pool (4), socket. rediss:// is registered as absent (this hiredis has no
 *   TLS). Everything is parsed here, bounded and validated, before anything
 *   is created; bw_store_open then connects once (and loads the scripts) so
 *   that a wrong host, password or db fails at open.
 * - An entry is one Redis string under prefix + store key: 8 bytes of
 *   expires_at (big-endian, on the store's clock), then the entry's data. A
 *   value of any other length reads as absent (breakwater replaces it); the
 *   scripts answer a value longer than an entry as '' (absent too, and
 *   replaced as such), so that no reply of a script need carry one. Store
 *   keys only ever travel as arguments (redisAppendCommandArgv,
 *   binary-safe), never inside a script's source.
 * - The store's clock is the server's TIME (one clock for every client),
 *   returned by the same script that reads the entries; a test may inject its
 *   own clock (bw_store_set_clock), which is then read after the reply.
 * - update is an optimistic compare-and-set, the network stores' one loop
 *   (store/netupdate.c: the cache, lost races, the pause, BW_ECONFLICT); this
 *   file supplies its protocol (rd_update_ops): GET_SCRIPT (TIME + GET, one
 *   round trip) gives `now` and the current value; fn runs in this process; a
 *   KEEP ends there, a PUT or DELETE runs CAS_SCRIPT, which writes only if the
 *   value is still byte for byte the one fn saw (so no ABA: a value is its own
 *   version), with the lifetime as a server-side PX.
 * - The cache makes that one round trip in the common case: the store keeps
 *   the value it last saw at each key (CACHE_SLOTS slots, direct-mapped by the
 *   key's hash: what a read or a read_many answered, what an update wrote or
 *   ended on),
 *   and an update of a key it knows runs fn on that value at once, with `now`
 *   estimated as the server's TIME plus the monotonic time passed here since,
 *   at the offset of the quickest reply seen (behind the server's by at most
 *   that reply's way back; reply_now), and sends
 *   CAS_SCRIPT straight away; a KEEP sends it as a check, since a verdict on a
 *   value that may be stale is no answer. A stale value is only a conflict,
 *   answered with the current one: never a write over another client's. So a
 *   stored call (a read at acquire, an update at settle) is two round trips,
 *   and a coordinated write after a poll is one. On a conflict CAS_SCRIPT
 *   answers the new value and TIME, and fn runs again on them (so fn may run
 *   more than once; the last run's verdict is the one applied); from the
 *   second conflict on (the one on the cache's value counts), after a random
 *   pause (at most 4 ms) and a fresh read. A KEEP whose check fails is no
 *   lost race: fn runs again on the value the check answered. It goes on
 *   until its deadline (below): then it gives up with BW_ECONFLICT, saying
 *   how many races it lost (BW_ETIMEDOUT when the deadline cut a command).
 *   Scripts run by EVALSHA (their SHA1 from
 *   SCRIPT LOAD at open), falling back to EVAL when the server answers
 *   NOSCRIPT (a restart, SCRIPT FLUSH).
 * - Expiry is the server's: a PUT sets PX to the entry's remaining lifetime
 *   (rounded up to a millisecond; none for BW_STORE_NEVER), and a value whose
 *   expires_at <= now also reads as absent, so the sweep has nothing to do
 *   (it deletes nothing and says so). With an injected clock the PX is the
 *   remaining lifetime on that clock plus an hour (a test's manual clock does
 *   not follow real time: the expiry check stays client-side).
 * - Deadlines: a call's wait for a free connection of the pool, a
 *   reconnect, and every command and retry share one deadline, `timeout`
 *   from its start (the pool's). Contexts are non-blocking: each wait is a
 *   poll() on the socket until that deadline (roundtrip), and no command is
 *   sent once it passed (bw__netpool_check). A connection is a TCP connect,
 *   then AUTH and SELECT (when set) written together: one round trip for
 *   both. It takes at most connect_timeout; a call whose deadline comes
 *   first leaves it in its slot and the next call goes on with it
 *   (connect_one), and one made with less of the call's time left than its
 *   last round trip is kept for the next call, that call failing before a
 *   command the deadline would cut (so a link whose round trip is a good
 *   part of the timeout still gets its connections made). At open,
 *   connect_timeout bounds the connect and the SCRIPT LOADs. A connection that failed (a timeout, an I/O
 *   or protocol error, a refused reply) is dropped with every idle connection
 *   of the pool (they lead to the same server), and for a backoff (10 ms
 *   doubling to 1 s, reset by a success) calls fail at once with the last
 *   error instead of waiting again. A write whose reply timed out may still
 *   have been applied by the server.
 * - Replies are bounded before hiredis allocates them (reply_cap, its own
 *   block below): what each command can be answered, and no more.
 * - The pool is the store layer's for network backends (store/netpool.h): this
 *   file registers how a context is made (connect_one) and closed, and the
 *   pool does the rest (slots, deadlines, backoff).
 *
 * Locking
 * - The pool's mutex (store/netpool.h) guards which slot is busy, its context
 *   when idle, the backoff and the last failure. A slot marked busy belongs to
 *   one thread, which uses its context without the mutex (connecting,
 *   commands): no network wait happens under it, and fn runs with no lock
 *   held. Under it the pool only closes idle contexts (redisFree, no wait),
 *   taking no other lock.
 * - r->cmu guards the cache; it is held only to copy in or out, never
 *   together with the pool's mutex.
 * - Contexts must not cross fork(): a child opens its own store (the pool
 *   refuses a call in a child with BW_ESTATE).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "base/hash.h"
#include "base/systime.h"
#include "store/backend.h"
#include "store/netpool.h"
#include "store/netupdate.h"

#define HOST_MAX 255   /* bytes of a host name or address */
#define CRED_MAX 127   /* bytes of a user name or a password */
#define PREFIX_MAX 100 /* bytes of the key prefix */
#define SOCKET_MAX 107 /* bytes of a unix socket path (sun_path) */
#define POOL_MAX BW__NETPOOL_MAX
#define HEAD 8                                        /* expires_at before the data */
#define KEY_MAX (PREFIX_MAX + BW__STORE_KEY_MAX)      /* prefix + store key */
#define INJECTED_SLACK_MS ((int64_t)3600 * 1000)      /* see the design notes */
#define PX_MAX_MS ((int64_t)100 * 366 * 86400 * 1000) /* a lifetime's PX, at most ~100 years */
#define TIME_SEC_MAX ((int64_t)4000000000)            /* server TIME seconds we accept (year 2096) */
#define CACHE_SLOTS 256 /* values remembered for a first compare-and-set without a read (see the design notes) */

/*
 * TIME, then GET of every key (absent: false, a nil in the reply; a value
 * longer than an entry, HEAD + BW_STORE_DATA_MAX = 1032 bytes: '', which
 * reads as absent too, and is replaced through CAS_SCRIPT, which sees it as
 * '' as well).
 */
static const char GET_SCRIPT[] = "local t = redis.call('TIME')\n"
                                 "local r = {t[1], t[2]}\n"
                                 "for i = 1, #KEYS do\n"
                                 "  local v = redis.call('GET', KEYS[i])\n"
                                 "  if v and #v > 1032 then v = '' end\n"
                                 "  r[i + 2] = v\n"
                                 "end\n"
                                 "return r\n";
/*
 * ARGV: [1] '1' when KEYS[1] held exactly ARGV[2], '0' when it was absent;
 * [3] the new value ('' deletes); [4] its PX in ms ('0': no expiry; '-':
 * write nothing, only check). Returns 1 when written (or, checking, when the
 * key holds what ARGV[1..2] say), else {sec, usec, current value} for the
 * next attempt. A value longer than an entry is '' here, as in GET_SCRIPT.
 */
static const char CAS_SCRIPT[] = "local v = redis.call('GET', KEYS[1])\n"
                                 "if v and #v > 1032 then v = '' end\n"
                                 "if (ARGV[1] == '1' and v == ARGV[2]) or (ARGV[1] == '0' and v == false) then\n"
                                 "  if ARGV[4] == '-' then return 1\n"
                                 "  elseif ARGV[3] == '' then redis.call('DEL', KEYS[1])\n"
                                 "  elseif ARGV[4] == '0' then redis.call('SET', KEYS[1], ARGV[3])\n"
                                 "  else redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4]) end\n"
                                 "  return 1\n"
                                 "end\n"
                                 "local t = redis.call('TIME')\n"
                                 "return {t[1], t[2], v}\n";

enum { SC_GET, SC_CAS, SC_COUNT };
static const char *const script_src[SC_COUNT] = {GET_SCRIPT, CAS_SCRIPT};

/* A slot of the pool: its conn an rconn (below), its deadline the call's (store/netpool.h). */
typedef bw__netslot slot;

/* A value last seen at a key (a slot of the cache, under rd.cmu). */
typedef struct cached {
    uint64_t hash; /* of the key; 0: the slot is empty */
    uint16_t klen, vlen;
    int present; /* 0: the key was absent (vlen 0) */
    char key[KEY_MAX];
    char val[HEAD + BW_STORE_DATA_MAX];
} cached;

typedef struct rd {
    const bw__store_clock *clock;
    char host[HOST_MAX + 1];
    char sock[SOCKET_MAX + 1];
    char user[CRED_MAX + 1], pass[CRED_MAX + 1];
    int port, db, auth; /* auth: 0 none, 1 password, 2 user and password */
    char prefix[PREFIX_MAX + 1];
    size_t plen;
    int64_t connect_ns, timeout_ns;
    int pool;
    char sha[SC_COUNT][41];
    bw__netpool conns; /* the connections (a forked child must open its own store: its sockets are the parent's) */
    /* The cache: its own mutex, held for a copy and never with the pool's. */
    pthread_mutex_t cmu;
    uint64_t seed;
    cached *cache;            /* CACHE_SLOTS slots, direct-mapped by the key's hash */
    _Atomic int64_t time_off; /* the server's TIME minus bw__mono_now when last seen; INT64_MIN: never */
} rd;

/* ---- the URL ---- */

static int all_digits(const char *s, size_t n)
{
    if (n == 0 || n > 10)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

static int host_char(char ch, int bracketed)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' ||
        ch == '_')
        return 1;
    return bracketed && ch == ':';
}

/* userinfo "user:password" or ":password" (no escapes). */
static int parse_userinfo(rd *r, const char *s, size_t n, bw_error *err)
{
    const char *colon = memchr(s, ':', n);
    if (!colon)
        return bw__fail(err, BW_EINVAL, "url",
                        "redis: the userinfo must be user:password or :password (no escapes), got %zu bytes "
                        "without a ':'",
                        n);
    size_t ul = (size_t)(colon - s), pl = n - ul - 1;
    if (ul > CRED_MAX || pl > CRED_MAX)
        return bw__fail(err, BW_EINVAL, "url", "redis: the user name and the password must be at most %d bytes each",
                        CRED_MAX);
    if (pl == 0)
        return bw__fail(err, BW_EINVAL, "url", "redis: the password must not be empty in user:password@");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return bw__fail(err, BW_EINVAL, "url",
                            "redis: the user name and the password must be printable ASCII "
                            "without spaces");
    memcpy(r->user, s, ul);
    memcpy(r->pass, colon + 1, pl);
    r->auth = ul ? 2 : 1;
    return BW_OK;
}

/* host, [v6-address] or nothing (a socket), then :port. */
static int parse_hostport(rd *r, const char *s, size_t n, bw_error *err)
{
    const char *h = s, *rest;
    size_t hl;
    int bracketed = n > 0 && s[0] == '[';
    if (bracketed) {
        const char *close = memchr(s, ']', n);
        if (!close)
            return bw__fail(err, BW_EINVAL, "host", "redis: an IPv6 address must be written [address], got no ']'");
        h = s + 1;
        hl = (size_t)(close - h);
        rest = close + 1;
    } else {
        const char *colon = memchr(s, ':', n);
        hl = colon ? (size_t)(colon - s) : n;
        rest = s + hl;
    }
    size_t rl = n - (size_t)(rest - s);
    if (hl > HOST_MAX)
        return bw__fail(err, BW_EINVAL, "host", "redis: the host must be 1 to %d bytes, got %zu", HOST_MAX, hl);
    if (bracketed && hl == 0)
        return bw__fail(err, BW_EINVAL, "host", "redis: an IPv6 address must not be empty");
    for (size_t i = 0; i < hl; i++)
        if (!host_char(h[i], bracketed))
            return bw__fail(err, BW_EINVAL, "host",
                            "redis: the host may hold letters, digits, '.', '-' and '_' (and ':' inside [ ]), "
                            "byte %zu of its %zu is another (not quoted: it may be a password missing its '@')",
                            i + 1, hl);
    memcpy(r->host, h, hl);
    r->port = 6379;
    if (rl > 0) {
        if (rest[0] != ':' || !all_digits(rest + 1, rl - 1)) /* not quoted: it may be a password missing its '@' */
            return bw__fail(err, BW_EINVAL, "port",
                            "redis: the port must be a whole number in [1, 65535], got something else");
        long p = strtol(rest + 1, NULL, 10);
        if (p < 1 || p > 65535)
            return bw__fail(err, BW_EINVAL, "port", "redis: the port must be a whole number in [1, 65535], got %ld", p);
        r->port = (int)p;
    }
    return BW_OK;
}

/* u->path: "//" [userinfo "@"] [host [":" port]] ["/" [db]]. */
static int parse_path(rd *r, const char *path, bw_error *err)
{
    if (strncmp(path, "//", 2) != 0)
        return bw__fail(err, BW_EINVAL, "path",
                        "redis: the URL must be redis://[user:password@]host[:port][/db] or "
                        "redis://[/db]?socket=/path, got no '//' after 'redis:'");
    const char *a = path + 2;
    size_t an = strcspn(a, "/");
    const char *at = NULL;
    for (size_t i = 0; i < an; i++)
        if (a[i] == '@')
            at = a + i; /* the last '@': a password may hold one */
    int rc = BW_OK;
    if (at)
        rc = parse_userinfo(r, a, (size_t)(at - a), err);
    const char *hp = at ? at + 1 : a;
    if (rc == BW_OK)
        rc = parse_hostport(r, hp, an - (size_t)(hp - a), err);
    if (rc != BW_OK)
        return rc;
    const char *d = a + an;
    r->db = 0;
    if (*d == '/' && d[1]) {
        size_t dn = strlen(d + 1);
        long long v = all_digits(d + 1, dn) ? strtoll(d + 1, NULL, 10) : -1;
        if (v < 0 || v > INT32_MAX)
            return bw__fail(err, BW_EINVAL, "db",
                            "redis: the db (after the host's '/') must be a whole number in [0, %d], got %s "
                            "(not quoted: it may be the end of a password holding a '/')",
                            INT32_MAX, all_digits(d + 1, dn) ? "a larger one" : "something else");
        r->db = (int)v;
    }
    return BW_OK;
}

static int parse_options(rd *r, const bw__url *u, bw_error *err)
{
    int64_t v;
    int rc = bw__url_int(u, "connect_timeout", 1000000, 60 * (int64_t)BW_NS_PER_S, BW_NS_PER_S, 1, &r->connect_ns, err);
    if (rc == BW_OK)
        rc = bw__url_int(u, "timeout", 1000000, 60 * (int64_t)BW_NS_PER_S, 100 * (int64_t)1000000, 1, &r->timeout_ns,
                         err);
    if (rc == BW_OK)
        rc = bw__url_int(u, "pool", 1, POOL_MAX, 4, 0, &v, err);
    if (rc != BW_OK)
        return rc;
    r->pool = (int)v;
    const char *p = bw__url_opt(u, "prefix");
    if (!p)
        p = "breakwater:";
    size_t pl = strlen(p);
    if (pl > PREFIX_MAX)
        return bw__fail(err, BW_EINVAL, "prefix", "redis: prefix must be 0 to %d bytes, got %zu", PREFIX_MAX, pl);
    for (size_t i = 0; i < pl; i++)
        if ((unsigned char)p[i] < 0x21 || (unsigned char)p[i] > 0x7e)
            return bw__fail(err, BW_EINVAL, "prefix", "redis: prefix must be printable ASCII without spaces");
    memcpy(r->prefix, p, pl + 1);
    r->plen = pl;
    const char *s = bw__url_opt(u, "socket");
    if (s) {
        size_t sl = strlen(s);
        if (sl < 1 || sl > SOCKET_MAX || s[0] != '/')
            return bw__fail(err, BW_EINVAL, "socket", "redis: socket must be an absolute path of 1 to %d bytes",
                            SOCKET_MAX);
        if (r->host[0])
            return bw__fail(err, BW_EINVAL, "socket",
                            "redis: give a host or ?socket=, not both (redis://[/db]?socket=/path)");
        memcpy(r->sock, s, sl + 1);
    } else if (!r->host[0]) {
        return bw__fail(err, BW_EINVAL, "host",
                        "redis: a redis: store needs a host, as in redis://127.0.0.1:6379, or ?socket=/path");
    }
    return BW_OK;
}

/* ---- replies: bounded before anything is allocated for them ---- */

/*
 * hiredis builds a reply as it reads it, through functions a program may
 * supply: ours refuse (a NULL object, which hiredis takes as an error of the
 * connection) what no command of this store can be answered, before hiredis
 * allocates it. The command sets what its reply may hold (reply_cap, the
 * reader's privdata while it waits for the reply): arrays at most `elements`
 * long, the whole reply at most `bytes` as hiredis allocates it (ITEM_COST an
 * item, a string's bytes, an array's pointers), strings at most `strmax`
 * bytes (STRING_MAX, an entry's longest, for the scripts, which answer a
 * longer value as '', see GET_SCRIPT; KEY_MAX for SCAN's keys); and for every
 * reply, arrays nested at
 * most DEPTH_MAX deep (SCAN's [cursor, [keys]]), and no RESP3 double or
 * boolean (hiredis 1.x reads them; no command of this store, in RESP2, is
 * answered one). An item still arriving is at most `strmax` + 32 bytes (its
 * header and string) and counts in `bytes`: the reader holds no more. A
 * command's caps stay near a megabyte: read_many reads READ_BATCH keys a
 * command, and a SCAN page asks for at most SCAN_COUNT_MAX. A refused reply is a protocol error: the connection
 * is dropped, the call fails with BW_ESYS saying what was refused.
 */
#define STRING_MAX (HEAD + BW_STORE_DATA_MAX)
#define DEPTH_MAX 2
#define ITEM_COST (sizeof(redisReply) + sizeof(redisReply *))
#define PENDING_MAX(strmax) ((size_t)(strmax) + 32)
/* SCAN may answer more keys than COUNT (a hash bucket's keys come together): its page's elements at most */
#define SCAN_KEYS_MAX(count) (2 * (size_t)(count) + 64)
#define SCAN_COUNT_MAX 1000 /* a SCAN page's COUNT at most: its reply's cap ~1.4 MB */
#define READ_BATCH 1024     /* keys a GET_SCRIPT reads at most (the lane's batch): its reply's cap ~1.1 MB */
_Static_assert(STRING_MAX >= KEY_MAX && STRING_MAX == 1032, "the scripts' '#v > 1032' is an entry's longest value");

typedef struct reply_cap {
    size_t elements, strmax, bytes; /* the command's caps */
    size_t used;                    /* bytes the reply holds so far */
    char why[128];                  /* the refusal ("": none) */
} reply_cap;

/*
 * The caps of a reply of at most `elements` elements, strings of at most
 * `strmax` bytes: the most it holds is SCAN's, two arrays (one of them
 * `elements` long) and elements + 1 strings.
 */
static reply_cap cap_str(size_t elements, size_t strmax)
{
    reply_cap c = {elements, strmax,
                   2 * ITEM_COST + (elements + 2) * sizeof(redisReply *) + (elements + 1) * (ITEM_COST + strmax + 1), 0,
                   ""};
    return c;
}

/* The caps of a script's (or a status's) reply of at most `elements` elements: strings up to an entry. */
static reply_cap cap_of(size_t elements)
{
    return cap_str(elements, STRING_MAX);
}

static _Atomic(const redisReplyObjectFunctions *) hiredis_fns; /* hiredis's own, which ours call once they agree */

static void *refuse(reply_cap *c, const char *fmt, size_t n, size_t max)
{
    if (c)
        snprintf(c->why, sizeof c->why, fmt, n, max);
    return NULL;
}

/* Count cost bytes against the reply's cap: 0, or -1 with the refusal written. */
static int charge(reply_cap *c, size_t cost)
{
    if (!c || cost > c->bytes - c->used) {
        refuse(c, "more than %zu bytes in all (this command's answer holds at most %zu)", c ? c->used + cost : 0,
               c ? c->bytes : 0);
        return -1;
    }
    c->used += cost;
    return 0;
}

static void *bounded_string(const redisReadTask *t, char *str, size_t len)
{
    reply_cap *c = t->privdata;
    size_t max = c ? c->strmax : STRING_MAX;
    if (len > max)
        return refuse(c, "a string of %zu bytes (at most %zu)", len, max);
    return charge(c, ITEM_COST + len + 1) ? NULL : atomic_load(&hiredis_fns)->createString(t, str, len);
}

/*
 * hiredis 1.x gives an array's length as a size_t (0.14: an int), and has
 * RESP3's doubles and booleans besides; the table below names its functions,
 * so that it builds against both.
 */
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
typedef size_t array_len;
#else
typedef int array_len;
#endif

static void *bounded_array(const redisReadTask *t, array_len elements)
{
    reply_cap *c = t->privdata;
    size_t depth = 0;
    for (const redisReadTask *p = t->parent; p; p = p->parent)
        depth++;
    if (depth >= DEPTH_MAX)
        return refuse(c, "arrays nested %zu deep (at most %zu)", depth + 1, DEPTH_MAX);
    if (!c || (size_t)elements > c->elements)
        return refuse(c, "an array of %zu elements (this command's answer holds at most %zu)", (size_t)elements,
                      c ? c->elements : 0);
    return charge(c, ITEM_COST + (size_t)elements * sizeof(redisReply *))
               ? NULL
               : atomic_load(&hiredis_fns)->createArray(t, elements);
}

static void *bounded_integer(const redisReadTask *t, long long v)
{
    return charge(t->privdata, ITEM_COST) ? NULL : atomic_load(&hiredis_fns)->createInteger(t, v);
}

static void *bounded_nil(const redisReadTask *t)
{
    return charge(t->privdata, ITEM_COST) ? NULL : atomic_load(&hiredis_fns)->createNil(t);
}

#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
/*
 * A double or a boolean (RESP3 ',' and '#'): no command of this store is
 * answered one (a session speaks RESP2: a script's true is the integer 1), so
 * a server that sends one is refused, as a protocol error.
 */
static void *refuse_resp3(const redisReadTask *t, const char *what)
{
    reply_cap *c = t->privdata;
    if (c)
        snprintf(c->why, sizeof c->why, "a %s (RESP3: no command of this store is answered one)", what);
    return NULL;
}

static void *refused_double(const redisReadTask *t, double v, char *str, size_t len)
{
    (void)v;
    (void)str;
    (void)len;
    return refuse_resp3(t, "double");
}

static void *refused_bool(const redisReadTask *t, int v)
{
    (void)v;
    return refuse_resp3(t, "boolean");
}
#endif

static redisReplyObjectFunctions bounded_fns = {
    .createString = bounded_string,
    .createArray = bounded_array,
    .createInteger = bounded_integer,
    .createNil = bounded_nil,
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
    .createDouble = refused_double,
    .createBool = refused_bool,
#endif
    .freeObject = freeReplyObject,
};

/* ---- connections ---- */

static const char *where(const rd *r, char *buf, size_t n)
{
    if (r->sock[0])
        snprintf(buf, n, "%.107s", r->sock);
    else
        snprintf(buf, n, "%.100s:%d", r->host, r->port);
    return buf;
}

/*
 * A connection: hiredis's context and the cap of the reply it reads, which
 * is the reader's privdata for as long as the context lives (so a reply
 * that a connection being made left half read goes on, in a later call,
 * against the same cap). `due`: replies of the connect (AUTH, SELECT) still
 * to come; `began`: when the connect's step under way began (bw__mono_now).
 */
typedef struct rconn {
    redisContext *c;
    reply_cap cap;
    int due;
    int64_t began;
} rconn;

static void conn_free(rconn *k)
{
    if (k) {
        redisFree(k->c);
        free(k);
    }
}

/*
 * Write what is appended to k by `deadline`: 1 written, 0 the deadline
 * passed (the rest stays in hiredis's buffer), -1 failed (hiredis's error in
 * k->c->err, else poll's errno in *e).
 */
static int send_out(rconn *k, int64_t deadline, int *e)
{
    for (;;) {
        int done = 0;
        if (redisBufferWrite(k->c, &done) != REDIS_OK)
            return -1;
        if (done)
            return 1;
        int w = bw__netpool_wait(k->c->fd, BW__NETPOOL_OUT, deadline); /* not POLLIN: unread bytes would spin */
        *e = errno;
        if (w <= 0)
            return w;
    }
}

/*
 * Read the reply under way on k into *rep by `deadline`, bounded by k->cap:
 * 1 a reply, 0 the deadline passed (what came stays in hiredis's reader), -1
 * failed (refused: k->cap.why; hiredis's error: k->c->err; else poll's errno
 * in *e).
 */
static int read_reply(rconn *k, int64_t deadline, void **rep, int *e)
{
    redisContext *c = k->c;
    reply_cap *cap = &k->cap;
    for (;;) {
        *rep = NULL;
        if (redisGetReplyFromReader(c, rep) != REDIS_OK)
            return -1;
        if (*rep)
            return 1;
        size_t pending = c->reader->len - c->reader->pos; /* of the item still arriving */
        if (pending > PENDING_MAX(cap->strmax)) {
            refuse(cap, "an item of more than %zu bytes (at most %zu)", pending, PENDING_MAX(cap->strmax));
            return -1;
        }
        if (pending > cap->bytes - cap->used) {
            refuse(cap, "more than %zu bytes in all (this command's answer holds at most %zu)", cap->used + pending,
                   cap->bytes);
            return -1;
        }
        int w = bw__netpool_wait(c->fd, BW__NETPOOL_IN, deadline);
        *e = errno;
        if (w <= 0)
            return w;
        if (redisBufferRead(c) != REDIS_OK)
            return -1;
    }
}

/* Fail with what went wrong on k (w, e: as send_out and read_reply said). */
static int conn_fail(const rd *r, const rconn *k, int w, int e, const char *what, bw_error *err)
{
    char wh[140];
    where(r, wh, sizeof wh);
    if (k->cap.why[0])
        return bw__fail(err, BW_ESYS, "", "redis: %s %.100s: the server's reply was refused: %.120s", what, wh,
                        k->cap.why);
    if (w == 0)
        return bw__fail(err, BW_ETIMEDOUT, "", "redis: %s %.100s: no answer in time", what, wh);
    if (k->c->err)
        return bw__fail(err, k->c->err == REDIS_ERR_OOM ? BW_ENOMEM : BW_ESYS, "", "redis: %s %.100s: %.100s", what, wh,
                        k->c->errstr);
    return bw__fail(err, BW_ESYS, "", "redis: %s %.100s: %.100s", what, wh, strerror(e));
}

/*
 * Send the command appended to k and read its reply by `deadline`, bounded by
 * cap (cap_of, cap_str; every wait a poll() on the socket: the
 * context is non-blocking). The reply, or NULL with *err filled and *broken
 * set (k failed, or is out of step with the server: it is dropped).
 */
static redisReply *roundtrip(const rd *r, rconn *k, int64_t deadline, reply_cap cap, const char *what, int *broken,
                             bw_error *err)
{
    k->cap = cap;
    void *rep = NULL;
    int e = 0, w = send_out(k, deadline, &e);
    if (w > 0)
        w = read_reply(k, deadline, &rep, &e);
    if (w > 0)
        return rep;
    *broken = 1;
    conn_fail(r, k, w, e, what, err);
    return NULL;
}

/* A command on k, its reply bounded by cap, by `deadline`: as roundtrip. */
static redisReply *command(const rd *r, rconn *k, int64_t deadline, reply_cap cap, int argc, const char **argv,
                           const size_t *len, const char *what, int *broken, bw_error *err)
{
    if (redisAppendCommandArgv(k->c, argc, argv, len) != REDIS_OK) {
        *broken = 1;
        bw__fail(err, BW_ENOMEM, "", "out of memory");
        return NULL;
    }
    return roundtrip(r, k, deadline, cap, what, broken, err);
}

/* Fail with the server's error reply (the connection stays usable). */
static int reply_fail(const redisReply *rep, const char *what, bw_error *err)
{
    return bw__fail(err, BW_ESYS, "", "redis: %s: the server answered: %.*s", what,
                    (int)(rep->len < 150 ? rep->len : 150), rep->str ? rep->str : "");
}

/* Where a connection being made stands (a slot's connect_step; 0: made). */
enum { CS_TCP = 1, CS_SEND, CS_REPLIES };

/* A new connection, its TCP (or unix socket) connect under way, its replies bounded: *out, or an error. */
static int conn_new(const rd *r, rconn **out, bw_error *err)
{
    char wh[140];
    where(r, wh, sizeof wh);
    rconn *k = calloc(1, sizeof *k);
    if (!k)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    errno = 0;
    redisContext *c = r->sock[0] ? redisConnectUnixNonBlock(r->sock) : redisConnectNonBlock(r->host, r->port);
    if (!c || c->err) {
        int rc = bw__fail(err, c ? BW_ESYS : BW_ENOMEM, "", "redis: connect to %.100s: %.100s", wh,
                          c ? c->errstr : "out of memory");
        redisFree(c);
        free(k);
        return rc;
    }
    int fl = fcntl(c->fd, F_GETFD);
    if (fl >= 0)
        fcntl(c->fd, F_SETFD, fl | FD_CLOEXEC); /* hiredis does not: a child a process execs must not inherit it */
    atomic_store(&hiredis_fns, c->reader->fn);  /* hiredis's defaults: the same for every context */
    c->reader->fn = &bounded_fns;
    c->reader->maxbuf = REDIS_READER_MAX_BUF; /* an idle reader gives back a buffer larger than 16 KiB */
    c->reader->privdata = &k->cap;
    k->c = c;
    k->cap = cap_of(0);
    k->began = bw__mono_now();
    *out = k;
    return BW_OK;
}

/*
 * Make, or go on making, connection k by `until` (*step: where it stands,
 * CS_TCP at first): the connect, then AUTH and SELECT (when set) written
 * together (one round trip for both), their replies read. BW_OK with *step 0:
 * made; BW_OK with *step set: not done by `until` (what came is kept: the
 * connect can go on later); an error: it failed (*err filled).
 */
static int conn_make(const rd *r, rconn *k, int *step, int64_t until, bw_error *err)
{
    int e = 0, w;
    if (*step == CS_TCP) {
        w = bw__netpool_wait(k->c->fd, BW__NETPOOL_OUT, until); /* the connect's end (or its failure) */
        if (w == 0)
            return BW_OK;
        int soerr = w < 0 ? errno : 0;
        socklen_t sl = sizeof soerr;
        if (w > 0 && getsockopt(k->c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
            soerr = errno;
        if (soerr) {
            char wh[140];
            return bw__fail(err, BW_ESYS, "", "redis: connect to %.100s: %.100s", where(r, wh, sizeof wh),
                            strerror(soerr));
        }
        char db[16];
        snprintf(db, sizeof db, "%d", r->db);
        const char *auth[3] = {"AUTH", r->auth == 2 ? r->user : r->pass, r->pass}, *sel[2] = {"SELECT", db};
        size_t alen[3] = {4, strlen(auth[1]), strlen(auth[2])}, slen[2] = {6, strlen(db)};
        k->due = 0;
        if (r->auth && redisAppendCommandArgv(k->c, r->auth == 2 ? 3 : 2, auth, alen) == REDIS_OK)
            k->due++;
        if (r->db && redisAppendCommandArgv(k->c, 2, sel, slen) == REDIS_OK)
            k->due++;
        if (k->due != (r->auth != 0) + (r->db != 0))
            return bw__fail(err, BW_ENOMEM, "", "out of memory");
        k->began = bw__mono_now();
        *step = k->due ? CS_SEND : 0;
    }
    if (*step == CS_SEND) {
        w = send_out(k, until, &e);
        if (w == 0)
            return BW_OK;
        if (w < 0)
            return conn_fail(r, k, w, e, r->auth ? "AUTH on" : "SELECT on", err);
        k->cap = cap_of(0);
        *step = CS_REPLIES;
    }
    while (*step == CS_REPLIES) {
        const char *what = r->auth && k->due == (r->db ? 2 : 1) ? "AUTH" : "SELECT";
        void *rep = NULL;
        w = read_reply(k, until, &rep, &e);
        if (w == 0)
            return BW_OK;
        if (w < 0)
            return conn_fail(r, k, w, e, what[0] == 'A' ? "AUTH on" : "SELECT on", err);
        redisReply *rp = rep;
        int rc = rp->type == REDIS_REPLY_STATUS ? BW_OK : reply_fail(rp, what, err);
        freeReplyObject(rp);
        if (rc != BW_OK)
            return rc;
        k->cap = cap_of(0);
        if (--k->due == 0)
            *step = 0;
    }
    return BW_OK;
}

/* A new connection made by `until` (at open: connect_timeout), in *out; an error with nothing made. */
static int connect_by(const rd *r, int64_t until, rconn **out, bw_error *err)
{
    rconn *k = NULL;
    int step = CS_TCP, rc = conn_new(r, &k, err);
    if (rc == BW_OK)
        rc = conn_make(r, k, &step, until, err);
    if (rc == BW_OK && step) {
        char wh[140];
        rc = bw__fail(err, BW_ETIMEDOUT, "",
                      "redis: connect to %.100s: no answer within connect_timeout (%" PRId64 " ms)",
                      where(r, wh, sizeof wh), r->connect_ns / 1000000);
    }
    if (rc != BW_OK) {
        conn_free(k);
        return rc;
    }
    *out = k;
    return BW_OK;
}

/*
 * The pool's callbacks (store/netpool.h). A connection takes at most
 * connect_timeout to make; the call whose deadline comes first leaves it in
 * its slot (s->connect_step says where it stands), and the next call on the
 * slot goes on with it. One made with less of the call's time left than its
 * last step took (a round trip, the connect's or AUTH and SELECT's) is made,
 * but that call gives up (BW_ETIMEDOUT) before its command, which the
 * deadline would cut, dropping the connection: the next call uses it.
 */
static int connect_one(void *backend, bw__netslot *s, int64_t deadline, bw_error *err)
{
    const rd *r = backend;
    char wh[140];
    where(r, wh, sizeof wh);
    if (!s->conn) {
        rconn *k = NULL;
        int rc = conn_new(r, &k, err);
        if (rc != BW_OK)
            return rc;
        s->conn = k;
        s->connect_until = bw__mono_now() + r->connect_ns;
        s->connect_step = CS_TCP;
    }
    rconn *k = s->conn;
    int64_t until = s->connect_until < deadline ? s->connect_until : deadline;
    int rc = conn_make(r, k, &s->connect_step, until, err);
    if (rc == BW_OK && s->connect_step == 0) {
        s->connect_until = 0;
        int64_t now = bw__mono_now(), took = now - k->began;
        if (deadline - now < took)
            return bw__fail(err, BW_ETIMEDOUT, "",
                            "redis: connect to %.100s: made with %" PRId64 " ms of the call's timeout (%" PRId64
                            " ms) left, less than its last round trip (%" PRId64 " ms): the next call uses it",
                            wh, (deadline > now ? deadline - now : 0) / 1000000, r->timeout_ns / 1000000,
                            took / 1000000);
        return BW_OK;
    }
    if (rc == BW_OK && until < s->connect_until) /* the call's deadline came first: the next call goes on */
        return bw__fail(err, BW_ETIMEDOUT, "",
                        "redis: connect to %.100s: not done within the call's timeout (%" PRId64
                        " ms); the next call goes on with it",
                        wh, r->timeout_ns / 1000000);
    if (rc == BW_OK)
        rc = bw__fail(err, BW_ETIMEDOUT, "",
                      "redis: connect to %.100s: no answer within connect_timeout (%" PRId64 " ms)", wh,
                      r->connect_ns / 1000000);
    conn_free(k);
    s->conn = NULL;
    s->connect_until = 0;
    s->connect_step = 0;
    return rc;
}

static void close_one(void *backend, void *conn, int forked)
{
    (void)backend;
    (void)forked; /* redisFree closes this process's descriptor only: nothing is said to the server */
    conn_free(conn);
}

static const bw__netpool_ops pool_ops = {connect_one, close_one};

/*
 * Run script `which` with keys and args on slot s, by its call's deadline
 * (none left: BW_ETIMEDOUT, nothing sent): EVALSHA, then EVAL when the server
 * lost the script (when the deadline is still ahead: the same check). Its reply holds what GET_SCRIPT answers for nkeys
 * keys, or CAS_SCRIPT's {sec, usec, value}, at most. The reply, or NULL with *err filled.
 */
static redisReply *run_script(const rd *r, slot *s, int which, size_t nkeys, const char *const *keys,
                              const size_t *klen, int nargs, const char **args, const size_t *alen, int *broken,
                              bw_error *err)
{
    if (bw__netpool_check(&r->conns, s, err) != BW_OK)
        return NULL;
    rconn *c = s->conn;
    size_t elements = which == SC_GET ? 2 + nkeys : 3;
    size_t argc = 3 + nkeys + (size_t)nargs;
    const char *sv[3 + 8 + 8];
    size_t sl[3 + 8 + 8];
    const char **argv = sv;
    size_t *len = sl;
    if (argc > sizeof sv / sizeof sv[0]) {
        argv = malloc(argc * sizeof *argv);
        len = malloc(argc * sizeof *len);
        if (!argv || !len) {
            free((void *)argv);
            free(len);
            bw__fail(err, BW_ENOMEM, "", "out of memory");
            return NULL;
        }
    }
    char nk[24];
    snprintf(nk, sizeof nk, "%zu", nkeys);
    argv[2] = nk;
    len[2] = strlen(nk);
    for (size_t i = 0; i < nkeys; i++) {
        argv[3 + i] = keys[i];
        len[3 + i] = klen[i];
    }
    for (int i = 0; i < nargs; i++) {
        argv[3 + nkeys + (size_t)i] = args[i];
        len[3 + nkeys + (size_t)i] = alen[i];
    }
    redisReply *rep = NULL;
    int noscript = 1;
    if (r->sha[which][0]) {
        argv[0] = "EVALSHA";
        len[0] = 7;
        argv[1] = r->sha[which];
        len[1] = 40;
        rep = command(r, c, s->deadline, cap_of(elements), (int)argc, argv, len, "EVALSHA on", broken, err);
        if (rep && rep->type == REDIS_REPLY_ERROR && rep->len >= 8 && memcmp(rep->str, "NOSCRIPT", 8) == 0) {
            freeReplyObject(rep); /* the server lost it (a restart, SCRIPT FLUSH): EVAL loads it again */
            rep = NULL;
        } else {
            noscript = 0;
        }
    }
    if (noscript && !*broken && bw__netpool_check(&r->conns, s, err) != BW_OK)
        noscript = 0; /* NOSCRIPT came when the deadline had passed: no EVAL (nothing sent, still in step) */
    if (noscript) {
        argv[0] = "EVAL";
        len[0] = 4;
        argv[1] = script_src[which];
        len[1] = strlen(script_src[which]);
        rep = command(r, c, s->deadline, cap_of(elements), (int)argc, argv, len, "EVAL on", broken, err);
    }
    if (argv != sv) {
        free((void *)argv);
        free(len);
    }
    if (rep && rep->type == REDIS_REPLY_ERROR) {
        reply_fail(rep, which == SC_GET ? "reading entries" : "writing an entry", err);
        freeReplyObject(rep);
        rep = NULL;
    }
    return rep;
}

/* ---- replies (untrusted: every field checked) ---- */

/* A TIME field: 1 to 19 digits in [0, max]. */
static int time_part(const redisReply *e, int64_t max, int64_t *out)
{
    if (!e || e->type != REDIS_REPLY_STRING || e->len < 1 || e->len > 19)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < e->len; i++) {
        if (e->str[i] < '0' || e->str[i] > '9')
            return -1;
        v = v * 10 + (e->str[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* `now` from the reply's TIME (or the injected clock); the server's TIME is noted for est_now. */
static int reply_now(rd *r, const redisReply *rep, int64_t *now, bw_error *err)
{
    int64_t sec, usec;
    if (time_part(rep->element[0], TIME_SEC_MAX, &sec) || time_part(rep->element[1], 999999, &usec))
        return bw__fail(err, BW_ESYS, "", "redis: the server's TIME is malformed or out of range");
    int64_t server = sec * BW_NS_PER_S + usec * 1000;
    /*
     * Each sample is a lower bound of the offset (the reply took time to come
     * back): keep the largest, unless the server's clock stepped back (a
     * sample a second or more below it), which starts afresh.
     */
    int64_t sample = server - bw__mono_now(), off = atomic_load_explicit(&r->time_off, memory_order_relaxed);
    if (off == INT64_MIN || sample > off || sample < off - BW_NS_PER_S)
        atomic_store_explicit(&r->time_off, sample, memory_order_relaxed);
    if (atomic_load(&((bw__store_clock *)r->clock)->clock))
        *now = bw__store_clock_now(r->clock);
    else
        *now = server;
    return BW_OK;
}

/*
 * The store's `now` without a round trip, for an update's first attempt from
 * the cache: the server's TIME plus the time passed here since, at the best
 * offset seen (reply_now), or the injected clock.
 * 0 when no TIME has been seen yet.
 */
static int est_now(rd *r, int64_t *now)
{
    if (atomic_load(&((bw__store_clock *)r->clock)->clock)) {
        *now = bw__store_clock_now(r->clock);
        return 1;
    }
    int64_t off = atomic_load_explicit(&r->time_off, memory_order_relaxed);
    if (off == INT64_MIN)
        return 0;
    *now = off + bw__mono_now();
    return 1;
}

/* Decode value v (vlen bytes; present 0: absent) into *out: *found = 1 when it is a live entry (absent, expired or
 * malformed: 0). */
static void decode_raw(const char *v, size_t vlen, int present, int64_t now, bw_store_entry *out, int *found)
{
    *found = 0;
    if (!present || vlen < HEAD + 1 || vlen > HEAD + BW_STORE_DATA_MAX)
        return;
    uint64_t x = 0;
    for (int i = 0; i < HEAD; i++)
        x = x << 8 | (unsigned char)v[i];
    int64_t exp = (int64_t)x;
    if (exp <= now)
        return;
    out->expires_at = exp;
    out->len = (uint32_t)(vlen - HEAD);
    memcpy(out->data, v + HEAD, out->len);
    *found = 1;
}

static void decode(const redisReply *v, int64_t now, bw_store_entry *out, int *found)
{
    int present = v && v->type == REDIS_REPLY_STRING;
    decode_raw(present ? v->str : NULL, present ? v->len : 0, present, now, out, found);
}

static size_t make_key(const rd *r, const char *name, char *key)
{
    size_t n = strlen(name);
    if (n > BW__STORE_KEY_MAX)
        n = BW__STORE_KEY_MAX; /* store.c checked it; never past the buffer */
    memcpy(key, r->prefix, r->plen);
    memcpy(key + r->plen, name, n);
    return r->plen + n;
}

/* ---- the cache of values last seen (see the design notes) ---- */

static cached *cache_slot(rd *r, const char *key, size_t klen, uint64_t *h)
{
    *h = bw__hash(r->seed, key, klen) | 1;     /* never 0, the empty slot's */
    return &r->cache[(*h >> 1) % CACHE_SLOTS]; /* not bit 0, which is always set */
}

/* Remember that key holds v (a nil: absent); a value of a length breakwater never writes is not kept. */
static void cache_put(rd *r, const char *key, size_t klen, const char *v, size_t vlen, int present)
{
    if (klen > KEY_MAX || vlen > HEAD + BW_STORE_DATA_MAX)
        return;
    uint64_t h;
    cached *c = cache_slot(r, key, klen, &h);
    pthread_mutex_lock(&r->cmu);
    c->hash = h;
    c->klen = (uint16_t)klen;
    memcpy(c->key, key, klen);
    c->present = present;
    c->vlen = (uint16_t)(present ? vlen : 0);
    if (present)
        memcpy(c->val, v, vlen);
    pthread_mutex_unlock(&r->cmu);
}

static void cache_put_reply(rd *r, const char *key, size_t klen, const redisReply *v)
{
    if (v->type == REDIS_REPLY_STRING)
        cache_put(r, key, klen, v->str, v->len, 1);
    else if (v->type == REDIS_REPLY_NIL)
        cache_put(r, key, klen, NULL, 0, 0);
}

/* What key last held, into *present, val and *vlen: 0 when the cache does not know. */
static int cache_get(rd *r, const char *key, size_t klen, int *present, char *val, size_t *vlen)
{
    uint64_t h;
    cached *c = cache_slot(r, key, klen, &h);
    pthread_mutex_lock(&r->cmu);
    int hit = c->hash == h && c->klen == klen && memcmp(c->key, key, klen) == 0;
    if (hit) {
        *present = c->present;
        *vlen = c->vlen;
        memcpy(val, c->val, c->vlen);
    }
    pthread_mutex_unlock(&r->cmu);
    return hit;
}

/* A GET_SCRIPT (or conflicting CAS_SCRIPT) reply with `n` values: well formed? */
static int reply_shape(const redisReply *rep, size_t n, bw_error *err)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n + 2)
        return bw__fail(err, BW_ESYS, "", "redis: the server's reply has an unexpected shape");
    for (size_t i = 0; i < n; i++) {
        int t = rep->element[i + 2]->type;
        if (t != REDIS_REPLY_NIL && t != REDIS_REPLY_STRING)
            return bw__fail(err, BW_ESYS, "", "redis: the server's reply has an unexpected shape");
    }
    return BW_OK;
}

/* ---- the operations ---- */

/*
 * Read n keys (GET_SCRIPT) on slot s, READ_BATCH a command (so that a reply's
 * cap stays near a megabyte however many keys are asked): each batch decodes
 * its entries at its own TIME, and *now is the first batch's (the earliest:
 * every entry found is live then too). Releases s.
 */
static int read_keys(rd *r, slot *s, size_t n, const char *const *names, int64_t *now, bw_store_entry *out, int *found,
                     bw_error *err)
{
    char kbuf[KEY_MAX + 1];
    const char *k1 = kbuf;
    size_t l1;
    char *block = NULL;
    const char **keys = &k1;
    size_t *klen = &l1;
    size_t batch = n < READ_BATCH ? n : READ_BATCH;
    int broken = 0, rc = BW_OK;
    bw_error e = {0, "", ""};
    if (n > 1) {
        block = malloc(batch * (KEY_MAX + sizeof *keys + sizeof *klen));
        if (!block)
            rc = bw__fail(&e, BW_ENOMEM, "", "out of memory");
        keys = (const char **)(void *)block;
        klen = (size_t *)(void *)(block + batch * sizeof *keys);
    }
    for (size_t off = 0; rc == BW_OK && off < n; off += batch) {
        size_t m = n - off < batch ? n - off : batch;
        if (n == 1) {
            l1 = make_key(r, names[0], kbuf);
        } else {
            char *kb = block + batch * (sizeof *keys + sizeof *klen);
            for (size_t i = 0; i < m; i++) {
                klen[i] = make_key(r, names[off + i], kb + i * KEY_MAX);
                keys[i] = kb + i * KEY_MAX;
            }
        }
        redisReply *rep = run_script(r, s, SC_GET, m, keys, klen, 0, NULL, NULL, &broken, &e);
        rc = rep ? reply_shape(rep, m, &e) : e.code;
        int64_t t = 0;
        if (rc == BW_OK)
            rc = reply_now(r, rep, &t, &e);
        if (rc == BW_OK && off == 0)
            *now = t;
        for (size_t i = 0; rc == BW_OK && i < m; i++) {
            decode(rep->element[i + 2], t, &out[off + i], &found[off + i]);
            cache_put_reply(r, keys[i], klen[i], rep->element[i + 2]);
        }
        if (rep)
            freeReplyObject(rep);
    }
    free(block);
    return bw__netpool_done(&r->conns, s, broken, rc, &e, err);
}

static int rd_read(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err)
{
    rd *r = ctx;
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 1, &s, err);
    if (rc != BW_OK)
        return rc;
    return read_keys(r, s, 1, &name, now, out, found, err);
}

static int rd_read_many(void *ctx, size_t n, const char *const *names, int64_t *now, bw_store_entry *out, int *found,
                        bw_error *err)
{
    rd *r = ctx;
    if (n == 0) {
        *now = bw__store_clock_now(r->clock);
        return BW_OK;
    }
    if (n > 100000)
        return bw__fail(err, BW_EINVAL, "n", "redis: read_many reads at most 100000 keys at once, got %zu", n);
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 0, &s, err);
    if (rc != BW_OK)
        return rc;
    return read_keys(r, s, n, names, now, out, found, err);
}

/* The PX of an entry expiring at `exp`, written at `now` ("0": never). */
static void px_of(const rd *r, int64_t now, int64_t exp, char *buf, size_t n)
{
    if (exp == BW_STORE_NEVER) {
        snprintf(buf, n, "0");
        return;
    }
    int64_t left = exp > now ? (exp / 2 - now / 2) : 0; /* halves: no overflow */
    int64_t ms = left >= PX_MAX_MS / 2 * 1000000 ? PX_MAX_MS : (left * 2 + 999999) / 1000000;
    if (ms < 1)
        ms = 1;
    if (atomic_load(&((bw__store_clock *)r->clock)->clock))
        ms += INJECTED_SLACK_MS;
    if (ms > PX_MAX_MS)
        ms = PX_MAX_MS;
    snprintf(buf, n, "%" PRId64, ms);
}

/* One update (store/netupdate.h): the key and the value last seen there (the state). */
typedef struct rd_call {
    bw__netupdate u; /* first: the operations get it */
    rd *r;
    slot *s;
    char key[KEY_MAX + 1];
    const char *keys[1];
    size_t klen[1];
    int present; /* 0: the key was absent */
    size_t slen;
    char seen[HEAD + BW_STORE_DATA_MAX];
} rd_call;

/* The value of a GET_SCRIPT or conflict reply (then freed) into the state, *now its TIME. */
static int take_reply(rd_call *c, redisReply *rep, int64_t *now)
{
    int rc = reply_shape(rep, 1, &c->u.e);
    if (rc == BW_OK)
        rc = reply_now(c->r, rep, now, &c->u.e);
    if (rc == BW_OK) {
        const redisReply *v = rep->element[2];
        c->present = v->type == REDIS_REPLY_STRING;
        c->slen = c->present ? v->len : 0;
        if (c->slen > sizeof c->seen) /* the scripts answer a longer value as '' */
            rc = bw__fail(&c->u.e, BW_ESYS, "", "redis: the server's reply has an unexpected shape");
        else if (c->present)
            memcpy(c->seen, v->str, c->slen);
    }
    freeReplyObject(rep);
    return rc;
}

static int rd_up_cached(bw__netupdate *u, int64_t *now)
{
    rd_call *c = (rd_call *)u;
    return est_now(c->r, now) && cache_get(c->r, c->key, c->klen[0], &c->present, c->seen, &c->slen);
}

static int rd_up_read(bw__netupdate *u, int64_t *now)
{
    rd_call *c = (rd_call *)u;
    redisReply *rep = run_script(c->r, c->s, SC_GET, 1, c->keys, c->klen, 0, NULL, NULL, &u->broken, &u->e);
    return rep ? take_reply(c, rep, now) : u->e.code;
}

static int rd_up_entry(bw__netupdate *u, int64_t now, bw_store_entry *cur, int *exists)
{
    rd_call *c = (rd_call *)u;
    int found;
    decode_raw(c->seen, c->slen, c->present, now, cur, &found);
    *exists = c->present;
    return found;
}

/*
 * CAS_SCRIPT: apply verdict at the key if it still holds exactly the state's
 * value (a PUT writes `next`, expiring by PX from *now; a DELETE deletes; a
 * KEEP only checks). 1 done (the state becomes what was written), 0 a
 * conflict (the state and *now become the reply's value and TIME), or an
 * error.
 */
static int cas(rd_call *c, bw_store_verdict verdict, const bw_store_entry *next, int64_t *now)
{
    unsigned char val[HEAD + BW_STORE_DATA_MAX];
    size_t vlen = 0;
    char px[24] = "0";
    int check = verdict == BW_STORE_KEEP;
    if (check) {
        px[0] = '-', px[1] = 0;
    } else if (verdict == BW_STORE_PUT) { /* store.c checked the verdict and the length */
        uint64_t x = (uint64_t)next->expires_at;
        for (int i = HEAD - 1; i >= 0; i--, x >>= 8)
            val[i] = (unsigned char)(x & 0xff);
        memcpy(val + HEAD, next->data, next->len);
        vlen = HEAD + next->len;
        px_of(c->r, *now, next->expires_at, px, sizeof px);
    }
    const char *args[4] = {c->present ? "1" : "0", c->present ? c->seen : "", (const char *)val, px};
    size_t alen[4] = {1, c->present ? c->slen : 0, vlen, strlen(px)};
    redisReply *rep = run_script(c->r, c->s, SC_CAS, 1, c->keys, c->klen, 4, args, alen, &c->u.broken, &c->u.e);
    if (!rep)
        return c->u.e.code;
    if (!(rep->type == REDIS_REPLY_INTEGER && rep->integer == 1))
        return take_reply(c, rep, now) == BW_OK ? 0 : c->u.e.code;
    freeReplyObject(rep);
    if (!check) {
        c->present = verdict == BW_STORE_PUT;
        c->slen = vlen;
        memcpy(c->seen, val, vlen);
    }
    return 1;
}

static int rd_up_write(bw__netupdate *u, bw_store_verdict verdict, const bw_store_entry *next, int64_t *now)
{
    return cas((rd_call *)u, verdict, next, now);
}

/* A KEEP (or a DELETE of nothing) decided on the cache: CAS_SCRIPT's check, which answers the value on a mismatch. */
static int rd_up_confirm(bw__netupdate *u, int64_t *now)
{
    return cas((rd_call *)u, BW_STORE_KEEP, NULL, now);
}

static const bw__netupdate_ops rd_update_ops = {rd_up_cached, rd_up_read, rd_up_entry, rd_up_write, rd_up_confirm};

static int rd_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    rd *r = ctx;
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 0, &s, err);
    if (rc != BW_OK)
        return rc;
    rd_call c = {.r = r, .s = s};
    bw__netupdate_start(&c.u, &rd_update_ops, &r->conns, s, name);
    c.keys[0] = c.key;
    c.klen[0] = make_key(r, name, c.key);
    rc = bw__netupdate_run(&c.u, fn, arg);
    if (rc == BW_OK) /* the value now there (written, or confirmed): the next update of the key starts from it */
        cache_put(r, c.key, c.klen[0], c.seen, c.slen, c.present);
    return bw__netpool_done(&r->conns, s, c.u.broken, rc, &c.u.e, err);
}

static int rd_sweep(void *ctx, int max, int *deleted, bw_error *err)
{
    (void)ctx;
    (void)max;
    (void)err;
    *deleted = 0; /* the server expires entries itself (PX): there is nothing to sweep */
    return BW_OK;
}

/*
 * A page of keys: one SCAN cursor MATCH prefix* COUNT max (never KEYS), the
 * prefix's glob characters escaped. SCAN may answer more keys than COUNT: the
 * page then holds the first max of them in name order, and its cursor is
 * "C:NAME" (C the cursor this page started from, NAME the page's last key), so
 * that the next page asks the same SCAN again and keeps the names after NAME:
 * a key live meanwhile is in that answer again (SCAN's guarantee), so none is
 * lost, whatever was deleted in between. The cursor is otherwise the server's.
 */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int rd_scan(void *ctx, const char *cursor, char *next, int max, bw_store_key *keys, int *n, bw_error *err)
{
    rd *r = ctx;
    char from[24] = "0";
    const char *after = NULL;
    if (cursor[0]) {
        size_t d = strspn(cursor, "0123456789");
        if (d == 0 || d > 20 || (cursor[d] != 0 && cursor[d] != ':'))
            return bw__fail(err, BW_EINVAL, "cursor", "redis: not one of its scan cursors");
        memcpy(from, cursor, d);
        from[d] = 0;
        after = cursor[d] == ':' ? cursor + d + 1 : NULL;
    }
    char pattern[2 * PREFIX_MAX + 2];
    size_t pl = 0;
    for (size_t i = 0; i < r->plen; i++) {
        if (strchr("*?[]\\", r->prefix[i]))
            pattern[pl++] = '\\';
        pattern[pl++] = r->prefix[i];
    }
    pattern[pl++] = '*';
    pattern[pl] = 0;
    char count[16];
    int want = max < 10 ? 10 : max > SCAN_COUNT_MAX ? SCAN_COUNT_MAX : max;
    snprintf(count, sizeof count, "%d", want);
    const char *argv[6] = {"SCAN", from, "MATCH", pattern, "COUNT", count};
    size_t len[6];
    for (int i = 0; i < 6; i++)
        len[i] = strlen(argv[i]);
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 0, &s, err);
    if (rc != BW_OK)
        return rc;
    int broken = 0;
    bw_error e = {0, "", ""};
    redisReply *rep = bw__netpool_check(&r->conns, s, &e) == BW_OK
                          ? command(r, s->conn, s->deadline, cap_str(SCAN_KEYS_MAX(want), KEY_MAX), 6, argv, len,
                                    "SCAN on", &broken, &e)
                          : NULL;
    const char **names = NULL;
    size_t cands = 0;
    if (!rep) {
        rc = e.code;
    } else if (rep->type == REDIS_REPLY_ERROR) {
        rc = reply_fail(rep, "SCAN", &e);
    } else if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
               rep->element[0]->len > 20 || rep->element[1]->type != REDIS_REPLY_ARRAY) {
        rc = bw__fail(&e, BW_ESYS, "", "redis: SCAN answered something else than a cursor and keys");
    } else if (rep->element[1]->elements && !(names = malloc(rep->element[1]->elements * sizeof *names))) {
        rc = bw__fail(&e, BW_ENOMEM, "", "out of memory");
    } else {
        const redisReply *ks = rep->element[1];
        for (size_t i = 0; i < ks->elements; i++) {
            const redisReply *k = ks->element[i];
            if (k->type != REDIS_REPLY_STRING || k->len <= r->plen || k->len - r->plen > BW__STORE_KEY_MAX ||
                memcmp(k->str, r->prefix, r->plen) != 0 || strlen(k->str) != k->len)
                continue; /* not a key breakwater writes */
            const char *nm = k->str + r->plen;
            int ok = 1;
            for (const char *p = nm; *p && ok; p++)
                ok = *p >= 0x20 && *p < 0x7f;
            if (ok && (!after || strcmp(nm, after) > 0))
                names[cands++] = nm;
        }
        if (cands > 1)
            qsort(names, cands, sizeof *names, cmp_str);
        size_t take = cands < (size_t)max ? cands : (size_t)max;
        for (size_t i = 0; i < take; i++)
            memcpy(keys[i].name, names[i], strlen(names[i]) + 1);
        *n = (int)take;
        if (cands > take)
            snprintf(next, BW_STORE_CURSOR_MAX, "%s:%s", from, keys[take - 1].name);
        else if (strcmp(rep->element[0]->str, "0") == 0)
            next[0] = 0;
        else
            snprintf(next, BW_STORE_CURSOR_MAX, "%s", rep->element[0]->str);
    }
    free(names);
    if (rep)
        freeReplyObject(rep);
    return bw__netpool_done(&r->conns, s, broken, rc, &e, err);
}

static void rd_close(void *ctx)
{
    rd *r = ctx;
    bw__netpool_destroy(&r->conns);
    pthread_mutex_destroy(&r->cmu);
    free(r->cache);
    free(r);
}

/* ---- opening ---- */

/*
 * Connect once, by connect_timeout, and SCRIPT LOAD both scripts on that
 * connection (their SHA1s serve every connection), which then joins the pool.
 */
static int open_first(rd *r, bw_error *err)
{
    int64_t until = bw__mono_now() + r->connect_ns;
    rconn *c = NULL;
    bw_error e = {0, "", ""};
    int rc = connect_by(r, until, &c, &e);
    int broken = 0;
    for (int i = 0; rc == BW_OK && i < SC_COUNT; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", script_src[i]};
        size_t len[3] = {6, 4, strlen(script_src[i])};
        redisReply *rep = command(r, c, until, cap_of(0), 3, argv, len, "SCRIPT LOAD on", &broken, &e);
        if (!rep) {
            rc = e.code;
            break;
        }
        if (rep->type == REDIS_REPLY_STRING && rep->len == 40)
            memcpy(r->sha[i], rep->str, 40);
        else
            rc = rep->type == REDIS_REPLY_ERROR
                     ? reply_fail(rep, "SCRIPT LOAD", &e)
                     : bw__fail(&e, BW_ESYS, "", "redis: SCRIPT LOAD answered something else than a SHA1");
        freeReplyObject(rep);
    }
    if (rc == BW_OK) {
        bw__netpool_adopt(&r->conns, c);
        return BW_OK;
    }
    conn_free(c);
    if (err)
        *err = e;
    return rc;
}

static int rd_open(const bw__url *u, const bw__store_clock *clock, bw_store_ops *ops, void **ctx, bw_error *err)
{
    rd *r = calloc(1, sizeof *r);
    if (!r)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    int rc = parse_path(r, u->path, err);
    if (rc == BW_OK)
        rc = parse_options(r, u, err);
    if (rc != BW_OK) {
        free(r);
        return rc;
    }
    r->cache = calloc(CACHE_SLOTS, sizeof *r->cache); /* pages the kernel gives as they are touched */
    if (!r->cache) {
        free(r);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    if (pthread_mutex_init(&r->cmu, NULL) != 0) {
        free(r->cache);
        free(r);
        return bw__fail(err, BW_ESYS, "", "could not create the redis: store's mutex");
    }
    rc = bw__netpool_init(&r->conns, "redis", r->pool, r->timeout_ns, &pool_ops, r, err);
    if (rc != BW_OK) {
        pthread_mutex_destroy(&r->cmu);
        free(r->cache);
        free(r);
        return rc;
    }
    r->seed = bw__hash_seed(r);
    atomic_init(&r->time_off, INT64_MIN);
    r->clock = clock;
    rc = open_first(r, err);
    if (rc != BW_OK) {
        rd_close(r);
        return rc;
    }
    static const bw_store_ops rd_ops = {BW_STORE_OPS_VERSION, "redis", rd_update, rd_sweep, rd_close, rd_read,
                                        rd_read_many,         rd_scan};
    *ops = rd_ops;
    *ctx = r;
    return BW_OK;
}

const bw__backend bw__backend_redis = {
    "redis", {"prefix", "connect_timeout", "timeout", "pool", "socket", NULL}, BW__STORE_REALTIME, rd_open, NULL, NULL};
