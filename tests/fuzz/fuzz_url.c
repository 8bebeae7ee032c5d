/*
 * fuzz_url.c — a libFuzzer target for store URLs (tests/fuzz/): the URL
 * parser (bw__url_parse), option lookup and validation (bw__url_opt,
 * bw__url_int) of store/backend.h, and bw_store_open wherever opening can
 * create nothing: memory: (closed again at once), a scheme this build lacks,
 * a URL that does not parse, an option its backend does not take (refused
 * before the backend runs). A URL that would open a real shm: segment or
 * sqlite: file is checked through the parser and the option checks only.
 *
 * Any input (a NUL-terminated copy) must run without a crash, a sanitizer
 * report or a long loop, and:
 * - every error fills err: the code returned, a field and a non-empty
 *   message, each NUL-terminated within its array; a parse error names
 *   "url", "scheme", "path" or an option key of the input;
 * - a parsed URL's parts are NUL-terminated within their arrays, the scheme
 *   non-empty, keys non-empty, distinct and free of '=' and '&', and
 *   scheme ":" path ("?" key "=" value, "&" between) gives the input back;
 * - bw__url_opt finds each key's value and nothing for a key not given;
 * - bw__url_int answers the default for an absent key, never a value outside
 *   [lo, hi], and for a plain decimal number exactly what range says;
 * - bw_store_open agrees with the parser about a URL that does not parse;
 * - a secret never shows: the input with a password put in (as a userinfo's,
 *   "scheme://u:SECRET@...", as an option, "...&password=SECRET", and as
 *   one that held a '&', "...&password=x&SECRET") is
 *   masked by bw_store_url_redact, and no error of bw_store_open (message or
 *   field) holds it; and the redacted text of any input fits the bound
 *   store.h gives (3 * strlen + 1), is what its return value says, and is
 *   the input itself when *masked says nothing was masked.
 * Built as a fuzzer with clang (-DBW_FUZZ=ON); without it, replay.c drives the
 * checked-in corpus (tests/fuzz/corpus/url/) under ctest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/breakwater.h"
#include "store/backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                                                                  \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            abort();                                                                                                   \
    } while (0)

/* An error as every call must leave it: code, field and message filled and terminated. */
static void check_error(const bw_error *e, int rc)
{
    REQUIRE(rc < 0);
    REQUIRE(e->code == rc);
    REQUIRE(memchr(e->field, 0, sizeof e->field) != NULL);
    REQUIRE(memchr(e->message, 0, sizeof e->message) != NULL);
    REQUIRE(e->message[0] != 0);
}

static void poison(bw_error *e)
{
    memset(e, 0x7f, sizeof *e); /* no terminator anywhere: filling it must put one */
}

/* The backend of this build for scheme, or NULL (absent ones too: their open never runs). */
static const bw__backend *present_backend(const char *scheme)
{
    for (const bw__backend *const *b = bw__backends; *b; b++)
        if (strcmp((*b)->scheme, scheme) == 0 && !(*b)->absent)
            return *b;
    return NULL;
}

/* A plain decimal number of at most 18 digits: its value, independently of the parser. */
static int plain_decimal(const char *v, int64_t *out)
{
    const char *p = v;
    int neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    size_t n = strlen(p);
    if (n == 0 || n > 18 || strspn(p, "0123456789") != n)
        return 0;
    int64_t x = 0;
    for (; *p; p++)
        x = x * 10 + (*p - '0');
    *out = neg ? -x : x;
    return 1;
}

static void check_int_option(const bw__url *u, const char *key)
{
    static const struct {
        int64_t lo, hi;
        int duration;
    } ranges[] = {{1, 1048576, 0}, {0, INT64_MAX, 0},          {INT64_MIN, INT64_MAX, 0},
                  {-5, 5, 0},      {1, 3600 * BW_NS_PER_S, 1}, {0, 366 * 86400 * BW_NS_PER_S, 1}};
    const char *v = bw__url_opt(u, key);
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        int64_t out = 12345;
        bw_error e;
        poison(&e);
        int rc = bw__url_int(u, key, ranges[i].lo, ranges[i].hi, 42, ranges[i].duration, &out, &e);
        if (rc == BW_OK) {
            REQUIRE(v ? out >= ranges[i].lo && out <= ranges[i].hi : out == 42);
        } else {
            REQUIRE(v != NULL && rc == BW_EINVAL);
            check_error(&e, rc);
            REQUIRE(strcmp(e.field, key) == 0);
            REQUIRE(out == 12345); /* untouched */
        }
        int64_t x;
        if (v && !ranges[i].duration && plain_decimal(v, &x))
            REQUIRE((rc == BW_OK) == (x >= ranges[i].lo && x <= ranges[i].hi) && (rc != BW_OK || out == x));
    }
}

/* Every invariant of a URL that parsed. */
static void check_parsed(const char *text, const bw__url *u)
{
    REQUIRE(memchr(u->scheme, 0, sizeof u->scheme) != NULL);
    REQUIRE(memchr(u->path, 0, sizeof u->path) != NULL);
    REQUIRE(u->scheme[0] != 0);
    REQUIRE(u->nopts >= 0 && u->nopts <= BW__URL_MAX_OPTS);
    /* The parts give the input back. */
    size_t at = 0, n = strlen(text);
    size_t ls = strlen(u->scheme), lp = strlen(u->path);
    REQUIRE(ls < n && memcmp(text, u->scheme, ls) == 0 && text[ls] == ':');
    at = ls + 1;
    REQUIRE(at + lp <= n && memcmp(text + at, u->path, lp) == 0);
    REQUIRE(memchr(u->path, '?', lp) == NULL);
    at += lp;
    for (int i = 0; i < u->nopts; i++) {
        const char *k = u->opt[i].key, *v = u->opt[i].value;
        REQUIRE(memchr(k, 0, sizeof u->opt[i].key) != NULL);
        REQUIRE(memchr(v, 0, sizeof u->opt[i].value) != NULL);
        size_t lk = strlen(k), lv = strlen(v);
        REQUIRE(lk > 0 && strpbrk(k, "=&") == NULL && strchr(v, '&') == NULL);
        REQUIRE(at < n && text[at] == (i == 0 ? '?' : '&'));
        at++;
        REQUIRE(at + lk + 1 + lv <= n && memcmp(text + at, k, lk) == 0 && text[at + lk] == '=');
        at += lk + 1;
        REQUIRE(memcmp(text + at, v, lv) == 0);
        at += lv;
        for (int j = 0; j < i; j++)
            REQUIRE(strcmp(u->opt[j].key, k) != 0);
        REQUIRE(bw__url_opt(u, k) == v);
        check_int_option(u, k);
    }
    REQUIRE(at == n);
    REQUIRE(bw__url_opt(u, "no=such=key") == NULL); /* a parsed key never holds '=' */
    check_int_option(u, "no=such=key");
}

/*
 * Open the URL if that can create nothing outside this process: memory:, a
 * scheme with no backend in this build, a URL that does not parse, or an
 * option the backend does not take (bw_store_open refuses those before the
 * backend runs).
 */
static void maybe_open(const char *text, int parsed, const bw__url *u, const bw_error *parse_err, const char *secret)
{
    const bw__backend *b = parsed ? present_backend(u->scheme) : NULL;
    int unknown_opt = -1;
    for (int i = 0; b && i < u->nopts && unknown_opt < 0; i++) {
        int known = 0;
        for (int k = 0; b->options[k]; k++) /* "*": any option (the backend checks it, and may connect) */
            known |= strcmp(b->options[k], u->opt[i].key) == 0 || strcmp(b->options[k], "*") == 0;
        if (!known)
            unknown_opt = i;
    }
    if (b && strcmp(b->scheme, "memory") != 0 && unknown_opt < 0)
        return; /* would make a segment or a file */
    bw_store *s = NULL;
    bw_error e;
    poison(&e);
    int rc = bw_store_open(text, &s, &e);
    if (rc != BW_OK) {
        check_error(&e, rc);
        REQUIRE(!secret || (!strstr(e.message, secret) && !strstr(e.field, secret)));
        REQUIRE(s == NULL);
        /* The field bw_store_open names, scrubbed of the URL's secrets as its error is (a key may equal one). */
        char want[sizeof e.field];
        const char *field = !parsed ? parse_err->field : unknown_opt >= 0 ? u->opt[unknown_opt].key : "scheme";
        snprintf(want, sizeof want, "%s", field);
        bw__url_scrub(text, want, sizeof want);
        if (!parsed) /* the same parser: the same answer */
            REQUIRE(rc == parse_err->code && strcmp(e.field, want) == 0);
        else if (unknown_opt >= 0)
            REQUIRE(rc == BW_EINVAL && strcmp(e.field, want) == 0);
        else if (!b)
            REQUIRE((rc == BW_EINVAL || rc == BW_ESTATE) && strcmp(e.field, want) == 0);
        return;
    }
    REQUIRE(parsed && b && strcmp(b->scheme, "memory") == 0 && s != NULL);
    REQUIRE(strcmp(bw_store_scheme(s), "memory") == 0);
    bw_store_close(s);
}

#define SECRET "Zq7xSECRETk9"

/* The redacted text of text: within the documented bound, its length the one returned; malloc'd (NULL: none). */
static char *redacted(const char *text)
{
    size_t cap = 3 * strlen(text) + 1;
    char *r = malloc(cap);
    if (!r)
        return NULL;
    unsigned masked = 0xdead, again = 0xdead;
    int n = bw_store_url_redact(text, r, cap, &masked);
    REQUIRE(n >= 0 && (size_t)n == strlen(r) && (size_t)n < cap);
    REQUIRE(bw_store_url_redact(text, NULL, 0, &again) == n && again == masked);
    /* What it says it masked: nothing when the text is unchanged, something when a "***" was put in. */
    REQUIRE(masked != 0 || strcmp(r, text) == 0);
    REQUIRE(masked == 0 || strstr(r, "***") != NULL);
    REQUIRE((masked & ~(unsigned)(BW_STORE_URL_SECRET | BW_STORE_URL_WORD | BW_STORE_URL_ALL)) == 0);
    return r;
}

/* Open text if that creates nothing (maybe_open), with the checks of a URL that parsed or did not. */
static void check_open(const char *text, const char *secret)
{
    bw__url *u = malloc(sizeof *u);
    if (!u)
        return;
    bw_error e;
    poison(&e);
    int rc = bw__url_parse(text, u, &e);
    REQUIRE(rc == BW_OK || !strstr(e.message, secret));
    maybe_open(text, rc == BW_OK, u, &e, secret);
    free(u);
}

/* The input with SECRET put in as a password, two ways: never shown. */
static void check_secret(const char *text)
{
    if (strstr(text, "Zq7x"))
        return; /* the input holds the marker itself */
    size_t n = strlen(text);
    char *v = malloc(n + 64);
    if (!v)
        return;
    const char *colon = strchr(text, ':');
    size_t sl = colon ? (size_t)(colon - text) : 0;
    const char *rest = colon ? colon + 1 : text;
    if (strncmp(rest, "//", 2) == 0)
        rest += 2;
    snprintf(v, n + 64, "%.*s://u:" SECRET "@%s", (int)(sl ? sl : 1), sl ? text : "x", rest);
    char *r = redacted(v);
    REQUIRE(!r || !strstr(r, SECRET));
    free(r);
    check_open(v, SECRET);
    for (int cut = 0; cut < 2; cut++) { /* the value whole, or cut by a '&' it held */
        snprintf(v, n + 64, "%s%spassword=%s" SECRET, text, strchr(text, '?') ? "&" : "?", cut ? "x&" : "");
        r = redacted(v);
        REQUIRE(!r || !strstr(r, SECRET));
        free(r);
        check_open(v, SECRET);
    }
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0; /* an embedded NUL ends the URL, as in C */
    bw__url *u = malloc(sizeof *u);
    if (!u) {
        free(text);
        return 0;
    }
    bw_error e;
    poison(&e);
    int rc = bw__url_parse(text, u, &e);
    if (rc == BW_OK) {
        check_parsed(text, u);
    } else {
        REQUIRE(rc == BW_EINVAL);
        check_error(&e, rc);
        int named = strcmp(e.field, "url") == 0 || strcmp(e.field, "scheme") == 0 || strcmp(e.field, "path") == 0;
        REQUIRE(named || (e.field[0] && strstr(text, e.field) != NULL)); /* else a key given twice */
    }
    maybe_open(text, rc == BW_OK, u, &e, NULL);
    free(u);
    free(redacted(text));
    check_secret(text);
    free(text);
    return 0;
}
