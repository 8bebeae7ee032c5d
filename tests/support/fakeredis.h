/*
 * fakeredis.h — a fake Redis server on loopback, for what a real one never
 * does (tests/support/): answers a test chooses, byte for byte, to the
 * commands the redis: store sends. It reads RESP commands (arrays of bulk
 * strings) and answers by the command's name:
 *   AUTH, SELECT, PING   +OK
 *   SCRIPT (LOAD)        the test's `load` bytes (default: a 40-character SHA1)
 *   EVALSHA, EVAL, SCAN  the test's `eval` bytes (default: -ERR)
 *   anything else        -ERR
 the EVALSHA and EVAL answers `delay_ms` after the command arrived, the others
 * at once; after an answer the test set (not a default one) it may go on
 * sending `fill` (at most `fill_max` bytes in all, every `fill_every_ms`, 0:
 * as fast as the client reads) until the client goes: a reply that never
 * ends. It counts the commands it answered. Muted (fakeredis_mute), a
 * connection that receives bytes answers one '+' and reads nothing more: a
 * server that sends while it does not read. One thread per connection
 * (blocking I/O); every wait is bounded by the stop: fakeredis_stop shuts
 * every socket down and joins the threads. The answers may change while it
 * runs (fakeredis_set, under its mutex).
 */
#ifndef BW_TEST_FAKEREDIS_H
#define BW_TEST_FAKEREDIS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FR_MAX_CONNS 512
#define FR_ANSWER_MAX 4096

typedef struct fakeredis {
    int fd, port;
    pthread_t acceptor;
    pthread_mutex_t mu;
    int conns[FR_MAX_CONNS];
    pthread_t threads[FR_MAX_CONNS];
    int nconns, stopping;
    /* The answers (under mu). */
    char load[FR_ANSWER_MAX], eval[FR_ANSWER_MAX], fill[FR_ANSWER_MAX];
    size_t load_len, eval_len, fill_len;
    int load_set, eval_set; /* the test's, not the default: fill follows it */
    long fill_max;
    int delay_ms, fill_every_ms;
    int mute; /* see fakeredis_mute */
    atomic_long commands;
} fakeredis;

typedef struct fr_conn {
    fakeredis *s;
    int fd;
} fr_conn;

static inline void fr_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline int fr_send(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The length of the complete command at buf[0..n), its name into name[16]; 0: not complete yet; -1: not RESP. */
static inline long fr_command(const char *buf, size_t n, char *name)
{
    size_t at = 0;
    long argc = -1;
    name[0] = 0;
    for (long i = -1; i < 0 || i < argc; i++) { /* i = -1: the array's header */
        const char *nl = memchr(buf + at, '\n', n - at);
        if (!nl)
            return 0;
        if (buf[at] != (i < 0 ? '*' : '$'))
            return -1;
        long v = strtol(buf + at + 1, NULL, 10);
        at = (size_t)(nl - buf) + 1;
        if (i < 0) {
            argc = v;
            if (argc < 1 || argc > 1000000)
                return -1;
            continue;
        }
        if (v < 0 || (size_t)v + 2 > n - at)
            return v < 0 ? -1 : 0;
        if (i == 0)
            snprintf(name, 16, "%.*s", (int)(v < 15 ? v : 15), buf + at);
        at += (size_t)v + 2;
    }
    return (long)at;
}

static inline void *fr_serve(void *arg)
{
    fr_conn *c = arg;
    fakeredis *s = c->s;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    char answer[FR_ANSWER_MAX], fill[FR_ANSWER_MAX];
    while (buf) {
        char name[16];
        long used = fr_command(buf, len, name);
        if (used < 0)
            break;
        if (used == 0) {
            if (len == cap) {
                char *nb = realloc(buf, cap * 2);
                if (!nb)
                    break;
                buf = nb;
                cap *= 2;
            }
            ssize_t r = recv(c->fd, buf + len, cap - len, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            len += (size_t)r;
            pthread_mutex_lock(&s->mu);
            int mute = s->mute;
            pthread_mutex_unlock(&s->mu);
            if (mute) { /* one byte sent, nothing more read, until the stop */
                fr_send(c->fd, "+", 1);
                for (int stop = 0; !stop;) {
                    fr_sleep_ms(5);
                    pthread_mutex_lock(&s->mu);
                    stop = s->stopping;
                    pthread_mutex_unlock(&s->mu);
                }
                break;
            }
            continue;
        }
        memmove(buf, buf + used, len - (size_t)used);
        len -= (size_t)used;
        pthread_mutex_lock(&s->mu);
        size_t an;
        int eval = 0, set = 0;
        if (!strcasecmp(name, "AUTH") || !strcasecmp(name, "SELECT") || !strcasecmp(name, "PING")) {
            an = 5;
            memcpy(answer, "+OK\r\n", an);
        } else if (!strcasecmp(name, "SCRIPT")) {
            an = s->load_len;
            memcpy(answer, s->load, an);
            set = s->load_set;
        } else if (!strcasecmp(name, "EVALSHA") || !strcasecmp(name, "EVAL") || !strcasecmp(name, "SCAN")) {
            an = s->eval_len;
            memcpy(answer, s->eval, an);
            eval = 1;
            set = s->eval_set;
        } else {
            an = (size_t)snprintf(answer, sizeof answer, "-ERR unknown command '%s'\r\n", name);
        }
        int delay = eval ? s->delay_ms : 0, every = s->fill_every_ms;
        size_t fl = set ? s->fill_len : 0;
        long fill_max = s->fill_max;
        memcpy(fill, s->fill, fl);
        pthread_mutex_unlock(&s->mu);
        if (delay > 0)
            fr_sleep_ms(delay);
        atomic_fetch_add(&s->commands, 1);
        if (fr_send(c->fd, answer, an) != 0)
            break;
        int gone = 0;
        for (long sent = 0; fl > 0 && sent < fill_max && !gone; sent += (long)fl) {
            gone = fr_send(c->fd, fill, fl) != 0;
            if (every > 0)
                fr_sleep_ms(every);
        }
        if (gone)
            break;
    }
    free(buf);
    free(c); /* its socket is closed at the stop */
    return NULL;
}

static inline void *fr_accept(void *arg)
{
    fakeredis *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL; /* the listening socket was shut down: stopping */
        }
        pthread_mutex_lock(&s->mu);
        fr_conn *c = s->stopping || s->nconns == FR_MAX_CONNS ? NULL : malloc(sizeof *c);
        if (c) {
            c->s = s;
            c->fd = fd;
            s->conns[s->nconns] = fd;
            if (pthread_create(&s->threads[s->nconns], NULL, fr_serve, c) == 0) {
                s->nconns++;
                c = (fr_conn *)1;
            } else {
                free(c);
                c = NULL;
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (!c)
            close(fd);
    }
}

/* Set the answers: load (NULL: a valid SHA1), eval (NULL: -ERR), each of the given length. */
static inline void fakeredis_set(fakeredis *s, const char *load, size_t load_len, const char *eval, size_t eval_len,
                                 int delay_ms)
{
    static const char sha[] = "$40\r\n0123456789abcdef0123456789abcdef01234567\r\n";
    static const char err[] = "-ERR not set\r\n";
    pthread_mutex_lock(&s->mu);
    s->load_set = load && load_len <= FR_ANSWER_MAX;
    s->eval_set = eval && eval_len <= FR_ANSWER_MAX;
    if (!load || load_len > FR_ANSWER_MAX)
        load = sha, load_len = sizeof sha - 1;
    if (!eval || eval_len > FR_ANSWER_MAX)
        eval = err, eval_len = sizeof err - 1;
    memcpy(s->load, load, load_len);
    s->load_len = load_len;
    memcpy(s->eval, eval, eval_len);
    s->eval_len = eval_len;
    s->delay_ms = delay_ms;
    s->fill_len = 0;
    pthread_mutex_unlock(&s->mu);
}

/* on: a connection that receives bytes answers one '+' and stops reading (until the stop). */
static inline void fakeredis_mute(fakeredis *s, int on)
{
    pthread_mutex_lock(&s->mu);
    s->mute = on;
    pthread_mutex_unlock(&s->mu);
}

/* After each answer, send fill (n bytes) again and again, at most max bytes, every every_ms (0: at once). */
static inline void fakeredis_fill(fakeredis *s, const char *fill, size_t n, long max, int every_ms)
{
    pthread_mutex_lock(&s->mu);
    if (n > FR_ANSWER_MAX)
        n = 0;
    memcpy(s->fill, fill, n);
    s->fill_len = n;
    s->fill_max = max;
    s->fill_every_ms = every_ms;
    pthread_mutex_unlock(&s->mu);
}

/* Serve on s->fd, bound already: 0, or -1 (s->fd closed). */
static inline int fr_listen(fakeredis *s)
{
    if (listen(s->fd, 64) != 0) {
        close(s->fd);
        return -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    fakeredis_set(s, NULL, 0, NULL, 0, 0);
    if (pthread_create(&s->acceptor, NULL, fr_accept, s) != 0) {
        close(s->fd);
        return -1;
    }
    return 0;
}

/* Listen on 127.0.0.1, a free port: 0, or -1. */
static inline int fakeredis_start(fakeredis *s)
{
    memset(s, 0, sizeof *s);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&a, &al) != 0) {
        if (s->fd >= 0)
            close(s->fd);
        return -1;
    }
    s->port = ntohs(a.sin_port);
    return fr_listen(s);
}

/*
 * Listen on a unix socket at path (removed first; the caller removes it after
 * the stop): 0, or -1. Its buffers are the system's default (~200 KB), not
 * loopback TCP's, which grow to megabytes: a muted server fills them soon.
 */
static inline int fakeredis_start_unix(fakeredis *s, const char *path)
{
    memset(s, 0, sizeof *s);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path)
        return -1;
    memcpy(a.sun_path, path, strlen(path) + 1);
    unlink(path);
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (s->fd >= 0)
            close(s->fd);
        return -1;
    }
    return fr_listen(s);
}

static inline void fakeredis_stop(fakeredis *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    for (int i = 0; i < s->nconns; i++)
        shutdown(s->conns[i], SHUT_RDWR);
    pthread_mutex_unlock(&s->mu);
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->acceptor, NULL);
    for (int i = 0; i < s->nconns; i++) {
        pthread_join(s->threads[i], NULL);
        close(s->conns[i]);
    }
    close(s->fd);
    pthread_mutex_destroy(&s->mu);
}

#endif
