/*
 * shm.c — the shm:NAME store (being written).
 */
#include "store_impl.h"

int bw__shm_open(bw_store *s, bw__url *u, bw_error *err)
{
    (void)s;
    (void)u;
    return bw__fail(err, BW_ESTATE, "scheme", "shm: is not available yet");
}
