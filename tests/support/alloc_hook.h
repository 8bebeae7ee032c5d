/*
 * alloc_hook.h — counts heap allocations and fails the N-th one on request, by
 * replacing malloc and friends in the program that includes it (once) and
 * forwarding to glibc's __libc_* entry points. The library's own calls land here
 * too, since the program's definitions interpose on the shared C library's.
 * A shared helper of tests/support/, used by the benchmarks (allocations per
 * call), tests/unit/test_oom.c (every allocation failure path) and
 * tests/unit/test_pipeline.c (no allocation when executing).
 *
 * Sanitizer builds bring their own allocator, so there the hook is compiled out
 * and ALLOC_HOOK is 0; a user must then skip what needs it.
 */
#ifndef BW_ALLOC_HOOK_H
#define BW_ALLOC_HOOK_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_HOOK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ALLOC_HOOK 0
#endif
#endif
#ifndef ALLOC_HOOK
#define ALLOC_HOOK 1
#endif

static _Atomic unsigned long alloc_count; /* allocations so far */
static _Atomic long alloc_fail_at = -1;   /* fail the allocation with this count (-1: never) */

static inline unsigned long allocs_now(void)
{
    return atomic_load_explicit(&alloc_count, memory_order_relaxed);
}

/* Fail the n-th allocation from now (0 = the next one); -1 turns failing off. */
static inline void alloc_fail_after(long n)
{
    atomic_store(&alloc_fail_at, n < 0 ? -1 : (long)allocs_now() + n);
}

#if ALLOC_HOOK
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);

/* Exported even under -fvisibility=hidden, so that libc's own calls come here too. */
#define ALLOC_HOOK_API __attribute__((visibility("default")))

/* Count one allocation; 0 when it is the one to fail. */
static inline int alloc_allowed(void)
{
    long n = (long)atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return n != atomic_load_explicit(&alloc_fail_at, memory_order_relaxed);
}

ALLOC_HOOK_API void *malloc(size_t size)
{
    return alloc_allowed() ? __libc_malloc(size) : NULL;
}

ALLOC_HOOK_API void *calloc(size_t n, size_t size)
{
    return alloc_allowed() ? __libc_calloc(n, size) : NULL;
}

ALLOC_HOOK_API void *realloc(void *p, size_t size)
{
    return alloc_allowed() ? __libc_realloc(p, size) : NULL;
}

ALLOC_HOOK_API void free(void *p)
{
    __libc_free(p);
}

ALLOC_HOOK_API void *aligned_alloc(size_t align, size_t size)
{
    return alloc_allowed() ? __libc_memalign(align, size) : NULL;
}

ALLOC_HOOK_API int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    void *p = alloc_allowed() ? __libc_memalign(align, size) : NULL;
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}
#endif

#endif
