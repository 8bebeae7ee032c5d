/*
 * http.c — the /metrics server (observe.h) on libmicrohttpd: one daemon with
 * its own polling thread, on a listening socket this file opens itself (so a
 * failure to listen reports the system's reason). GET (and HEAD) /metrics
 * answers the set's text in the format the Accept header asks for; any other
 * path is 404, any other method 405. Every connection times out after
 * CONN_TIMEOUT_S of silence, so no wait of the server's is unbounded.
 * Built only when libmicrohttpd is found (CMakeLists.txt); http_none.c
 * stands in otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/error.h"
#include "breakwater/observe.h"

#define CONN_TIMEOUT_S 10u /* a connection silent this long is closed */
#define CONN_LIMIT 64u     /* connections at once */
#define BACKLOG 64
#define STOP_WAIT_NS (INT64_C(10) * 1000000000) /* stop waits this long at most for answers in progress */

struct bw_metrics_server {
    struct MHD_Daemon *daemon;
    bw_metrics *m;
    int fd; /* the listening socket (MHD closes it unless quiesced) */
    int port;
    atomic_int answering; /* requests between the handler's first call and their completion */
    atomic_size_t hint;   /* the last text's size: the next buffer's */
    char request_marker;  /* *con_cls of a request being answered */
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

static enum MHD_Result answer_metrics(bw_metrics_server *s, struct MHD_Connection *conn)
{
    bw_metrics_format format = negotiate(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
    size_t cap = atomic_load_explicit(&s->hint, memory_order_relaxed);
    cap = cap + cap / 8 + 4096;
    char *buf = NULL;
    size_t len = 0;
    int rc = BW_ENOMEM;
    /* The text grows between two writes only by what was added meanwhile: a few tries suffice. */
    for (int tries = 0; tries < 8; tries++) {
        char *nb = realloc(buf, cap);
        if (!nb) {
            rc = BW_ENOMEM;
            break;
        }
        buf = nb;
        rc = bw_metrics_write(s->m, format, buf, cap, &len);
        if (rc != BW_ELIMIT)
            break;
        cap = len + len / 8 + 4096;
    }
    if (rc != BW_OK) {
        free(buf);
        return answer_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "the metrics could not be written\n", NULL);
    }
    atomic_store_explicit(&s->hint, len, memory_order_relaxed);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, bw_metrics_content_type(format));
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    bw_metrics_server *s = cls;
    (void)version;
    (void)upload_data;
    if (!*con_cls) { /* the headers are in: answer on the next call, after any body */
        *con_cls = &s->request_marker;
        atomic_fetch_add(&s->answering, 1);
        return MHD_YES;
    }
    if (*upload_data_size) { /* a body: nothing here takes one */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return answer_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served here\n", "GET, HEAD");
    if (strcmp(url, "/metrics") != 0)
        return answer_static(conn, MHD_HTTP_NOT_FOUND, "not found: this server serves GET /metrics only\n", NULL);
    return answer_metrics(s, conn);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    bw_metrics_server *s = cls;
    (void)conn;
    (void)toe;
    if (*con_cls) {
        *con_cls = NULL;
        atomic_fetch_sub(&s->answering, 1);
    }
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

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return bw__fail(err, BW_ESYS, "address", "cannot listen on %.60s: socket: %s", address, strerror(errno));
    int one = 1, fl;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || (fl = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
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
    atomic_init(&s->hint, 0);
    s->daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC, 0, NULL, NULL, handle, s,
                                 MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_LIMIT,
                                 MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (!s->daemon) {
        int e = errno;
        close(fd);
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
    /* Accept nothing new; let the answers in progress finish (bounded: a connection times out); stop. */
    MHD_socket quiesced = MHD_quiesce_daemon(s->daemon);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&s->answering) > 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((int64_t)(now.tv_sec - t0.tv_sec) * 1000000000 + (now.tv_nsec - t0.tv_nsec) >= STOP_WAIT_NS)
            break;
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    MHD_stop_daemon(s->daemon);
    if (quiesced != MHD_INVALID_SOCKET)
        close(quiesced);
    free(s);
}
