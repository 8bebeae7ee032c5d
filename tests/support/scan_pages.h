/*
 * scan_pages.h — a page of a store's scan reads at most a page of entries,
 * expired ones included (test_sqlite, test_postgres): 300 expired keys before
 * one live key, listed 10 at a time, are 31 pages, the first one empty but
 * not the last, and the listing is the live key alone. (A scan that skipped
 * expired rows in its query read all 300 for its first page.)
 */
#ifndef BW_TEST_SCAN_PAGES_H
#define BW_TEST_SCAN_PAGES_H

#include <breakwater/store.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static bw_store_verdict sp_put(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    (void)cur;
    next->expires_at = *(const int64_t *)arg;
    next->len = 1;
    next->data[0] = 7;
    return BW_STORE_PUT;
}

static void check_scan_pages_bounded(bw_store *s)
{
    char name[32];
    int64_t past = 1, never = BW_STORE_NEVER; /* 1 ns after the epoch: expired on any store clock */
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "sp-a%03d", i);
        CHECK_OK(bw_store_update(s, name, sp_put, &past, NULL));
    }
    CHECK_OK(bw_store_update(s, "sp-b", sp_put, &never, NULL));
    bw_store_cursor c;
    memset(&c, 0, sizeof c);
    bw_store_key keys[10];
    int pages = 0, live = 0, n = -1;
    bw_error e;
    CHECK_OK(bw_store_scan(s, &c, keys, 10, &n, &e));
    pages++;
    CHECK_INT(n, 0);
    CHECK(!c.done);
    while (!c.done && pages < 1000) {
        int rc = bw_store_scan(s, &c, keys, 10, &n, &e);
        if (rc != BW_OK) {
            H_FAIL("bw_store_scan: %s (%s)", bw_strerror(rc), e.message);
            break;
        }
        pages++;
        for (int i = 0; i < n; i++) {
            CHECK_STR(keys[i].name, "sp-b");
            live++;
        }
    }
    CHECK_INT(live, 1);
    CHECK_INT(pages, 31);
}

#endif
