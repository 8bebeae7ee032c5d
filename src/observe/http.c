/*
 * http.c — the /metrics server (observe.h) on libmicrohttpd: one daemon with
 * its own polling thread, on a listening socket this file opens itself (so a
 * failure to listen reports the system's reason). GET (and HEAD) /metrics
 * answers the set's text in the format the Accept header asks for; any other
 * path is 404, any other method 405. Every request is answered on the
 * handler's first call, as soon as its headers are in: a body is never read
 * (libmicrohttpd discards it and closes the connection after the answer).
 * Built only when libmicrohttpd is found (CMakeLists.txt); http_none.c
 * stands in otherwise.
 *
 * What a client can hold: at most CONN_LIMIT connections at once, at most
 * PER_IP_LIMIT of them from one address, each with a memory pool of
 * CONN_MEMORY bytes for its request's headers (a larger head is refused), and
 * closed after CONN_TIMEOUT_S without a byte read or written. That timeout is
 * per idle period, not per request: a client that trickles a byte every few
 * seconds keeps its connection, so PER_IP_LIMIT connections from each of two
 * addresses can keep every other client out. The server is meant for a
 * trusted network (loopback, a scrape network), not the internet (observe.h).
 *
 * The text is shared: one rendered text per format, kept as an MHD response
 * that every request answered with it queues (libmicrohttpd counts the
 * connections using a response and frees its buffer after the last one), and
 * rendered again at a request when it is CACHE_MAX_AGE_NS old or older. So
 * the scrapes of one second hold one copy of the text per format, not one
 * each, and the text a scrape sees is at most CACHE_MAX_AGE_NS old. A replaced
 * text lives on while a connection still sends it: the worst case (clients a
 * second apart that never read) is one text per connection, CONN_LIMIT.
 *
 * Locking: `mu` protects `cache` and `hint` and nothing else; it is held
 * while a text is looked up, rendered when stale, and queued (queueing takes
 * the connection's reference before a later render can drop the cache's).
 * Holding it while rendering is deliberate: a scrape arriving during a render
 * waits for that render and shares its text instead of rendering its own copy;
 * scrapes are rare and the handler runs on libmicrohttpd's one polling thread
 * (MHD_USE_AUTO_INTERNAL_THREAD, no thread per connection), so nothing else
 * ever waits on it there; stop takes it only after the daemon has stopped.
 * A render takes each breaker's lock only briefly (bw_metrics_write), and no
 * breaker code calls back into this file, so the order mu -> a breaker's lock
 * is the only one. `answering` is atomic: the handler increments it when a
 * metrics answer is queued, the completion callback decrements it, and stop
 * reads it.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/error.h"
#include "base/systime.h"
#include "breakwater/observe.h"

#define CONN_TIMEOUT_S 5u         /* a connection with no byte read or written this long is closed */
#define CONN_LIMIT 16u            /* connections at once */
#define PER_IP_LIMIT 8u           /* connections at once from one address */
#define CONN_MEMORY (16u * 1024u) /* a connection's memory: its request head (about 14 KiB at most), answer head */
#define BACKLOG 64
#define CACHE_MAX_AGE_NS (INT64_C(1000000000)) /* a text this old is rendered again at the next scrape */

#ifdef BW_TESTING
/* The tests' hook: the cache's age limit instead of CACHE_MAX_AGE_NS when >= 0 (0: render at every scrape). */
static _Atomic int64_t cache_age_override = -1;
void bw__metrics_set_cache_age(int64_t ns);
void bw__metrics_set_cache_age(int64_t ns)
{
    atomic_store(&cache_age_override, ns);
}
static int64_t cache_max_age(void)
{
    int64_t o = atomic_load(&cache_age_override);
    return o >= 0 ? o : CACHE_MAX_AGE_NS;
}
#else
#define cache_max_age() CACHE_MAX_AGE_NS
#endif
#define STOP_GRACE_NS (INT64_C(2) * 1000000000) /* stop waits this long at most for answers being sent */

typedef struct cached {
    struct MHD_Response *resp; /* the text, shared by the requests answered with it; NULL: none yet */
    int64_t made_ns;           /* when it was rendered (CLOCK_MONOTONIC) */
} cached;

struct bw_metrics_server {
    struct MHD_Daemon *daemon;
    bw_metrics *m;
    int fd; /* the listening socket (MHD closes it unless quiesced) */
    int port;
    atomic_int answering; /* metrics answers queued and not yet completed (sent, or the connection closed) */
    pthread_mutex_t mu;   /* protects cache and hint */
    cached cache[2];      /* by bw_metrics_format */
    size_t hint[2];       /* the last text's size: the next render's buffer */
    char answer_marker;   /* *con_cls of a request answered with the metrics (counted in answering) */
    char other_marker;    /* *con_cls of a request answered otherwise */
};

/* ---- Accept ---- */

static int ieq(const char *a, size_t n, const char *b)
{
    if (strlen(b) != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z')
            x = (char)(x - 'A' + 'a');
        if (x != y)
            return 0;
    }
    return 1;
}

/* A q value ("1", "0.5", "0.75"); anything unreadable counts as 1 (the default). */
static double qvalue(const char *p, size_t n)
{
    double v = 0, scale = 1;
    int dot = 0, digits = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '.' && !dot) {
            dot = 1;
        } else if (p[i] >= '0' && p[i] <= '9') {
            digits++;
            if (dot) {
                scale /= 10;
                v += (p[i] - '0') * scale;
            } else {
                v = v * 10 + (p[i] - '0');
            }
        } else {
            return 1;
        }
    }
    return digits ? v : 1;
}

/*
 * OpenMetrics when the Accept header lists application/openmetrics-text with a
 * q above 0 and at least that of text/plain; else the Prometheus text format
 * (also for no header, or only * / *).
 */
static bw_metrics_format negotiate(const char *accept)
{
    if (!accept)
        return BW_METRICS_PROMETHEUS;
    double q_om = 0, q_text = 0;
    const char *p = accept;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        /* the media type: up to ';' */
        const char *t = p;
        while (t < end && (*t == ' ' || *t == '\t'))
            t++;
        const char *te = t;
        while (te < end && *te != ';' && *te != ' ' && *te != '\t')
            te++;
        double q = 1;
        for (const char *par = te; par < end;) {
            par = memchr(par, ';', (size_t)(end - par));
            if (!par)
                break;
            par++;
            while (par < end && (*par == ' ' || *par == '\t'))
                par++;
            const char *pe = par;
            while (pe < end && *pe != ';')
                pe++;
            if (pe - par >= 2 && (par[0] == 'q' || par[0] == 'Q') && par[1] == '=') {
                const char *v = par + 2, *ve = pe;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                    ve--;
                q = qvalue(v, (size_t)(ve - v));
            }
            par = pe;
        }
        size_t tl = (size_t)(te - t);
        if (ieq(t, tl, "application/openmetrics-text")) {
            if (q > q_om)
                q_om = q;
        } else if (ieq(t, tl, "text/plain")) {
            if (q > q_text)
                q_text = q;
        }
        p = *end ? end + 1 : end;
    }
    return q_om > 0 && q_om >= q_text ? BW_METRICS_OPENMETRICS : BW_METRICS_PROMETHEUS;
}

/* ---- answering ---- */

static enum MHD_Result answer_static(struct MHD_Connection *conn, unsigned status, const char *body, const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)(uintptr_t)body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A new text of format f, as a response (its buffer freed by MHD with it); NULL when it could not be made. */
static struct MHD_Response *render(bw_metrics_server *s, bw_metrics_format f)
{
    size_t cap = s->hint[f];
    cap = cap + cap / 8 + 4096;
    char *buf = NULL;
    size_t len = 0;
    int rc = BW_ENOMEM;
    /* The text grows between two writes only by what was added meanwhile: a few tries suffice. */
    for (int tries = 0; tries < 4; tries++) {
        char *nb = realloc(buf, cap);
        if (!nb) {
            rc = BW_ENOMEM;
            break;
        }
        buf = nb;
        rc = bw_metrics_write(s->m, f, buf, cap, &len);
        if (rc != BW_ELIMIT)
            break;
        cap = len + len / 8 + 4096;
    }
    if (rc != BW_OK) {
        free(buf);
        return NULL;
    }
    s->hint[f] = len;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return NULL;
    }
    if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, bw_metrics_content_type(f)) != MHD_YES ||
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES) {
        MHD_destroy_response(r);
        return NULL;
    }
    return r;
}

static enum MHD_Result answer_metrics(bw_metrics_server *s, struct MHD_Connection *conn, void **con_cls)
{
    bw_metrics_format f = negotiate(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
    pthread_mutex_lock(&s->mu);
    cached *c = &s->cache[f];
    int64_t now = bw__mono_now();
    if (!c->resp || now - c->made_ns >= cache_max_age() || now < c->made_ns) {
        struct MHD_Response *r = render(s, f);
        if (!r) {
            pthread_mutex_unlock(&s->mu);
            *con_cls = &s->other_marker;
            return answer_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "the metrics could not be written\n", NULL);
        }
        if (c->resp)
            MHD_destroy_response(c->resp); /* the cache's reference: freed once no connection sends it */
        c->resp = r;
        c->made_ns = now; /* its data is at least this old */
    }
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, c->resp);
    pthread_mutex_unlock(&s->mu);
    if (ret == MHD_YES) {
        *con_cls = &s->answer_marker;
        atomic_fetch_add(&s->answering, 1);
    }
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    bw_metrics_server *s = cls;
    (void)version;
    (void)upload_data;
    if (*con_cls) { /* answered already (a body arriving anyway): nothing here takes one */
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* The headers are in: answer now, before any body (libmicrohttpd then discards it and closes). */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        *con_cls = &s->other_marker;
        return answer_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served here\n", "GET, HEAD");
    }
    if (strcmp(url, "/metrics") != 0) {
        *con_cls = &s->other_marker;
        return answer_static(conn, MHD_HTTP_NOT_FOUND, "not found: this server serves GET /metrics only\n", NULL);
    }
    return answer_metrics(s, conn, con_cls);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    bw_metrics_server *s = cls;
    (void)conn;
    (void)toe;
    if (*con_cls == &s->answer_marker)
        atomic_fetch_sub(&s->answering, 1);
    *con_cls = NULL;
}

/* ---- starting and stopping ---- */

/* "HOST:PORT" into *sin; BW_EINVAL with the reason otherwise. */
static int parse_address(const char *address, struct sockaddr_in *sin, bw_error *err)
{
    const char *colon = strchr(address, ':');
    if (!colon)
        return bw__fail(err, BW_EINVAL, "address",
                        "address '%.60s' must be HOST:PORT, HOST a numeric IPv4 address (e.g. 127.0.0.1:9464)",
                        address);
    if (strchr(colon + 1, ':'))
        return bw__fail(err, BW_EINVAL, "address",
                        "address '%.60s': HOST must be a numeric IPv4 address (IPv6 is not supported)", address);
    size_t hl = (size_t)(colon - address);
    char host[16];
    memset(sin, 0, sizeof *sin);
    sin->sin_family = AF_INET;
    if (hl == 0 || hl >= sizeof host)
        return bw__fail(err, BW_EINVAL, "address",
                        "address '%.60s': HOST must be a numeric IPv4 address such as 127.0.0.1 or 0.0.0.0", address);
    memcpy(host, address, hl);
    host[hl] = 0;
    if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
        return bw__fail(err, BW_EINVAL, "address",
                        "address '%.60s': HOST '%s' is not a numeric IPv4 address (names are not resolved)", address,
                        host);
    const char *p = colon + 1;
    size_t pl = strlen(p);
    unsigned long port = 0;
    int ok = pl >= 1 && pl <= 5;
    for (size_t i = 0; ok && i < pl; i++) {
        if (p[i] < '0' || p[i] > '9')
            ok = 0;
        else
            port = port * 10 + (unsigned long)(p[i] - '0');
    }
    if (!ok || port > 65535)
        return bw__fail(err, BW_EINVAL, "address",
                        "address '%.60s': PORT must be a number in [0, 65535] (0: any free port)", address);
    sin->sin_port = htons((uint16_t)port);
    return BW_OK;
}

int bw_metrics_serve(bw_metrics *m, const char *address, bw_metrics_server **out, bw_error *err)
{
    if (out)
        *out = NULL;
    if (!m || !address || !out)
        return bw__fail(err, BW_EINVAL,
                        !m         ? "m"
                        : !address ? "address"
                                   : "out",
                        "%s must not be NULL",
                        !m         ? "m"
                        : !address ? "address"
                                   : "out");
    struct sockaddr_in sin;
    int rc = parse_address(address, &sin, err);
    if (rc != BW_OK)
        return rc;

    /* Close-on-exec from the start: a fork + exec on another thread meanwhile does not inherit it. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return bw__fail(err, BW_ESYS, "address", "cannot listen on %.60s: socket: %s", address, strerror(errno));
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        int e = errno;
        close(fd);
        return bw__fail(err, BW_ESYS, "address", "cannot listen on %.60s: %s", address, strerror(e));
    }
    if (bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(fd, BACKLOG) != 0) {
        int e = errno;
        close(fd);
        return bw__fail(err, BW_ESYS, "address", "cannot listen on %.60s: %s", address, strerror(e));
    }

    bw_metrics_server *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return bw__fail(err, BW_ENOMEM, "", "out of memory for the metrics server");
    }
    s->m = m;
    s->fd = fd;
    atomic_init(&s->answering, 0);
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        close(fd);
        free(s);
        return bw__fail(err, BW_ESYS, "", "could not create the metrics server's mutex");
    }
    s->daemon =
        MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC, 0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET,
                         (MHD_socket)fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                         (unsigned int)PER_IP_LIMIT, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (!s->daemon) {
        int e = errno;
        close(fd);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return bw__fail(err, BW_ESYS, "address", "cannot serve on %.60s: libmicrohttpd did not start (%s)", address,
                        e ? strerror(e) : "no reason given");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    if (!s->port) {
        struct sockaddr_in got;
        socklen_t gl = sizeof got;
        if (getsockname(fd, (struct sockaddr *)&got, &gl) == 0)
            s->port = ntohs(got.sin_port);
    }
    *out = s;
    return BW_OK;
}

int bw_metrics_server_port(const bw_metrics_server *s)
{
    return s ? s->port : 0;
}

void bw_metrics_server_stop(bw_metrics_server *s)
{
    if (!s)
        return;
    /* Accept nothing new; give the metrics answers being sent a short grace (a client that does not read
       its answer is not waited for longer); stop, which closes every connection left. */
    MHD_socket quiesced = MHD_quiesce_daemon(s->daemon);
    int64_t t0 = bw__mono_now();
    while (atomic_load(&s->answering) > 0 && bw__mono_now() - t0 < STOP_GRACE_NS) {
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    MHD_stop_daemon(s->daemon);
    if (quiesced != MHD_INVALID_SOCKET)
        close(quiesced);
    /* No connection is left: the cache holds the last reference to each text. */
    for (int f = 0; f < 2; f++)
        if (s->cache[f].resp)
            MHD_destroy_response(s->cache[f].resp);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
