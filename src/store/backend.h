/*
 * backend.h — what a store backend sees of the store layer (internal; store
 * layer). A backend (store/memory/, store/shm/, store/sqlite/, ...) includes
 * this header and the base layer, nothing else of breakwater's internals but,
 * for a network backend, the connection pool (store/netpool.h).
 *
 * A backend is a folder with its sources, a CMakeLists.txt that registers it
 * (bw_add_backend, or bw_absent_backend when its dependency is missing) and one
 * descriptor, `const bw__backend bw__backend_<scheme>`, that the generated
 * scheme table (backends.c) lists. bw_store_open finds the descriptor by the
 * URL's scheme, checks every option the URL gives against `options`, and calls
 * `open` with the parsed URL; open fills the ops table and its context, exactly
 * as a custom store's author does for bw_store_custom (store.h), so a built-in
 * store is a custom store that ships with the library.
 *
 * Keys: every name a backend's operations receive is a store key (base/name.h):
 * 1 to BW__STORE_KEY_MAX (511) bytes of printable ASCII, at most one space.
 * The store's clock: a backend reads "now" through bw__store_clock_now on the
 * clock it was given, so that a test can inject a manual clock.
 */
#ifndef BW_STORE_BACKEND_H
#define BW_STORE_BACKEND_H

#include <stdatomic.h>
#include <string.h>

#include "base/error.h"
#include "base/name.h"
#include "breakwater/store.h"

/* ---- URLs: scheme ":" path ["?" key "=" value {"&" key "=" value}] (url.c) ---- */

#define BW__URL_MAX_OPTS 8

typedef struct bw__url {
    char scheme[16];
    char path[4096];
    int nopts;
    struct {
        char key[32];
        char value[128];
    } opt[BW__URL_MAX_OPTS];
} bw__url;

/*
 * Parse url into *u: each part bounded, an option at most once, no escapes.
 * Returns BW_OK, or BW_EINVAL with *err naming the part ("url", "scheme",
 * "path", or the option).
 */
int bw__url_parse(const char *url, bw__url *u, bw_error *err);
/* The value of option `key`, or NULL when absent. */
const char *bw__url_opt(const bw__url *u, const char *key);
/*
 * Option `key` as a whole number in [lo, hi] (dflt when absent), or as a
 * duration ("5s", "1h", "off" = 0) when `duration`. BW_EINVAL with *err naming
 * the option otherwise.
 */
int bw__url_int(const bw__url *u, const char *key, int64_t lo, int64_t hi, int64_t dflt, int duration, int64_t *out,
                bw_error *err);

/*
 * The secrets of a URL (url.c), for every message that shows a URL or may
 * echo a part of one: what bw_store_url_redact masks (store.h says which
 * parts, and why so generously). A span is url[at, at + len); `kind` says
 * what it is, BW_STORE_URL_* bits (store.h; spans merged have their kinds
 * or'ed): BW_STORE_URL_ALL marks a string that is not a URL at all (no
 * scheme), which only ever matches as a whole. bw__url_secrets writes the
 * spans in order, merged, at most max (max >= 1; past that the last one runs
 * to the end of url, with the kinds of all it holds) and returns how many.
 */
typedef struct bw__url_span {
    size_t at, len;
    unsigned kind;
} bw__url_span;
#define BW__URL_SPANS_MAX 32
int bw__url_secrets(const char *url, bw__url_span *out, int max);
/*
 * url with each secret replaced by "***" into buf (n bytes, NUL-terminated when n > 0); the length of the whole.
 * *kinds (when kinds is not NULL): the BW_STORE_URL_* bits of what was masked, 0 nothing.
 */
size_t bw__url_redact(const char *url, char *buf, size_t n, unsigned *kinds);
/*
 * Replace in the string s (of an array of n bytes, any n; cut to n - 1 bytes
 * first when it holds no NUL) with "***":
 * - every occurrence of a secret of url, wherever it is;
 * - each piece of one between the delimiters of a URL (a message may echo a
 *   part: libpq reads "u:SEC/RET@h" as host "u", port "SEC"), of 3 bytes or
 *   more, where it is a word of its own: not where a letter or digit of its
 *   end touches another of s ("pass word" leaves "password" and "bwpass"
 *   alone; a word of s that equals a piece, "a word to pass", is masked:
 *   the scrub cannot tell it from an echo). Shorter pieces are left (too
 *   short to tell from ordinary text);
 * - both percent-decoded too (libpq quotes "u:abc%40def"'s password as
 *   "abc@def"), all of each secret before any piece;
 * - the first 3 bytes or more of any of these at the very end of s (a
 *   message cut short in the middle of a secret).
 */
void bw__url_scrub(const char *url, char *s, size_t n);
/*
 * What bw__url_scrub looks for in a message, computed once: an open store
 * keeps it to scrub the errors of its later calls (store.c). Entries of a
 * kind byte (BW__NEEDLE_WHOLE: all of a secret; BW__NEEDLE_PIECE: a piece of
 * one), the text and a NUL, ended by an empty entry. bw__url_needles writes
 * them into buf when its n bytes hold them all and returns the bytes needed
 * (1: url has no secret to look for); bw__url_scrub_needles applies them to s
 * as bw__url_scrub does (needles NULL: nothing to do). bw__url_wipe zeroes n
 * bytes at p (a copy of a secret, before it is freed).
 */
enum { BW__NEEDLE_WHOLE = 'w', BW__NEEDLE_PIECE = 'p' };
size_t bw__url_needles(const char *url, char *buf, size_t n);
void bw__url_scrub_needles(const char *needles, char *s, size_t n);
void bw__url_wipe(char *p, size_t n);

/* ---- the store's clock ---- */

/* The default clocks of the backends: the kernel's coarse clocks (store.c says why). */
enum { BW__STORE_MONOTONIC = 0, BW__STORE_REALTIME = 1 };

typedef struct bw__store_clock {
    _Atomic(bw_clock *) clock; /* bw_store_set_clock; NULL = the default */
    int fallback;              /* BW__STORE_MONOTONIC or BW__STORE_REALTIME */
} bw__store_clock;

/* The store's clock, in ns (clock.c). */
int64_t bw__store_clock_now(const bw__store_clock *c);

/* ---- backends ---- */

typedef struct bw__backend {
    const char *scheme;
    /*
     * The URL options it takes, NULL-terminated. "*" among them: any other
     * option too, which open then checks itself (postgresql: passes libpq's
     * connection keywords through to libpq).
     */
    const char *options[8];
    int clock; /* its default clock: BW__STORE_MONOTONIC or BW__STORE_REALTIME */
    /*
     * Open the store u names: fill *ops (a version-BW_STORE_OPS_VERSION table)
     * and *ctx, keeping `clock` (valid until ops->close) for its "now". On
     * failure return the error with *err filled, having created nothing.
     */
    int (*open)(const bw__url *u, const bw__store_clock *clock, bw_store_ops *ops, void **ctx, bw_error *err);
    /* NULL when the backend is in the tree but not in this build: why (e.g. its library was not found). */
    const char *absent;
    /*
     * An entry of a core whose backend is in a component's library
     * (base/component.h): the component's name ("redis"), and open is NULL;
     * bw_store_open takes the component's backend of the same scheme. NULL for
     * a backend in this library.
     */
    const char *component;
} bw__backend;

/* The scheme table (generated: backends.c), NULL-terminated. */
extern const bw__backend *const bw__backends[];

/* Copy an entry's used bytes (for backends that keep entries). */
static inline void bw__entry_copy(bw_store_entry *dst, const bw_store_entry *src)
{
    dst->expires_at = src->expires_at;
    dst->len = src->len;
    memcpy(dst->data, src->data, src->len);
}

#endif
