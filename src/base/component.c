/*
 * component.c — finding the optional components' libraries (component.h), and
 * bw_components().
 *
 * Locking: `load_mu` serialises loading (dlopen, dlsym); a descriptor found is
 * published in `found` (atomic), read without the lock afterwards. A library
 * is loaded with RTLD_NODELETE: a descriptor, once found, stays valid.
 */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#ifndef BW__STATIC
#include <dlfcn.h>
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

static const bw__component *load(const bw__component_ref *r, char *why, size_t n)
{
#ifdef BW__STATIC
    if (r->linked)
        return check(r, r->linked, why, n);
    snprintf(why, n,
             "the %s component is not linked into this program (breakwater is linked statically): link "
             "libbreakwater-%s.a (pkg-config --static --libs breakwater-%s, or the CMake target "
             "breakwater::%s_static)",
             r->name, r->name, r->name, r->name);
    return NULL;
#else
    /* Already loaded (the program links it)? Else beside the core (a prefix only the program's RUNPATH names), else
     * wherever the dynamic loader looks. */
    void *h = dlopen(r->soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | RTLD_NOLOAD);
    Dl_info self;
    if (!h && dladdr((void *)bw__component_get, &self) && self.dli_fname && strrchr(self.dli_fname, '/')) {
        char path[4096];
        int dir = (int)(strrchr(self.dli_fname, '/') - self.dli_fname);
        if (snprintf(path, sizeof path, "%.*s/%s", dir, self.dli_fname, r->soname) < (int)sizeof path)
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    }
    if (!h)
        h = dlopen(r->soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, n,
                 "the %s component's library could not be loaded (%s): install it (on Debian: libbreakwater-%s0)",
                 r->name, e ? e : r->soname, r->name);
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

const bw__component *bw__component_get(const char *name, char *why, size_t n)
{
    for (int i = 0; i < REFS_MAX && bw__component_refs[i].name; i++) {
        const bw__component_ref *r = &bw__component_refs[i];
        if (strcmp(r->name, name) != 0)
            continue;
        const bw__component *c = atomic_load_explicit(&found[i], memory_order_acquire);
        if (c)
            return c;
        pthread_mutex_lock(&load_mu);
        c = atomic_load_explicit(&found[i], memory_order_relaxed);
        if (!c) {
            c = load(r, why, n);
            if (c)
                atomic_store_explicit(&found[i], c, memory_order_release);
        }
        pthread_mutex_unlock(&load_mu);
        return c;
    }
    snprintf(why, n, "this build of breakwater has no %s component", name);
    return NULL;
}

unsigned bw_components(void)
{
    unsigned bits = BW_COMPONENT_CORE | (BW__COMPONENTS);
    char why[8];
    for (int i = 0; i < REFS_MAX && bw__component_refs[i].name; i++)
        if (bw__component_get(bw__component_refs[i].name, why, sizeof why))
            bits |= bw__component_refs[i].bit;
    return bits;
}
