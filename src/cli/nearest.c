/*
 * nearest.c — "did you mean payments?": the store's circuit nearest in
 * spelling to a name it does not hold (cli layer; see cli.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* The keys a did-you-mean looks at, at most: the store's first NEAREST_KEYS_MAX (an error path; bounded). */
enum { NEAREST_KEYS_MAX = 65536 };

/*
 * The optimal string alignment distance of a and b (an edit is an insertion, a deletion, a change or a swap of
 * neighbours), letters compared without case; both at most NEAREST_LEN_MAX bytes. The configuration's did-you-mean
 * (core/config_keys.c) has one for keys under 64 bytes; the command uses the public API only.
 */
static size_t name_distance(const char *a, const char *b)
{
    static size_t row[3][NEAREST_LEN_MAX + 1];
    size_t n = strlen(a), m = strlen(b);
    for (size_t j = 0; j <= m; j++)
        row[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t *cur = row[i % 3], *prev = row[(i - 1) % 3], *prev2 = row[(i + 1) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            size_t best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
    }
    return row[n % 3][m];
}

/*
 * The store's circuit nearest to `name` in spelling, into out (n bytes), or "" when none is near: within 1 edit
 * for a name of up to 4 bytes, 2 up to 9 and 3 beyond (as git and the configuration's keys guess), the nearest
 * first, then the first listed. Looks at the store's first NEAREST_KEYS_MAX keys, a page at a time (nothing kept);
 * a store that cannot list, or fails, gives none.
 */
void cli_nearest_name(cli *c, const char *name, char *out, size_t n)
{
    out[0] = 0;
    size_t len = strlen(name);
    if (len > NEAREST_LEN_MAX)
        return;
    size_t most = len <= 4 ? 1 : len <= 9 ? 2 : 3, best = most + 1;
    enum { PAGE = 256 };
    bw_store_key *keys = malloc(PAGE * sizeof *keys);
    if (!keys)
        return;
    bw_store_cursor cur;
    memset(&cur, 0, sizeof cur);
    for (size_t seen = 0; !cur.done && seen < NEAREST_KEYS_MAX;) {
        int got = 0;
        bw_error e;
        if (bw_store_scan(c->store, &cur, keys, PAGE, &got, &e) != BW_OK)
            break;
        for (int i = 0; i < got; i++, seen++) {
            size_t kl = strlen(keys[i].name);
            if (kl > NEAREST_LEN_MAX || (kl > len ? kl - len : len - kl) >= best || strcmp(keys[i].name, name) == 0 ||
                strchr(keys[i].name, ' ')) /* a keyed circuit (NAME KEY): no verb takes it */
                continue;
            size_t d = name_distance(name, keys[i].name);
            if (d < best) {
                best = d;
                snprintf(out, n, "%s", keys[i].name);
            }
        }
    }
    free(keys);
}
