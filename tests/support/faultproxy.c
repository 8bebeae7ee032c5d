/*
 * faultproxy.c — the fault proxy of the tests (see faultproxy.h): one thread
 * polls the listening socket, a wake-up pipe and every connection pair.
 *
 * Design notes
 * - A pair is the accepted client socket and a socket connected to the
 *   upstream server (a blocking connect bounded by SO_SNDTIMEO, 500 ms: on
 *   loopback it is refused or accepted at once, even by a stopped server,
 *   whose kernel completes the handshake). Both are non-blocking afterwards.
 * - Each direction holds at most FAULTPROXY_BUF bytes and MARKS chunks; a
 *   chunk is the bytes of one read and the instant it may go (now in pass
 *   mode, now + delay in delay mode). A side is read only while its
 *   direction has room, so a slow or stopped peer stops the other side
 *   instead of growing a buffer. EOF or an error on either side closes the
 *   pair.
 * - poll() waits at most POLL_MS, or until the next held chunk is due.
 *
 * Locking: `mu` guards the mode, the requests (reset, stop) and their
 * acknowledgement (`cv`); the thread copies them at the top of each loop and
 * owns the sockets and buffers alone. Control calls write one byte to the
 * wake-up pipe after changing something, so the thread sees it at once.
 */
#define _POSIX_C_SOURCE 200809L
#include "faultproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MARKS 256
#define POLL_MS 100
#define CONNECT_MS 500

enum { M_PASS, M_DELAY, M_BLACKHOLE };

typedef struct dir {
    unsigned char buf[FAULTPROXY_BUF];
    size_t len; /* bytes held */
    size_t end[MARKS];
    int64_t due[MARKS]; /* chunk i is buf[end[i-1] .. end[i]) and may go at due[i] */
    int n;
} dir;

typedef struct pair {
    int cfd, sfd;
    dir up, down; /* client -> server, server -> client */
} pair;

struct faultproxy {
    int lfd, port;
    int wake[2];
    struct sockaddr_in upstream;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int mode, delay_ms, refuse, stop;
    long reset_req, reset_done;
    _Atomic int open;
    _Atomic long accepted;
    pair *pairs[FAULTPROXY_MAX_CONNS]; /* the thread's own */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Close fd so that its peer sees a reset (SO_LINGER 0). */
static void rst_close(int fd)
{
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void pair_close(faultproxy *p, int i, int rst)
{
    pair *x = p->pairs[i];
    if (rst) {
        rst_close(x->cfd);
        rst_close(x->sfd);
    } else {
        close(x->cfd);
        close(x->sfd);
    }
    free(x);
    p->pairs[i] = NULL;
    atomic_fetch_sub(&p->open, 1);
}

/* A socket connected to the upstream server, or -1. */
static int connect_upstream(const faultproxy *p)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {0, CONNECT_MS * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); /* bounds connect(2) */
    if (connect(fd, (const struct sockaddr *)&p->upstream, sizeof p->upstream) != 0 || nonblocking(fd) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void accept_one(faultproxy *p, int refuse)
{
    int cfd = accept(p->lfd, NULL, NULL);
    if (cfd < 0)
        return;
    atomic_fetch_add(&p->accepted, 1);
    int slot = -1;
    for (int i = 0; i < FAULTPROXY_MAX_CONNS && slot < 0; i++)
        if (!p->pairs[i])
            slot = i;
    int sfd = refuse || slot < 0 ? -1 : connect_upstream(p);
    pair *x = sfd >= 0 && nonblocking(cfd) == 0 ? calloc(1, sizeof *x) : NULL;
    if (!x) {
        rst_close(cfd);
        if (sfd >= 0)
            close(sfd);
        return;
    }
    x->cfd = cfd;
    x->sfd = sfd;
    p->pairs[slot] = x;
    atomic_fetch_add(&p->open, 1);
}

/* Bytes of d that may go now. */
static size_t ready(const dir *d, int mode, int64_t now)
{
    if (mode == M_PASS)
        return d->len;
    if (mode == M_BLACKHOLE)
        return 0;
    size_t r = 0;
    for (int i = 0; i < d->n && d->due[i] <= now; i++)
        r = d->end[i];
    return r;
}

static int has_room(const dir *d)
{
    return d->len < sizeof d->buf && d->n < MARKS;
}

/* Read what fd has into d (dropped in blackhole mode): 0, or -1 on EOF or an error. */
static int take(dir *d, int fd, int mode, int delay_ms, int64_t now)
{
    unsigned char sink[4096];
    int blackhole = mode == M_BLACKHOLE;
    unsigned char *to = blackhole ? sink : d->buf + d->len;
    size_t room = blackhole ? sizeof sink : sizeof d->buf - d->len;
    ssize_t got = read(fd, to, room);
    if (got == 0)
        return -1;
    if (got < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    if (blackhole)
        return 0;
    d->len += (size_t)got;
    d->end[d->n] = d->len;
    d->due[d->n] = mode == M_DELAY ? now + delay_ms : now;
    d->n++;
    return 0;
}

/* Write what may go of d to fd: 0, or -1 on an error. */
static int give(dir *d, int fd, int mode, int64_t now)
{
    size_t r = ready(d, mode, now);
    if (r == 0)
        return 0;
    ssize_t put = send(fd, d->buf, r, MSG_NOSIGNAL);
    if (put < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    size_t w = (size_t)put;
    memmove(d->buf, d->buf + w, d->len - w);
    d->len -= w;
    int k = 0;
    for (int i = 0; i < d->n; i++)
        if (d->end[i] > w) {
            d->end[k] = d->end[i] - w;
            d->due[k] = d->due[i];
            k++;
        }
    d->n = k;
    return 0;
}

/* The next instant a held chunk is due (INT64_MAX: none). */
static int64_t next_due(const dir *d, int mode)
{
    if (mode != M_DELAY || d->n == 0)
        return INT64_MAX;
    return d->due[0]; /* in order: the first undelivered chunk decides */
}

static void *run(void *arg)
{
    faultproxy *p = arg;
    struct pollfd fds[2 + 2 * FAULTPROXY_MAX_CONNS];
    int who[2 + 2 * FAULTPROXY_MAX_CONNS]; /* the pair of fds[k] (k >= 2) */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int mode = p->mode, delay_ms = p->delay_ms, refuse = p->refuse, stop = p->stop;
        long reset = p->reset_req;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        if (reset != p->reset_done) {
            for (int i = 0; i < FAULTPROXY_MAX_CONNS; i++)
                if (p->pairs[i])
                    pair_close(p, i, 1);
            pthread_mutex_lock(&p->mu);
            p->reset_done = reset;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
        }
        int64_t now = now_ms(), due = INT64_MAX;
        int n = 0;
        fds[n++] = (struct pollfd){p->wake[0], POLLIN, 0};
        fds[n++] = (struct pollfd){p->lfd, POLLIN, 0};
        for (int i = 0; i < FAULTPROXY_MAX_CONNS; i++) {
            pair *x = p->pairs[i];
            if (!x)
                continue;
            short ce = (short)((has_room(&x->up) ? POLLIN : 0) | (ready(&x->down, mode, now) ? POLLOUT : 0));
            short se = (short)((has_room(&x->down) ? POLLIN : 0) | (ready(&x->up, mode, now) ? POLLOUT : 0));
            who[n] = i;
            fds[n++] = (struct pollfd){x->cfd, ce, 0};
            who[n] = i;
            fds[n++] = (struct pollfd){x->sfd, se, 0};
            int64_t d1 = next_due(&x->up, mode), d2 = next_due(&x->down, mode);
            due = d1 < due ? d1 : due;
            due = d2 < due ? d2 : due;
        }
        int wait = POLL_MS;
        if (due != INT64_MAX)
            wait = due <= now ? 0 : (due - now < POLL_MS ? (int)(due - now) : POLL_MS);
        if (poll(fds, (nfds_t)n, wait) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & POLLIN) {
            char drain[64];
            while (read(p->wake[0], drain, sizeof drain) > 0)
                ;
        }
        now = now_ms();
        for (int k = 2; k < n; k += 2) {
            int i = who[k];
            pair *x = p->pairs[i];
            if (!x)
                continue;
            short cr = fds[k].revents, sr = fds[k + 1].revents;
            int bad = 0;
            if (cr & POLLIN)
                bad |= take(&x->up, x->cfd, mode, delay_ms, now);
            if (sr & POLLIN)
                bad |= take(&x->down, x->sfd, mode, delay_ms, now);
            if ((cr | sr) & (POLLERR | POLLNVAL))
                bad = -1;
            if (!bad && (cr & POLLHUP) && !(cr & POLLIN))
                bad = -1;
            if (!bad && (sr & POLLHUP) && !(sr & POLLIN))
                bad = -1;
            if (!bad)
                bad |= give(&x->up, x->sfd, mode, now);
            if (!bad)
                bad |= give(&x->down, x->cfd, mode, now);
            if (bad)
                pair_close(p, i, 0);
        }
        if (fds[1].revents & POLLIN)
            accept_one(p, refuse);
    }
    for (int i = 0; i < FAULTPROXY_MAX_CONNS; i++)
        if (p->pairs[i])
            pair_close(p, i, 0);
    return NULL;
}

int faultproxy_start(const char *host, int port, faultproxy **out)
{
    faultproxy *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->lfd = -1;
    p->wake[0] = p->wake[1] = -1;
    p->upstream.sin_family = AF_INET;
    p->upstream.sin_port = htons((uint16_t)port);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    int ok = inet_pton(AF_INET, host, &p->upstream.sin_addr) == 1 && pipe(p->wake) == 0 &&
             nonblocking(p->wake[0]) == 0 && nonblocking(p->wake[1]) == 0 &&
             (p->lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0 && bind(p->lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
             listen(p->lfd, 64) == 0 && nonblocking(p->lfd) == 0 &&
             getsockname(p->lfd, (struct sockaddr *)&a, &al) == 0;
    int mu = ok && pthread_mutex_init(&p->mu, NULL) == 0;
    int cv = mu && pthread_cond_init(&p->cv, NULL) == 0;
    if (cv && pthread_create(&p->thread, NULL, run, p) == 0) {
        p->port = ntohs(a.sin_port);
        *out = p;
        return 0;
    }
    int e = errno;
    if (cv)
        pthread_cond_destroy(&p->cv);
    if (mu)
        pthread_mutex_destroy(&p->mu);
    if (p->lfd >= 0)
        close(p->lfd);
    if (p->wake[0] >= 0) {
        close(p->wake[0]);
        close(p->wake[1]);
    }
    free(p);
    errno = e;
    return -1;
}

int faultproxy_port(const faultproxy *p)
{
    return p->port;
}

static void kick(faultproxy *p)
{
    char b = 1;
    ssize_t w = write(p->wake[1], &b, 1); /* a full pipe already wakes it */
    (void)w;
}

static void set_mode(faultproxy *p, int mode, int delay_ms)
{
    pthread_mutex_lock(&p->mu);
    p->mode = mode;
    p->delay_ms = delay_ms;
    pthread_mutex_unlock(&p->mu);
    kick(p);
}

void faultproxy_pass(faultproxy *p)
{
    set_mode(p, M_PASS, 0);
}

void faultproxy_delay(faultproxy *p, int ms)
{
    set_mode(p, M_DELAY, ms < 0 ? 0 : ms);
}

void faultproxy_blackhole(faultproxy *p)
{
    set_mode(p, M_BLACKHOLE, 0);
}

void faultproxy_refuse(faultproxy *p, int on)
{
    pthread_mutex_lock(&p->mu);
    p->refuse = on;
    pthread_mutex_unlock(&p->mu);
    kick(p);
}

void faultproxy_reset(faultproxy *p)
{
    pthread_mutex_lock(&p->mu);
    long want = ++p->reset_req;
    pthread_mutex_unlock(&p->mu);
    kick(p);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2; /* bounded: the thread answers within one loop */
    pthread_mutex_lock(&p->mu);
    while (p->reset_done < want && !p->stop)
        if (pthread_cond_timedwait(&p->cv, &p->mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&p->mu);
}

int faultproxy_open_count(faultproxy *p)
{
    return atomic_load(&p->open);
}

long faultproxy_accepted(faultproxy *p)
{
    return atomic_load(&p->accepted);
}

void faultproxy_stop(faultproxy *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    kick(p);
    pthread_join(p->thread, NULL);
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
