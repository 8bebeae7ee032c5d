/*
 * sqlite.c — the sqlite:PATH store (being written).
 */
#include "store_impl.h"

int bw__sqlite_open(bw_store *s, bw__url *u, bw_error *err)
{
    (void)s;
    (void)u;
    return bw__fail(err, BW_ESTATE, "scheme", "sqlite: is not available yet");
}
