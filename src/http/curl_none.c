/*
 * curl_none.c — breakwater/curl.h in a build without libcurl: bw_curl_new
 * says so, and nothing else can be reached without a bw_curl. The functions
 * take void pointers for curl's types: this file cannot include curl.h, and
 * the symbols are the same (tests/symbols.txt).
 */
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "breakwater/breakwater.h"

typedef struct bw_curl bw_curl;

BW_API int bw_curl_new(bw_registry *registry, bw_breaker *keyed, bw_curl **out, bw_error *err);
BW_API void bw_curl_free(bw_curl *c);
BW_API int bw_curl_set_resolver(bw_curl *c, void *fn, void *user);
BW_API int bw_curl_set_failure_statuses(bw_curl *c, const int *statuses, size_t n, bw_error *err);
BW_API int bw_curl_set_classifier(bw_curl *c, void *fn, void *user);
BW_API int bw_curl_classify(const bw_curl *c, int code, long http_status, int *timed_out);
BW_API int bw_curl_set_retry_after_cap(bw_curl *c, int64_t ns, bw_error *err);
BW_API int bw_curl_set_pipeline(bw_curl *c, bw_pipeline *p, bw_error *err);
BW_API int bw_curl_set_timeout(bw_curl *c, int64_t ns, bw_error *err);
BW_API int bw_curl_set_open_on_retry_after(bw_curl *c, int64_t max_ns, bw_error *err);
BW_API int bw_curl_perform(bw_curl *c, void *easy, void *res);
BW_API int bw_curl_multi_add(bw_curl *c, void *multi, void *easy, void *res);
BW_API int bw_curl_multi_done(bw_curl *c, const void *msg, void *res);
BW_API int bw_curl_multi_abandon(bw_curl *c, void *easy);

int bw_curl_new(bw_registry *registry, bw_breaker *keyed, bw_curl **out, bw_error *err)
{
    (void)registry;
    (void)keyed;
    if (out)
        *out = NULL;
    return bw__fail(err, BW_ENOTSUP, "",
                    "this build of breakwater has no libcurl integration (install libcurl4-openssl-dev and rebuild)");
}

void bw_curl_free(bw_curl *c)
{
    (void)c;
}

int bw_curl_set_resolver(bw_curl *c, void *fn, void *user)
{
    (void)c, (void)fn, (void)user;
    return BW_ENOTSUP;
}

int bw_curl_set_failure_statuses(bw_curl *c, const int *statuses, size_t n, bw_error *err)
{
    (void)c, (void)statuses, (void)n;
    return bw__fail(err, BW_ENOTSUP, "", "no libcurl integration in this build");
}

int bw_curl_set_classifier(bw_curl *c, void *fn, void *user)
{
    (void)c, (void)fn, (void)user;
    return BW_ENOTSUP;
}

int bw_curl_classify(const bw_curl *c, int code, long http_status, int *timed_out)
{
    (void)c, (void)code, (void)http_status;
    if (timed_out)
        *timed_out = 0;
    return BW_IGNORED;
}

int bw_curl_set_retry_after_cap(bw_curl *c, int64_t ns, bw_error *err)
{
    (void)c, (void)ns;
    return bw__fail(err, BW_ENOTSUP, "", "no libcurl integration in this build");
}

int bw_curl_set_open_on_retry_after(bw_curl *c, int64_t max_ns, bw_error *err)
{
    (void)c, (void)max_ns;
    return bw__fail(err, BW_ENOTSUP, "", "no libcurl integration in this build");
}

int bw_curl_set_timeout(bw_curl *c, int64_t ns, bw_error *err)
{
    (void)c, (void)ns;
    return bw__fail(err, BW_ENOTSUP, "", "no libcurl integration in this build");
}

int bw_curl_set_pipeline(bw_curl *c, bw_pipeline *p, bw_error *err)
{
    (void)c, (void)p;
    return bw__fail(err, BW_ENOTSUP, "", "no libcurl integration in this build");
}

int bw_curl_perform(bw_curl *c, void *easy, void *res)
{
    (void)c, (void)easy, (void)res;
    return BW_ENOTSUP;
}

int bw_curl_multi_add(bw_curl *c, void *multi, void *easy, void *res)
{
    (void)c, (void)multi, (void)easy, (void)res;
    return BW_ENOTSUP;
}

int bw_curl_multi_done(bw_curl *c, const void *msg, void *res)
{
    (void)c, (void)msg, (void)res;
    return BW_ENOTSUP;
}

int bw_curl_multi_abandon(bw_curl *c, void *easy)
{
    (void)c, (void)easy;
    return BW_ENOTSUP;
}
