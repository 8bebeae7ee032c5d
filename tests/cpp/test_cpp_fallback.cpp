/*
 * test_cpp_fallback.cpp (tests/cpp/) — typed fallbacks (breakwater.hpp,
 * bw::fallback): breaker_ref::call, call_key and try_call given a fallback
 * returning the call's type (std::string from a const char *, std::optional,
 * a move-only std::unique_ptr, void), standing in for a rejection (with its
 * retry_after on a manual clock) and for a failure (an exception, or a value
 * the classifier judged a failure, with its code); the mask; a fallback that
 * throws; pipeline::call and try_call through retry + breaker (+ timeout,
 * bulkhead, keyed) with a typed fallback. The static_asserts for types that
 * do not fit are tested by static_asserts.sh. Built by g++ and clang++ at
 * -std=c++17 and -std=c++20 (tests/CMakeLists.txt).
 */
#include <breakwater/breakwater.hpp>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "check.hpp"

using namespace std::chrono_literals;

namespace
{

/* A breaker on a manual clock that trips after 4 failures (of at least 4 calls) and waits 10 s. */
struct fixture {
    bw::manual_clock clock;
    bw::breaker b;
    explicit fixture(const char *extra = "")
        : clock(), b("under-test", bw::config::parse(std::string("window=count:10 min_calls=4 failure_rate=0.5 "
                                                                 "wait=10s permitted_probes=2 ") +
                                                     extra)
                                       .clock(clock))
    {
    }
    void trip()
    {
        for (int i = 0; i < 4; i++)
            b.try_acquire().settle(bw::outcome::failure, 7);
    }
};

struct http_error : std::runtime_error {
    int status;
    explicit http_error(int s) : std::runtime_error("http"), status(s)
    {
    }
};

struct response {
    int status;
    std::string body;
};

struct shape {
    explicit shape(int s) : sides(s)
    {
    }
    virtual ~shape() = default;
    int sides;
};
struct triangle : shape {
    triangle() : shape(3)
    {
    }
};

/* The status of the http_error an exception_ptr holds; -1 for anything else. */
int status_of(const std::exception_ptr &e)
{
    try {
        std::rethrow_exception(e);
    } catch (const http_error &h) {
        return h.status;
    } catch (...) {
        return -1;
    }
}

const auto by_status = [](const response &r) {
    return r.status >= 500 ? bw::verdict(bw::outcome::failure, r.status) : bw::verdict(bw::outcome::success);
};

/* OPEN: the fallback stands in, with the rejection's reasons; the call is not made. */
void test_call_fallback_on_rejection()
{
    fixture f;
    f.trip();
    CHECK(f.b.state() == bw::state::open);
    f.clock.advance(3s);
    int ran = 0;
    std::optional<bw::nanoseconds> retry_after;
    std::optional<bw::state> state;
    std::string s = f.b.call(
        [&] {
            ran++;
            return std::string("live");
        },
        bw::fallback{[&](const bw::fallback_info &why) {
            CHECK(why.rejected() && !why.failed() && !why.timed_out() && !why.full());
            CHECK_EQ(why.reason(), BW_FALLBACK_ON_REJECTED);
            CHECK_EQ(why.status(), BW_REJECTED);
            CHECK_EQ(why.code(), 0);
            CHECK(why.rejection().last_failure() == 7);
            CHECK(!why.exception());
            retry_after = why.retry_after();
            state = why.state();
            return "cached"; /* a const char * for a std::string call */
        }});
    CHECK(s == "cached");
    CHECK_EQ(ran, 0);
    CHECK(retry_after == bw::nanoseconds(7s));
    CHECK(state == bw::state::open);
    CHECK_EQ(f.b.counters().rejected[BW_STATE_OPEN], 1);

    /* A fallback taking nothing; std::nullopt for a std::optional. */
    std::optional<int> o = f.b.call(
        [&] {
            ran++;
            return std::optional<int>(1);
        },
        bw::fallback{[] { return std::nullopt; }});
    CHECK(!o);
    /* Move-only: a std::unique_ptr<triangle> for a std::unique_ptr<shape> call. */
    std::unique_ptr<shape> p =
        f.b.call([&] { return std::make_unique<shape>(4); }, bw::fallback{[] { return std::make_unique<triangle>(); }});
    CHECK(p && p->sides == 3);
    /* A void call; a mutable fallback. */
    int stood = 0;
    f.b.call([&] { ran++; }, bw::fallback{[n = 0, &stood]() mutable { stood = ++n; }});
    CHECK_EQ(stood, 1);
    /* A fallback held in a variable (an lvalue) works the same. */
    auto cached = bw::fallback{[](const bw::fallback_info &) { return 5; }};
    CHECK_EQ(f.b.call([] { return 1; }, cached), 5);
    CHECK_EQ(ran, 0);

    /* FORCED_OPEN: no retry_after, the state says why. */
    f.b.force_open();
    f.b.call([] { return 0; }, bw::fallback{[](const bw::fallback_info &why) {
                 CHECK(!why.retry_after());
                 CHECK(why.state() == bw::state::forced_open);
                 return 1;
             }});

    /* A rejection outside the mask is call()'s: bw::rejected. */
    bool caught = false;
    try {
        f.b.call([] { return 1; }, bw::fallback{BW_FALLBACK_ON_FAILURE, [] { return 2; }});
    } catch (const bw::rejected &r) {
        caught = r.state() == bw::state::forced_open;
    }
    CHECK(caught);
}

/* The call ran and failed: settled first, then the fallback with the exception or the verdict's code. */
void test_call_fallback_on_failure()
{
    fixture f("window=count:100 min_calls=100"); /* never trips here */
    int fallbacks = 0;
    std::string s =
        f.b.call([]() -> std::string { throw http_error(503); }, bw::fallback{[&](const bw::fallback_info &why) {
                     fallbacks++;
                     CHECK(why.failed() && !why.rejected());
                     CHECK_EQ(why.status(), BW_OK);
                     CHECK(!why.retry_after() && !why.state());
                     return "stale:" + std::to_string(status_of(why.exception()));
                 }});
    CHECK(s == "stale:503");
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 1); /* recorded as without a fallback */

    /* A value the classifier judges a failure: the fallback gets the verdict's code, the value is dropped. */
    auto cached = bw::fallback{[&](const bw::fallback_info &why) {
        fallbacks++;
        CHECK(why.failed());
        CHECK(!why.exception());
        return response{200, "cached:" + std::to_string(why.code())};
    }};
    response r = f.b.call([] { return response{502, "bad gateway"}; }, by_status, cached);
    CHECK(r.body == "cached:502");
    CHECK(f.b.last_failure() == 502);
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 2);
    /* A success is the call's own. */
    r = f.b.call([] { return response{200, "live"}; }, by_status, cached);
    CHECK(r.body == "live");
    CHECK_EQ(fallbacks, 2);
    /* UNREACHABLE is a failure for the fallback too; IGNORED is not. */
    r = f.b.call([] { return response{0, ""}; }, [](const response &) { return bw::outcome::unreachable; }, cached);
    CHECK(r.body == "cached:0");
    r = f.b.call(
        [] {
            return response{404, "not found"};
        },
        [](const response &) { return bw::outcome::ignored; }, cached);
    CHECK(r.body == "not found");
    CHECK_EQ(fallbacks, 3);

    /* An exception the classifier ignores is rethrown: there is no value to return, and no failure to replace. */
    auto ignore_404 = bw::classifier{by_status, [](std::exception_ptr e) {
                                         return status_of(e) == 404 ? bw::verdict(bw::outcome::ignored)
                                                                    : bw::verdict(bw::outcome::failure, status_of(e));
                                     }};
    bool caught = false;
    try {
        f.b.call([]() -> response { throw http_error(404); }, ignore_404, cached);
    } catch (const http_error &e) {
        caught = e.status == 404;
    }
    CHECK(caught);
    CHECK_EQ(fallbacks, 3);
    /* The exception classifier's code reaches the fallback as code(), with the exception. */
    r = f.b.call([]() -> response { throw http_error(500); }, ignore_404,
                 bw::fallback{[](const bw::fallback_info &why) {
                     CHECK(status_of(why.exception()) == 500);
                     return response{why.code(), "from the verdict"};
                 }});
    CHECK_EQ(r.status, 500);

    /* A mask without BW_FALLBACK_ON_FAILURE: the failed value is returned, the exception rethrown. */
    auto only_rejections = bw::fallback{BW_FALLBACK_ON_REJECTED, [] { return response{200, "cached"}; }};
    CHECK_EQ(f.b.call([] { return response{503, ""}; }, by_status, only_rejections).status, 503);
    caught = false;
    try {
        f.b.call([]() -> response { throw http_error(503); }, only_rejections);
    } catch (const http_error &) {
        caught = true;
    }
    CHECK(caught);

    /* A void call that throws. */
    int stood = 0;
    f.b.call([] { throw std::logic_error("x"); }, bw::fallback{[&] { stood++; }});
    CHECK_EQ(stood, 1);

    /* A fallback that throws: its exception propagates; the call's failure is recorded all the same. */
    uint64_t failures = f.b.counters().calls[BW_CALL_FAILURE];
    caught = false;
    try {
        f.b.call([]() -> int { throw http_error(500); },
                 bw::fallback{[]() -> int { throw std::runtime_error("no cache either"); }});
    } catch (const std::runtime_error &e) {
        caught = std::string(e.what()) == "no cache either";
    }
    CHECK(caught);
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], failures + 1);

    /* A bad mask is refused before the call is asked for. */
    uint64_t before = f.b.snapshot().total_calls;
    caught = false;
    try {
        f.b.call([] { return 1; }, bw::fallback{0x10u, [] { return 2; }});
    } catch (const bw::error &e) {
        caught = e.code() == BW_ERANGE && e.field() == "on";
    }
    CHECK(caught);
    CHECK_EQ(f.b.snapshot().total_calls, before);
}

/* call_key: a keyed circuit's rejection is the fallback's; a bad key stays an error. */
void test_call_key_fallback()
{
    fixture f;
    std::string key = "tenant-1";
    auto zero = bw::fallback{[](const bw::fallback_info &why) { return why.rejected() ? -1 : -2; }};
    for (int i = 0; i < 4; i++)
        CHECK_EQ(f.b.call_key(
                     key, [] { return 1; }, [](int) { return bw::outcome::failure; }, zero),
                 -2);
    CHECK_EQ(f.b.call_key(
                 key, [] { return 1; }, zero),
             -1);
    CHECK_EQ(f.b.call_key(
                 "tenant-2", [] { return 1; }, zero),
             1);
    CHECK_EQ(f.b.call_key(
                 std::string_view(key), [] { return 1; }, zero),
             -1);
    CHECK(f.b.state() == bw::state::closed); /* the breaker's own circuit */
    bool caught = false;
    try {
        f.b.call_key(
            "bad key", [] { return 1; }, zero);
    } catch (const bw::error &e) {
        caught = e.code() == BW_EINVAL && !e.message().empty();
    }
    CHECK(caught);
    caught = false;
    try {
        f.b.call_key(
            std::string_view("nul\0", 4), [] { return 1; }, zero);
    } catch (const bw::error &e) {
        caught = e.code() == BW_EINVAL && e.field() == "key";
    }
    CHECK(caught);
}

/* try_call: the fallback's value in a call_result that says it stood in, and for which outcome. */
void test_try_call_fallback()
{
    fixture f;
    auto two = bw::fallback{[] { return 2; }};
    auto own = f.b.try_call([] { return 1; }, two);
    CHECK(own && own.value() == 1 && own.fallback() == 0);
    auto failed = f.b.try_call([] { return 1; }, [](int) { return bw::verdict(bw::outcome::failure, 9); },
                               bw::fallback{[](const bw::fallback_info &why) { return why.code() * 10; }});
    CHECK(failed && failed.value() == 90);
    CHECK_EQ(failed.fallback(), BW_FALLBACK_ON_FAILURE);
    f.trip();
    f.clock.advance(4s);
    auto rejected = f.b.try_call([] { return 1; }, two);
    CHECK(rejected && !rejected.rejected() && rejected.value() == 2);
    CHECK_EQ(rejected.fallback(), BW_FALLBACK_ON_REJECTED);
    CHECK(rejected.rejection().retry_after() == bw::nanoseconds(6s));
    auto outside = f.b.try_call([] { return 1; }, bw::fallback{BW_FALLBACK_ON_FAILURE, [] { return 2; }});
    CHECK(!outside && outside.rejected() && outside.fallback() == 0);
    auto v = f.b.try_call([] {}, bw::fallback{[] {}});
    CHECK(v && v.fallback() == BW_FALLBACK_ON_REJECTED);
    auto bad = f.b.try_call([] { return 1; }, bw::fallback{0u, [] { return 2; }});
    CHECK_EQ(bad.status(), BW_ERANGE);
    auto key = f.b.try_call_key(
        std::string_view("nul\0", 4), [] { return 1; }, two);
    CHECK(key.status() == BW_EINVAL && key.fallback() == 0);
    auto keyed = f.b.try_call_key(
        "tenant", [] { return 1; }, two);
    CHECK(keyed && keyed.value() == 1);
}

/* A pipeline: retry + breaker + a typed fallback given to call(). */
void test_pipeline_call_fallback()
{
    fixture f("min_calls=5");
    bw::retry r;
    r.attempts(3).backoff(BW_BACKOFF_CONSTANT, 0ns, 1, 0ns);
    bw::pipeline p("orders");
    p.add(r).add(f.b);
    auto code = [](const response &x) { return x.status >= 500 ? x.status : 0; }; /* the code the layers see */
    int calls = 0, fallbacks = 0;
    bw_fallback_info last = bw_fallback_info();
    auto cached = bw::fallback{[&](const bw::fallback_info &why) {
        fallbacks++;
        last = why.raw();
        return response{200, "cached"};
    }};

    /* Fails once, then succeeds: the last attempt's value. */
    response x = p.call(
        [&](bw::context ctx) {
            calls++;
            return ctx.attempt() < 2 ? response{503, ""} : response{200, "live"};
        },
        code, cached);
    CHECK(x.body == "live");
    CHECK_EQ(calls, 2);
    CHECK_EQ(fallbacks, 0);
    /* Every attempt fails: the fallback stands in with the last code, after 3 attempts. */
    x = p.call(
        [&] {
            calls++;
            return response{502, ""};
        },
        code, cached);
    CHECK(x.body == "cached");
    CHECK_EQ(calls, 5);
    CHECK(last.reason == BW_FALLBACK_ON_FAILURE && last.rc == 502 && last.attempts == 3 && last.status == BW_OK);
    CHECK(f.b.state() == bw::state::open); /* 4 failures of 5 calls */

    /* OPEN: the fallback stands in for the rejection, with its retry_after; no call, no retry. */
    f.clock.advance(4s);
    std::optional<bw::nanoseconds> wait;
    x = p.call(
        [&] {
            calls++;
            return response{200, "live"};
        },
        code, bw::fallback{[&](const bw::fallback_info &why) {
            CHECK(why.rejected());
            CHECK_EQ(why.attempts(), 1);
            CHECK(why.rejection().last_failure() == 502);
            wait = why.retry_after();
            return response{200, "cached"};
        }});
    CHECK(x.body == "cached");
    CHECK(wait == bw::nanoseconds(6s));
    CHECK_EQ(calls, 5);
    /* Without a fallback, or outside its mask: bw::rejected, with the same reasons. */
    bool caught = false;
    try {
        p.call([] { return 1; });
    } catch (const bw::rejected &e) {
        caught = e.retry_after() == bw::nanoseconds(6s);
    }
    CHECK(caught);
    caught = false;
    try {
        p.call([] { return 1; }, bw::fallback{BW_FALLBACK_ON_FAILURE | BW_FALLBACK_ON_TIMEOUT, [] { return 2; }});
    } catch (const bw::rejected &) {
        caught = true;
    }
    CHECK(caught);
    /* try_call says whose value it is. */
    auto t = p.try_call([] { return response{200, "live"}; }, code, cached);
    CHECK(t && t.value().body == "cached");
    CHECK_EQ(t.fallback(), BW_FALLBACK_ON_REJECTED);
    CHECK(t.rejection().retry_after() == bw::nanoseconds(6s));
    auto none = p.try_call([] { return response{200, "live"}; }, code);
    CHECK(!none && none.rejected() && none.rejection().retry_after() == bw::nanoseconds(6s));
    auto v = p.try_call([] {}, bw::fallback{[] {}});
    CHECK(v && v.fallback() == BW_FALLBACK_ON_REJECTED);
    CHECK_EQ(p.try_call([] { return 1; }, bw::fallback{0u, [] { return 2; }}).status(), BW_ERANGE);
}

/* A pipeline call that throws: the layers record exception_rc; the fallback gets the exception, or it is rethrown. */
void test_pipeline_call_exceptions()
{
    fixture f("window=count:100 min_calls=100"); /* never trips here */
    bw::retry r;
    r.attempts(3).backoff(BW_BACKOFF_CONSTANT, 0ns, 1, 0ns);
    bw::pipeline p("orders");
    p.add(r).add(f.b);
    std::string s = p.call([](bw::context ctx) -> std::string { throw http_error(500 + ctx.attempt()); },
                           bw::fallback{[](const bw::fallback_info &why) {
                               CHECK(why.failed());
                               CHECK_EQ(why.code(), bw::pipeline::exception_rc);
                               CHECK_EQ(why.attempts(), 3);
                               return "stale:" + std::to_string(status_of(why.exception()));
                           }});
    CHECK(s == "stale:503"); /* the last attempt's exception */
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 3);
    /* Throws once, then returns: the value. */
    CHECK_EQ(p.call([](bw::context ctx) {
        if (ctx.attempt() < 2)
            throw http_error(500);
        return 7;
    }),
             7);
    /* No fallback: the last attempt's exception is rethrown. */
    bool caught = false;
    try {
        p.call([](bw::context ctx) -> int { throw http_error(600 + ctx.attempt()); });
    } catch (const http_error &e) {
        caught = e.status == 603;
    }
    CHECK(caught);
    /* A value whose code is not 0, outside the fallback's mask: the value. */
    CHECK_EQ(p.call([] { return 9; }, [](int v) { return v; }, bw::fallback{BW_FALLBACK_ON_REJECTED, [] { return 0; }}),
             9);
    /* A fallback that throws: its exception propagates. */
    caught = false;
    try {
        p.call([]() -> int { throw http_error(500); },
               bw::fallback{[]() -> int { throw std::runtime_error("no cache either"); }});
    } catch (const std::runtime_error &e) {
        caught = std::string(e.what()) == "no cache either";
    }
    CHECK(caught);
    /* A void call. */
    int stood = 0;
    p.call([] { throw std::logic_error("x"); }, bw::fallback{[&] { stood++; }});
    CHECK_EQ(stood, 1);
    int ran = 0;
    p.call([&] { ran++; });
    CHECK_EQ(ran, 1);

    /* A pipeline with a fallback layer (add_fallback's int code) refuses typed calls; execute works. */
    bw::pipeline q("with-layer");
    q.add_fallback(BW_FALLBACK_ON_ALL, [](const bw::fallback_info &why) { return why.failed() ? 100 : 101; }).add(f.b);
    caught = false;
    try {
        q.call([] { return 1; }, bw::fallback{[] { return 2; }});
    } catch (const bw::error &e) {
        caught = e.code() == BW_EINVAL && e.field() == "fallback";
    }
    CHECK(caught);
    CHECK_EQ(q.try_call([] { return 1; }).status(), BW_EINVAL);
    CHECK_EQ(q.execute([] { return 1; }).rc, 100);
}

/* Timeouts, full bulkheads and keyed circuits through a typed call. */
void test_pipeline_call_timeout_full_keyed()
{
    bw::manual_clock clock;
    bw::bulkhead slots(1);
    bw::pipeline p("slow");
    p.add(slots).add_timeout(1s);
    CHECK_EQ(bw_pipeline_set_clock(p.get(), clock.get()), BW_OK);
    auto slow = [&] {
        clock.advance(2s);
        return std::string("late");
    };
    auto cached = bw::fallback{[](const bw::fallback_info &why) {
        return std::string(why.timed_out() ? "timed out"
                           : why.full()    ? "full"
                                           : "?") +
               ":" + std::to_string(why.status());
    }};
    CHECK(p.call(slow, cached) == "timed out:" + std::to_string(BW_ETIMEDOUT));
    bool caught = false;
    try {
        p.call(slow);
    } catch (const bw::error &e) {
        caught = e.code() == BW_ETIMEDOUT;
    }
    CHECK(caught);
    auto r = p.try_call(slow);
    CHECK(!r && r.status() == BW_ETIMEDOUT && !r.rejected());
    /* A late attempt that threw: the fallback sees the exception; without one it is rethrown. */
    auto late_throw = [&]() -> std::string {
        clock.advance(2s);
        throw http_error(504);
    };
    CHECK(p.call(late_throw, bw::fallback{[](const bw::fallback_info &why) {
                     return std::to_string(status_of(why.exception()));
                 }}) == "504");
    caught = false;
    try {
        p.call(late_throw);
    } catch (const http_error &) {
        caught = true;
    }
    CHECK(caught);
    {
        auto held = slots.try_acquire();
        CHECK(held);
        CHECK(p.call([] { return std::string("live"); }, cached) == "full:" + std::to_string(BW_EFULL));
        caught = false;
        try {
            p.call([] { return 1; });
        } catch (const bw::error &e) {
            caught = e.code() == BW_EFULL;
        }
        CHECK(caught);
    }
    CHECK(p.call([] { return std::string("live"); }, cached) == "live");

    bw::breaker family("family", bw::config::parse("window=count:10 min_calls=2 failure_rate=0.5 wait=10s"));
    bw::pipeline k("keyed");
    k.add_keyed(family);
    auto fails = [](int v) { return v; };
    for (int i = 0; i < 2; i++)
        k.call_key(
            "tenant-9", [] { return 1; }, fails);
    CHECK(k.call_key(
              "tenant-9", [] { return 0; }, fails,
              bw::fallback{[](const bw::fallback_info &why) { return why.rejected() ? 42 : 0; }}) == 42);
    CHECK_EQ(k.call_key("tenant-8", [](bw::context c) { return c.key() == "tenant-8" ? 5 : 6; }), 5);
    CHECK_EQ(k.try_call_key("tenant-9", [] { return 0; }).status(), BW_REJECTED);
    caught = false;
    try {
        k.call_key(std::string_view("bad\0", 4), [] { return 0; });
    } catch (const bw::error &e) {
        caught = e.code() == BW_EINVAL && e.field() == "key";
    }
    CHECK(caught);
}

} // namespace

int main()
{
    RUN(test_call_fallback_on_rejection);
    RUN(test_call_fallback_on_failure);
    RUN(test_call_key_fallback);
    RUN(test_try_call_fallback);
    RUN(test_pipeline_call_fallback);
    RUN(test_pipeline_call_exceptions);
    RUN(test_pipeline_call_timeout_full_keyed);
    return SUMMARY();
}
