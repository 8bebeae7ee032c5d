/*
 * consumer.c — a program built against breakwater as installed (make
 * package, scripts/package_check.sh): a breaker on the core, a sqlite:
 * store (its component loaded by the core, or linked statically), and, when
 * built with CONSUMER_CURL, the libcurl component. It prints where the core
 * was loaded from (the script checks it is the installed one) and exits 0
 * when everything worked.
 */
#define _GNU_SOURCE /* dladdr */
#include <breakwater/breakwater.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CONSUMER_CURL
#include <breakwater/curl.h>
#endif

static int fail(const char *what, int rc, const bw_error *e)
{
    fprintf(stderr, "consumer: %s: %s (%s)\n", what, bw_strerror(rc), e ? e->message : "");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer DIR (a directory for the sqlite: store's file)\n");
        return 2;
    }
    if (bw_version() != BW_VERSION_NUM)
        return fail("the library's version is not the headers'", BW_ESTATE, NULL);
    bw_error e;
    memset(&e, 0, sizeof e);

    /* A breaker on the core alone: two failures open it, the next call is rejected. */
    bw_config *cfg = bw_config_new();
    int rc = cfg ? bw_config_parse(cfg, "window=count:2 min_calls=2 failure_rate=0.5", &e) : BW_ENOMEM;
    bw_breaker *b = NULL;
    if (rc == BW_OK)
        rc = bw_breaker_new("consumer", cfg, &b, &e);
    if (rc != BW_OK)
        return fail("breaker", rc, &e);
    for (int i = 0; i < 2; i++) {
        bw_permit p;
        if (bw_acquire(b, &p, NULL) != BW_OK || bw_settle(b, &p, BW_FAILURE) != BW_OK)
            return fail("call", BW_ESTATE, NULL);
    }
    bw_permit p;
    bw_rejection why;
    if (bw_acquire(b, &p, &why) != BW_REJECTED)
        return fail("the breaker did not open", BW_ESTATE, NULL);
    bw_breaker_free(b);

    /* A breaker shared through sqlite: (a component: loaded by the shared core, linked into a static program). */
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/consumer.db", argv[1]);
    bw_store *s = NULL;
    if ((rc = bw_store_open(url, &s, &e)) != BW_OK)
        return fail("sqlite: store", rc, &e);
    if ((rc = bw_config_set_store(cfg, s, BW_STORE_STORED, &e)) != BW_OK ||
        (rc = bw_breaker_new("consumer", cfg, &b, &e)) != BW_OK)
        return fail("stored breaker", rc, &e);
    if (bw_acquire(b, &p, NULL) != BW_OK || bw_settle(b, &p, BW_SUCCESS) != BW_OK)
        return fail("stored call", BW_ESTATE, NULL);
    bw_breaker_free(b);
    bw_store_close(s);
    bw_config_free(cfg);

#ifdef CONSUMER_CURL
    /* The libcurl component, linked: a handle made and freed. */
    bw_registry *reg = NULL;
    bw_curl *bc = NULL;
    if ((rc = bw_registry_new(NULL, &reg, &e)) != BW_OK || (rc = bw_curl_new(reg, NULL, &bc, &e)) != BW_OK)
        return fail("curl", rc, &e);
    bw_curl_free(bc);
    bw_registry_free(reg);
#endif

    Dl_info info;
    if (dladdr((void *)bw_version, &info) && info.dli_fname)
        printf("core: %s\n", info.dli_fname);
    printf("components: 0x%x\n", bw_components());
    printf("consumer: ok\n");
    return 0;
}
