/*
 * url.c — store URLs: scheme ":" path ["?" key "=" value {"&" key "=" value}],
 * their options in the configuration text's syntax, and their secrets
 * (backend.h).
 *
 * Design notes: a URL may carry a password (redis://:pw@host,
 * postgresql://u:pw@host, postgresql:host=h password=pw, ?password=pw), and
 * a message about a URL must never show it. So the parser echoes no part of
 * a URL that could hold one (a malformed URL is named by the part at fault
 * and its rule, not quoted), and bw_store_open scrubs whatever a backend or
 * its library (libpq quotes parts of a connection string) wrote in its error
 * with bw__url_scrub; bw__url_redact gives the URL itself for a message.
 * Both find the secrets with one scan (bw__url_secrets), generous by design:
 * masking a part that was no secret costs a less telling message, missing a
 * secret costs the secret. The scrub looks for each secret whole, anywhere,
 * and for its pieces (a library may quote a part) only as words of their
 * own, so that a password of common words does not mask words of the message
 * it is part of ("pass word" in "password"); both as written and
 * percent-decoded; in place, so a message of any length is scrubbed whole.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/duration.h"
#include "store/backend.h"

/* A scheme as RFC 3986 writes one: a letter, then letters, digits, '+', '-', '.'. */
static int scheme_like(const char *s, size_t n)
{
    if (n == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '+' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

/* An option key a message may quote: 1 to 31 bytes of letters, digits and '_' (never a piece of a value). */
static int key_like(const char *s, size_t n)
{
    if (n == 0 || n > 31)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_'))
            return 0;
    return 1;
}

int bw__url_parse(const char *url, bw__url *u, bw_error *err)
{
    memset(u, 0, sizeof *u);
    const char *colon = strchr(url, ':');
    /* Nothing of a string that is not a URL is quoted: it may be a secret given in the wrong place. */
    if (!colon || colon == url)
        return bw__fail(err, BW_EINVAL, "url", "store URL must look like scheme:path, got %s",
                        colon ? "no scheme before the ':'" : "no ':'");
    size_t n = (size_t)(colon - url);
    if (n >= sizeof u->scheme)
        return bw__fail(err, BW_EINVAL, "scheme", "unknown store scheme of %zu bytes (none is longer than %zu)", n,
                        sizeof u->scheme - 1);
    if (!scheme_like(url, n))
        return bw__fail(err, BW_EINVAL, "scheme",
                        "the store URL's scheme (before its first ':') must be a letter, then letters, digits, "
                        "'+', '-' or '.'");
    memcpy(u->scheme, url, n);
    const char *p = colon + 1;
    const char *q = strchr(p, '?');
    size_t plen = q ? (size_t)(q - p) : strlen(p);
    if (plen >= sizeof u->path)
        return bw__fail(err, BW_EINVAL, "path", "store path is too long (%zu bytes, at most %zu)", plen,
                        sizeof u->path - 1);
    memcpy(u->path, p, plen);
    while (q) {
        const char *k = q + 1;
        q = strchr(k, '&');
        size_t len = q ? (size_t)(q - k) : strlen(k);
        const char *eq = memchr(k, '=', len);
        /* Not quoted: a part without '=' may be the end of a secret that held a '&'. */
        if (!eq || eq == k)
            return bw__fail(err, BW_EINVAL, "url", "store option %d must be key=value (after '?', '&' between)",
                            u->nopts + 1);
        size_t kl = (size_t)(eq - k), vl = len - kl - 1;
        if (u->nopts == BW__URL_MAX_OPTS)
            return bw__fail(err, BW_EINVAL, "url", "at most %d store options", BW__URL_MAX_OPTS);
        if (kl >= sizeof u->opt[0].key || !key_like(k, kl))
            return bw__fail(err, BW_EINVAL, "url",
                            "store option %d: a key must be 1 to %zu bytes of letters, digits and '_'", u->nopts + 1,
                            sizeof u->opt[0].key - 1);
        if (vl >= sizeof u->opt[0].value)
            return bw__fail(err, BW_EINVAL, "url", "store option '%.*s': the value is longer than %zu bytes", (int)kl,
                            k, sizeof u->opt[0].value - 1);
        for (int i = 0; i < u->nopts; i++)
            if (strlen(u->opt[i].key) == kl && memcmp(u->opt[i].key, k, kl) == 0)
                return bw__fail(err, BW_EINVAL, u->opt[i].key, "store option '%s' is given twice", u->opt[i].key);
        memcpy(u->opt[u->nopts].key, k, kl);
        memcpy(u->opt[u->nopts].value, eq + 1, vl);
        u->nopts++;
    }
    return BW_OK;
}

const char *bw__url_opt(const bw__url *u, const char *key)
{
    for (int i = 0; i < u->nopts; i++)
        if (strcmp(u->opt[i].key, key) == 0)
            return u->opt[i].value;
    return NULL;
}

int bw__url_int(const bw__url *u, const char *key, int64_t lo, int64_t hi, int64_t dflt, int duration, int64_t *out,
                bw_error *err)
{
    const char *v = bw__url_opt(u, key);
    if (!v) {
        *out = dflt;
        return BW_OK;
    }
    int64_t x = 0;
    /* The configuration text's rules: no spaces, exact durations with their unit, overflow reported as such. */
    int bad = duration ? bw__parse_duration(v, 0, &x) : bw__parse_int(v, &x);
    if (bad == BW__DURATION_BARE)
        return bw__duration_bare(err, BW_EINVAL, key, "", v, "ms", "s");
    if (bad == 1)
        return bw__fail(err, BW_EINVAL, key,
                        "%s must be a whole number in [%" PRId64 ", %" PRId64 "], got '%.60s' (too large)", key, lo, hi,
                        v);
    if (bad || x < lo || x > hi) {
        if (!duration)
            return bw__fail(err, BW_EINVAL, key, "%s must be a whole number in [%" PRId64 ", %" PRId64 "], got '%.60s'",
                            key, lo, hi, v);
        char a[32], b[32];
        bw__fmt_duration(a, sizeof a, lo, "off");
        bw__fmt_duration(b, sizeof b, hi, "off");
        return bw__fail(err, BW_EINVAL, key, "%s must be a duration in [%s, %s], got '%.60s'", key, a, b, v);
    }
    *out = x;
    return BW_OK;
}

/* ---- secrets ---- */

/* Whether key (n bytes) names a secret: it holds "pass", "pwd", "secret", "token" or "auth", in any case. */
static int secret_key(const char *k, size_t n)
{
    static const char *const words[] = {"pass", "pwd", "secret", "token", "auth"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t wl = strlen(words[w]);
        for (size_t i = 0; i + wl <= n; i++) {
            size_t j = 0;
            while (j < wl && (k[i + j] | 0x20) == words[w][j])
                j++;
            if (j == wl)
                return 1;
        }
    }
    return 0;
}

static int space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

typedef struct spans {
    bw__url_span *v;
    int n, max;
    size_t cut;         /* past max: everything from here on is one span; SIZE_MAX: none */
    unsigned cut_kinds; /* the kinds of the spans left out past max */
} spans;

static void add(spans *sp, size_t at, size_t len, unsigned kind)
{
    if (len == 0)
        return;
    if (sp->n == sp->max) {
        if (at < sp->cut)
            sp->cut = at;
        sp->cut_kinds |= kind;
        return;
    }
    sp->v[sp->n++] = (bw__url_span){at, len, kind};
}

/*
 * The password of a userinfo "@" (after "//", or right after the scheme's ':'
 * when the "//" is missing): after the userinfo's first ':', up to the last
 * '@' of the URL. Returns where the host starts.
 */
static size_t userinfo(const char *url, size_t a, size_t n, spans *sp)
{
    size_t at = n;
    for (size_t i = a; i < n; i++)
        if (url[i] == '@')
            at = i;
    if (at == n)
        return a;
    const char *colon = memchr(url + a, ':', at - a);
    if (colon)
        add(sp, (size_t)(colon - url) + 1, at - (size_t)(colon - url) - 1, BW_STORE_URL_PASSWORD);
    return at + 1;
}

/*
 * host[:port] up to the first '/' or '?', a ',' between hosts (libpq): a
 * port that is not a number may be a password whose '@' is missing
 * (redis://:pw).
 */
static void ports(const char *url, size_t h, size_t n, spans *sp)
{
    size_t end = h;
    while (end < n && url[end] != '/' && url[end] != '?')
        end++;
    for (size_t e = h; e < end;) {
        size_t ee = e;
        while (ee < end && url[ee] != ',')
            ee++;
        size_t p = e;
        if (url[e] == '[') {
            while (p < ee && url[p] != ']')
                p++;
            p = p < ee ? p + 1 : ee;
        }
        while (p < ee && url[p] != ':')
            p++;
        if (p < ee) {
            size_t d = p + 1;
            while (d < ee && url[d] >= '0' && url[d] <= '9')
                d++;
            if (d < ee)
                add(sp, p + 1, ee - p - 1, BW_STORE_URL_PORT);
        }
        e = ee + 1;
    }
}

/*
 * The words without '=' of a query (after the first '?', '&' between) and of
 * a libpq keyword string (the path's words, when its first holds a '='):
 * malformed, and maybe the piece of a secret that held a '&' or a space.
 */
static void bare_words(const char *url, size_t r, size_t n, int keywords, spans *sp)
{
    const char *q = memchr(url + r, '?', n - r);
    size_t qa = q ? (size_t)(q - url) + 1 : n;
    for (size_t i = keywords ? r : qa; i < n;) {
        int query = i >= qa;
        size_t e = i;
        int eq = 0;
        while (e < n && url[e] != '&' && (query || (!space(url[e]) && url[e] != '?')))
            eq |= url[e++] == '=';
        if (!query) { /* libpq takes "key = value": a word beside a '=' is a key or a value */
            size_t a = e, b = i;
            while (a < n && space(url[a]))
                a++;
            while (b > r && space(url[b - 1]))
                b--;
            eq |= (a < n && url[a] == '=') || (b > r && url[b - 1] == '=');
        }
        if (!eq)
            add(sp, i, e - i, BW_STORE_URL_WORD);
        i = e < n && !query && url[e] == '?' ? qa : e + 1;
    }
}

/*
 * Every key=value (a query's option, or a word of a libpq keyword string)
 * whose key (letters, digits, '_', '-', '.') names a secret, starting a word (after the scheme's ':', '?',
 * '&', ';' or a space): its value, quoted ('...', '\' escaping) or up to a
 * '&' or a space; and then every word without '=' that follows (what libpq
 * would read of an unquoted value holding a space, what a '&' cut off).
 */
static void keyed_values(const char *url, size_t r, size_t n, spans *sp)
{
    for (size_t i = r; i < n; i++) {
        if (i > r && url[i - 1] != '?' && url[i - 1] != '&' && url[i - 1] != ';' && !space(url[i - 1]))
            continue;
        size_t k = i; /* a key: letters, digits, '_', '-', '.' ("//user:pw@host" is none) */
        while (k < n && ((url[k] >= 'a' && url[k] <= 'z') || (url[k] >= 'A' && url[k] <= 'Z') ||
                         (url[k] >= '0' && url[k] <= '9') || url[k] == '_' || url[k] == '-' || url[k] == '.'))
            k++;
        size_t key_end = k;
        while (k < n && space(url[k]))
            k++;
        if (k == n || url[k] != '=' || key_end == i || !secret_key(url + i, key_end - i))
            continue;
        size_t v = k + 1;
        while (v < n && space(url[v]))
            v++;
        size_t e = v;
        if (e < n && url[e] == '\'') {
            for (e++; e < n && url[e] != '\''; e++)
                if (url[e] == '\\' && e + 1 < n)
                    e++;
            e = e < n ? e + 1 : n;
        } else {
            while (e < n && url[e] != '&' && !space(url[e]))
                e++;
        }
        for (size_t w = e;;) { /* the words without '=' that follow */
            while (w < n && (url[w] == '&' || space(url[w])))
                w++;
            size_t we = w;
            int eq = 0;
            while (we < n && url[we] != '&' && !space(url[we]))
                eq |= url[we++] == '=';
            if (we == w || eq)
                break;
            e = w = we;
        }
        add(sp, v, e - v, BW_STORE_URL_KEYED);
        i = e > i ? e - 1 : i;
    }
}

static void sort_merge(spans *sp)
{
    for (int i = 1; i < sp->n; i++) /* insertion: a handful, nearly in order */
        for (int j = i; j > 0 && sp->v[j - 1].at > sp->v[j].at; j--) {
            bw__url_span t = sp->v[j];
            sp->v[j] = sp->v[j - 1];
            sp->v[j - 1] = t;
        }
    int k = 0;
    for (int i = 0; i < sp->n; i++) {
        if (k > 0 && sp->v[i].at <= sp->v[k - 1].at + sp->v[k - 1].len) {
            size_t end = sp->v[i].at + sp->v[i].len, prev = sp->v[k - 1].at + sp->v[k - 1].len;
            if (end > prev)
                sp->v[k - 1].len = end - sp->v[k - 1].at;
            sp->v[k - 1].kind |= sp->v[i].kind;
        } else {
            sp->v[k++] = sp->v[i];
        }
    }
    sp->n = k;
}

int bw__url_secrets(const char *url, bw__url_span *out, int max)
{
    spans sp = {out, 0, max - 1, SIZE_MAX, 0}; /* one kept for the tail past max */
    size_t n = strlen(url);
    const char *colon = strchr(url, ':');
    if (!colon || !scheme_like(url, (size_t)(colon - url))) { /* not a URL: all of it may be a secret */
        if (n == 0)
            return 0;
        out[0] = (bw__url_span){0, n, BW_STORE_URL_ALL};
        return 1;
    }
    size_t r = (size_t)(colon - url) + 1;
    int uri = strncmp(url + r, "//", 2) == 0;
    if (uri)
        ports(url, userinfo(url, r + 2, n, &sp), n, &sp);
    else
        userinfo(url, r, n, &sp);
    size_t w = strcspn(url + r, " \t\n\r\f\v?"); /* a keyword string: its first word holds a '=' */
    bare_words(url, r, n, !uri && memchr(url + r, '=', w) != NULL, &sp);
    keyed_values(url, r, n, &sp);
    sort_merge(&sp);
    if (sp.cut != SIZE_MAX) { /* too many: from the first one left out to the end, all masked */
        while (sp.n > 0 && sp.v[sp.n - 1].at >= sp.cut)
            sp.n--;
        if (sp.n > 0 && sp.v[sp.n - 1].at + sp.v[sp.n - 1].len >= sp.cut) {
            sp.cut = sp.v[--sp.n].at;
            sp.cut_kinds |= sp.v[sp.n].kind;
        }
        sp.v[sp.n++] = (bw__url_span){sp.cut, n - sp.cut, sp.cut_kinds};
    }
    return sp.n;
}

/* Append len bytes of s at *k of buf (n bytes), counting what does not fit. */
static void put(char *buf, size_t n, size_t *k, const char *s, size_t len)
{
    if (*k < n) {
        size_t room = n - 1 - *k;
        memcpy(buf + *k, s, len < room ? len : room);
    }
    *k += len;
}

size_t bw__url_redact(const char *url, char *buf, size_t n, unsigned *kinds)
{
    bw__url_span v[BW__URL_SPANS_MAX];
    int ns = bw__url_secrets(url, v, BW__URL_SPANS_MAX);
    size_t k = 0, at = 0, len = strlen(url);
    unsigned masked = 0;
    for (int i = 0; i < ns; i++) {
        put(buf, n, &k, url + at, v[i].at - at);
        put(buf, n, &k, "***", 3);
        at = v[i].at + v[i].len;
        masked |= v[i].kind;
    }
    if (kinds)
        *kinds = masked;
    put(buf, n, &k, url + at, len - at);
    if (n > 0)
        buf[k < n ? k : n - 1] = 0;
    return k;
}

static int word_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/*
 * Replace in s (a string within an array of n bytes, cut to n - 1 first) every occurrence of needle (m >= 3
 * bytes) with "***", and its first 3 or more bytes when they end s (a message cut short in the middle of a
 * secret); a piece (`piece`) only where it is not part of a longer word: an end of it that is a letter or digit
 * must not touch another in s. In place, whatever n: "***" is never longer than what it replaces.
 */
static void replace(char *s, size_t n, const char *needle, size_t m, int piece)
{
    const char *end = memchr(s, 0, n);
    size_t len = end ? (size_t)(end - s) : n - 1, k = 0;
    char before = 0; /* the byte of s before i as it was (k <= i: it may be written over) */
    for (size_t i = 0; i < len;) {
        size_t at = len - i < m ? len - i : m; /* what of the needle s has from i on */
        int left = !piece || !word_byte(needle[0]) || !word_byte(before);
        int right = !piece || at < m || !word_byte(needle[m - 1]) || i + m == len || !word_byte(s[i + m]);
        if (at >= 3 && left && right && memcmp(s + i, needle, at) == 0) {
            memcpy(s + k, "***", 3); /* k + 3 <= i + at: nothing not yet read is written */
            k += 3;
            i += at;
            before = needle[at - 1];
        } else {
            before = s[i];
            s[k++] = s[i++];
        }
    }
    s[k] = 0;
}

static int delimiter(char c)
{
    return c && strchr(" \t\r\n/?#@:&=,;'\"\\%[]", c) != NULL;
}

static int hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The byte at p[i] of a text of len bytes, percent-decoded ("%40": '@'), into *c; the bytes it took (1 or 3). */
static size_t decoded_at(const char *p, size_t len, size_t i, char *c)
{
    if (p[i] == '%' && i + 2 < len && hex(p[i + 1]) >= 0 && hex(p[i + 2]) >= 0) {
        *c = (char)(hex(p[i + 1]) * 16 + hex(p[i + 2]));
        return 3;
    }
    *c = p[i];
    return 1;
}

/* The byte at p[i] into *c, percent-decoded when `decode`; the bytes it took. */
static size_t step(const char *p, size_t len, size_t i, int decode, char *c)
{
    if (decode)
        return decoded_at(p, len, i, c);
    *c = p[i];
    return 1;
}

/*
 * The length of p[0, len), percent-decoded when `decode`; *nul: whether a byte of it is a NUL ("%00").
 */
static size_t text_len(const char *p, size_t len, int decode, int *nul)
{
    size_t tl = 0;
    char c;
    *nul = 0;
    for (size_t i = 0; i < len; tl++) {
        i += step(p, len, i, decode, &c);
        *nul |= c == 0;
    }
    return tl;
}

/*
 * Append one needle (backend.h: its kind, its text, a NUL) of p[0, len), percent-decoded when `decode`, at *k of
 * buf (n bytes) when it fits; count it.
 */
static void needle(char *buf, size_t n, size_t *k, char kind, const char *p, size_t len, int decode)
{
    int nul;
    size_t tl = text_len(p, len, decode, &nul);
    if (buf && *k + tl + 2 <= n) {
        size_t j = *k;
        buf[j++] = kind;
        char c;
        for (size_t i = 0; i < len; buf[j++] = c)
            i += step(p, len, i, decode, &c);
        buf[j] = 0;
    }
    *k += tl + 2;
}

static int ends_piece(char c)
{
    return c == 0 || delimiter(c);
}

/*
 * The needles of the secret p[0, len) of kind `kind`: all of it (BW__NEEDLE_WHOLE), or each piece between
 * delimiters (BW__NEEDLE_PIECE), of at least SHORTEST bytes; as written, or percent-decoded (`decode`: then a
 * delimiter or a NUL decoded ends a piece, and all of it is a needle only when it decodes to no NUL).
 */
static void needles_of(char *buf, size_t n, size_t *k, char kind, const char *p, size_t len, int decode)
{
    enum { SHORTEST = 3 };
    int nul;
    size_t tl = text_len(p, len, decode, &nul), w;
    char c;
    if (kind == BW__NEEDLE_WHOLE) {
        if (tl >= SHORTEST && !nul)
            needle(buf, n, k, BW__NEEDLE_WHOLE, p, len, decode);
        return;
    }
    for (size_t a = 0; a < len;) {
        while (a < len && (w = step(p, len, a, decode, &c), ends_piece(c)))
            a += w;
        size_t b = a, pl = 0; /* p[a, b): a piece of pl bytes (decoded) */
        while (b < len && (w = step(p, len, b, decode, &c), !ends_piece(c))) {
            b += w;
            pl++;
        }
        if (pl >= SHORTEST && pl < tl)
            needle(buf, n, k, BW__NEEDLE_PIECE, p + a, b - a, decode);
        a = b;
    }
}

size_t bw__url_needles(const char *url, char *buf, size_t n)
{
    size_t k = 0;
    bw__url_span v[BW__URL_SPANS_MAX];
    int ns = url ? bw__url_secrets(url, v, BW__URL_SPANS_MAX) : 0;
    /* Every secret whole before any piece: a piece masked first would leave the rest of a whole one shown. */
    static const char kinds[] = {BW__NEEDLE_WHOLE, BW__NEEDLE_PIECE};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < ns; i++) {
            const char *p = url + v[i].at;
            size_t len = v[i].len;
            int nul;
            if (v[i].kind & BW_STORE_URL_ALL) { /* not a URL: matched only whole, never decoded */
                if (kinds[pass] == BW__NEEDLE_WHOLE)
                    needles_of(buf, n, &k, BW__NEEDLE_WHOLE, p, len, 0);
                continue;
            }
            needles_of(buf, n, &k, kinds[pass], p, len, 0);
            if (text_len(p, len, 1, &nul) < len) /* and as a library that decodes the URL (libpq) quotes it */
                needles_of(buf, n, &k, kinds[pass], p, len, 1);
        }
    if (buf && k < n)
        buf[k] = 0;
    return k + 1;
}

void bw__url_scrub_needles(const char *needles, char *s, size_t n)
{
    if (!needles || !s || n == 0)
        return;
    for (const char *p = needles; *p; p += strlen(p) + 1)
        replace(s, n, p + 1, strlen(p + 1), *p == BW__NEEDLE_PIECE);
}

void bw__url_scrub(const char *url, char *s, size_t n)
{
    if (!url || !s || n == 0)
        return;
    size_t len = bw__url_needles(url, NULL, 0);
    if (len == 1)
        return;
    char *needles = malloc(len);
    if (!needles) { /* what to look for is unknown: none of s is shown */
        snprintf(s, n, "***");
        return;
    }
    bw__url_needles(url, needles, len);
    bw__url_scrub_needles(needles, s, n);
    bw__url_wipe(needles, len);
    free(needles);
}

void bw__url_wipe(char *p, size_t n)
{
    volatile char *v = p; /* not a dead store the compiler may drop */
    while (n--)
        *v++ = 0;
}
