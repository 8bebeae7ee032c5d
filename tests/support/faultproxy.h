/*
 * faultproxy.h — a small TCP proxy on loopback that a test puts between a
 * store and its server, to break the connections on command (tests/support/;
 * faultproxy.c). One thread, poll(), no dependencies; everything bounded: at
 * most FAULTPROXY_MAX_CONNS connection pairs (more are reset at once), at
 * most FAULTPROXY_BUF bytes buffered each way (a full buffer stops reading
 * that side), and every call below returns within about a second.
 *
 * Modes (each applies at once to the connections open and to new ones):
 *   pass       forward both ways as soon as bytes arrive
 *   delay ms   forward each chunk read ms milliseconds after it arrived (in
 *              order; back in pass mode what is still held goes at once)
 *   blackhole  accept and read both ways, forward nothing (the bytes read
 *              are dropped: a stream that passes again afterwards has lost
 *              them, as a store whose call timed out assumes anyway)
 * and, on top of any mode:
 *   reset      every open connection is reset now (SO_LINGER 0 and close:
 *              both peers see ECONNRESET), once
 *   refuse     every new connection is accepted and reset at once, until
 *              refuse is turned off
 *
 * Thread safety: the control calls may come from any thread; faultproxy_stop
 * must not race them.
 */
#ifndef BW_TEST_FAULTPROXY_H
#define BW_TEST_FAULTPROXY_H

#define FAULTPROXY_MAX_CONNS 64
#define FAULTPROXY_BUF 65536

typedef struct faultproxy faultproxy;

/*
 * Listen on 127.0.0.1 on a free port and forward every connection to
 * host:port (an IPv4 address), in pass mode. 0 and *out, or -1 (errno set)
 * when the socket or the thread could not be made.
 */
int faultproxy_start(const char *host, int port, faultproxy **out);

/* The port it listens on. */
int faultproxy_port(const faultproxy *p);

void faultproxy_pass(faultproxy *p);
void faultproxy_delay(faultproxy *p, int ms);
void faultproxy_blackhole(faultproxy *p);

/* Reset every open connection; returns once they are closed. */
void faultproxy_reset(faultproxy *p);

/* on: reset every new connection as soon as it is accepted; 0: accept them again. */
void faultproxy_refuse(faultproxy *p, int on);

/* Connection pairs open now, and accepted since the start. */
int faultproxy_open_count(faultproxy *p);
long faultproxy_accepted(faultproxy *p);

/* Stop the thread, close every socket and free p (NULL is ignored). */
void faultproxy_stop(faultproxy *p);

#endif
