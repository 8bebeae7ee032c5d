/*
 * ir_bench_cpp.cpp — the hot paths through the C++ API (breakwater.hpp) next
 * to the same paths written against the C API in the same C++ translation
 * unit, under callgrind as bench/ir_bench.c (whose header says how a path is
 * measured); `make bench-ir` runs the cpp_* paths with this binary.
 *
 *   ir_bench_cpp PATH ITERS
 *
 * Paths (a breaker with the default configuration):
 *   empty                  the loop alone
 *   cpp_c_closed_success   bw_acquire + bw_settle(SUCCESS), CLOSED, the C calls (no bw_rejection: NULL)
 *   cpp_c_closed_success_why  the same with a bw_rejection to fill (as README.md's pay(), and as a permit has)
 *   cpp_closed_success     try_acquire() + permit.settle(success): the same through the wrapper
 *   cpp_closed_call        call([] { return 0; }): acquire, the call, the default classifier, settle
 *   cpp_closed_call_fallback  the same given a bw::fallback (not run: the call succeeds)
 *   cpp_c_open_reject      bw_acquire in OPEN, filling a bw_rejection, and reading its retry_after (with the
 *                          settle of an admitted call that correct C needs, as the permit's destructor has)
 *   cpp_open_reject        try_acquire() in OPEN, testing rejected() and reading the rejection's retry_after
 *   cpp_open_reject_bool   try_acquire() in OPEN, testing the permit (if (!p)) and reading the retry_after
 *   cpp_open_reject_fallback  call() in OPEN given a bw::fallback that reads the retry_after and returns a value
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <valgrind/callgrind.h>

#include "breakwater/breakwater.hpp"

#define BARRIER() __asm__ __volatile__("" ::: "memory")

namespace
{
volatile int64_t sink; /* where a rejection's retry_after goes, so that it is read */

bw::breaker make(const char *text)
{
    bw::result<bw::breaker> b = bw::breaker::make("svc", bw::config::parse(text ? text : ""));
    if (!b) {
        std::fprintf(stderr, "ir_bench_cpp: %s\n", b.error().message().data());
        std::exit(1);
    }
    return std::move(b).value();
}

void open(bw::breaker &b)
{
    for (int i = 0; i < 100; i++)
        b.try_acquire().settle(bw::outcome::failure);
    if (b.state() != bw::state::open) {
        std::fprintf(stderr, "ir_bench_cpp: the breaker did not open\n");
        std::exit(1);
    }
}
} // namespace

int main(int argc, char **argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: ir_bench_cpp PATH ITERS\n");
        return 2;
    }
    const char *path = argv[1];
    long n = std::atol(argv[2]);

#define MEASURE(body)                                                                                                  \
    do {                                                                                                               \
        for (long i = 0; i < n / 10 + 1; i++) { /* warm-up */                                                          \
            body;                                                                                                      \
            BARRIER();                                                                                                 \
        }                                                                                                              \
        CALLGRIND_TOGGLE_COLLECT;                                                                                      \
        for (long i = 0; i < n; i++) {                                                                                 \
            body;                                                                                                      \
            BARRIER();                                                                                                 \
        }                                                                                                              \
        CALLGRIND_TOGGLE_COLLECT;                                                                                      \
    } while (0)

    if (std::strcmp(path, "empty") == 0) {
        MEASURE((void)0);
    } else if (std::strcmp(path, "cpp_c_closed_success") == 0) {
        bw::breaker br = make(nullptr);
        bw_breaker *b = br.get();
        MEASURE({
            bw_permit p;
            if (bw_acquire(b, &p, nullptr) == BW_OK)
                bw_settle(b, &p, BW_SUCCESS);
        });
    } else if (std::strcmp(path, "cpp_c_closed_success_why") == 0) {
        bw::breaker br = make(nullptr);
        bw_breaker *b = br.get();
        MEASURE({
            bw_permit p;
            bw_rejection why;
            if (bw_acquire(b, &p, &why) == BW_OK)
                bw_settle(b, &p, BW_SUCCESS);
            else
                sink = why.retry_after_ns;
        });
    } else if (std::strcmp(path, "cpp_closed_success") == 0) {
        bw::breaker owner = make(nullptr);
        bw::breaker_ref br = owner; /* a local handle, as the C path's local pointer */
        MEASURE({
            bw::permit p = br.try_acquire();
            if (p)
                p.settle(bw::outcome::success);
        });
    } else if (std::strcmp(path, "cpp_closed_call") == 0) {
        bw::breaker owner = make(nullptr);
        bw::breaker_ref br = owner;
        MEASURE(br.call([] { return 0; }));
    } else if (std::strcmp(path, "cpp_closed_call_fallback") == 0) {
        bw::breaker owner = make(nullptr);
        bw::breaker_ref br = owner;
        MEASURE(br.call([] { return 0; }, bw::fallback{[] { return 1; }}));
    } else if (std::strcmp(path, "cpp_c_open_reject") == 0) {
        bw::breaker br = make("wait=1h");
        open(br);
        bw_breaker *b = br.get();
        MEASURE({
            bw_permit p;
            bw_rejection why;
            int rc = bw_acquire(b, &p, &why);
            if (rc == BW_REJECTED)
                sink = why.retry_after_ns;
            else if (rc == BW_OK) /* never taken here; correct C settles what it was admitted */
                bw_settle(b, &p, BW_IGNORED);
        });
    } else if (std::strcmp(path, "cpp_open_reject") == 0) {
        bw::breaker owner = make("wait=1h");
        open(owner);
        bw::breaker_ref br = owner;
        MEASURE({
            bw::permit p = br.try_acquire();
            if (p.rejected())
                sink = p.rejection().raw().retry_after_ns;
        });
    } else if (std::strcmp(path, "cpp_open_reject_bool") == 0) {
        bw::breaker owner = make("wait=1h");
        open(owner);
        bw::breaker_ref br = owner;
        MEASURE({
            bw::permit p = br.try_acquire();
            if (!p)
                sink = p.rejection().raw().retry_after_ns;
        });
    } else if (std::strcmp(path, "cpp_open_reject_fallback") == 0) {
        bw::breaker owner = make("wait=1h");
        open(owner);
        bw::breaker_ref br = owner;
        MEASURE(sink = br.call([] { return int64_t(0); }, bw::fallback{[](const bw::fallback_info &why) {
                                   return why.raw().rejection.retry_after_ns;
                               }}));
    } else {
        std::fprintf(stderr, "ir_bench_cpp: unknown path '%s'\n", path);
        return 2;
    }
    return 0;
}
