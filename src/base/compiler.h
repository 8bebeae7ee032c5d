/*
 * compiler.h — compiler hints every layer uses (internal; base layer).
 *
 * Branch hints, printf checking, inlining control and the sanitizer a build
 * runs under. Nothing here generates code of its own.
 */
#ifndef BW_BASE_COMPILER_H
#define BW_BASE_COMPILER_H

#if defined(__GNUC__) || defined(__clang__)
#define BW_LIKELY(x) __builtin_expect(!!(x), 1)
#define BW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define BW_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define BW_NOINLINE __attribute__((noinline))
/* Inline always: a few instructions on a hot path that the compiler's heuristics sometimes leave out of line. */
#define BW_ALWAYS_INLINE inline __attribute__((always_inline))
/* Inline every call of this function's body (the machine and window of a settle, across files under LTO). */
#define BW_FLATTEN __attribute__((flatten))
#else
#define BW_FLATTEN
#define BW_NOINLINE
#define BW_ALWAYS_INLINE inline
#define BW_LIKELY(x) (x)
#define BW_UNLIKELY(x) (x)
#define BW_PRINTF(a, b)
#endif

/* BW__TSAN is 1 in a ThreadSanitizer build (gcc defines __SANITIZE_THREAD__, clang has __has_feature). */
#if defined(__SANITIZE_THREAD__)
#define BW__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BW__TSAN 1
#endif
#endif
#ifndef BW__TSAN
#define BW__TSAN 0
#endif

#endif
