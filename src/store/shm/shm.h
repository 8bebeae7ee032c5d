/*
 * shm.h — the shm: store's fault-injection points, for its crash tests only
 * (internal; the hook exists only in the tests' build of the library,
 * BW_TESTING, never in the shipped one).
 *
 * When set, a commit calls the hook at each point: the journal written but not
 * yet pending; pending set but nothing applied; half the entry's data applied.
 * A test kills the process there.
 */
#ifndef BW_STORE_SHM_H
#define BW_STORE_SHM_H

enum { BW__SHM_FAULT_JOURNAL = 1, BW__SHM_FAULT_PENDING = 2, BW__SHM_FAULT_APPLY = 3 };

#ifdef BW_TESTING
extern void (*bw__shm_fault)(int point);
#endif

#endif
