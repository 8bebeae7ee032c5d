/*
 * http_server.h — a small real HTTP/1.1 server on loopback for the libcurl
 * tests and bench (tests/support/): keep-alive, one thread per connection,
 * and behaviour chosen by the request's path, so a test drives it with the
 * URLs it requests:
 *   /ok                  200 "ok"
 *   /status/NNN          status NNN (100..599) with a short body
 *   ...?ra=VALUE         adds "Retry-After: VALUE" (VALUE "date+N": an
 *                        IMF-fixdate N seconds from now)
 *   /slow/MS             200 after MS milliseconds
 *   /stall               reads the request and never answers (until the
 *                        client goes or the server stops)
 *   /reset               closes the connection with a reset (SO_LINGER 0)
 * It counts accepted connections and requests, so a test can show that a
 * rejected request opened no connection. Every wait is bounded by the stop:
 * http_server_stop wakes every thread (a pipe) and joins them.
 */
#ifndef BW_TEST_HTTP_SERVER_H
#define BW_TEST_HTTP_SERVER_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HS_MAX_CONNS 2048

typedef struct http_server {
    int fd, port;
    int stop[2]; /* the read end wakes every poll when the write end closes */
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_t conns[HS_MAX_CONNS];
    int nconns;
    atomic_long accepts, requests;
} http_server;

typedef struct hs_conn {
    http_server *s;
    int fd;
} hs_conn;

/* Wait for fd readable, or the stop; 1 readable, 0 stopping. */
static inline int hs_wait(http_server *s, int fd)
{
    struct pollfd p[2] = {{fd, POLLIN, 0}, {s->stop[0], POLLIN, 0}};
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (p[1].revents & (POLLIN | POLLHUP)))
            return 0;
        if (p[0].revents)
            return 1;
    }
}

static inline void hs_send_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        b += w;
        n -= (size_t)w;
    }
}

static inline void hs_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Answer one request for `path`; returns 0 to close the connection. */
static inline int hs_answer(http_server *s, int fd, const char *path)
{
    int status = 200;
    char ra[96] = "";
    const char *q = strstr(path, "?ra=");
    if (q) {
        const char *v = q + 4;
        if (strncmp(v, "date+", 5) == 0) {
            time_t t = time(NULL) + atol(v + 5);
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(ra, sizeof ra, "Retry-After: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        } else {
            snprintf(ra, sizeof ra, "Retry-After: %.60s\r\n", v);
            for (char *p = ra; *p; p++)
                if (*p == '+')
                    *p = ' ';
        }
    }
    if (strncmp(path, "/status/", 8) == 0) {
        status = atoi(path + 8);
        if (status < 100 || status > 599)
            status = 400;
    } else if (strncmp(path, "/slow/", 6) == 0) {
        long ms = atol(path + 6);
        struct pollfd p = {s->stop[0], POLLIN, 0};
        if (poll(&p, 1, (int)(ms > 60000 ? 60000 : ms)) > 0)
            return 0;
    } else if (strncmp(path, "/stall", 6) == 0) {
        hs_wait(s, fd); /* until the client goes (readable: EOF) or the stop */
        return 0;
    } else if (strncmp(path, "/reset", 6) == 0) {
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        return 0;
    } else if (strncmp(path, "/ok", 3) != 0) {
        status = 404;
    }
    char head[256];
    const char *body = status == 200 ? "ok" : "status";
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n", status, strlen(body), ra);
    hs_send_all(fd, head, (size_t)n);
    hs_send_all(fd, body, strlen(body));
    return 1;
}

static inline void *hs_conn_main(void *arg)
{
    hs_conn c = *(hs_conn *)arg;
    free(arg);
    char buf[8192];
    size_t have = 0;
    for (;;) {
        char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
        if (!end) {
            if (have == sizeof buf || !hs_wait(c.s, c.fd))
                break;
            ssize_t r = recv(c.fd, buf + have, sizeof buf - have, 0);
            if (r <= 0)
                break;
            have += (size_t)r;
            continue;
        }
        atomic_fetch_add(&c.s->requests, 1);
        char path[1024] = "/";
        sscanf(buf, "%*s %1023s", path);
        size_t used = (size_t)(end + 4 - buf);
        memmove(buf, buf + used, have - used);
        have -= used;
        if (!hs_answer(c.s, c.fd, path))
            break;
    }
    close(c.fd);
    return NULL;
}

static inline void *hs_accept_main(void *arg)
{
    http_server *s = arg;
    while (hs_wait(s, s->fd)) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&s->accepts, 1);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        hs_conn *c = malloc(sizeof *c);
        pthread_mutex_lock(&s->mu);
        int ok = c && s->nconns < HS_MAX_CONNS;
        if (ok) {
            c->s = s;
            c->fd = fd;
            ok = pthread_create(&s->conns[s->nconns], NULL, hs_conn_main, c) == 0;
            if (ok)
                s->nconns++;
        }
        pthread_mutex_unlock(&s->mu);
        if (!ok) {
            free(c);
            close(fd);
        }
    }
    return NULL;
}

/* Start on a free loopback port (s->port). Returns 0, or -1. */
static inline int http_server_start(http_server *s)
{
    memset(s, 0, sizeof *s);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (s->fd < 0 || pipe(s->stop) != 0)
        return -1;
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->fd, 1024) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    s->port = ntohs(a.sin_port);
    pthread_mutex_init(&s->mu, NULL);
    return pthread_create(&s->acceptor, NULL, hs_accept_main, s) == 0 ? 0 : -1;
}

static inline void http_server_stop(http_server *s)
{
    close(s->stop[1]); /* every poll wakes */
    pthread_join(s->acceptor, NULL);
    for (int i = 0; i < s->nconns; i++)
        pthread_join(s->conns[i], NULL);
    close(s->stop[0]);
    close(s->fd);
    pthread_mutex_destroy(&s->mu);
}

#endif
