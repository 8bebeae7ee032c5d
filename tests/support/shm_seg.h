/*
 * shm_seg.h — shm: segments of the shm store's own tests (tests/support/):
 * names bwtest-<pid>-<tag>, unlinked by the test that made them. Include it
 * after defining _POSIX_C_SOURCE.
 */
#ifndef BW_TEST_SHM_SEG_H
#define BW_TEST_SHM_SEG_H

#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "breakwater/breakwater.h"

/* A segment name for `tag`, unique to this process (valid for the next 7 calls). */
static inline char *seg(const char *tag)
{
    static char buf[8][96];
    static int n;
    char *b = buf[n++ % 8];
    snprintf(b, sizeof buf[0], "bwtest-%ld-%s", (long)getpid(), tag);
    return b;
}

static inline void unlink_seg(const char *name)
{
    char path[256]; /* names are up to 200 bytes */
    snprintf(path, sizeof path, "/%s", name);
    shm_unlink(path);
}

/* Open shm:NAME, with ?capacity=cap when cap > 0. */
static inline int open_shm(const char *name, int cap, bw_store **out, bw_error *e)
{
    char url[320];
    if (cap > 0)
        snprintf(url, sizeof url, "shm:%s?capacity=%d", name, cap);
    else
        snprintf(url, sizeof url, "shm:%s", name);
    return bw_store_open(url, out, e);
}

#endif
