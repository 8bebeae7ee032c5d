/*
 * netpool.h — the connection pool of the network store backends, redis: and
 * postgresql: (internal; store layer).
 *
 * A backend embeds a bw__netpool in its store and registers, at init, what
 * the pool needs of a connection (bw__netpool_ops): how to make one and how
 * to close one. A connection is the backend's (a void *: a redisContext, a
 * PGconn); the pool only hands it out, one call at a time.
 *
 * - A call takes a slot (acquire) and gives it back (release). Its wait for a
 *   free slot is bounded by the call's deadline, `timeout` from the acquire:
 *   the slot's `deadline`, which bound() turns into the time left for the
 *   next command, so that the wait and the commands share it (redis:; a
 *   backend may extend it, e.g. on a conflict). A backend that bounds each
 *   command itself does not call bound() (postgresql:).
 * - A slot without a connection is connected at acquire (ops->connect, which
 *   waits at most the backend's connect timeout).
 * - A failure (a connect that failed, a release of a broken connection)
 *   closes every idle connection (they lead to the same server) and starts a
 *   backoff, 10 ms doubling to 1 s, reset by a release of a working connection:
 *   during it, acquire fails at once with the last error and how long the
 *   backoff still lasts, instead of waiting again.
 * - A pool belongs to the process that made it: in a forked child (its
 *   sockets are the parent's, replies would cross) acquire fails with
 *   BW_ESTATE, and destroy tells ops->close that it runs in a child.
 *
 * Errors: messages start with the pool's name ("redis: ..."); BW_ETIMEDOUT
 * when the deadline passed (every slot stayed busy, or before a command),
 * BW_ESTATE after fork(), else what ops->connect or the failure said. During a
 * backoff, acquire returns the failure's own code (BW_ESYS, BW_ETIMEDOUT or
 * BW_ENOMEM from connect) with its message (cut to 185 bytes) and how long the
 * backoff lasts; acquire with now_only and no idle connection returns
 * BW_ESTATE with *err untouched (outside a backoff).
 *
 * Locking: the pool's mutex guards which slot is busy, the connection of an
 * idle slot, the backoff and the last failure; its condition variable signals
 * a slot coming free (or a failure, which every waiter then returns). A busy
 * slot belongs to the thread that acquired it, which uses its connection and
 * its deadline without the mutex. The mutex is held only inside the functions
 * below, never across a network wait: ops->connect and ops->set_timeout run
 * without it; ops->close runs under it (so it must not wait, nor take a
 * lock), except from destroy, which runs alone. The backend's own locks are
 * never taken under it.
 */
#ifndef BW_STORE_NETPOOL_H
#define BW_STORE_NETPOOL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

#define BW__NETPOOL_MAX 64 /* slots of a pool at most */

/* What the pool needs of a connection: the backend registers it at init. `backend` is the pointer it gave then. */
typedef struct bw__netpool_ops {
    /*
     * Make a new connection into *conn, waiting at most the backend's connect
     * timeout, its per-command timeout (if it has one: bound()) set to the
     * pool's `timeout`. BW_OK, or the error with *err filled and nothing made.
     */
    int (*connect)(void *backend, void **conn, bw_error *err);
    /*
     * Close conn without waiting (under the pool's mutex). `forked`: in a
     * child forked from the process that made the pool, whose socket is the
     * parent's too (destroy only).
     */
    void (*close)(void *backend, void *conn, int forked);
    /*
     * For bound(): set conn's per-command timeout to ns. BW_OK, or the error
     * with *err filled (conn is unusable then). NULL when the backend never
     * calls bound().
     */
    int (*set_timeout)(void *backend, void *conn, int64_t ns, bw_error *err);
} bw__netpool_ops;

/* A slot of the pool: what acquire hands out. */
typedef struct bw__netslot {
    void *conn; /* the backend's connection; NULL: not connected */
    /* The busy thread's: */
    int64_t deadline; /* of the call using it (bw__mono_now instant) */
    int64_t set_ns;   /* the per-command timeout set on conn (bound) */
    int busy;         /* the pool's, under its mutex */
} bw__netslot;

/* The pool: a backend embeds it and touches only the conn and deadline of a slot it acquired. */
typedef struct bw__netpool {
    const char *name; /* the messages' prefix: "redis", "postgresql" */
    const bw__netpool_ops *ops;
    void *backend;
    int size;           /* slots in use: 1 to BW__NETPOOL_MAX */
    int64_t timeout_ns; /* a call's deadline, from its acquire */
    pid_t pid;          /* the process that made it */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t down_until, backoff; /* bw__mono_now instants; backoff 0 = healthy */
    int down_code;
    char down_why[200];
    bw__netslot slots[BW__NETPOOL_MAX];
} bw__netpool;

/*
 * Make *p (zeroed by the caller, e.g. by calloc): `size` slots, none
 * connected yet; name, ops and backend stay the caller's until destroy.
 * BW_OK, or BW_ESYS with *err filled when its mutex or condition variable
 * could not be made (nothing to destroy then).
 */
int bw__netpool_init(bw__netpool *p, const char *name, int size, int64_t timeout_ns, const bw__netpool_ops *ops,
                     void *backend, bw_error *err);

/*
 * Close every connection (ops->close, `forked` in a forked child) and free
 * what init made. No slot may be busy, but in a forked child, where the slots
 * the parent's threads held are copied busy: those are closed too (one busy
 * connecting has no connection yet; its socket, the child's copy, stays open).
 */
void bw__netpool_destroy(bw__netpool *p);

/*
 * Give the pool a connection the backend made itself (at open, before any
 * call): an idle slot takes it (when none is left, it is closed).
 */
void bw__netpool_adopt(bw__netpool *p, void *conn);

/*
 * Take a slot for one call, its deadline `timeout` from now: one with a
 * connection if any is idle, else an idle one, connected here. During a
 * backoff fail at once with the last error. `now_only`: only a connected
 * slot that is idle now, else BW_ESTATE at once with *err untouched;
 * otherwise wait for one to come free until the deadline (BW_ETIMEDOUT).
 * BW_OK with *out the caller's until release.
 */
int bw__netpool_acquire(bw__netpool *p, int now_only, bw__netslot **out, bw_error *err);

/*
 * Give s back. `broken`: its connection failed (e says how): it is closed
 * with every idle one and a backoff starts. Otherwise the server answered:
 * the backoff ends.
 */
void bw__netpool_release(bw__netpool *p, bw__netslot *s, int broken, const bw_error *e);

/*
 * The end of a call: release s (as bw__netpool_release) and return rc, with
 * *err = *e when rc is an error (err may be NULL).
 */
int bw__netpool_done(bw__netpool *p, bw__netslot *s, int broken, int rc, const bw_error *e, bw_error *err);

/*
 * Bound the next command on s by its call's deadline: its per-command timeout
 * (ops->set_timeout) is the time left, at most `timeout` (within a
 * millisecond of it, `timeout` itself, so that the common case sets nothing);
 * BW_ETIMEDOUT when none is left. So a call's wait for a slot and its
 * commands together wait at most `timeout`. *broken is set when
 * set_timeout failed.
 */
int bw__netpool_bound(const bw__netpool *p, bw__netslot *s, int *broken, bw_error *err);

#endif
