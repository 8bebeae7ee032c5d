/*
 * static_asserts.cpp (tests/cpp/) — calls whose types do not fit, each of
 * which must fail to compile with breakwater.hpp's static_assert message as
 * the first error (static_asserts.sh compiles the file once per case, with
 * -D<case>, and expects the message after "// expect:"). Without a case the
 * file holds the same calls with fitting types, and must compile.
 */
#include <breakwater/breakwater.hpp>

#include <memory>
#include <string>

/* The fitting calls: the cases below differ from these in one type. */
std::string fits(bw::breaker_ref b, bw::pipeline &p)
{
    std::unique_ptr<int> u =
        b.call([] { return std::make_unique<int>(1); }, bw::fallback{[] { return std::unique_ptr<int>(); }});
    b.try_call_key(
        "k", [] { return 1; }, bw::fallback{[](const bw::fallback_info &) { return 2L; }});
    p.add_fallback(BW_FALLBACK_ON_ALL, [](const bw_fallback_info &) { return 1; });
    int n = p.call([](bw::context) { return 1; }, [](int v) { return v; }, bw::fallback{[] { return 2; }});
    return b.call([] { return std::string("x"); }, bw::fallback{[] { return "y"; }}) + std::to_string(n + *u);
}

#ifdef BW_FAIL_CALL_TYPE
// expect: bw::fallback: the fallback's return type does not convert to the call's result type
std::string wrong_type(bw::breaker_ref b)
{
    return b.call([] { return std::string("x"); }, bw::fallback{[] { return 42; }});
}
#endif

#ifdef BW_FAIL_CALL_VOID_FALLBACK
// expect: bw::fallback: the fallback's return type does not convert to the call's result type
int void_fallback(bw::breaker_ref b)
{
    return b.call([] { return 1; }, [](int) { return bw::outcome::success; }, bw::fallback{[] {}});
}
#endif

#ifdef BW_FAIL_CALL_ARGS
// expect: bw::fallback: the fallback must be callable with a const bw::fallback_info & or with no argument
int wrong_args(bw::breaker_ref b)
{
    return b.call([] { return 1; }, bw::fallback{[](int code) { return code; }});
}
#endif

#ifdef BW_FAIL_UNIQUE_PTR
// expect: bw::fallback: the fallback's return type does not convert to the call's result type
std::unique_ptr<int> wrong_pointer(bw::breaker_ref b)
{
    return b.call([] { return std::make_unique<int>(1); }, bw::fallback{[] { return std::make_unique<long>(2); }});
}
#endif

#ifdef BW_FAIL_TRY_CALL_KEY
// expect: bw::fallback: the fallback's return type does not convert to the call's result type
int wrong_try(bw::breaker_ref b)
{
    return b
        .try_call_key(
            "k", [] { return 1; }, bw::fallback{[] { return std::string("2"); }})
        .value();
}
#endif

#ifdef BW_FAIL_PIPELINE_TYPE
// expect: bw::fallback: the fallback's return type does not convert to the call's result type
std::string pipeline_type(bw::pipeline &p)
{
    return p.call([] { return std::string("x"); },
                  bw::fallback{[](const bw::fallback_info &why) { return why.code(); }});
}
#endif

#ifdef BW_FAIL_PIPELINE_ARGS
// expect: pipeline::call: the call must be callable with a bw::context or with no argument
int pipeline_args(bw::pipeline &p)
{
    return p.call([](int attempt) { return attempt; });
}
#endif

#ifdef BW_FAIL_PIPELINE_CODE
// expect: pipeline::call: the code function must take the call's value
int pipeline_code(bw::pipeline &p)
{
    return p.call([] { return 1; }, [](int v) { return v ? bw::outcome::failure : bw::outcome::success; });
}
#endif

#ifdef BW_FAIL_PIPELINE_CODE_BOOL
// expect: pipeline::call: the code function must take the call's value
int pipeline_code_bool(bw::pipeline &p)
{
    return p.call([] { return 1; }, [](int v) { return v == 1; }, bw::fallback{[] { return 0; }});
}
#endif

#ifdef BW_FAIL_ADD_FALLBACK_TYPE
// expect: pipeline::add_fallback: the fallback returns the int code that replaces the call's
void add_fallback_type(bw::pipeline &p)
{
    p.add_fallback(BW_FALLBACK_ON_REJECTED, [](const bw_fallback_info &) { return std::string("cached"); });
}
#endif

#ifdef BW_FAIL_ADD_FALLBACK_ARGS
// expect: pipeline::add_fallback: the fallback must be callable with a const bw_fallback_info &
void add_fallback_args(bw::pipeline &p)
{
    p.add_fallback(BW_FALLBACK_ON_REJECTED, [](int a, int b) { return a + b; });
}
#endif
