/*
 * instance.h — this process's identity in a fleet, for quorum tripping
 * (internal; share layer).
 *
 * A 64-bit hash of the host name, the process id and a random number drawn
 * once per program run (inherited by forks, which differ by pid): distinct per
 * process across hosts in practice, never 0, the same for every thread, and
 * recomputed in a forked child. docs/stores.md documents it.
 */
#ifndef BW_SHARE_INSTANCE_H
#define BW_SHARE_INSTANCE_H

#include <stdint.h>

uint64_t bw__instance_id(void);

#endif
