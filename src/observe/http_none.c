/*
 * http_none.c — bw_metrics_serve in a build without libmicrohttpd: it says so.
 */
#include "base/error.h"
#include "breakwater/observe.h"

int bw_metrics_serve(bw_metrics *m, const char *address, bw_metrics_server **out, bw_error *err)
{
    (void)m;
    (void)address;
    if (out)
        *out = NULL;
    return bw__fail(err, BW_ENOTSUP, "",
                    "this build of breakwater has no HTTP server (install libmicrohttpd-dev and rebuild)");
}

int bw_metrics_server_port(const bw_metrics_server *s)
{
    (void)s;
    return 0;
}

void bw_metrics_server_stop(bw_metrics_server *s)
{
    (void)s;
}

#ifdef BW_TESTING
/* The tests' hook of http.c (the cache's age limit): nothing to set without a server. */
void bw__metrics_set_cache_age(int64_t ns);
void bw__metrics_set_cache_age(int64_t ns)
{
    (void)ns;
}
#endif
