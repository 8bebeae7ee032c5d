/*
 * instance.c — this process's identity in a fleet (see instance.h).
 *
 * Lock-free and fork-safe: the run's random number is set once by a
 * compare-and-swap (racing threads agree on the winner's), and the id is a
 * pure function of it, the host name and the pid, so threads racing to cache
 * it write the same value. The cache is the id, then the pid it belongs to
 * (release); a reader checks the pid first (acquire).
 */
#define _POSIX_C_SOURCE 200809L
#include "share/instance.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/hash.h"

static _Atomic uint64_t run_random;
static _Atomic uint64_t cached_id;
static _Atomic pid_t cached_pid;

uint64_t bw__instance_id(void)
{
    pid_t pid = getpid();
    if (atomic_load_explicit(&cached_pid, memory_order_acquire) == pid)
        return atomic_load_explicit(&cached_id, memory_order_relaxed);
    uint64_t r = atomic_load(&run_random);
    if (!r) {
        uint64_t mine = 0, none = 0;
        if (getrandom(&mine, sizeof mine, GRND_NONBLOCK) != (ssize_t)sizeof mine)
            mine = bw__hash_seed(&r); /* no entropy yet (early boot): the address space and the clock */
        mine |= 1;
        r = atomic_compare_exchange_strong(&run_random, &none, mine) ? mine : none;
    }
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    uint64_t id = bw__hash(r, host, strlen(host)) ^ bw__mix64((uint64_t)pid + BW__GOLDEN);
    id = bw__mix64(id ^ r);
    if (!id)
        id = 1;
    atomic_store_explicit(&cached_id, id, memory_order_relaxed);
    atomic_store_explicit(&cached_pid, pid, memory_order_release);
    return id;
}
