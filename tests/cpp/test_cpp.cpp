/*
 * test_cpp.cpp (tests/cpp/) — the C++ API (breakwater.hpp) with exceptions:
 * RAII and moves, the configuration's chained setters and errors, calls with
 * classifiers that see results and exceptions, rejections, the scoped permit
 * (an unsettled one settles IGNORED and hands a probe slot back), listeners
 * released exactly once, keyed circuits and registries by std::string_view,
 * the pipeline, and several threads on one breaker. Built by g++ and clang++
 * at -std=c++17 and -std=c++20 (tests/CMakeLists.txt).
 */
#include <breakwater/breakwater.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

void test_config()
{
    bw::config c;
    c.failure_rate(0.25).min_calls(3).count_window(20).wait(1500ms).slow_call_duration(2s).auto_transition(true);
    std::string text = c.format();
    CHECK(text.find("failure_rate=0.25") != std::string::npos);
    CHECK(text.find("wait=1.5s") != std::string::npos || text.find("wait=1500ms") != std::string::npos);
    bw::config copy = c; /* a value: the copy is independent */
    copy.failure_rate(0.75);
    CHECK(c.format().find("failure_rate=0.25") != std::string::npos);
    CHECK(copy.format().find("failure_rate=0.75") != std::string::npos);
    bw::config parsed = bw::config::parse(text);
    CHECK(parsed.format() == text);

    bool threw = false;
    try {
        c.failure_rate(1.5);
    } catch (const bw::error &e) {
        threw = true;
        CHECK_EQ(e.code(), BW_ERANGE);
        CHECK(e.field() == "failure_rate");
        CHECK(!e.message().empty());
        CHECK(std::string(e.what()) == std::string(e.message()));
    }
    CHECK(threw);
    CHECK(c.format() == text); /* unchanged by the refused value */
    threw = false;
    try {
        bw::config::parse("failure_rate=0.5 nonsense");
    } catch (const bw::error &e) {
        threw = true;
        CHECK_EQ(e.code(), BW_EPARSE);
    }
    CHECK(threw);
    threw = false;
    try { /* a cross-field check */
        bw::config().permitted_probes(2).max_concurrent_probes(3).validate();
    } catch (const bw::error &e) {
        threw = true;
        CHECK_EQ(e.code(), BW_ERANGE);
    }
    CHECK(threw);
}

void test_breaker_raii_and_errors()
{
    bool threw = false;
    try {
        bw::breaker bad("has space");
    } catch (const bw::error &e) {
        threw = true;
        CHECK_EQ(e.code(), BW_EINVAL);
    }
    CHECK(threw);
    threw = false;
    try {
        bw::breaker bad(std::string_view("nul\0byte", 8));
    } catch (const bw::error &e) {
        threw = true;
        CHECK_EQ(e.code(), BW_EINVAL);
        CHECK(e.field() == "name");
    }
    CHECK(threw);
    threw = false;
    try {
        bw::breaker bad(std::string(300, 'a'));
    } catch (const bw::error &e) {
        threw = true;
        CHECK_EQ(e.code(), BW_EINVAL);
    }
    CHECK(threw);

    /* A string_view that is not NUL-terminated is copied. */
    std::string names = "payments-and-more";
    bw::breaker a(std::string_view(names).substr(0, 8));
    CHECK(a.name() == "payments");
    CHECK(a.state() == bw::state::closed);
    CHECK(!a.key());

    bw::breaker moved = std::move(a);
    CHECK(!a);
    CHECK(moved.name() == "payments");
    bw::breaker other("other");
    other = std::move(moved); /* the old "other" is freed at once; moved is left empty */
    CHECK(other.name() == "payments");
    CHECK(!moved);

    bw::result<bw::breaker> r = bw::breaker::make("bad name");
    CHECK(!r);
    CHECK_EQ(r.error().code(), BW_EINVAL);
    threw = false;
    try {
        r.value();
    } catch (const bw::error &) {
        threw = true;
    }
    CHECK(threw);
    bw::result<bw::breaker> ok = bw::breaker::make("fine", bw::config().wait(1s));
    CHECK(ok && ok->name() == "fine");
}

void test_call_classifies_results()
{
    fixture f("window=count:100 min_calls=100");
    int v = f.b.call([] { return 42; });
    CHECK_EQ(v, 42);
    CHECK_EQ(f.b.counters().calls[BW_CALL_SUCCESS], 1);

    auto by_status = [](int status) { return status >= 500 ? bw::outcome::failure : bw::outcome::success; };
    CHECK_EQ(f.b.call([] { return 503; }, by_status), 503);
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 1);
    /* A verdict carries the failure code. */
    f.b.call([] { return 502; }, [](int s) { return bw::verdict(bw::outcome::failure, s); });
    CHECK(f.b.last_failure() == 502);

    /* Void callables; a classifier taking nothing judges them. */
    int ran = 0;
    f.b.call([&] { ran++; });
    f.b.call([&] { ran++; }, [] { return bw::outcome::ignored; });
    CHECK_EQ(ran, 2);
    CHECK_EQ(f.b.counters().calls[BW_CALL_IGNORED], 1);

    /* Move-only results come through. */
    auto p = f.b.call([] { return std::make_unique<int>(5); });
    CHECK(p && *p == 5);
}

void test_call_exceptions()
{
    fixture f;
    bool caught = false;
    try {
        f.b.call([]() -> int { throw http_error(500); });
    } catch (const http_error &e) { /* rethrown after settling */
        caught = e.status == 500;
    }
    CHECK(caught);
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 1);

    /* The classifier sees the exception and says a 404 says nothing about the dependency. */
    auto classify = bw::classifier{[](int) { return bw::outcome::success; },
                                   [](std::exception_ptr e) {
                                       try {
                                           std::rethrow_exception(e);
                                       } catch (const http_error &h) {
                                           return h.status == 404 ? bw::verdict(bw::outcome::ignored)
                                                                  : bw::verdict(bw::outcome::failure, h.status);
                                       } catch (...) {
                                           return bw::verdict(bw::outcome::failure);
                                       }
                                   }};
    caught = false;
    try {
        f.b.call([]() -> int { throw http_error(404); }, classify);
    } catch (const http_error &) {
        caught = true;
    }
    CHECK(caught);
    CHECK_EQ(f.b.counters().calls[BW_CALL_IGNORED], 1);
    try {
        f.b.call([]() -> int { throw http_error(503); }, classify);
    } catch (const http_error &) {
    }
    CHECK(f.b.last_failure() == 503);
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 2);
    /* A classifier for results only: exceptions stay failures. */
    try {
        f.b.call([]() -> int { throw std::runtime_error("x"); }, [](int) { return bw::outcome::ignored; });
    } catch (const std::runtime_error &) {
    }
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 3);
    /* try_call settles and rethrows too. */
    caught = false;
    try {
        f.b.try_call([] { throw std::logic_error("y"); });
    } catch (const std::logic_error &) {
        caught = true;
    }
    CHECK(caught);
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 4);
    CHECK(f.b.state() == bw::state::open); /* 4 failures of 4 calls in the window */
}

void test_rejections()
{
    fixture f;
    f.trip();
    CHECK(f.b.state() == bw::state::open);
    f.clock.advance(3s);
    bool caught = false;
    int ran = 0;
    try {
        f.b.call([&] { return ++ran; });
    } catch (const bw::rejected &r) {
        caught = true;
        CHECK(r.state() == bw::state::open);
        CHECK(r.retry_after() == std::chrono::nanoseconds(7s));
        CHECK(r.last_failure() == 7);
    }
    CHECK(caught);
    CHECK_EQ(ran, 0);

    auto r = f.b.try_call([&] { return ++ran; });
    CHECK(!r && r.rejected());
    CHECK_EQ(r.status(), BW_REJECTED);
    CHECK(r.rejection().retry_after() == std::chrono::nanoseconds(7s));
    auto v = f.b.try_call([&] { ran++; });
    CHECK(v.rejected());
    CHECK_EQ(ran, 0);

    bw::permit p = f.b.try_acquire();
    CHECK(!p && p.rejected());
    CHECK(p.rejection().state() == bw::state::open);
    CHECK_EQ(p.settle(bw::outcome::success), BW_EPERMIT);

    caught = false;
    try {
        f.b.acquire();
    } catch (const bw::rejected &e) {
        caught = true;
        CHECK(std::string(e.what()).find("rejected") != std::string::npos);
    }
    CHECK(caught);

    f.b.force_open();
    try {
        f.b.acquire();
    } catch (const bw::rejected &e) {
        CHECK(e.state() == bw::state::forced_open);
        CHECK(!e.retry_after());
    }
    CHECK_EQ(f.b.counters().rejected[BW_STATE_OPEN], 5);
}

void test_permit_scoped()
{
    fixture f("window=count:100 min_calls=100");
    {
        bw::permit p = f.b.acquire();
        CHECK(p);
    } /* destroyed unsettled: IGNORED */
    CHECK_EQ(f.b.counters().calls[BW_CALL_IGNORED], 1);
    {
        bw::permit p = f.b.acquire();
        CHECK_EQ(p.settle(bw::outcome::success), BW_OK);
        CHECK(!p);
        CHECK_EQ(p.status(), BW_OK);
        CHECK_EQ(p.settle(bw::outcome::success), BW_EPERMIT); /* once only */
    }
    CHECK_EQ(f.b.counters().calls[BW_CALL_SUCCESS], 1);
    CHECK_EQ(f.b.counters().calls[BW_CALL_IGNORED], 1);

    /* Moving hands the call over: settled once, by the last owner. */
    {
        bw::permit a = f.b.acquire();
        bw::permit b = std::move(a);
        CHECK(!a && b);
        CHECK_EQ(a.settle(bw::outcome::failure), BW_EPERMIT);
        bw::permit c;
        c = std::move(b);
        CHECK_EQ(c.settle(bw::outcome::failure, 9), BW_OK);
    }
    CHECK_EQ(f.b.counters().calls[BW_CALL_FAILURE], 1);
    CHECK(f.b.last_failure() == 9);
    /* Assigning over an admitted permit settles it IGNORED first. */
    {
        bw::permit a = f.b.acquire();
        a = f.b.acquire();
        CHECK_EQ(f.b.counters().calls[BW_CALL_IGNORED], 2);
    }
    CHECK_EQ(f.b.counters().calls[BW_CALL_IGNORED], 3);
    /* settle_timeout is a slow failure; a message is kept with the last failure. */
    f.b.acquire().settle_timeout(11);
    CHECK_EQ(f.b.counters().calls[BW_CALL_SLOW_FAILURE], 1);
    f.b.acquire().settle(bw::outcome::failure, 12, std::string_view("connection refused by upstream"));
    CHECK(std::string(f.b.counters().last_failure_message) == "connection refused by upstream");
    /* An exception between acquire and settle cannot lose the call. */
    try {
        bw::permit p = f.b.acquire();
        throw std::runtime_error("bail out");
    } catch (const std::runtime_error &) {
    }
    CHECK_EQ(f.b.counters().calls[BW_CALL_IGNORED], 4);
}

/* A half-open probe whose permit is dropped unsettled hands its slot back: the round goes on. */
void test_permit_returns_probe_slot()
{
    fixture f("max_concurrent_probes=1");
    f.trip();
    f.clock.advance(10s);
    {
        bw::permit probe = f.b.acquire();
        CHECK(probe);
        CHECK(f.b.state() == bw::state::half_open);
        CHECK(f.b.try_acquire().rejected()); /* one probe at a time */
    }
    /* Without the IGNORED settle the slot would stay taken and this would be rejected. */
    bw::permit again = f.b.try_acquire();
    CHECK(again);
    CHECK_EQ(again.settle(bw::outcome::success), BW_OK);
    f.b.call([] { return 0; });
    CHECK(f.b.state() == bw::state::closed);
}

struct tracked {
    std::shared_ptr<std::atomic<int>> alive;
    explicit tracked(std::shared_ptr<std::atomic<int>> a) : alive(std::move(a))
    {
        ++*alive;
    }
    tracked(const tracked &o) : alive(o.alive)
    {
        ++*alive;
    }
    ~tracked()
    {
        --*alive;
    }
};

void test_listeners()
{
    auto alive = std::make_shared<std::atomic<int>>(0);
    std::vector<std::string> seen;
    {
        fixture f;
        tracked t(alive);
        /* A lambda holding a copy of t: the listener owns that copy. */
        uint64_t id = f.b.add_listener(BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), [t, &seen](const bw::event &e) {
            seen.push_back(std::string(bw::to_string(e.from())) + "->" + bw::to_string(e.to()));
        });
        CHECK(id != 0);
        /* A std::function taking the C event. */
        int rejections = 0;
        std::function<void(const bw_event &)> fn = [&rejections, t](const bw_event &e) {
            if (e.type == BW_EVENT_REJECTED)
                rejections++;
        };
        uint64_t id2 = f.b.add_listener(BW_EVENT_MASK(BW_EVENT_REJECTED), fn);
        /* A listener that throws does not break the call. */
        f.b.add_listener(BW_EVENT_MASK(BW_EVENT_CALL), [](const bw::event &) { throw std::runtime_error("oops"); });
        f.trip();
        CHECK(f.b.try_acquire().rejected());
        CHECK_EQ(rejections, 1);
        CHECK(seen.size() == 1 && seen[0] == "closed->open");
        CHECK_EQ(f.b.remove_listener(id2), BW_OK);
        CHECK_EQ(f.b.remove_listener(id2), BW_ESTATE);
        f.b.try_acquire();
        CHECK_EQ(rejections, 1);
        CHECK_EQ(*alive, 3); /* t, fn's copy and the first listener's; id2's was released */
        fn = nullptr;
        CHECK_EQ(*alive, 2);
    } /* the breaker's destructor releases the rest */
    CHECK_EQ(*alive, 0);

    /* A registry's listener hears every breaker. */
    bw::registry reg;
    int changes = 0;
    uint64_t rid = reg.add_listener(BW_EVENT_MASK(BW_EVENT_RESET), [&](const bw::event &) { changes++; });
    reg.get("a").reset();
    reg.get("b").reset();
    CHECK_EQ(changes, 2);
    CHECK_EQ(reg.remove_listener(rid), BW_OK);
    reg.get("a").reset();
    CHECK_EQ(changes, 2);
}

void test_keyed()
{
    fixture f;
    std::string hosts = "tenant-1 tenant-2";
    std::string_view t1 = std::string_view(hosts).substr(0, 8), t2 = std::string_view(hosts).substr(9);
    for (int i = 0; i < 4; i++)
        f.b.acquire(t1).settle(bw::outcome::failure);
    CHECK(f.b.try_acquire(t1).rejected());
    CHECK(f.b.try_acquire(t2));
    CHECK(f.b.try_acquire(std::string("tenant-2")));
    CHECK(f.b.try_acquire("tenant-2"));
    CHECK_EQ(f.b.keyed_count(), 2);
    CHECK(f.b.state() == bw::state::closed); /* the breaker's own circuit */
    bool caught = false;
    try {
        f.b.call_key(t1, [] { return 0; });
    } catch (const bw::rejected &r) {
        caught = r.state() == bw::state::open;
    }
    CHECK(caught);
    CHECK_EQ(f.b.call_key(t2, [] { return 3; }), 3);
    CHECK(f.b.try_call_key(t1, [] { return 3; }).rejected());

    /* Bad keys: a space, a NUL, too long. */
    CHECK_EQ(f.b.try_acquire("bad key").status(), BW_EINVAL);
    CHECK_EQ(f.b.try_acquire(std::string_view("nul\0", 4)).status(), BW_EINVAL);
    CHECK_EQ(f.b.try_acquire(std::string_view(std::string(256, 'k'))).status(), BW_EINVAL);
    try {
        f.b.acquire("bad key");
        CHECK(false);
    } catch (const bw::error &e) {
        CHECK_EQ(e.code(), BW_EINVAL);
        CHECK(!e.message().empty());
    }

    /* A held circuit: a breaker_ref to it, dropped by the destructor. */
    {
        bw::circuit c = f.b.circuit_of(t1);
        CHECK(c.key() == "tenant-1");
        CHECK(c.name() == "under-test");
        CHECK(c.state() == bw::state::open);
        CHECK_EQ(c.reset(), BW_OK);
        CHECK(c.state() == bw::state::closed);
        bw::circuit moved = std::move(c);
        CHECK(!c && moved);
    }
    CHECK(f.b.try_acquire(t1));
    bw::error_code ec;
    bw::circuit none = f.b.circuit_of("bad key", ec);
    CHECK(!none && ec.code() == BW_EINVAL);
    CHECK_EQ(f.b.keyed_apply(bw::verb::force_open), BW_OK);
    CHECK(f.b.try_acquire(t2).rejected());
    CHECK(f.b.keyed_counters().calls[BW_CALL_FAILURE] >= 4);
}

void test_registry()
{
    bw::registry reg(bw::config().wait(5s));
    std::string line = "payments orders";
    bw::breaker_ref p = reg.get(std::string_view(line).substr(0, 8));
    CHECK(p && p.name() == "payments");
    CHECK(reg.get("payments").get() == p.get());
    CHECK(reg.get(std::string("payments")).get() == p.get());
    CHECK(reg.find("orders").get() == nullptr);
    bw::breaker_ref o = reg.get(std::string_view(line).substr(9), bw::config().failure_rate(1));
    CHECK(reg.find("orders").get() == o.get());
    CHECK_EQ(reg.size(), 2);
    auto all = reg.list();
    CHECK(all.size() == 2 && all[0].get() == p.get() && all[1].get() == o.get());
    CHECK_EQ(reg.apply(bw::verb::metrics_only), BW_OK);
    CHECK(p.state() == bw::state::metrics_only && o.state() == bw::state::metrics_only);
    CHECK(reg.get("new-one").state() == bw::state::metrics_only);
    bw::error_code ec;
    CHECK(!reg.get("bad name", ec));
    CHECK_EQ(ec.code(), BW_EINVAL);
    CHECK(reg.get("fine", ec) && !ec);
    try {
        reg.get(std::string_view("x\0y", 3));
        CHECK(false);
    } catch (const bw::error &e) {
        CHECK_EQ(e.code(), BW_EINVAL);
    }
    bw::registry moved = std::move(reg);
    CHECK_EQ(moved.size(), 4);
}

void test_verbs_and_inspection()
{
    fixture f;
    f.b.call([] { return 0; });
    bw_snapshot s = f.b.snapshot();
    CHECK_EQ(s.total_calls, 1);
    CHECK_EQ(f.b.open_for(30s), BW_OK);
    CHECK(f.b.state() == bw::state::open);
    CHECK(f.b.try_acquire().rejection().retry_after() == std::chrono::nanoseconds(30s));
    CHECK_EQ(f.b.open_for(0s), BW_ERANGE);
    CHECK_EQ(f.b.disable(), BW_OK);
    CHECK(f.b.state() == bw::state::disabled);
    CHECK_EQ(f.b.open_for(1s), BW_ESTATE);
    CHECK_EQ(f.b.metrics_only(), BW_OK);
    CHECK_EQ(f.b.apply(bw::verb::reset), BW_OK);
    CHECK(f.b.state() == bw::state::closed);
    CHECK(!f.b.last_failure());
    CHECK(f.b.bytes() > 0);
    CHECK(std::string(bw::to_string(bw::state::half_open)) == "half_open");
    CHECK(std::string(bw::to_string(bw::outcome::unreachable)) == "unreachable");
}

void test_store()
{
    bw::store s("memory:");
    CHECK(s.scheme() == "memory");
    {
        bw::breaker a("shared", bw::config::parse("min_calls=2 failure_rate=0.5").store(s, bw::store_mode::stored));
        bw::breaker b("shared", bw::config().store(s, bw::store_mode::stored));
        a.call([] { return 1; }, [](int) { return bw::outcome::failure; });
        a.call([] { return 1; }, [](int) { return bw::outcome::failure; });
        CHECK(a.state() == bw::state::open);
        CHECK(b.try_acquire().rejected()); /* one circuit through the store */
    }                                      /* the breakers go before the store */
    auto bad = bw::store::open("nosuch:x");
    CHECK(!bad && bad.error().code() == BW_EINVAL);
    try {
        bw::store t("nosuch:x");
        CHECK(false);
    } catch (const bw::error &e) {
        CHECK_EQ(e.code(), BW_EINVAL);
        CHECK(!e.field().empty());
    }
}

void test_pipeline()
{
    fixture f("min_calls=5");
    bw::retry r;
    r.attempts(3).backoff(BW_BACKOFF_CONSTANT, 0ns, 1, 0ns);
    bw::bulkhead bh(4);
    bw::pipeline p("orders");
    int fallbacks = 0;
    p.add_fallback(BW_FALLBACK_ON_REJECTED,
                   [&](const bw_fallback_info &why) {
                       fallbacks++;
                       return why.rejection.state == BW_STATE_OPEN ? 100 : 101;
                   })
        .add(r)
        .add(f.b)
        .add(bh)
        .add_timeout(1s);
    CHECK_EQ(p.layers(), 5);

    int calls = 0;
    bw::execution x = p.execute([&](bw::context ctx) {
        calls++;
        CHECK(ctx.remaining().has_value());
        return ctx.attempt() < 2 ? 1 : 0; /* fails once, then succeeds */
    });
    CHECK(x && x.rc == 0 && x.report.attempts == 2);
    CHECK_EQ(calls, 2);

    /* An exception is a failure for the layers and is rethrown; every attempt threw. */
    bool caught = false;
    try {
        p.execute([]() -> int { throw http_error(500); });
    } catch (const http_error &) {
        caught = true;
    }
    CHECK(caught);
    CHECK(f.b.state() == bw::state::open); /* 1 + 3 failures of 5 calls */
    CHECK_EQ(bh.in_flight(), 0);
    /* Open: the fallback stands in. */
    x = p.execute([] { return 0; });
    CHECK(x && x.rc == 100 && x.report.has_rejection);
    CHECK_EQ(fallbacks, 1);

    /* A pipeline is movable; its fallbacks move with it. */
    bw::pipeline q = std::move(p);
    CHECK_EQ(q.execute([] { return 0; }).rc, 100);
    CHECK_EQ(fallbacks, 2);

    /* Per-call keyed circuits. */
    bw::breaker family("family");
    bw::pipeline k("keyed");
    k.add_keyed(family);
    CHECK(k.execute_key("tenant-9", [](bw::context c) { return c.key() == "tenant-9" ? 0 : 1; }).rc == 0);
    CHECK_EQ(family.keyed_count(), 1);
    CHECK_EQ(k.execute_key(std::string_view("bad\0", 4), [] { return 0; }).status, BW_EINVAL);

    /* Bulkhead slots. */
    {
        auto s1 = bh.try_acquire();
        CHECK(s1 && bh.in_flight() == 1);
        /* A slot assigned over is released at once, not when the moved-from slot ends. */
        auto s2 = bh.try_acquire();
        CHECK(s2 && bh.in_flight() == 2);
        s1 = std::move(s2);
        CHECK(s1 && !s2);
        CHECK_EQ(bh.in_flight(), 1);
    }
    CHECK_EQ(bh.in_flight(), 0);
    try {
        bw::bulkhead none(0);
        CHECK(false);
    } catch (const bw::error &e) {
        CHECK_EQ(e.code(), BW_ERANGE);
    }
}

/* Several threads on one breaker through the wrapper (TSan's case). */
void test_threads()
{
    bw::breaker b("threads", bw::config().count_window(1000000).min_calls(1000000));
    std::atomic<int> ran{0};
    std::atomic<uint64_t> events{0};
    b.add_listener(BW_EVENT_MASK(BW_EVENT_CALL), [&](const bw::event &) { events++; });
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&, t] {
            for (int i = 0; i < 2000; i++) {
                if (i % 3 == 0) {
                    bw::permit p = b.acquire();
                    if (i % 2)
                        p.settle(bw::outcome::success);
                } else {
                    try {
                        b.call([&]() -> int {
                            if ((i + t) % 5 == 0)
                                throw std::runtime_error("x");
                            return ++ran;
                        });
                    } catch (const std::runtime_error &) {
                    }
                }
            }
        });
    for (auto &t : ts)
        t.join();
    bw_counters c = b.counters();
    uint64_t total = 0;
    for (int k = 0; k < BW_CALL_KINDS; k++)
        total += c.calls[k];
    CHECK_EQ(total, 8000);
    CHECK_EQ(events.load(), 8000);
}

#define BW_TEST_STR(x) #x
#define BW_TEST_XSTR(x) BW_TEST_STR(x)

/* A consumer (no BW_BUILDING) sees BW_API empty: it never exports the library's symbols as its own. */
void test_bw_api_is_empty_for_consumers()
{
    CHECK(std::string(BW_TEST_XSTR(BW_API)).empty());
#ifdef BW_BUILDING
    CHECK(false);
#endif
}

} // namespace

int main()
{
    RUN(test_config);
    RUN(test_breaker_raii_and_errors);
    RUN(test_call_classifies_results);
    RUN(test_call_exceptions);
    RUN(test_rejections);
    RUN(test_permit_scoped);
    RUN(test_permit_returns_probe_slot);
    RUN(test_listeners);
    RUN(test_keyed);
    RUN(test_registry);
    RUN(test_verbs_and_inspection);
    RUN(test_store);
    RUN(test_pipeline);
    RUN(test_threads);
    RUN(test_bw_api_is_empty_for_consumers);
    return SUMMARY();
}
