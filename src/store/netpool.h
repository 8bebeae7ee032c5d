/*
 * netpool.h — the connection pool of the network store backends, redis: and
 * postgresql: (internal; store layer).
 *
 * A backend embeds a bw__netpool in its store and registers, at init, what
 * the pool needs of a connection (bw__netpool_ops): how to make one and how
 * to close one. A connection is the backend's (a void *: a redisContext, a
 * PGconn); the pool only hands it out, one call at a time.
 *
 * - A call takes a slot (acquire) and gives it back (release). Everything it
 *   waits for shares one deadline, `timeout` from its acquire (the slot's
 *   `deadline`): the wait for a free slot, the making of a connection, and
 *   every command, which the backend bounds by it (bw__netpool_check before
 *   sending, bw__netpool_wait for the socket). So a call returns within
 *   `timeout`, whatever the server does.
 * - A slot without a connection is connected at acquire (ops->connect), by
 *   the call's deadline. A connection takes at most the backend's connect
 *   timeout to make, which may be longer than a call's: a backend that can
 *   resume its connect leaves one the call's deadline cut short in the slot
 *   (connect_until: when its connect timeout ends), and the next acquire of
 *   that slot goes on with it, within its own deadline; the call whose
 *   deadline came first fails (BW_ETIMEDOUT), and that is no failure of the
 *   server (no backoff). One whose connect timeout passed failed.
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
 * Locking: the pool's mutex guards which slot is busy, the connection (and
 * connect_until, connect_step) of an idle slot, the backoff and the last
 * failure; its condition variable signals a slot coming free (or a failure,
 * which every waiter then returns). A busy slot belongs to the thread that
 * acquired it, which uses its connection and its deadline without the mutex.
 * The mutex is held only inside the functions below, never across a network
 * wait: ops->connect runs without it; ops->close runs under it (so it must
 * not wait, nor take a lock), except from destroy, which runs alone. The
 * backend's own locks are never taken under it.
 */
#ifndef BW_STORE_NETPOOL_H
#define BW_STORE_NETPOOL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

#define BW__NETPOOL_MAX 64 /* slots of a pool at most */

struct bw__netslot;

/* What the pool needs of a connection: the backend registers it at init. `backend` is the pointer it gave then. */
typedef struct bw__netpool_ops {
    /*
     * Make the connection of slot s by `deadline` (the call's, a bw__mono_now
     * instant) at most: a new one when s->conn is NULL, else go on with the
     * one an earlier call left unfinished (s->connect_until and
     * s->connect_step say where it stands). BW_OK: s->conn is made,
     * s->connect_until 0. An error with s->conn NULL: the connection failed
     * (refused, its connect timeout passed, ...), nothing is left. An error
     * (BW_ETIMEDOUT) with s->conn set: not finished by `deadline`, its
     * connect timeout (s->connect_until) still ahead: the next call on the
     * slot goes on with it; with s->connect_until 0: made, but too late in
     * the call for its command: the next call uses it (neither is a failure:
     * no backoff). A backend that cannot resume finishes or fails by
     * `deadline`. *err filled on an error.
     */
    int (*connect)(void *backend, struct bw__netslot *s, int64_t deadline, bw_error *err);
    /*
     * Close conn without waiting (under the pool's mutex), made or being
     * made. `forked`: in a child forked from the process that made the pool,
     * whose socket is the parent's too (destroy only).
     */
    void (*close)(void *backend, void *conn, int forked);
} bw__netpool_ops;

/* A slot of the pool: what acquire hands out. */
typedef struct bw__netslot {
    void *conn; /* the backend's connection; NULL: not connected */
    /* The busy thread's (the pool's, under its mutex, when idle): */
    int64_t deadline;      /* of the call using it (bw__mono_now instant) */
    int64_t connect_until; /* conn is still being made, at most until then (its connect timeout); 0: made */
    int connect_step;      /* where the making stands (the backend's) */
    int busy;              /* the pool's, under its mutex */
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
 * connection if any is idle, else one whose connection is being made (going
 * on with it), else an idle one, connected here; all by the deadline. During
 * a backoff fail at once with the last error. `now_only`: only a connected
 * slot that is idle now, else BW_ESTATE at once with *err untouched;
 * otherwise wait for one to come free until the deadline (BW_ETIMEDOUT).
 * BW_OK with *out the caller's until release.
 */
int bw__netpool_acquire(bw__netpool *p, int now_only, bw__netslot **out, bw_error *err);

/*
 * Give s back. `broken`: its connection failed (e says how; an e without an
 * error code counts as BW_ESYS, "NAME: the connection failed"): it is closed
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
 * Before a command on s: BW_OK while its call's deadline is ahead, else
 * BW_ETIMEDOUT (nothing was sent: the connection is still in step).
 */
int bw__netpool_check(const bw__netpool *p, const bw__netslot *s, bw_error *err);

/* What bw__netpool_wait waits for. */
enum {
    BW__NETPOOL_IN = 0, /* readable */
    BW__NETPOOL_OUT,    /* writable only: bytes the server sends meanwhile (left unread) do not end the wait */
    BW__NETPOOL_INOUT   /* either (libpq's rule while it flushes: read what comes, so that neither side blocks) */
};

/*
 * Wait until fd is ready as `what` says (BW__NETPOOL_IN, _OUT, _INOUT) or
 * `deadline` (a bw__mono_now instant) passes: 1 ready (or an error or hang-up
 * on it), 0 the deadline passed, -1 poll failed (errno).
 */
int bw__netpool_wait(int fd, int what, int64_t deadline);

#endif
