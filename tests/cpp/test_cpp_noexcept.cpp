/*
 * test_cpp_noexcept.cpp (tests/cpp/) — the C++ API built with -fno-exceptions:
 * the header detects it (BW_CPP_EXCEPTIONS is 0), every throwing form is gone,
 * and the noexcept forms report what the throwing ones would throw: make()
 * returning bw::result, a configuration keeping its first error, try_call()
 * and try_acquire() saying "rejected", and error_code & overloads.
 */
#include <breakwater/breakwater.hpp>

#include <optional>
#include <string>

#include "check.hpp"

#if BW_CPP_EXCEPTIONS || defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#error "test_cpp_noexcept must be built with -fno-exceptions"
#endif

using namespace std::chrono_literals;

namespace
{

void test_factories()
{
    auto bad = bw::breaker::make("bad name");
    CHECK(!bad);
    CHECK_EQ(bad.error().code(), BW_EINVAL);
    CHECK(!bad.error().message().empty());

    /* A setter's error is kept (the first one) and refuses the make. */
    bw::config cfg;
    cfg.failure_rate(2.0).min_calls(0);
    CHECK_EQ(cfg.error().code(), BW_ERANGE);
    CHECK(cfg.error().field() == "failure_rate");
    auto refused = bw::breaker::make("fine", cfg);
    CHECK(!refused && refused.error().code() == BW_ERANGE);
    auto reg = bw::registry::make(cfg);
    CHECK(!reg && reg.error().field() == "failure_rate");

    bw::config parsed;
    parsed.apply("nonsense");
    CHECK_EQ(parsed.error().code(), BW_EPARSE);
    CHECK(bw::store::open("nosuch:").error().code() == BW_EINVAL);
    CHECK(bw::bulkhead::make(0).error().code() == BW_ERANGE);
    CHECK(bw::pipeline::make("bad name").error().code() == BW_EINVAL);
}

void test_calls()
{
    auto clock = bw::manual_clock::make();
    CHECK(clock);
    bw::config cfg;
    cfg.min_calls(2).failure_rate(0.5).wait(10s).clock(*clock);
    CHECK(!cfg.error());
    auto made = bw::breaker::make("svc", cfg);
    CHECK(made);
    bw::breaker b = std::move(made).value();

    auto r = b.try_call([] { return 7; });
    CHECK(r && r.value() == 7);
    auto failing = [](int) { return bw::outcome::failure; };
    b.try_call([] { return 1; }, failing);
    b.try_call([] { return 1; }, failing);
    CHECK(b.state() == bw::state::open);
    clock->advance(4s);
    auto rej = b.try_call([] { return 7; });
    CHECK(!rej && rej.rejected());
    CHECK(rej.rejection().retry_after() == std::chrono::nanoseconds(6s));
    auto v = b.try_call([] {});
    CHECK(v.rejected());
    {
        bw::permit p = b.try_acquire();
        CHECK(p.rejected());
    }
    clock->advance(6s);
    {
        bw::permit probe = b.try_acquire(); /* dropped unsettled: IGNORED, the slot handed back */
        CHECK(probe);
    }
    CHECK_EQ(b.counters().calls[BW_CALL_IGNORED], 1);
    CHECK(b.try_acquire());

    /* error_code & forms. */
    bw::error_code ec;
    CHECK(!b.circuit_of("bad key", ec));
    CHECK_EQ(ec.code(), BW_EINVAL);
    bw::circuit c = b.circuit_of("k", ec);
    CHECK(c && !ec);
    int heard = 0;
    uint64_t id = b.add_listener(
        BW_EVENT_MASK(BW_EVENT_RESET), [&](const bw::event &) { heard++; }, ec);
    CHECK(id != 0 && !ec);
    b.reset();
    CHECK_EQ(heard, 1);
    auto reg = bw::registry::make();
    CHECK(reg);
    CHECK(reg->get("x", ec) && !ec);
    CHECK(!reg->get(std::string_view("a b"), ec) && ec.code() == BW_EINVAL);
}

void test_pipeline()
{
    auto made = bw::pipeline::make("p");
    CHECK(made);
    bw::pipeline p = std::move(made).value();
    bw::error_code ec;
    p.add_fallback(
        BW_FALLBACK_ON_FAILURE, [](const bw_fallback_info &) { return 5; }, ec);
    CHECK(!ec);
    CHECK_EQ(p.execute([] { return 1; }).rc, 5);
    CHECK_EQ(p.execute([] { return 0; }).rc, 0);
}

/* Typed fallbacks in the noexcept forms: try_call with a bw::fallback, on a breaker and a pipeline. */
void test_fallbacks()
{
    auto clock = bw::manual_clock::make();
    CHECK(clock);
    bw::config cfg;
    cfg.min_calls(2).failure_rate(0.5).wait(10s).clock(*clock);
    auto made = bw::breaker::make("svc", cfg);
    CHECK(made);
    bw::breaker b = std::move(made).value();
    auto failing = [](const std::string &s) {
        return bw::verdict(s == "bad" ? bw::outcome::failure : bw::outcome::success, 5);
    };
    auto cached = bw::fallback{[](const bw::fallback_info &why) {
        return std::string(why.rejected() ? "cached" : "failed:") + std::to_string(why.code());
    }};
    auto r = b.try_call([] { return std::string("bad"); }, failing, cached);
    CHECK(r && r.value() == "failed:5" && r.fallback() == BW_FALLBACK_ON_FAILURE);
    r = b.try_call([] { return std::string("bad"); }, failing, cached);
    CHECK(b.state() == bw::state::open);
    clock->advance(4s);
    std::optional<bw::nanoseconds> wait;
    auto rej = b.try_call([] { return std::string("live"); }, bw::fallback{[&](const bw::fallback_info &why) {
                              wait = why.retry_after();
                              return "cached";
                          }});
    CHECK(rej && rej.value() == "cached" && rej.fallback() == BW_FALLBACK_ON_REJECTED);
    CHECK(wait == bw::nanoseconds(6s));
    CHECK(b.try_call([] { return 1; }, bw::fallback{BW_FALLBACK_ON_FAILURE, [] { return 2; }}).rejected());

    auto pm = bw::pipeline::make("typed");
    CHECK(pm);
    bw::pipeline p = std::move(pm).value();
    bw::error_code ec;
    p.add(b, ec);
    CHECK(!ec);
    auto t =
        p.try_call([] { return 1; }, bw::fallback{[](const bw::fallback_info &why) { return why.rejected() ? 3 : 4; }});
    CHECK(t && t.value() == 3 && t.fallback() == BW_FALLBACK_ON_REJECTED);
    CHECK(p.try_call([] { return 1; }).rejected());
}

} // namespace

int main()
{
    RUN(test_factories);
    RUN(test_calls);
    RUN(test_pipeline);
    RUN(test_fallbacks);
    return SUMMARY();
}
