/*
 * component.c — finding the optional components' libraries (component.h), and
 * bw_components().
 *
 * Locking: `load_mu` serialises loading (dlopen, dlsym); a descriptor found is
 * published in `found` (atomic), read without the lock afterwards. A library
 * is loaded with RTLD_NODELETE: a descriptor, once found, stays valid. A
 * forked child starts with a fresh `load_mu` (pthread_atfork).
 */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#ifndef BW__STATIC
#include <dlfcn.h>
#include <unistd.h>
#endif

#include "base/component.h"
#include "base/error.h"

/* BW__COMPONENTS: the BW_COMPONENT_* bits of the components compiled into this library itself (CMakeLists.txt). */
#ifndef BW__COMPONENTS
#define BW__COMPONENTS 0u
#endif

#define REFS_MAX 16

static _Atomic(const bw__component *) found[REFS_MAX];
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

static const bw__component *check(const bw__component_ref *r, const bw__component *c, char *why, size_t n)
{
    if (c->abi != BW__COMPONENT_ABI || c->bit != r->bit) {
        snprintf(why, n,
                 "the %s component (%s) is from another release of breakwater (%d) than the core (%d): install "
                 "the same version of both",
                 r->name, r->soname, c->abi, BW__COMPONENT_ABI);
        return NULL;
    }
    return c;
}

#ifndef BW__STATIC
/* The directory of the core's own file, when the dynamic loader named it by an absolute path; else 0. */
static int core_dir(char *out, size_t n)
{
    Dl_info self;
    if (!dladdr((void *)bw__component_get, &self) || !self.dli_fname || self.dli_fname[0] != '/')
        return 0;
    int len = (int)(strrchr(self.dli_fname, '/') - self.dli_fname);
    return snprintf(out, n, "%.*s", len, self.dli_fname) < (int)n;
}
#endif

/*
 * Find r's descriptor. With `load` 0, only a library already in the process (linked into the program, or loaded
 * before). A message that may be cut (bw_error's 216 bytes) puts its advice first.
 */
static const bw__component *find(const bw__component_ref *r, int load, char *why, size_t n)
{
#ifdef BW__STATIC
    (void)load;
    if (r->linked)
        return check(r, r->linked, why, n);
    snprintf(why, n,
             "not linked into this program (breakwater is linked statically): link libbreakwater-%s.a "
             "(pkg-config --static breakwater-%s)",
             r->name, r->name);
    return NULL;
#else
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
    /* Already loaded (the program links it)? Else the one beside the core (a prefix only the program's RUNPATH
     * names), else the one the dynamic loader finds. */
    void *h = dlopen(r->soname, flags | RTLD_NOLOAD);
    if (!h && !load) {
        snprintf(why, n, "not loaded");
        return NULL;
    }
    char path[4096];
    if (!h && core_dir(path, sizeof path)) {
        size_t len = strlen(path);
        if (snprintf(path + len, sizeof path - len, "/%s", r->soname) < (int)(sizeof path - len) &&
            access(path, F_OK) == 0) {
            h = dlopen(path, flags);
            if (!h) { /* there, but broken (its own dependency missing, say): that is the error to report */
                const char *e = dlerror();
                snprintf(why, n, "the library beside the core did not load: %s", e ? e : path);
                return NULL;
            }
        }
    }
    if (!h)
        h = dlopen(r->soname, flags);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, n, "install libbreakwater-%s0 (Debian), or put %s where the dynamic loader finds it (%s)",
                 r->name, r->soname, e ? e : "not found");
        return NULL;
    }
    const bw__component *c = dlsym(h, r->symbol);
    if (!c) {
        snprintf(why, n, "%s has no %s: it is not a breakwater component library", r->soname, r->symbol);
        return NULL;
    }
    return check(r, c, why, n);
#endif
}

/* A fork() while another thread loads leaves load_mu locked in the child: the child starts with a fresh one. */
static void reset_in_child(void)
{
    pthread_mutex_init(&load_mu, NULL);
}
static void register_reset(void)
{
    pthread_atfork(NULL, NULL, reset_in_child);
}

static const bw__component *get(int i, int load, char *why, size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    const bw__component *c = atomic_load_explicit(&found[i], memory_order_acquire);
    if (c)
        return c;
    pthread_once(&once, register_reset);
    pthread_mutex_lock(&load_mu);
    c = atomic_load_explicit(&found[i], memory_order_relaxed);
    if (!c) {
        c = find(&bw__component_refs[i], load, why, n);
        if (c)
            atomic_store_explicit(&found[i], c, memory_order_release);
    }
    pthread_mutex_unlock(&load_mu);
    return c;
}

const bw__component *bw__component_get(const char *name, char *why, size_t n)
{
    for (int i = 0; i < REFS_MAX && bw__component_refs[i].name; i++)
        if (strcmp(bw__component_refs[i].name, name) == 0)
            return get(i, 1, why, n);
    snprintf(why, n, "this build of breakwater has no %s component", name);
    return NULL;
}

/* A store component counts when it can be loaded (it is, then); an integration when the program has it. */
unsigned bw_components(void)
{
    unsigned bits = BW_COMPONENT_CORE | (BW__COMPONENTS);
    char why[8];
    for (int i = 0; i < REFS_MAX && bw__component_refs[i].name; i++)
        if (get(i, bw__component_refs[i].store, why, sizeof why))
            bits |= bw__component_refs[i].bit;
    return bits;
}
