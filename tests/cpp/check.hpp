/*
 * check.hpp — the C++ tests' harness (tests/cpp/): the C harness of
 * tests/support/harness.h in C++ (that one uses <stdatomic.h>, which C++17
 * lacks). A test is a function; RUN() calls it and counts it failed when a
 * CHECK in it failed; SUMMARY() prints "N passed, N failed" and gives main's
 * exit status. BW_TEST=NAME in the environment runs the test NAME alone (an
 * executable with no test of that name fails), as the C harness does.
 */
#ifndef BW_TEST_CPP_CHECK_HPP
#define BW_TEST_CPP_CHECK_HPP

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace check
{
inline std::atomic<int> failed_checks{0};
inline int passed, failed;
inline const char *current = "";
/* The one test to run (BW_TEST), or NULL: all. */
inline const char *only()
{
    static const char *name = [] {
        const char *e = std::getenv("BW_TEST");
        return e && *e ? e : nullptr;
    }();
    return name;
}
} // namespace check

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            check::failed_checks++;                                                                                    \
            std::fprintf(stderr, "%s:%d: [%s] check failed: %s\n", __FILE__, __LINE__, check::current, #cond);         \
        }                                                                                                              \
    } while (0)

#define CHECK_EQ(a, b)                                                                                                 \
    do {                                                                                                               \
        long long check_a = (long long)(a), check_b = (long long)(b);                                                  \
        if (check_a != check_b) {                                                                                      \
            check::failed_checks++;                                                                                    \
            std::fprintf(stderr, "%s:%d: [%s] %s == %s: %lld != %lld\n", __FILE__, __LINE__, check::current, #a, #b,   \
                         check_a, check_b);                                                                            \
        }                                                                                                              \
    } while (0)

#define RUN(test)                                                                                                      \
    do {                                                                                                               \
        if (check::only() && std::strcmp(check::only(), #test) != 0)                                                   \
            break;                                                                                                     \
        check::current = #test;                                                                                        \
        int check_before = check::failed_checks;                                                                       \
        test();                                                                                                        \
        if (check::failed_checks == check_before)                                                                      \
            check::passed++;                                                                                           \
        else {                                                                                                         \
            check::failed++;                                                                                           \
            std::fprintf(stderr, "FAIL %s\n", #test);                                                                  \
        }                                                                                                              \
    } while (0)

#define SUMMARY()                                                                                                      \
    (std::printf("%d passed, %d failed\n", check::passed, check::failed),                                              \
     check::only() && check::passed + check::failed == 0                                                               \
         ? (std::fprintf(stderr, "no test named %s\n", check::only()), 1)                                              \
     : check::failed == 0 ? 0                                                                                          \
                          : 1)

#endif
