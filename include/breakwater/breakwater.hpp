/*
 * breakwater/breakwater.hpp — the C++ API: a header-only C++17 layer over the
 * C API (breakwater.h) with RAII handles, std::chrono durations,
 * std::string_view names, exceptions (or, in code built without them, returned
 * errors) and callables for calls, classifiers and listeners. docs/cpp.md is
 * the guide.
 *
 *     bw::breaker payments("payments", bw::config::parse("failure_rate=0.5 wait=30s"));
 *     try {
 *         auto reply = payments.call([&] { return client.charge(card); });
 *     } catch (const bw::rejected &r) {
 *         serve_cached(r.retry_after());                  // no call was made
 *     }
 *
 * Ownership. bw::breaker, bw::registry, bw::store, bw::pipeline, bw::retry,
 * bw::bulkhead, bw::manual_clock and bw::circuit own what they wrap and free it
 * in their destructor; they are move-only (a moved-from object holds nothing and
 * may only be destroyed or assigned to). bw::config is a value: copying it
 * copies the C configuration. bw::breaker_ref is a non-owning view of a breaker
 * (a registry's breaker, a keyed circuit, or a bw::breaker), valid as long as
 * what it views. The objects a C object borrows (a store, a clock, a retry
 * policy, a bulkhead, a breaker in a pipeline) must outlive it, as in C.
 *
 * Errors. Every fallible call exists in two forms:
 * - a throwing one, which throws bw::error (the bw_error detail: code, field,
 *   message) for an error and bw::rejected for a rejection; std::bad_alloc
 *   when an allocation of the wrapper itself fails;
 * - a noexcept one, for code built without exceptions: constructors become
 *   static make() functions returning bw::result<T> (value() / error()), calls
 *   become try_acquire() / try_call() returning a permit or bw::call_result
 *   that says whether the call was rejected, and other operations take a
 *   trailing bw::error_code &.
 * Built with -fno-exceptions (no __cpp_exceptions), only the noexcept forms
 * exist (define BW_CPP_NO_EXCEPTIONS to get that in any build).
 *
 * Fallbacks. call() and try_call(), a breaker's or a pipeline's, take a
 * typed fallback after the callable (and its classifier): bw::fallback{fn},
 * where fn gets a bw::fallback_info (rejected and retry_after, or the failure's
 * code and exception) and returns a value of the call's type, which the call
 * returns instead of throwing. A fallback whose type does not fit stops the
 * build with a static_assert that says so.
 *
 *     std::string page = payments.call([&] { return fetch(url); },
 *                                      bw::fallback{[&](const bw::fallback_info &why) { return cached(url); }});
 *
 * Names and keys. The C API takes NUL-terminated strings. A std::string_view
 * argument is copied into a 256-byte buffer on the stack first (names and keys
 * are at most 255 bytes: a longer one, or one holding a NUL byte, is refused
 * with BW_EINVAL without a call): a copy of up to 255 bytes, a few nanoseconds.
 * The overloads taking const char * or const std::string & pass the string
 * through without a copy; use them on hot keyed paths.
 *
 * Cost. try_acquire, acquire, settle and call are always inlined and compile to
 * the C calls: an admitted permit stores the breaker pointer its settle needs,
 * a refused one stores nothing, and the status is tested once. Under callgrind
 * (`make bench-ir`, the cpp_* paths) a CLOSED acquire + settle costs what the C
 * calls given a bw_rejection cost (C given NULL saves 2 instructions), and an
 * OPEN rejection one instruction more than in C. Classifiers and call bodies
 * are inlined templates; nothing allocates on a call.
 *
 * Thread safety: as the C API's. A bw::breaker, registry, store or pipeline may
 * be used from many threads at once (not destroyed while in use); a bw::config,
 * a permit and a circuit handle belong to one thread at a time.
 */
#ifndef BREAKWATER_HPP
#define BREAKWATER_HPP

#include "breakwater.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if (defined(__cpp_exceptions) || defined(__EXCEPTIONS)) && !defined(BW_CPP_NO_EXCEPTIONS)
#define BW_CPP_EXCEPTIONS 1
#else
#define BW_CPP_EXCEPTIONS 0
#endif

/* The hot path's wrappers are always inlined: their cost must be the C call's. */
#if defined(__GNUC__)
#define BW_CPP_HOT __attribute__((always_inline))
#else
#define BW_CPP_HOT
#endif

namespace bw
{

/* ---- values ---- */

using nanoseconds = std::chrono::nanoseconds;

enum class state : int {
    closed = BW_STATE_CLOSED,
    open = BW_STATE_OPEN,
    half_open = BW_STATE_HALF_OPEN,
    forced_open = BW_STATE_FORCED_OPEN,
    disabled = BW_STATE_DISABLED,
    metrics_only = BW_STATE_METRICS_ONLY
};

enum class outcome : int {
    success = BW_SUCCESS,
    failure = BW_FAILURE,
    ignored = BW_IGNORED,
    unreachable = BW_UNREACHABLE
};

enum class verb : int {
    reset = BW_VERB_RESET,
    force_open = BW_VERB_FORCE_OPEN,
    disable = BW_VERB_DISABLE,
    metrics_only = BW_VERB_METRICS_ONLY
};

enum class policy : int { rate = BW_POLICY_RATE, consecutive = BW_POLICY_CONSECUTIVE };

enum class store_mode : int { coordinated = BW_STORE_COORDINATED, stored = BW_STORE_STORED };

/* bw::to_string — the C names: "closed", "success", ... (static strings). */
inline const char *to_string(state s) noexcept
{
    return bw_state_name(static_cast<bw_state>(s));
}
inline const char *to_string(outcome o) noexcept
{
    return bw_outcome_name(static_cast<bw_outcome>(o));
}

/*
 * What a classifier says about a call: an outcome, and a failure code that
 * becomes the breaker's last failure when the outcome is a failure (bw_settle_ex).
 * A classifier may return a bw::outcome, which converts to a verdict with code 0.
 */
struct verdict {
    outcome result;
    int code;
    constexpr verdict(outcome o, int c = 0) noexcept : result(o), code(c)
    {
    }
};

/*
 * bw::error_code — an error of a noexcept call: the C status (BW_OK, or a
 * negative bw_status) with the bw_error detail. False when there is no error.
 */
class error_code
{
  public:
    error_code() noexcept : detail_()
    {
    }
    error_code(int code, const bw_error *detail) noexcept : detail_()
    {
        assign(code, detail);
    }
    void assign(int code, const bw_error *detail) noexcept
    {
        if (detail && detail->code == code)
            detail_ = *detail;
        else
            detail_ = bw_error();
        detail_.code = code;
    }
    void clear() noexcept
    {
        detail_ = bw_error();
    }
    explicit operator bool() const noexcept
    {
        return detail_.code != BW_OK;
    }
    int code() const noexcept
    {
        return detail_.code;
    }
    /* The field or argument at fault ("" when none applies). */
    std::string_view field() const noexcept
    {
        return detail_.field;
    }
    /* A sentence for a human; bw_strerror(code) when the call gave none. */
    std::string_view message() const noexcept
    {
        return detail_.message[0] ? std::string_view(detail_.message) : std::string_view(bw_strerror(detail_.code));
    }
    const bw_error &detail() const noexcept
    {
        return detail_;
    }

  private:
    bw_error detail_;
};

#if BW_CPP_EXCEPTIONS
/* bw::error — an error thrown by a throwing call; what() is the message. */
class error : public std::exception
{
  public:
    explicit error(const error_code &ec) : ec_(ec)
    {
    }
    error(int code, const bw_error *detail) : ec_(code, detail)
    {
    }
    int code() const noexcept
    {
        return ec_.code();
    }
    std::string_view field() const noexcept
    {
        return ec_.field();
    }
    std::string_view message() const noexcept
    {
        return ec_.message();
    }
    const bw_error &detail() const noexcept
    {
        return ec_.detail();
    }
    const char *what() const noexcept override
    {
        return ec_.message().data(); /* NUL-terminated: a bw_error buffer or a static string */
    }

  private:
    error_code ec_;
};
#endif

/*
 * bw::rejection — why a breaker refused a call (bw_rejection): the state that
 * refused, how long until it admits a probe (OPEN only), and the last failure.
 */
class rejection
{
  public:
    rejection() noexcept : why_()
    {
    }
    explicit rejection(const bw_rejection &why) noexcept : why_(why)
    {
    }
    bw::state state() const noexcept
    {
        return static_cast<bw::state>(why_.state);
    }
    /* OPEN: the time until the wait ends; std::nullopt in HALF_OPEN and FORCED_OPEN. */
    std::optional<nanoseconds> retry_after() const noexcept
    {
        if (why_.retry_after_ns == BW_NO_TIME)
            return std::nullopt;
        return nanoseconds(why_.retry_after_ns);
    }
    /* The failure code of the last failure since the last reset, if any. */
    std::optional<int> last_failure() const noexcept
    {
        if (!why_.has_last_failure)
            return std::nullopt;
        return why_.last_failure;
    }
    const bw_rejection &raw() const noexcept
    {
        return why_;
    }

  private:
    bw_rejection why_;
};

#if BW_CPP_EXCEPTIONS
/* bw::rejected — thrown by acquire() and call() when the breaker refuses; no call was made. */
class rejected : public std::exception, public rejection
{
  public:
    explicit rejected(const bw_rejection &why) noexcept : rejection(why)
    {
    }
    const char *what() const noexcept override
    {
        return "breakwater: call rejected by an open circuit";
    }
};
#endif

namespace detail
{
#if BW_CPP_EXCEPTIONS
[[noreturn]] inline void raise(int code, const bw_error *detail)
{
    if (code == BW_ENOMEM)
        throw std::bad_alloc();
    throw error(code, detail);
}
#endif

inline int note(int rc, const bw_error *e, error_code &ec) noexcept
{
    if (rc < 0)
        ec.assign(rc, e);
    else
        ec.clear();
    return rc;
}

/*
 * A NUL-terminated copy of a name or key for the C API: a string_view of at most
 * 255 bytes without a NUL is copied into the buffer; anything else is invalid
 * (the C API refuses such a name anyway, and a NUL would silently cut it).
 */
class cstr
{
  public:
    explicit cstr(std::string_view s) noexcept
    {
        ok_ = s.size() < sizeof buf_ && (s.empty() || std::memchr(s.data(), '\0', s.size()) == nullptr);
        size_t n = ok_ ? s.size() : 0;
        if (n)
            std::memcpy(buf_, s.data(), n);
        buf_[n] = '\0';
    }
    bool ok() const noexcept
    {
        return ok_;
    }
    const char *c_str() const noexcept
    {
        return buf_;
    }
    static bw_error refused(const char *what) noexcept
    {
        bw_error e = bw_error();
        e.code = BW_EINVAL;
        std::snprintf(e.field, sizeof e.field, "%s", what);
        std::snprintf(e.message, sizeof e.message, "%s must be 1 to 255 bytes without a NUL byte", what);
        return e;
    }

  private:
    char buf_[256];
    bool ok_;
};

template <class T> struct always_false : std::false_type {
};

/* Turn whatever a classifier returned into a verdict. */
template <class V> constexpr verdict to_verdict(V &&v) noexcept
{
    return verdict(std::forward<V>(v));
}

/* Classify an exception: the classifier's say if it takes std::exception_ptr, else a failure. */
template <class C> verdict classify_exception(C &classify, std::exception_ptr e)
{
    if constexpr (std::is_invocable_v<C &, std::exception_ptr>)
        return to_verdict(std::invoke(classify, std::move(e)));
    else {
        (void)classify;
        (void)e;
        return verdict(outcome::failure);
    }
}

/* The default classifier: a result is a success; an exception a failure. */
struct default_classifier {
    template <class... A> constexpr verdict operator()(const A &...) const noexcept
    {
        return verdict(outcome::success);
    }
    verdict operator()(std::exception_ptr) const noexcept
    {
        return verdict(outcome::failure);
    }
};
} // namespace detail

/* bw::classifier{f, g, ...} — one classifier out of several lambdas (one for the result, one for exceptions). */
template <class... F> struct classifier : F... {
    using F::operator()...;
};
template <class... F> classifier(F...) -> classifier<F...>;

/* ---- fallbacks ---- */

/*
 * bw::fallback_info — why a fallback is standing in (a view of
 * bw_fallback_info, pipeline.h, with the exception the call threw), given to
 * the fallback of breaker_ref::call and pipeline::call. One reason holds:
 * rejected() (a breaker refused: the call was not made), failed() (the call
 * ran, and threw or gave a failure), timed_out(), full().
 */
class fallback_info
{
  public:
    explicit fallback_info(const bw_fallback_info &why) noexcept : why_(why)
    {
    }
#if BW_CPP_EXCEPTIONS
    fallback_info(const bw_fallback_info &why, std::exception_ptr thrown) noexcept : why_(why), thrown_(thrown)
    {
    }
#endif
    /* The BW_FALLBACK_ON_* bit this fallback stands in for. */
    unsigned reason() const noexcept
    {
        return why_.reason;
    }
    bool rejected() const noexcept
    {
        return why_.reason == BW_FALLBACK_ON_REJECTED;
    }
    bool failed() const noexcept
    {
        return why_.reason == BW_FALLBACK_ON_FAILURE;
    }
    bool timed_out() const noexcept
    {
        return why_.reason == BW_FALLBACK_ON_TIMEOUT;
    }
    bool full() const noexcept
    {
        return why_.reason == BW_FALLBACK_ON_FULL;
    }
    /* rejected(): the breaker's reasons (its state, retry_after, last failure); an empty rejection otherwise. */
    bw::rejection rejection() const noexcept
    {
        return bw::rejection(why_.rejection);
    }
    /* rejected(): the state that refused the call; std::nullopt otherwise. */
    std::optional<bw::state> state() const noexcept
    {
        if (!rejected())
            return std::nullopt;
        return static_cast<bw::state>(why_.rejection.state);
    }
    /* Rejected by an OPEN circuit: the time until it admits a probe; std::nullopt otherwise. */
    std::optional<nanoseconds> retry_after() const noexcept
    {
        return rejection().retry_after();
    }
    /*
     * The call's code: for breaker_ref::call the failure code of the verdict
     * (0 for an exception the classifier gave none), for pipeline::call the code
     * the layers saw (pipeline::exception_rc for an exception); 0 when no call
     * ran.
     */
    int code() const noexcept
    {
        return why_.rc;
    }
    /* The status the call ended with: BW_OK for a failure, BW_REJECTED, BW_ETIMEDOUT or BW_EFULL. */
    int status() const noexcept
    {
        return why_.status;
    }
    /* The attempts an inner retry layer made (1 without one). */
    int attempts() const noexcept
    {
        return why_.attempts;
    }
#if BW_CPP_EXCEPTIONS
    /* The exception the call threw (failed(), or timed_out() after a throw); nullptr when it threw none. */
    const std::exception_ptr &exception() const noexcept
    {
        return thrown_;
    }
#endif
    const bw_fallback_info &raw() const noexcept
    {
        return why_;
    }

  private:
    bw_fallback_info why_;
#if BW_CPP_EXCEPTIONS
    std::exception_ptr thrown_;
#endif
};

/*
 * bw::fallback{fn} or bw::fallback{on, fn} — a typed fallback for
 * breaker_ref::call, try_call and pipeline::call: fn takes a
 * const bw::fallback_info & (or nothing) and returns a value that converts to
 * the call's result type, which the call then returns instead. `on` (the
 * BW_FALLBACK_ON_* bits, default BW_FALLBACK_ON_ALL) says for which outcomes;
 * a call refuses an empty set or unknown bits with BW_ERANGE. A type that
 * does not fit is a compile error (static_assert) naming what is wrong.
 */
template <class G> struct fallback {
    unsigned on;
    G fn;
    explicit fallback(G g) : on(BW_FALLBACK_ON_ALL), fn(std::move(g))
    {
    }
    fallback(unsigned mask, G g) : on(mask), fn(std::move(g))
    {
    }
};
template <class G> fallback(G) -> fallback<G>;
template <class G> fallback(unsigned, G) -> fallback<G>;

namespace detail
{
/* What a call with a fallback returns: the callable's result, by value (a reference result is copied). */
template <class R> using value_t = std::remove_cv_t<std::remove_reference_t<R>>;

/* The result of a fallback G, whichever way it is called; void when it cannot be called either way. */
template <class G, bool Info = std::is_invocable_v<G &, const fallback_info &>, bool None = std::is_invocable_v<G &>>
struct fallback_call {
    static constexpr bool ok = false;
    using type = void;
};
template <class G, bool None> struct fallback_call<G, true, None> {
    static constexpr bool ok = true;
    using type = std::invoke_result_t<G &, const fallback_info &>;
};
template <class G> struct fallback_call<G, false, true> {
    static constexpr bool ok = true;
    using type = std::invoke_result_t<G &>;
};
/* Whether fallback G can stand in for a call whose value is V (void: anything it returns is dropped). */
template <class V, class G>
constexpr bool fallback_fits = fallback_call<G>::ok &&
                               (std::is_void_v<V> || std::is_convertible_v<typename fallback_call<G>::type, V>);

/* The compile-time checks of a call given a fallback: one readable error each. */
template <class V, class G> constexpr void check_fallback() noexcept
{
    static_assert(fallback_call<G>::ok,
                  "bw::fallback: the fallback must be callable with a const bw::fallback_info & or with no argument");
    static_assert(!fallback_call<G>::ok || fallback_fits<V, G>,
                  "bw::fallback: the fallback's return type does not convert to the call's result type");
}

/* Run fallback g for a call whose value is V, and return what it returned as a V. */
template <class V, class G> V stand_in(G &g, const fallback_info &why)
{
    if constexpr (fallback_fits<V, G>) {
        if constexpr (std::is_void_v<V>) {
            if constexpr (std::is_invocable_v<G &, const fallback_info &>)
                (void)std::invoke(g, why);
            else
                (void)std::invoke(g);
        } else if constexpr (std::is_invocable_v<G &, const fallback_info &>) {
            return std::invoke(g, why);
        } else {
            (void)why;
            return std::invoke(g);
        }
    } else {
        std::abort(); /* not compiled: check_fallback has stopped the build */
    }
}

/* Whether `on` is a set of BW_FALLBACK_ON_* bits a fallback may take. */
constexpr bool fallback_mask_ok(unsigned on) noexcept
{
    return on != 0 && (on & ~BW_FALLBACK_ON_ALL) == 0;
}
inline bw_error fallback_mask_refused(unsigned on) noexcept
{
    bw_error e = bw_error();
    e.code = BW_ERANGE;
    std::snprintf(e.field, sizeof e.field, "on");
    std::snprintf(e.message, sizeof e.message,
                  "on must be a nonzero set of BW_FALLBACK_ON_* bits (within 0x%x), got 0x%x", BW_FALLBACK_ON_ALL, on);
    return e;
}

/* A bw_fallback_info: the rejection when there is one, else an empty one (retry_after_ns BW_NO_TIME). */
inline bw_fallback_info fallback_why(unsigned reason, int status, int rc, int attempts,
                                     const bw_rejection *why) noexcept
{
    bw_fallback_info w = bw_fallback_info();
    w.reason = reason;
    w.status = status;
    w.rc = rc;
    w.attempts = attempts;
    if (why)
        w.rejection = *why;
    else
        w.rejection.retry_after_ns = BW_NO_TIME;
    return w;
}

/* Whether a fallback on `on` stands in for a call judged v: a failure or unreachable. */
constexpr bool stands_in(unsigned on, verdict v) noexcept
{
    return (on & BW_FALLBACK_ON_FAILURE) && (v.result == outcome::failure || v.result == outcome::unreachable);
}

struct stood_in_t {
};

/* For the typed calls without a fallback, or without a code function. */
struct no_fallback_fn {
    void operator()() const noexcept
    {
    }
};
using no_fallback = fallback<no_fallback_fn>;
struct no_code {
    template <class... A> constexpr int operator()(const A &...) const noexcept
    {
        return 0;
    }
};
/* A std::invoke_result stand-in for what cannot be invoked. */
struct no_type {
    using type = void;
};
} // namespace detail

/*
 * bw::result<T> — the value of a noexcept factory, or its error. value() on an
 * error throws bw::error (aborts when built without exceptions).
 */
template <class T> class result
{
  public:
    result(T &&v) noexcept(std::is_nothrow_move_constructible_v<T>) : v_(std::move(v))
    {
    }
    result(const error_code &ec) noexcept : ec_(ec)
    {
    }
    explicit operator bool() const noexcept
    {
        return v_.has_value();
    }
    bool has_value() const noexcept
    {
        return v_.has_value();
    }
    const error_code &error() const noexcept
    {
        return ec_;
    }
    T &value() &
    {
        must();
        return *v_;
    }
    T &&value() &&
    {
        must();
        return std::move(*v_);
    }
    T *operator->() noexcept
    {
        return &*v_;
    }
    T &operator*() &noexcept
    {
        return *v_;
    }

  private:
    void must() const
    {
        if (!v_) {
#if BW_CPP_EXCEPTIONS
            detail::raise(ec_.code(), &ec_.detail());
#else
            std::abort();
#endif
        }
    }
    std::optional<T> v_;
    error_code ec_;
};

/*
 * bw::call_result<R> — what try_call returns: the callable's value when the
 * call ran, or that it was rejected (rejection()), or an error status (a bad
 * key, a moved-from breaker). Given a bw::fallback, the value may be the
 * fallback's: fallback() then says for which outcome (and rejection() why,
 * when it stood in for a rejection).
 */
template <class R> class call_result
{
  public:
    explicit call_result(R &&v) : v_(std::move(v)), status_(BW_OK)
    {
    }
    call_result(int status, const bw_rejection &why) noexcept : status_(status), why_(why)
    {
    }
    /* A fallback's value, standing in for the outcome `reason` (a BW_FALLBACK_ON_* bit). */
    call_result(detail::stood_in_t, R &&v, unsigned reason, const bw_rejection &why)
        : v_(std::move(v)), status_(BW_OK), fallback_(reason), why_(why)
    {
    }
    explicit operator bool() const noexcept
    {
        return status_ == BW_OK;
    }
    bool rejected() const noexcept
    {
        return status_ == BW_REJECTED;
    }
    /* BW_OK, BW_REJECTED or an error (a negative bw_status). */
    int status() const noexcept
    {
        return status_;
    }
    const bw::rejection &rejection() const noexcept
    {
        return why_;
    }
    /* The BW_FALLBACK_ON_* bit a fallback stood in for (the value is the fallback's); 0 otherwise. */
    unsigned fallback() const noexcept
    {
        return fallback_;
    }
    R &value() &noexcept
    {
        return *v_;
    }
    R &&value() &&noexcept
    {
        return std::move(*v_);
    }
    R *operator->() noexcept
    {
        return &*v_;
    }
    R &operator*() &noexcept
    {
        return *v_;
    }

  private:
    std::optional<R> v_;
    int status_;
    unsigned fallback_ = 0;
    bw::rejection why_;
};

template <> class call_result<void>
{
  public:
    call_result() noexcept : status_(BW_OK)
    {
    }
    call_result(int status, const bw_rejection &why) noexcept : status_(status), why_(why)
    {
    }
    call_result(detail::stood_in_t, unsigned reason, const bw_rejection &why) noexcept
        : status_(BW_OK), fallback_(reason), why_(why)
    {
    }
    explicit operator bool() const noexcept
    {
        return status_ == BW_OK;
    }
    bool rejected() const noexcept
    {
        return status_ == BW_REJECTED;
    }
    int status() const noexcept
    {
        return status_;
    }
    const bw::rejection &rejection() const noexcept
    {
        return why_;
    }
    unsigned fallback() const noexcept
    {
        return fallback_;
    }

  private:
    int status_;
    unsigned fallback_ = 0;
    bw::rejection why_;
};

/*
 * bw::event — a view of one listener event (bw_event), valid during the
 * callback only. raw() is the C struct, for the fields not wrapped here.
 */
class event
{
  public:
    explicit event(const bw_event &e) noexcept : e_(e)
    {
    }
    bw_event_type type() const noexcept
    {
        return e_.type;
    }
    std::string_view name() const noexcept
    {
        return e_.name ? std::string_view(e_.name) : std::string_view();
    }
    /* A keyed circuit's key, or std::nullopt for a breaker's own circuit. */
    std::optional<std::string_view> key() const noexcept
    {
        if (!e_.key)
            return std::nullopt;
        return std::string_view(e_.key);
    }
    bw::state from() const noexcept
    {
        return static_cast<bw::state>(e_.from);
    }
    bw::state to() const noexcept
    {
        return static_cast<bw::state>(e_.to);
    }
    bw_reason reason() const noexcept
    {
        return e_.reason;
    }
    bw::outcome outcome() const noexcept
    {
        return static_cast<bw::outcome>(e_.outcome);
    }
    nanoseconds duration() const noexcept
    {
        return nanoseconds(e_.duration_ns);
    }
    std::optional<nanoseconds> retry_after() const noexcept
    {
        if (e_.retry_after_ns == BW_NO_TIME)
            return std::nullopt;
        return nanoseconds(e_.retry_after_ns);
    }
    const bw_event &raw() const noexcept
    {
        return e_;
    }

  private:
    const bw_event &e_;
};

namespace detail
{
/*
 * A listener: the callable, owned by the C listener through `user` and
 * deleted by its release callback, which the C API runs once no delivery can
 * reach it (removed and every running delivery ended, or its breaker or
 * registry freed). An exception escaping the callable is swallowed: it must
 * not unwind through the C library.
 */
template <class F> struct listener_box {
    F fn;
    static void deliver(const bw_event *e, void *user) noexcept
    {
        auto &self = *static_cast<listener_box *>(user);
#if BW_CPP_EXCEPTIONS
        try {
#endif
            if constexpr (std::is_invocable_v<F &, const bw::event &>)
                std::invoke(self.fn, bw::event(*e));
            else
                std::invoke(self.fn, *e);
#if BW_CPP_EXCEPTIONS
        } catch (...) {
        }
#endif
    }
    static void release(void *user) noexcept
    {
        delete static_cast<listener_box *>(user);
    }
};

/* Add a listener through add(l, &id), owning the callable until its release; 0 and *ec on failure. */
template <class F, class Add> uint64_t add_listener(unsigned mask, F &&fn, Add add, error_code &ec) noexcept
{
    using box = listener_box<std::decay_t<F>>;
    box *b = nullptr;
#if BW_CPP_EXCEPTIONS
    try { /* copying or moving the callable may throw (a std::function, a captured string): an error, not terminate */
        b = new (std::nothrow) box{std::forward<F>(fn)};
    } catch (...) {
        b = nullptr;
    }
#else
    b = new (std::nothrow) box{std::forward<F>(fn)};
#endif
    if (!b) {
        ec.assign(BW_ENOMEM, nullptr);
        return 0;
    }
    bw_listener l = {mask, &box::deliver, b, &box::release};
    uint64_t id = 0;
    int rc = add(&l, &id);
    if (rc != BW_OK) { /* not added: its release will never run */
        delete b;
        ec.assign(rc, nullptr);
        return 0;
    }
    ec.clear();
    return id;
}
} // namespace detail

/* ---- clocks ---- */

/* bw::manual_clock — a clock that moves only when told (clock.h), for tests; owns a bw_clock. */
class manual_clock
{
  public:
#if BW_CPP_EXCEPTIONS
    explicit manual_clock(nanoseconds start = nanoseconds::zero())
    {
        int rc = bw_clock_manual_new(start.count(), &c_);
        if (rc != BW_OK)
            detail::raise(rc, nullptr);
    }
#endif
    static result<manual_clock> make(nanoseconds start = nanoseconds::zero()) noexcept
    {
        bw_clock *c = nullptr;
        int rc = bw_clock_manual_new(start.count(), &c);
        if (rc != BW_OK)
            return error_code(rc, nullptr);
        return manual_clock(c);
    }
    manual_clock(manual_clock &&o) noexcept : c_(std::exchange(o.c_, nullptr))
    {
    }
    manual_clock &operator=(manual_clock &&o) noexcept
    {
        manual_clock old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(c_, old.c_);
        return *this;
    }
    manual_clock(const manual_clock &) = delete;
    manual_clock &operator=(const manual_clock &) = delete;
    ~manual_clock()
    {
        bw_clock_free(c_);
    }
    /* Move forward by d (>= 0), running due auto-transitions on this thread. BW_OK or BW_EINVAL. */
    int advance(nanoseconds d) noexcept
    {
        return bw_clock_manual_advance(c_, d.count());
    }
    int set(nanoseconds now) noexcept
    {
        return bw_clock_manual_set(c_, now.count());
    }
    nanoseconds now() const noexcept
    {
        return nanoseconds(bw_clock_now(c_));
    }
    bw_clock *get() const noexcept
    {
        return c_;
    }

  private:
    explicit manual_clock(bw_clock *c) noexcept : c_(c)
    {
    }
    bw_clock *c_ = nullptr;
};

/* ---- stores ---- */

/* bw::store — a store opened from a URL (store.h); closed by the destructor, after every breaker on it. */
class store
{
  public:
#if BW_CPP_EXCEPTIONS
    explicit store(std::string_view url)
    {
        std::string u(url);
        bw_error e = bw_error();
        int rc = bw_store_open(u.c_str(), &s_, &e);
        if (rc != BW_OK)
            detail::raise(rc, &e);
    }
#endif
    static result<store> open(std::string_view url) noexcept
    {
        char buf[1024];
        bw_error e = bw_error();
        if (url.size() >= sizeof buf || std::memchr(url.data(), '\0', url.size()))
            return error_code(BW_EINVAL, nullptr);
        std::memcpy(buf, url.data(), url.size());
        buf[url.size()] = '\0';
        bw_store *s = nullptr;
        int rc = bw_store_open(buf, &s, &e);
        if (rc != BW_OK)
            return error_code(rc, &e);
        return store(s);
    }
    store(store &&o) noexcept : s_(std::exchange(o.s_, nullptr))
    {
    }
    store &operator=(store &&o) noexcept
    {
        store old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(s_, old.s_);
        return *this;
    }
    store(const store &) = delete;
    store &operator=(const store &) = delete;
    ~store()
    {
        bw_store_close(s_);
    }
    std::string_view scheme() const noexcept
    {
        const char *s = bw_store_scheme(s_);
        return s ? std::string_view(s) : std::string_view();
    }
    bw_store *get() const noexcept
    {
        return s_;
    }

  private:
    explicit store(bw_store *s) noexcept : s_(s)
    {
    }
    bw_store *s_ = nullptr;
};

/* ---- configuration ---- */

/*
 * bw::config — a breaker configuration (config.h), a value: copies copy it.
 * Setters chain and take std::chrono durations (nanoseconds::zero() is "off" or
 * "none" where config.h allows it). A setter given a bad value throws
 * bw::error; built without exceptions it keeps the first error instead
 * (error()), and every make() given the config returns that error.
 */
class config
{
  public:
    config() : c_(bw_config_new())
    {
        if (!c_)
            fail(BW_ENOMEM, nullptr);
    }
    config(const config &o) : c_(bw_config_copy(o.c_)), first_(o.first_)
    {
        if (!c_)
            fail(BW_ENOMEM, nullptr);
    }
    config(config &&o) noexcept : c_(std::exchange(o.c_, nullptr)), first_(o.first_)
    {
    }
    config &operator=(config o) noexcept
    {
        std::swap(c_, o.c_);
        std::swap(first_, o.first_);
        return *this;
    }
    ~config()
    {
        bw_config_free(c_);
    }
    /* A configuration with the defaults changed by `text` (bw_config_parse). */
    static config parse(std::string_view text)
    {
        config c;
        c.apply(text);
        return c;
    }
    /* Apply settings written as text (all or nothing). */
    config &apply(std::string_view text)
    {
        std::string t(text);
        bw_error e = bw_error();
        return done(bw_config_parse(c_, t.c_str(), &e), e);
    }
    config &policy(bw::policy p)
    {
        bw_error e = bw_error();
        return done(bw_config_set_policy(c_, static_cast<bw_policy>(p), &e), e);
    }
    config &failure_rate(double r)
    {
        bw_error e = bw_error();
        return done(bw_config_set_failure_rate(c_, r, &e), e);
    }
    config &slow_call_rate(double r)
    {
        bw_error e = bw_error();
        return done(bw_config_set_slow_call_rate(c_, r, &e), e);
    }
    config &slow_call_duration(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_slow_call_duration(c_, d.count(), &e), e);
    }
    config &min_calls(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_min_calls(c_, n, &e), e);
    }
    /* The last n calls. */
    config &count_window(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_window(c_, BW_WINDOW_COUNT, n, &e), e);
    }
    /* The last `span` (whole seconds). */
    config &time_window(std::chrono::seconds span)
    {
        bw_error e = bw_error();
        return done(bw_config_set_window(c_, BW_WINDOW_TIME, span.count(), &e), e);
    }
    config &permitted_probes(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_permitted_probes(c_, n, &e), e);
    }
    config &max_concurrent_probes(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_max_concurrent_probes(c_, n, &e), e);
    }
    config &wait(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_wait(c_, d.count(), &e), e);
    }
    config &wait_multiplier(double m)
    {
        bw_error e = bw_error();
        return done(bw_config_set_wait_multiplier(c_, m, &e), e);
    }
    config &wait_max(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_wait_max(c_, d.count(), &e), e);
    }
    config &max_wait_in_half_open(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_max_wait_in_half_open(c_, d.count(), &e), e);
    }
    config &auto_transition(bool on)
    {
        bw_error e = bw_error();
        return done(bw_config_set_auto_transition(c_, on, &e), e);
    }
    config &counters(bool on)
    {
        bw_error e = bw_error();
        return done(bw_config_set_counters(c_, on, &e), e);
    }
    config &unreachable_counts(bool on)
    {
        bw_error e = bw_error();
        return done(bw_config_set_unreachable_counts(c_, on, &e), e);
    }
    config &initial_state(bw::state s)
    {
        bw_error e = bw_error();
        return done(bw_config_set_initial_state(c_, static_cast<bw_state>(s), &e), e);
    }
    config &error_threshold(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_error_threshold(c_, n, &e), e);
    }
    config &success_threshold(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_success_threshold(c_, n, &e), e);
    }
    config &half_open_capacity(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_half_open_capacity(c_, n, &e), e);
    }
    config &keyed_maxsize(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_keyed_maxsize(c_, n, &e), e);
    }
    config &keyed_limit(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_keyed_limit(c_, n, &e), e);
    }
    config &keyed_idle(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_keyed_idle(c_, d.count(), &e), e);
    }
    config &keyed_history_idle(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_keyed_history_idle(c_, d.count(), &e), e);
    }
    config &store_ttl(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_ttl(c_, d.count(), &e), e);
    }
    config &store_poll(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_poll(c_, d.count(), &e), e);
    }
    config &store_queue(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_queue(c_, n, &e), e);
    }
    config &store_quorum(int64_t n)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_quorum(c_, n, &e), e);
    }
    config &store_retry(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_retry(c_, d.count(), &e), e);
    }
    config &store_retry_multiplier(double m)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_retry_multiplier(c_, m, &e), e);
    }
    config &store_retry_max(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_retry_max(c_, d.count(), &e), e);
    }
    config &store_retry_jitter(double j)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_retry_jitter(c_, j, &e), e);
    }
    config &store_close_timeout(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store_close_timeout(c_, d.count(), &e), e);
    }
    /* Share breakers made from this config through `s` (borrowed: it must outlive them). */
    config &store(bw::store &s, store_mode mode)
    {
        bw_error e = bw_error();
        return done(bw_config_set_store(c_, s.get(), static_cast<bw_store_mode>(mode), &e), e);
    }
    /* The clock (borrowed: it must outlive the breakers); nullptr: the system clock. */
    config &clock(bw_clock *c)
    {
        bw_error e = bw_error();
        return done(bw_config_set_clock(c_, c), e);
    }
    config &clock(manual_clock &c)
    {
        return clock(c.get());
    }
    /* The cross-field checks (bw_config_validate). */
    config &validate()
    {
        bw_error e = bw_error();
        return done(bw_config_validate(c_, &e), e);
    }
    /* The knobs as text that parse() reads back. */
    std::string format() const
    {
        int n = bw_config_format(c_, nullptr, 0);
        if (n < 0)
            return std::string();
        std::string s(static_cast<size_t>(n) + 1, '\0');
        bw_config_format(c_, &s[0], s.size());
        s.resize(static_cast<size_t>(n));
        return s;
    }
    /* The first error a setter met (built without exceptions); no error otherwise. */
    const error_code &error() const noexcept
    {
        return first_;
    }
    const bw_config *get() const noexcept
    {
        return c_;
    }
    bw_config *get() noexcept
    {
        return c_;
    }

  private:
    config &done(int rc, const bw_error &e)
    {
        if (rc != BW_OK)
            fail(rc, &e);
        return *this;
    }
    void fail(int rc, const bw_error *e)
    {
#if BW_CPP_EXCEPTIONS
        detail::raise(rc, e);
#else
        if (!first_)
            first_.assign(rc, e);
#endif
    }
    bw_config *c_;
    error_code first_;
};

/* ---- permits ---- */

class breaker_ref;

/*
 * bw::permit — an admitted call (or a refused one: operator bool says which),
 * from breaker_ref::try_acquire or acquire. Settle it once with settle() or
 * settle_timeout(); one destroyed unsettled settles BW_IGNORED, so an early
 * return or an exception never loses a probe slot. Move-only; belongs to one
 * thread at a time (it may be moved to another).
 *
 * Layout: b_ is the breaker while the permit is admitted and unsettled, else
 * NULL; status_ is the acquire's status, written only when it is not BW_OK (so
 * that the admitted path stores nothing but b_: the hot path's cost), and
 * BW_OK once settled.
 */
class permit
{
  public:
    permit() noexcept : b_(nullptr), status_(BW_EINVAL), p_(), why_()
    {
    }
    permit(permit &&o) noexcept : b_(std::exchange(o.b_, nullptr)), status_(b_ ? BW_OK : o.status_)
    {
        if (b_)
            p_ = o.p_;
        if (status_ == BW_REJECTED)
            why_ = o.why_;
        o.status_ = status_;
    }
    permit &operator=(permit &&o) noexcept
    {
        if (this != &o) {
            abandon();
            b_ = std::exchange(o.b_, nullptr);
            status_ = b_ ? BW_OK : o.status_;
            if (b_)
                p_ = o.p_;
            if (status_ == BW_REJECTED)
                why_ = o.why_;
            o.status_ = status_;
        }
        return *this;
    }
    permit(const permit &) = delete;
    permit &operator=(const permit &) = delete;
    BW_CPP_HOT ~permit()
    {
        abandon();
    }
    /* True while the permit is admitted and not yet settled. */
    BW_CPP_HOT explicit operator bool() const noexcept
    {
        return b_ != nullptr;
    }
    BW_CPP_HOT bool rejected() const noexcept
    {
        return !b_ && status_ == BW_REJECTED;
    }
    /* The acquire's status: BW_OK (admitted; settled or not), BW_REJECTED, or an error. */
    int status() const noexcept
    {
        return b_ ? BW_OK : status_;
    }
    /* Why it was refused (when rejected()). */
    BW_CPP_HOT bw::rejection rejection() const noexcept
    {
        return rejected() ? bw::rejection(why_) : bw::rejection();
    }
    /*
     * Settle with an outcome (and a failure code for the last failure);
     * returns bw_settle_ex's status, or BW_EPERMIT for a permit that was not
     * admitted or is settled already.
     */
    BW_CPP_HOT int settle(outcome o, int failure_code = 0) noexcept
    {
        if (!b_)
            return BW_EPERMIT;
        int rc = failure_code == 0 ? bw_settle(b_, &p_, static_cast<bw_outcome>(o))
                                   : bw_settle_ex(b_, &p_, static_cast<bw_outcome>(o), failure_code);
        done();
        return rc;
    }
    BW_CPP_HOT int settle(verdict v) noexcept
    {
        return settle(v.result, v.code);
    }
    /* Settle with a short message kept with the last failure (copied, truncated to 63 bytes: bw_settle_msg). */
    int settle(outcome o, int failure_code, std::string_view message) noexcept
    {
        if (!b_)
            return BW_EPERMIT;
        char msg[BW_FAILURE_MESSAGE_MAX];
        size_t n = message.size() < sizeof msg ? message.size() : sizeof msg - 1;
        if (n)
            std::memcpy(msg, message.data(), n);
        msg[n] = '\0';
        int rc = bw_settle_msg(b_, &p_, static_cast<bw_outcome>(o), failure_code, msg);
        done();
        return rc;
    }
    /* The call timed out: a failure, and slow (bw_settle_timeout). */
    int settle_timeout(int failure_code = 0) noexcept
    {
        if (!b_)
            return BW_EPERMIT;
        int rc = bw_settle_timeout(b_, &p_, failure_code);
        done();
        return rc;
    }

  private:
    friend class breaker_ref;
    struct uninit {
    };
    /* For acquire: p_ and why_ are filled by the C call, status_ only when it is not BW_OK. */
    BW_CPP_HOT explicit permit(uninit) noexcept
    {
    }
    /*
     * Record the acquire's status. The stores of the refused branch are dead
     * unless read (no call follows them), so a rejection stores nothing; an
     * admitted permit stores b_ (which the settle needs) and nothing else.
     */
    BW_CPP_HOT void admit(bw_breaker *b, int rc) noexcept
    {
        /* One unsigned comparison with 1 tells the three cases apart (BW_OK below, BW_REJECTED equal, the
           negative errors above), so that a caller's own test of the status reuses its flags. */
        unsigned u = static_cast<unsigned>(rc);
        if (u < static_cast<unsigned>(BW_REJECTED)) {
#if defined(__GNUC__)
            if (!b) /* bw_acquire admits nothing on a NULL breaker: lets the compiler drop tests of b_ */
                __builtin_unreachable();
#endif
            b_ = b;
        } else if (u == static_cast<unsigned>(BW_REJECTED)) {
            b_ = nullptr;
            status_ = BW_REJECTED;
        } else {
            b_ = nullptr;
            status_ = rc;
        }
    }

    BW_CPP_HOT void done() noexcept
    {
        b_ = nullptr;
        status_ = BW_OK;
    }
    BW_CPP_HOT void abandon() noexcept
    {
        if (b_) {
            bw_settle(b_, &p_, BW_IGNORED);
            done();
        }
    }
    bw_breaker *b_;
    int status_;
    bw_permit p_;
    bw_rejection why_;
};

class circuit;

/*
 * bw::breaker_ref — a non-owning view of a breaker: every operation of
 * breaker.h and keyed.h. bw::breaker (owning), a registry's breakers and keyed
 * circuits are breaker_refs. Copyable; valid while the breaker lives.
 */
class breaker_ref
{
  public:
    breaker_ref() noexcept : b_(nullptr)
    {
    }
    explicit breaker_ref(bw_breaker *b) noexcept : b_(b)
    {
    }
    explicit operator bool() const noexcept
    {
        return b_ != nullptr;
    }
    bw_breaker *get() const noexcept
    {
        return b_;
    }

    /* ---- calls ---- */

    /* Ask to make a call; never throws. A rejection is a permit with rejected() true. */
    BW_CPP_HOT permit try_acquire() const noexcept
    {
        permit p{permit::uninit()};
        p.admit(b_, bw_acquire(b_, &p.p_, &p.why_));
        return p;
    }
    /* The same on the keyed circuit of `key`; an error (a bad key, BW_ELIMIT) is the permit's status(). */
    permit try_acquire(const char *key) const noexcept
    {
        permit p{permit::uninit()};
        p.admit(b_, bw_keyed_acquire(b_, key, &p.p_, &p.why_));
        return p;
    }
    permit try_acquire(const std::string &key) const noexcept
    {
        return try_acquire(key.c_str());
    }
    permit try_acquire(std::string_view key) const noexcept
    {
        detail::cstr k(key);
        if (!k.ok()) {
            permit p;
            p.status_ = BW_EINVAL;
            return p;
        }
        return try_acquire(k.c_str());
    }
#if BW_CPP_EXCEPTIONS
    /* Ask to make a call: an admitted permit, or bw::rejected (bw::error for an error). */
    BW_CPP_HOT permit acquire() const
    {
        permit p = try_acquire();
        if (!p)
            refuse(p.status_, p.why_, nullptr);
        return p;
    }
    permit acquire(const char *key) const
    {
        bw_error e;
        permit p = keyed(key, e);
        if (!p)
            refuse(p.status_, p.why_, &e);
        return p;
    }
    permit acquire(const std::string &key) const
    {
        return acquire(key.c_str());
    }
    permit acquire(std::string_view key) const
    {
        bw_error e;
        permit p = keyed(key, e);
        if (!p)
            refuse(p.status_, p.why_, &e);
        return p;
    }

    /*
     * Run f() guarded by the breaker and return what it returns. The result (or
     * an exception f threw, as std::exception_ptr) goes through `classify`,
     * which returns a bw::outcome or a bw::verdict: by default any result is a
     * success and any exception a failure; a classifier that cannot take an
     * exception_ptr leaves exceptions failures. An exception is rethrown after
     * the call is settled. Throws bw::rejected when the breaker refuses (f not
     * run).
     */
    template <class F, class C = detail::default_classifier> decltype(auto) call(F &&f, C &&classify = C()) const
    {
        permit p = acquire();
        return run(p, std::forward<F>(f), classify);
    }
    /* The same on the keyed circuit of `key`. */
    template <class K, class F, class C = detail::default_classifier>
    decltype(auto) call_key(K &&key, F &&f, C &&classify = C()) const
    {
        permit p = acquire(std::forward<K>(key));
        return run(p, std::forward<F>(f), classify);
    }

    /*
     * call() with a fallback (bw::fallback{[on,] fn}): what fn returns, as f's
     * result type (by value), stands in for a rejection (BW_FALLBACK_ON_REJECTED:
     * f not run; fn sees the rejection, its retry_after) and for a call the
     * classifier judged a failure or unreachable (BW_FALLBACK_ON_FAILURE: the
     * call is settled first, its value dropped; fn sees the verdict's code, and
     * the exception if f threw). Other outcomes are call()'s: a value returned,
     * an exception rethrown, bw::rejected for a rejection outside `on`,
     * bw::error for an error (a bad key). An exception fn throws propagates
     * from call() (the breaker has recorded f's outcome already).
     */
    template <class F, class G> auto call(F &&f, fallback<G> fb) const
    {
        return call(std::forward<F>(f), detail::default_classifier(), std::move(fb));
    }
    template <class F, class C, class G> auto call(F &&f, C &&classify, fallback<G> fb) const
    {
        using V = detail::value_t<std::invoke_result_t<F>>;
        detail::check_fallback<V, G>();
        must_mask(fb.on);
        permit p = try_acquire();
        return guard<V>(p, nullptr, std::forward<F>(f), classify, fb);
    }
    template <class K, class F, class G> auto call_key(K &&key, F &&f, fallback<G> fb) const
    {
        return call_key(std::forward<K>(key), std::forward<F>(f), detail::default_classifier(), std::move(fb));
    }
    template <class K, class F, class C, class G> auto call_key(K &&key, F &&f, C &&classify, fallback<G> fb) const
    {
        using V = detail::value_t<std::invoke_result_t<F>>;
        detail::check_fallback<V, G>();
        must_mask(fb.on);
        bw_error e;
        permit p = keyed(std::forward<K>(key), e);
        return guard<V>(p, &e, std::forward<F>(f), classify, fb);
    }
#endif
    /*
     * Run f() guarded by the breaker without throwing for a rejection: a
     * bw::call_result holding f's value, or saying it was rejected (or the
     * status of an error). Classification as call(); an exception f throws is
     * settled and rethrown.
     */
    template <class F, class C = detail::default_classifier> auto try_call(F &&f, C &&classify = C()) const
    {
        permit p = try_acquire();
        return try_run(p, std::forward<F>(f), classify);
    }
    template <class K, class F, class C = detail::default_classifier>
    auto try_call_key(K &&key, F &&f, C &&classify = C()) const
    {
        permit p = try_acquire(std::forward<K>(key));
        return try_run(p, std::forward<F>(f), classify);
    }
    /*
     * try_call() with a fallback: as call() with one, the fallback's value in
     * a call_result whose fallback() says for which outcome; a rejection
     * outside `on` is rejected(), an error (a bad key, a bad `on`: BW_ERANGE)
     * the status, with no value.
     */
    template <class F, class G> auto try_call(F &&f, fallback<G> fb) const
    {
        return try_call(std::forward<F>(f), detail::default_classifier(), std::move(fb));
    }
    template <class F, class C, class G> auto try_call(F &&f, C &&classify, fallback<G> fb) const
    {
        using V = detail::value_t<std::invoke_result_t<F>>;
        detail::check_fallback<V, G>();
        if (!detail::fallback_mask_ok(fb.on))
            return call_result<V>(BW_ERANGE, bw_rejection());
        permit p = try_acquire();
        return try_guard<V>(p, std::forward<F>(f), classify, fb);
    }
    template <class K, class F, class G> auto try_call_key(K &&key, F &&f, fallback<G> fb) const
    {
        return try_call_key(std::forward<K>(key), std::forward<F>(f), detail::default_classifier(), std::move(fb));
    }
    template <class K, class F, class C, class G> auto try_call_key(K &&key, F &&f, C &&classify, fallback<G> fb) const
    {
        using V = detail::value_t<std::invoke_result_t<F>>;
        detail::check_fallback<V, G>();
        if (!detail::fallback_mask_ok(fb.on))
            return call_result<V>(BW_ERANGE, bw_rejection());
        permit p = try_acquire(std::forward<K>(key));
        return try_guard<V>(p, std::forward<F>(f), classify, fb);
    }

    /* ---- inspection ---- */

    std::string_view name() const noexcept
    {
        const char *n = bw_breaker_name(b_);
        return n ? std::string_view(n) : std::string_view();
    }
    /* A keyed circuit's key; std::nullopt for a breaker's own circuit. */
    std::optional<std::string_view> key() const noexcept
    {
        const char *k = bw_breaker_key(b_);
        if (!k)
            return std::nullopt;
        return std::string_view(k);
    }
    bw::state state() const noexcept
    {
        return static_cast<bw::state>(bw_breaker_state(b_));
    }
    bw_snapshot snapshot() const noexcept
    {
        bw_snapshot s = bw_snapshot();
        bw_breaker_snapshot(b_, &s);
        return s;
    }
    bw_counters counters() const noexcept
    {
        bw_counters c = bw_counters();
        bw_breaker_counters(b_, &c);
        return c;
    }
    std::optional<int> last_failure() const noexcept
    {
        int code;
        if (bw_breaker_last_failure(b_, &code) != BW_OK)
            return std::nullopt;
        return code;
    }
    size_t bytes() const noexcept
    {
        return bw_breaker_bytes(b_);
    }

    /* ---- operator verbs: BW_OK, or BW_EINVAL for a breaker_ref holding nothing ---- */

    int reset() const noexcept
    {
        return bw_breaker_reset(b_);
    }
    int force_open() const noexcept
    {
        return bw_breaker_force_open(b_);
    }
    int disable() const noexcept
    {
        return bw_breaker_disable(b_);
    }
    int metrics_only() const noexcept
    {
        return bw_breaker_metrics_only(b_);
    }
    int apply(verb v) const noexcept
    {
        return bw_breaker_apply(b_, static_cast<bw_verb>(v));
    }
    /*
     * Open now for d (the dependency said when to come back): BW_OK; BW_ESTATE
     * in an operator state; BW_ERANGE; with a store, the fleet honours it too (bw_breaker_open_for).
     */
    int open_for(nanoseconds d) const noexcept
    {
        return bw_breaker_open_for(b_, d.count());
    }

    /* ---- listeners ---- */

#if BW_CPP_EXCEPTIONS
    /*
     * Add a listener: any callable taking const bw::event & (or const bw_event &),
     * copied or moved into the listener and destroyed once no delivery can reach
     * it (after remove_listener, or when the breaker is freed). It runs on
     * whichever thread produced the event (listener.h) and must not free the
     * breaker; an exception it throws is swallowed. Returns the listener's id.
     */
    template <class F> uint64_t add_listener(unsigned mask, F &&fn) const
    {
        error_code ec;
        uint64_t id = add_listener(mask, std::forward<F>(fn), ec);
        if (ec)
            detail::raise(ec.code(), &ec.detail());
        return id;
    }
#endif
    template <class F> uint64_t add_listener(unsigned mask, F &&fn, error_code &ec) const noexcept
    {
        bw_breaker *b = b_;
        return detail::add_listener(
            mask, std::forward<F>(fn),
            [b](const bw_listener *l, uint64_t *id) { return bw_breaker_add_listener(b, l, id); }, ec);
    }
    /* Remove a listener: BW_OK, BW_ESTATE (no such id), BW_ENOMEM, BW_EINVAL. */
    int remove_listener(uint64_t id) const noexcept
    {
        return bw_breaker_remove_listener(b_, id);
    }

    /* ---- keyed circuits ---- */

    inline circuit circuit_of(std::string_view key) const;
    inline circuit circuit_of(std::string_view key, error_code &ec) const noexcept;
    /* A verb on every resident keyed circuit, and those made later (bw_keyed_apply). */
    int keyed_apply(verb v) const noexcept
    {
        return bw_keyed_apply(b_, static_cast<bw_verb>(v));
    }
    size_t keyed_count() const noexcept
    {
        return bw_keyed_count(b_);
    }
    bw_counters keyed_counters() const noexcept
    {
        bw_counters c = bw_counters();
        bw_keyed_counters(b_, &c);
        return c;
    }

  protected:
    bw_breaker *b_;

  private:
    /* A permit on the keyed circuit of `key`, with the error's detail in e. */
    permit keyed(const char *key, bw_error &e) const noexcept
    {
        permit p{permit::uninit()};
        e.code = BW_OK; /* not all of it: this is a call's path */
        e.field[0] = e.message[0] = '\0';
        p.admit(b_, bw_keyed_acquire_ex(b_, key, &p.p_, &p.why_, &e));
        return p;
    }
    permit keyed(const std::string &key, bw_error &e) const noexcept
    {
        return keyed(key.c_str(), e);
    }
    permit keyed(std::string_view key, bw_error &e) const noexcept
    {
        detail::cstr k(key);
        if (!k.ok()) {
            e = detail::cstr::refused("key");
            permit p;
            p.status_ = BW_EINVAL;
            return p;
        }
        return keyed(k.c_str(), e);
    }
#if BW_CPP_EXCEPTIONS
    [[noreturn]] static void refuse(int status, const bw_rejection &why, const bw_error *e)
    {
        if (status == BW_REJECTED)
            throw rejected(why);
        detail::raise(status, e);
    }
    static void must_mask(unsigned on)
    {
        if (!detail::fallback_mask_ok(on)) {
            bw_error e = detail::fallback_mask_refused(on);
            detail::raise(BW_ERANGE, &e);
        }
    }
    /* call() with a fallback, once acquired: the fallback for a rejection in its mask, or what call() does. */
    template <class V, class F, class C, class G>
    static V guard(permit &p, const bw_error *e, F &&f, C &classify, fallback<G> &fb)
    {
        if (!p) {
            if (p.rejected() && (fb.on & BW_FALLBACK_ON_REJECTED))
                return detail::stand_in<V>(
                    fb.fn, fallback_info(detail::fallback_why(BW_FALLBACK_ON_REJECTED, BW_REJECTED, 0, 1, &p.why_)));
            refuse(p.status_, p.why_, e);
        }
        unsigned fell = 0;
        return run_or<V>(p, std::forward<F>(f), classify, fb, fell);
    }
#endif
    template <class V, class F, class C, class G>
    static call_result<V> try_guard(permit &p, F &&f, C &classify, fallback<G> &fb)
    {
        if (!p) {
            if (!p.rejected() || !(fb.on & BW_FALLBACK_ON_REJECTED))
                return call_result<V>(p.status(), p.rejected() ? p.why_ : bw_rejection());
            fallback_info why(detail::fallback_why(BW_FALLBACK_ON_REJECTED, BW_REJECTED, 0, 1, &p.why_));
            if constexpr (std::is_void_v<V>) {
                detail::stand_in<V>(fb.fn, why);
                return call_result<V>(detail::stood_in_t(), BW_FALLBACK_ON_REJECTED, p.why_);
            } else {
                return call_result<V>(detail::stood_in_t(), detail::stand_in<V>(fb.fn, why), BW_FALLBACK_ON_REJECTED,
                                      p.why_);
            }
        }
        unsigned fell = 0;
        if constexpr (std::is_void_v<V>) {
            run_or<V>(p, std::forward<F>(f), classify, fb, fell);
            if (fell)
                return call_result<V>(detail::stood_in_t(), fell, bw_rejection());
            return call_result<V>();
        } else {
            V v = run_or<V>(p, std::forward<F>(f), classify, fb, fell);
            if (fell)
                return call_result<V>(detail::stood_in_t(), std::move(v), fell, bw_rejection());
            return call_result<V>(std::move(v));
        }
    }
    /*
     * Run f on an admitted permit, classify and settle; a failure in the
     * fallback's mask is the fallback's (fell says so), anything else f's:
     * its value, or its exception rethrown. An exception the fallback throws
     * propagates.
     */
    template <class V, class F, class C, class G>
    static V run_or(permit &p, F &&f, C &classify, fallback<G> &fb, unsigned &fell)
    {
        using R = std::invoke_result_t<F>;
        verdict v(outcome::success);
#if BW_CPP_EXCEPTIONS
        std::exception_ptr thrown;
        try {
#endif
            if constexpr (std::is_void_v<R>) {
                std::invoke(std::forward<F>(f));
                if constexpr (std::is_invocable_v<C &>)
                    v = detail::to_verdict(std::invoke(classify));
                p.settle(v);
                if (!detail::stands_in(fb.on, v))
                    return;
            } else {
                R r = std::invoke(std::forward<F>(f));
                v = detail::to_verdict(std::invoke(classify, static_cast<const R &>(r)));
                p.settle(v);
                if (!detail::stands_in(fb.on, v))
                    return static_cast<V>(std::forward<R>(r));
            }
#if BW_CPP_EXCEPTIONS
        } catch (...) {
            if (!p) /* thrown after the settle (copying the result): not the call's outcome */
                throw;
            v = detail::classify_exception(classify, std::current_exception());
            p.settle(v);
            if (!detail::stands_in(fb.on, v))
                throw;
            thrown = std::current_exception();
        }
#endif
        fell = BW_FALLBACK_ON_FAILURE;
        bw_fallback_info why = detail::fallback_why(BW_FALLBACK_ON_FAILURE, BW_OK, v.code, 1, nullptr);
#if BW_CPP_EXCEPTIONS
        return detail::stand_in<V>(fb.fn, fallback_info(why, std::move(thrown)));
#else
        return detail::stand_in<V>(fb.fn, fallback_info(why));
#endif
    }
    /* Run f on an admitted permit, classify and settle; rethrow what f threw. */
    template <class F, class C> static decltype(auto) run(permit &p, F &&f, C &classify)
    {
        using R = std::invoke_result_t<F>;
#if BW_CPP_EXCEPTIONS
        try {
#endif
            if constexpr (std::is_void_v<R>) {
                std::invoke(std::forward<F>(f));
                if constexpr (std::is_invocable_v<C &>)
                    p.settle(detail::to_verdict(std::invoke(classify)));
                else
                    p.settle(outcome::success);
            } else {
                R r = std::invoke(std::forward<F>(f));
                p.settle(detail::to_verdict(std::invoke(classify, static_cast<const R &>(r))));
                return r;
            }
#if BW_CPP_EXCEPTIONS
        } catch (...) {
            if (p)
                p.settle(detail::classify_exception(classify, std::current_exception()));
            throw;
        }
#endif
    }
    template <class F, class C> static auto try_run(permit &p, F &&f, C &classify)
    {
        using R = std::invoke_result_t<F>;
        if (!p)
            return call_result<R>(p.status(), p.rejected() ? p.why_ : bw_rejection());
        if constexpr (std::is_void_v<R>) {
            run(p, std::forward<F>(f), classify);
            return call_result<void>();
        } else {
            return call_result<R>(run(p, std::forward<F>(f), classify));
        }
    }
};

/*
 * bw::circuit — a held keyed circuit (bw_keyed_hold): pinned, so never evicted,
 * while held; dropped by the destructor. A breaker_ref to the circuit.
 */
class circuit : public breaker_ref
{
  public:
    circuit() noexcept : h_()
    {
    }
    circuit(circuit &&o) noexcept : breaker_ref(std::exchange(o.b_, nullptr)), h_(o.h_)
    {
        o.h_ = bw_keyed_handle();
    }
    circuit &operator=(circuit &&o) noexcept
    {
        circuit old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(b_, old.b_);
        std::swap(h_, old.h_);
        return *this;
    }
    circuit(const circuit &) = delete;
    circuit &operator=(const circuit &) = delete;
    ~circuit()
    {
        if (b_)
            bw_keyed_drop(&h_);
    }

  private:
    friend class breaker_ref;
    bw_keyed_handle h_;
};

#if BW_CPP_EXCEPTIONS
inline circuit breaker_ref::circuit_of(std::string_view key) const
{
    error_code ec;
    circuit c = circuit_of(key, ec);
    if (ec)
        detail::raise(ec.code(), &ec.detail());
    return c;
}
#endif
inline circuit breaker_ref::circuit_of(std::string_view key, error_code &ec) const noexcept
{
    circuit c;
    detail::cstr k(key);
    if (!k.ok()) {
        bw_error e = detail::cstr::refused("key");
        ec.assign(BW_EINVAL, &e);
        return c;
    }
    bw_error e = bw_error();
    if (detail::note(bw_keyed_hold(b_, k.c_str(), &c.h_, &e), &e, ec) == BW_OK)
        c.b_ = c.h_.circuit;
    return c;
}

/* bw::breaker — an owned breaker (bw_breaker_new), freed by the destructor. */
class breaker : public breaker_ref
{
  public:
#if BW_CPP_EXCEPTIONS
    explicit breaker(std::string_view name) : breaker(name, nullptr)
    {
    }
    breaker(std::string_view name, const config &cfg) : breaker(name, &cfg)
    {
    }
#endif
    static result<breaker> make(std::string_view name) noexcept
    {
        return make(name, nullptr);
    }
    static result<breaker> make(std::string_view name, const config &cfg) noexcept
    {
        return make(name, &cfg);
    }
    breaker(breaker &&o) noexcept : breaker_ref(std::exchange(o.b_, nullptr))
    {
    }
    breaker &operator=(breaker &&o) noexcept
    {
        breaker old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(b_, old.b_);
        return *this;
    }
    breaker(const breaker &) = delete;
    breaker &operator=(const breaker &) = delete;
    ~breaker()
    {
        bw_breaker_free(b_);
    }
    /* Give up ownership: the caller frees the returned breaker with bw_breaker_free. */
    bw_breaker *release() noexcept
    {
        return std::exchange(b_, nullptr);
    }

  private:
    explicit breaker(bw_breaker *b) noexcept : breaker_ref(b)
    {
    }
#if BW_CPP_EXCEPTIONS
    breaker(std::string_view name, const config *cfg)
    {
        result<breaker> r = make(name, cfg);
        if (!r)
            detail::raise(r.error().code(), &r.error().detail());
        b_ = r->release();
    }
#endif
    static result<breaker> make(std::string_view name, const config *cfg) noexcept
    {
        if (cfg && cfg->error())
            return cfg->error();
        detail::cstr n(name);
        if (!n.ok()) {
            bw_error e = detail::cstr::refused("name");
            return error_code(BW_EINVAL, &e);
        }
        bw_error e = bw_error();
        bw_breaker *b = nullptr;
        int rc = bw_breaker_new(n.c_str(), cfg ? cfg->get() : nullptr, &b, &e);
        if (rc != BW_OK)
            return error_code(rc, &e);
        return breaker(b);
    }
};

/* ---- registry ---- */

/* bw::registry — breakers by name, made on first use (registry.h); frees them all in its destructor. */
class registry
{
  public:
#if BW_CPP_EXCEPTIONS
    registry() : registry(static_cast<const config *>(nullptr))
    {
    }
    explicit registry(const config &defaults) : registry(&defaults)
    {
    }
#endif
    static result<registry> make() noexcept
    {
        return make(static_cast<const config *>(nullptr));
    }
    static result<registry> make(const config &defaults) noexcept
    {
        return make(&defaults);
    }
    registry(registry &&o) noexcept : r_(std::exchange(o.r_, nullptr))
    {
    }
    registry &operator=(registry &&o) noexcept
    {
        registry old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(r_, old.r_);
        return *this;
    }
    registry(const registry &) = delete;
    registry &operator=(const registry &) = delete;
    ~registry()
    {
        bw_registry_free(r_);
    }
#if BW_CPP_EXCEPTIONS
    /* The breaker named `name`, made from the defaults (or `override`) on first use. */
    template <class N> breaker_ref get(N &&name) const
    {
        error_code ec;
        breaker_ref b = get(std::forward<N>(name), ec);
        if (ec)
            detail::raise(ec.code(), &ec.detail());
        return b;
    }
    template <class N> breaker_ref get(N &&name, const config &override) const
    {
        error_code ec;
        breaker_ref b = get(std::forward<N>(name), override, ec);
        if (ec)
            detail::raise(ec.code(), &ec.detail());
        return b;
    }
#endif
    breaker_ref get(const char *name, error_code &ec) const noexcept
    {
        return get_c(name, nullptr, ec);
    }
    breaker_ref get(const std::string &name, error_code &ec) const noexcept
    {
        return get_c(name.c_str(), nullptr, ec);
    }
    breaker_ref get(std::string_view name, error_code &ec) const noexcept
    {
        return get_v(name, nullptr, ec);
    }
    breaker_ref get(std::string_view name, const config &override, error_code &ec) const noexcept
    {
        return get_v(name, &override, ec);
    }
    /* The breaker named `name` if it exists; an empty breaker_ref otherwise. */
    breaker_ref find(std::string_view name) const noexcept
    {
        detail::cstr n(name);
        return breaker_ref(n.ok() ? bw_registry_get_existing(r_, n.c_str()) : nullptr);
    }
    size_t size() const noexcept
    {
        return bw_registry_count(r_);
    }
    /* The breakers, in the order they were made. */
    std::vector<breaker_ref> list() const
    {
        std::vector<bw_breaker *> v(bw_registry_count(r_) + 16);
        size_t n = bw_registry_list(r_, nullptr, v.data(), v.size());
        while (n > v.size()) {
            v.resize(n + 16);
            n = bw_registry_list(r_, nullptr, v.data(), v.size());
        }
        std::vector<breaker_ref> out;
        out.reserve(n);
        for (size_t i = 0; i < n; i++)
            out.emplace_back(v[i]);
        return out;
    }
    /* A verb on every breaker and keyed circuit, and those made later (bw_registry_apply). */
    int apply(verb v) const noexcept
    {
        return bw_registry_apply(r_, static_cast<bw_verb>(v));
    }
#if BW_CPP_EXCEPTIONS
    /* A listener for every breaker of the registry (as breaker_ref::add_listener); not from a listener. */
    template <class F> uint64_t add_listener(unsigned mask, F &&fn) const
    {
        error_code ec;
        uint64_t id = add_listener(mask, std::forward<F>(fn), ec);
        if (ec)
            detail::raise(ec.code(), &ec.detail());
        return id;
    }
#endif
    template <class F> uint64_t add_listener(unsigned mask, F &&fn, error_code &ec) const noexcept
    {
        bw_registry *r = r_;
        return detail::add_listener(
            mask, std::forward<F>(fn),
            [r](const bw_listener *l, uint64_t *id) { return bw_registry_add_listener(r, l, id); }, ec);
    }
    int remove_listener(uint64_t id) const noexcept
    {
        return bw_registry_remove_listener(r_, id);
    }
    bw_registry *get() const noexcept
    {
        return r_;
    }

  private:
    explicit registry(bw_registry *r) noexcept : r_(r)
    {
    }
#if BW_CPP_EXCEPTIONS
    explicit registry(const config *defaults)
    {
        result<registry> r = make(defaults);
        if (!r)
            detail::raise(r.error().code(), &r.error().detail());
        std::swap(r_, r->r_);
    }
#endif
    static result<registry> make(const config *defaults) noexcept
    {
        if (defaults && defaults->error())
            return defaults->error();
        bw_error e = bw_error();
        bw_registry *r = nullptr;
        int rc = bw_registry_new(defaults ? defaults->get() : nullptr, &r, &e);
        if (rc != BW_OK)
            return error_code(rc, &e);
        return registry(r);
    }
    breaker_ref get_c(const char *name, const config *override, error_code &ec) const noexcept
    {
        if (override && override->error()) {
            ec = override->error();
            return breaker_ref();
        }
        bw_error e = bw_error();
        bw_breaker *b = nullptr;
        detail::note(bw_registry_get(r_, name, override ? override->get() : nullptr, &b, &e), &e, ec);
        return breaker_ref(ec ? nullptr : b);
    }
    breaker_ref get_v(std::string_view name, const config *override, error_code &ec) const noexcept
    {
        detail::cstr n(name);
        if (!n.ok()) {
            bw_error e = detail::cstr::refused("name");
            ec.assign(BW_EINVAL, &e);
            return breaker_ref();
        }
        return get_c(n.c_str(), override, ec);
    }
    bw_registry *r_ = nullptr;
};

/* ---- retry, bulkhead ---- */

/* bw::retry — a retry policy (retry.h) with chained setters; borrowed by the pipelines that use it. */
class retry
{
  public:
    retry()
    {
        if (bw_retry_new(&r_) != BW_OK)
            fail(BW_ENOMEM, nullptr);
    }
    retry(retry &&o) noexcept : r_(std::exchange(o.r_, nullptr)), first_(o.first_)
    {
    }
    retry &operator=(retry &&o) noexcept
    {
        retry old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(r_, old.r_);
        std::swap(first_, old.first_);
        return *this;
    }
    retry(const retry &) = delete;
    retry &operator=(const retry &) = delete;
    ~retry()
    {
        bw_retry_free(r_);
    }
    retry &attempts(int n)
    {
        bw_error e = bw_error();
        return done(bw_retry_set_attempts(r_, n, &e), e);
    }
    retry &backoff(bw_backoff kind, nanoseconds base, double multiplier, nanoseconds cap)
    {
        bw_error e = bw_error();
        return done(bw_retry_set_backoff(r_, kind, base.count(), multiplier, cap.count(), &e), e);
    }
    retry &jitter(bw_jitter j)
    {
        bw_error e = bw_error();
        return done(bw_retry_set_jitter(r_, j, &e), e);
    }
    retry &max_duration(nanoseconds d)
    {
        bw_error e = bw_error();
        return done(bw_retry_set_max_duration(r_, d.count(), &e), e);
    }
    retry &patient(bool on, nanoseconds jitter = nanoseconds::zero())
    {
        bw_error e = bw_error();
        return done(bw_retry_set_patient(r_, on, jitter.count(), &e), e);
    }
    retry &seed(uint64_t s)
    {
        bw_error e = bw_error();
        return done(bw_retry_set_seed(r_, s), e);
    }
    const error_code &error() const noexcept
    {
        return first_;
    }
    bw_retry *get() const noexcept
    {
        return r_;
    }

  private:
    retry &done(int rc, const bw_error &e)
    {
        if (rc != BW_OK)
            fail(rc, &e);
        return *this;
    }
    void fail(int rc, const bw_error *e)
    {
#if BW_CPP_EXCEPTIONS
        detail::raise(rc, e);
#else
        if (!first_)
            first_.assign(rc, e);
#endif
    }
    bw_retry *r_ = nullptr;
    error_code first_;
};

/* bw::bulkhead — at most N calls in flight (bulkhead.h). */
class bulkhead
{
  public:
#if BW_CPP_EXCEPTIONS
    bulkhead(int max_concurrent, nanoseconds max_wait = nanoseconds::zero())
    {
        bw_error e = bw_error();
        int rc = bw_bulkhead_new(max_concurrent, max_wait.count(), &h_, &e);
        if (rc != BW_OK)
            detail::raise(rc, &e);
    }
#endif
    static result<bulkhead> make(int max_concurrent, nanoseconds max_wait = nanoseconds::zero()) noexcept
    {
        bw_error e = bw_error();
        bw_bulkhead *h = nullptr;
        int rc = bw_bulkhead_new(max_concurrent, max_wait.count(), &h, &e);
        if (rc != BW_OK)
            return error_code(rc, &e);
        return bulkhead(h);
    }
    bulkhead(bulkhead &&o) noexcept : h_(std::exchange(o.h_, nullptr))
    {
    }
    bulkhead &operator=(bulkhead &&o) noexcept
    {
        bulkhead old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(h_, old.h_);
        return *this;
    }
    bulkhead(const bulkhead &) = delete;
    bulkhead &operator=(const bulkhead &) = delete;
    ~bulkhead()
    {
        bw_bulkhead_free(h_);
    }
    /* A slot, released by its destructor; false when there was none (BW_EFULL). */
    class slot
    {
      public:
        slot(slot &&o) noexcept : h_(std::exchange(o.h_, nullptr))
        {
        }
        slot &operator=(slot &&o) noexcept
        {
            slot old(std::move(o)); // o is left empty; the slot this held is released with old, now
            std::swap(h_, old.h_);
            return *this;
        }
        slot(const slot &) = delete;
        slot &operator=(const slot &) = delete;
        ~slot()
        {
            if (h_)
                bw_bulkhead_release(h_);
        }
        explicit operator bool() const noexcept
        {
            return h_ != nullptr;
        }

      private:
        friend class bulkhead;
        explicit slot(bw_bulkhead *h) noexcept : h_(h)
        {
        }
        bw_bulkhead *h_;
    };
    /* Take a slot, waiting up to max_wait. */
    slot acquire() const noexcept
    {
        return slot(bw_bulkhead_acquire(h_) == BW_OK ? h_ : nullptr);
    }
    /* Take a slot if one is free now. */
    slot try_acquire() const noexcept
    {
        return slot(bw_bulkhead_try_acquire(h_) == BW_OK ? h_ : nullptr);
    }
    int in_flight() const noexcept
    {
        return bw_bulkhead_in_flight(h_);
    }
    bw_bulkhead *get() const noexcept
    {
        return h_;
    }

  private:
    explicit bulkhead(bw_bulkhead *h) noexcept : h_(h)
    {
    }
    bw_bulkhead *h_ = nullptr;
};

/* ---- pipeline ---- */

/* bw::context — one execution's context (bw_ctx), as the call sees it. */
class context
{
  public:
    explicit context(bw_ctx *c) noexcept : c_(c)
    {
    }
    /* The time left before the deadline; std::nullopt when no layer set one. */
    std::optional<nanoseconds> remaining() const noexcept
    {
        int64_t ns = bw_ctx_remaining_ns(c_);
        if (ns == BW_NO_TIME)
            return std::nullopt;
        return nanoseconds(ns);
    }
    int attempt() const noexcept
    {
        return bw_ctx_attempt(c_);
    }
    int set_retry_after(nanoseconds d) noexcept
    {
        return bw_ctx_set_retry_after(c_, d.count());
    }
    int set_timed_out() noexcept
    {
        return bw_ctx_set_timed_out(c_);
    }
    std::optional<std::string_view> key() const noexcept
    {
        const char *k = bw_ctx_key(c_);
        if (!k)
            return std::nullopt;
        return std::string_view(k);
    }
    bw_ctx *get() const noexcept
    {
        return c_;
    }

  private:
    bw_ctx *c_;
};

/* What pipeline::execute returns: the status (pipeline.h), the call's (or a fallback's) code, the report. */
struct execution {
    int status;
    int rc;
    bw_report report;
    explicit operator bool() const noexcept
    {
        return status == BW_OK;
    }
};

/*
 * bw::pipeline — layers around a call (pipeline.h), outermost first. The
 * breakers, retry policies and bulkheads it is given are borrowed (they must
 * outlive it); fallbacks are callables it owns. Build it on one thread, then
 * execute from any number.
 */
class pipeline
{
  public:
    /* The return code an exception escaping the call is recorded as (a failure for the default classifiers). */
    static constexpr int exception_rc = -0x7fff;

#if BW_CPP_EXCEPTIONS
    explicit pipeline(std::string_view name)
    {
        result<pipeline> r = make(name);
        if (!r)
            detail::raise(r.error().code(), &r.error().detail());
        std::swap(p_, r->p_);
    }
#endif
    static result<pipeline> make(std::string_view name) noexcept
    {
        detail::cstr n(name);
        if (!n.ok()) {
            bw_error e = detail::cstr::refused("name");
            return error_code(BW_EINVAL, &e);
        }
        bw_error e = bw_error();
        bw_pipeline *p = nullptr;
        int rc = bw_pipeline_new(n.c_str(), &p, &e);
        if (rc != BW_OK)
            return error_code(rc, &e);
        return pipeline(p);
    }
    pipeline(pipeline &&o) noexcept : p_(std::exchange(o.p_, nullptr)), owned_(std::exchange(o.owned_, nullptr))
    {
    }
    pipeline &operator=(pipeline &&o) noexcept
    {
        pipeline old(std::move(o)); // o is left empty; what this held is freed with old, now
        std::swap(p_, old.p_);
        std::swap(owned_, old.owned_);
        return *this;
    }
    pipeline(const pipeline &) = delete;
    pipeline &operator=(const pipeline &) = delete;
    ~pipeline()
    {
        bw_pipeline_free(p_);
        while (owned_) /* the fallbacks, after the pipeline that called them */
            delete std::exchange(owned_, owned_->next);
    }

    /* Each add appends a layer inside the others; throws bw::error, or fills ec. */
#if BW_CPP_EXCEPTIONS
    pipeline &add(breaker_ref b)
    {
        return must(add(b, scratch()));
    }
    pipeline &add(const registry &r)
    {
        return must(add(r, scratch()));
    }
    /* Per-call keyed circuits of b (execute_key). */
    pipeline &add_keyed(breaker_ref b)
    {
        return must(add_keyed(b, scratch()));
    }
    pipeline &add(const retry &r)
    {
        return must(add(r, scratch()));
    }
    pipeline &add(const bulkhead &h)
    {
        return must(add(h, scratch()));
    }
    pipeline &add_timeout(nanoseconds d)
    {
        return must(add_timeout(d, scratch()));
    }
    /*
     * A fallback layer for the outcomes in `on` (BW_FALLBACK_ON_* bits) of
     * execute's int-code calls: fn(const bw_fallback_info &), fn(const
     * bw::fallback_info &) or fn() returns the code that replaces the call's
     * (anything else does not compile). The pipeline owns fn. An exception fn
     * throws becomes the code exception_rc. For a value of another type, give
     * the call its fallback: call(f, bw::fallback{fn}).
     */
    template <class F> pipeline &add_fallback(unsigned on, F &&fn)
    {
        return must(add_fallback(on, std::forward<F>(fn), scratch()));
    }
#endif
    pipeline &add(breaker_ref b, error_code &ec) noexcept
    {
        bw_error e = bw_error();
        detail::note(bw_pipeline_add_breaker(p_, b.get(), &e), &e, ec);
        return *this;
    }
    pipeline &add(const registry &r, error_code &ec) noexcept
    {
        bw_error e = bw_error();
        detail::note(bw_pipeline_add_registry(p_, r.get(), &e), &e, ec);
        return *this;
    }
    pipeline &add_keyed(breaker_ref b, error_code &ec) noexcept
    {
        bw_error e = bw_error();
        detail::note(bw_pipeline_add_keyed(p_, b.get(), &e), &e, ec);
        return *this;
    }
    pipeline &add(const retry &r, error_code &ec) noexcept
    {
        bw_error e = bw_error();
        detail::note(r.error() ? r.error().code() : bw_pipeline_add_retry(p_, r.get(), &e),
                     r.error() ? &r.error().detail() : &e, ec);
        return *this;
    }
    pipeline &add(const bulkhead &h, error_code &ec) noexcept
    {
        bw_error e = bw_error();
        detail::note(bw_pipeline_add_bulkhead(p_, h.get(), &e), &e, ec);
        return *this;
    }
    pipeline &add_timeout(nanoseconds d, error_code &ec) noexcept
    {
        bw_error e = bw_error();
        detail::note(bw_pipeline_add_timeout(p_, d.count(), nullptr, &e), &e, ec);
        return *this;
    }
    template <class F> pipeline &add_fallback(unsigned on, F &&fn, error_code &ec) noexcept
    {
        using box = fallback_box<std::decay_t<F>>;
        static_assert(box::callable, "pipeline::add_fallback: the fallback must be callable with a const "
                                     "bw_fallback_info &, a const bw::fallback_info & or no argument");
        static_assert(!box::callable || box::returns_code,
                      "pipeline::add_fallback: the fallback returns the int code that replaces the call's; for a "
                      "value of another type give the call its fallback: call(f, bw::fallback{fn})");
        box *b = new (std::nothrow) box(std::forward<F>(fn));
        if (!b) {
            ec.assign(BW_ENOMEM, nullptr);
            return *this;
        }
        bw_error e = bw_error();
        if (detail::note(bw_pipeline_add_fallback(p_, on, &box::call, b, &e), &e, ec) != BW_OK) {
            delete b;
            return *this;
        }
        b->next = owned_; /* freed with the pipeline */
        owned_ = b;
        return *this;
    }

    /*
     * Run f through every layer. f takes a bw::context (or nothing) and
     * returns an int code (0 = success for the default classifiers). An
     * exception escaping f is recorded by the layers as exception_rc and
     * rethrown once execute returns, unless a fallback stood in or a later
     * attempt succeeded.
     */
    template <class F> execution execute(F &&f) noexcept(!BW_CPP_EXCEPTIONS)
    {
        return run(nullptr, f);
    }
    /* For the per-call circuit `key` (a registry name or a keyed circuit's key). */
    template <class F> execution execute_key(std::string_view key, F &&f) noexcept(!BW_CPP_EXCEPTIONS)
    {
        detail::cstr k(key);
        if (!k.ok())
            return execution{BW_EINVAL, 0, bw_report()};
        return run(k.c_str(), f);
    }

#if BW_CPP_EXCEPTIONS
    /*
     * A typed call through every layer (as Polly's ResiliencePipeline<T>):
     * f takes a bw::context (or nothing) and returns a value of any type (or
     * void), which call() returns, by value. For each attempt the layers see
     * the int code code(value) (code() for a void f; without `code`, 0: a
     * success), or exception_rc when f throws. Without a fallback, or for an
     * outcome outside its mask, call() ends as the layers did: BW_OK gives the
     * last attempt's value (even when its code said it failed), or rethrows
     * its exception; a rejection throws bw::rejected; BW_ETIMEDOUT (rethrowing
     * f's exception if the late attempt threw one), BW_EFULL and errors throw
     * bw::error.
     *
     * With bw::fallback{[on,] fn}, what fn returns stands in for the outcomes
     * in `on`: BW_FALLBACK_ON_REJECTED, _TIMEOUT and _FULL as for a fallback
     * layer, and _FAILURE for a last attempt that threw or whose code is not
     * 0 (as the default classifiers judge it). fn sees why (its retry_after,
     * the code, the exception). It runs outside every layer, as an outermost
     * fallback layer would, but emits no BW_EVENT_FALLBACK; an exception it
     * throws propagates. A fallback layer (add_fallback) stands in with an int
     * code, not a value: a pipeline that has one refuses typed calls
     * (BW_EINVAL; use execute).
     */
    template <class F, class Code = detail::no_code> auto call(F &&f, Code &&code = Code())
    {
        detail::no_fallback none{detail::no_fallback_fn()};
        return call_or_throw(nullptr, f, code, none);
    }
    template <class F, class G> auto call(F &&f, fallback<G> fb)
    {
        detail::no_code code;
        return call_or_throw(nullptr, f, code, fb);
    }
    template <class F, class Code, class G> auto call(F &&f, Code &&code, fallback<G> fb)
    {
        return call_or_throw(nullptr, f, code, fb);
    }
    /* For the per-call circuit `key` (as execute_key). */
    template <class F, class Code = detail::no_code> auto call_key(std::string_view key, F &&f, Code &&code = Code())
    {
        detail::no_fallback none{detail::no_fallback_fn()};
        return call_or_throw(&key, f, code, none);
    }
    template <class F, class G> auto call_key(std::string_view key, F &&f, fallback<G> fb)
    {
        detail::no_code code;
        return call_or_throw(&key, f, code, fb);
    }
    template <class F, class Code, class G> auto call_key(std::string_view key, F &&f, Code &&code, fallback<G> fb)
    {
        return call_or_throw(&key, f, code, fb);
    }
#endif
    /*
     * call() without the exceptions for outcomes: a bw::call_result holding the
     * value (f's, or the fallback's: fallback() says so), or saying rejected()
     * (rejection() says why), or the status (BW_ETIMEDOUT, BW_EFULL, an error).
     * An exception f throws that no fallback takes, or one the fallback
     * throws, is rethrown.
     */
    template <class F, class Code = detail::no_code> auto try_call(F &&f, Code &&code = Code())
    {
        detail::no_fallback none{detail::no_fallback_fn()};
        bw_error e;
        return typed(nullptr, f, code, none, e);
    }
    template <class F, class G> auto try_call(F &&f, fallback<G> fb)
    {
        detail::no_code code;
        bw_error e;
        return typed(nullptr, f, code, fb, e);
    }
    template <class F, class Code, class G> auto try_call(F &&f, Code &&code, fallback<G> fb)
    {
        bw_error e;
        return typed(nullptr, f, code, fb, e);
    }
    template <class F, class Code = detail::no_code>
    auto try_call_key(std::string_view key, F &&f, Code &&code = Code())
    {
        detail::no_fallback none{detail::no_fallback_fn()};
        bw_error e;
        return typed(&key, f, code, none, e);
    }
    template <class F, class G> auto try_call_key(std::string_view key, F &&f, fallback<G> fb)
    {
        detail::no_code code;
        bw_error e;
        return typed(&key, f, code, fb, e);
    }
    template <class F, class Code, class G> auto try_call_key(std::string_view key, F &&f, Code &&code, fallback<G> fb)
    {
        bw_error e;
        return typed(&key, f, code, fb, e);
    }
    int layers() const noexcept
    {
        return bw_pipeline_layers(p_);
    }
    bw_pipeline *get() const noexcept
    {
        return p_;
    }

  private:
    explicit pipeline(bw_pipeline *p) noexcept : p_(p)
    {
    }
    /* What the pipeline owns (its fallbacks' callables), in a list freed by the destructor. */
    struct owned {
        owned *next = nullptr;
        virtual ~owned() = default;
    };
    template <class F> struct fallback_box : owned {
        static constexpr bool takes_c = std::is_invocable_v<F &, const bw_fallback_info &>;
        static constexpr bool takes_info = std::is_invocable_v<F &, const fallback_info &>;
        static constexpr bool callable = takes_c || takes_info || std::is_invocable_v<F &>;
        using result = typename std::conditional_t<
            takes_c, std::invoke_result<F &, const bw_fallback_info &>,
            std::conditional_t<takes_info, std::invoke_result<F &, const fallback_info &>,
                               std::conditional_t<callable, std::invoke_result<F &>, detail::no_type>>>::type;
        static constexpr bool returns_code = std::is_convertible_v<result, int>;
        explicit fallback_box(F &&f) : fn(std::move(f))
        {
        }
        explicit fallback_box(const F &f) : fn(f)
        {
        }
        F fn;
        static int call(const bw_fallback_info *why, void *, void *user) noexcept
        {
            auto &self = *static_cast<fallback_box *>(user);
#if BW_CPP_EXCEPTIONS
            try {
#endif
                if constexpr (!callable || !returns_code)
                    return exception_rc; /* not compiled: add_fallback's static_asserts stopped the build */
                else if constexpr (takes_c)
                    return std::invoke(self.fn, *why);
                else if constexpr (takes_info)
                    return std::invoke(self.fn, fallback_info(*why));
                else
                    return std::invoke(self.fn);
#if BW_CPP_EXCEPTIONS
            } catch (...) {
                return exception_rc;
            }
#endif
        }
    };
    /* The value of a typed call's f, and the calls it can be given. */
    template <class F> struct typed_call {
        static constexpr bool with_context = std::is_invocable_v<F &, context>;
        static constexpr bool callable = with_context || std::is_invocable_v<F &>;
        using result =
            typename std::conditional_t<with_context, std::invoke_result<F &, context>,
                                        std::conditional_t<callable, std::invoke_result<F &>, detail::no_type>>::type;
        using value = detail::value_t<result>;
        static decltype(auto) invoke(F &f, bw_ctx *ctx)
        {
            if constexpr (with_context)
                return std::invoke(f, context(ctx));
            else
                return std::invoke(f);
        }
    };
    template <class V, class Code> static constexpr bool code_fits()
    {
        if constexpr (std::is_void_v<V>) {
            if constexpr (std::is_invocable_v<Code &>)
                return std::is_same_v<std::invoke_result_t<Code &>, int>;
            else
                return false;
        } else if constexpr (std::is_invocable_v<Code &, const V &>) {
            return std::is_same_v<std::invoke_result_t<Code &, const V &>, int>;
        } else {
            return false;
        }
    }
    template <class F, class Code, class G> static constexpr bool typed_ok()
    {
        using V = typename typed_call<F>::value;
        static_assert(typed_call<F>::callable,
                      "pipeline::call: the call must be callable with a bw::context or with no argument");
        static_assert(!typed_call<F>::callable || code_fits<V, Code>(),
                      "pipeline::call: the code function must take the call's value (nothing for a void call) and "
                      "return the int code the layers classify (0 = a success)");
        if constexpr (!std::is_same_v<G, detail::no_fallback_fn>)
            detail::check_fallback<V, G>();
        return typed_call<F>::callable && code_fits<V, Code>() &&
               (std::is_same_v<G, detail::no_fallback_fn> || detail::fallback_fits<V, G>);
    }
    /* A typed call's attempt: the value (or that f ran, for void), the exception f threw, the code it gave. */
    template <class F, class Code> struct typed_task {
        using V = typename typed_call<F>::value;
        F &fn;
        Code &code;
        std::optional<std::conditional_t<std::is_void_v<V>, bool, V>> value;
#if BW_CPP_EXCEPTIONS
        std::exception_ptr thrown;
#endif
        static int call(bw_ctx *ctx, void *arg) noexcept
        {
            auto &self = *static_cast<typed_task *>(arg);
            self.value.reset();
#if BW_CPP_EXCEPTIONS
            self.thrown = nullptr;
            try {
#endif
                if constexpr (std::is_void_v<V>) {
                    typed_call<F>::invoke(self.fn, ctx);
                    self.value.emplace(true);
                    return std::invoke(self.code);
                } else {
                    self.value.emplace(typed_call<F>::invoke(self.fn, ctx));
                    return std::invoke(self.code, static_cast<const V &>(*self.value));
                }
#if BW_CPP_EXCEPTIONS
            } catch (...) {
                self.thrown = std::current_exception();
                return exception_rc;
            }
#endif
        }
    };
    /* A typed call: its value (f's or the fallback's) or why there is none (the error's detail in e). */
    template <class F, class Code, class G>
    auto typed(const std::string_view *key, F &f, Code &code, fallback<G> &fb, bw_error &e)
    {
        using V = typename typed_call<F>::value;
        constexpr bool has_fallback = !std::is_same_v<G, detail::no_fallback_fn>;
        if constexpr (!typed_ok<F, Code, G>()) {
            return call_result<int>(BW_EINVAL, bw_rejection()); /* not compiled: typed_ok stopped the build */
        } else {
            e = bw_error();
            if (owned_) {
                e = int_fallback_refused();
                return call_result<V>(BW_EINVAL, bw_rejection());
            }
            if (has_fallback && !detail::fallback_mask_ok(fb.on)) {
                e = detail::fallback_mask_refused(fb.on);
                return call_result<V>(BW_ERANGE, bw_rejection());
            }
            detail::cstr k(key ? *key : std::string_view());
            if (!k.ok()) {
                e = detail::cstr::refused("key");
                return call_result<V>(BW_EINVAL, bw_rejection());
            }
            typed_task<F, Code> t
            {
                f, code, std::nullopt
#if BW_CPP_EXCEPTIONS
                    ,
                    nullptr
#endif
            };
            int rc = 0;
            bw_report report;
            int status =
                bw_pipeline_execute_key(p_, key ? k.c_str() : nullptr, &typed_task<F, Code>::call, &t, &rc, &report);
            if (report.fallback) { /* a fallback layer added through get() stood in with a code */
                e = int_fallback_refused();
                return call_result<V>(BW_EINVAL, bw_rejection());
            }
            bool threw = false; /* the last attempt made the call (BW_OK, BW_ETIMEDOUT), and it threw */
#if BW_CPP_EXCEPTIONS
            threw = (status == BW_OK || status == BW_ETIMEDOUT) && t.thrown;
#endif
            unsigned reason = status == BW_OK          ? (threw || rc != 0 ? BW_FALLBACK_ON_FAILURE : 0u)
                              : status == BW_REJECTED  ? BW_FALLBACK_ON_REJECTED
                              : status == BW_ETIMEDOUT ? BW_FALLBACK_ON_TIMEOUT
                              : status == BW_EFULL     ? BW_FALLBACK_ON_FULL
                                                       : 0u;
            if constexpr (has_fallback) {
                if (reason & fb.on) {
                    bw_fallback_info why = detail::fallback_why(reason, status, rc, report.attempts,
                                                                status == BW_REJECTED ? &report.rejection : nullptr);
#if BW_CPP_EXCEPTIONS
                    fallback_info info(why, threw ? t.thrown : nullptr);
#else
                    fallback_info info(why);
#endif
                    if constexpr (std::is_void_v<V>) {
                        detail::stand_in<V>(fb.fn, info);
                        return call_result<V>(detail::stood_in_t(), reason, why.rejection);
                    } else {
                        return call_result<V>(detail::stood_in_t(), detail::stand_in<V>(fb.fn, info), reason,
                                              why.rejection);
                    }
                }
            }
#if BW_CPP_EXCEPTIONS
            if (threw)
                std::rethrow_exception(t.thrown);
#endif
            if (status != BW_OK)
                return call_result<V>(status, status == BW_REJECTED ? report.rejection : bw_rejection());
            if (!t.value) { /* a layer added through get() ended the call without making it */
                e.code = BW_ESTATE;
                std::snprintf(e.message, sizeof e.message, "a layer ended the typed call without making it");
                return call_result<V>(BW_ESTATE, bw_rejection());
            }
            if constexpr (std::is_void_v<V>)
                return call_result<V>();
            else
                return call_result<V>(std::move(*t.value));
        }
    }
#if BW_CPP_EXCEPTIONS
    template <class F, class Code, class G>
    auto call_or_throw(const std::string_view *key, F &f, Code &code, fallback<G> &fb)
    {
        bw_error e;
        auto r = typed(key, f, code, fb, e);
        if (!r) {
            if (r.rejected())
                throw rejected(r.rejection().raw());
            detail::raise(r.status(), &e);
        }
        if constexpr (!std::is_void_v<typename typed_call<F>::value>)
            return std::move(r).value();
    }
#endif
    static bw_error int_fallback_refused() noexcept
    {
        bw_error e = bw_error();
        e.code = BW_EINVAL;
        std::snprintf(e.field, sizeof e.field, "fallback");
        std::snprintf(e.message, sizeof e.message,
                      "a fallback layer stands in with an int code, not a value: typed calls (call, try_call) "
                      "take their fallback as bw::fallback; use execute with this pipeline");
        return e;
    }
    template <class F> struct task {
        F &fn;
#if BW_CPP_EXCEPTIONS
        std::exception_ptr thrown;
#endif
        static int call(bw_ctx *ctx, void *arg) noexcept
        {
            auto &self = *static_cast<task *>(arg);
#if BW_CPP_EXCEPTIONS
            self.thrown = nullptr;
            try {
#endif
                if constexpr (std::is_invocable_v<F &, context>)
                    return std::invoke(self.fn, context(ctx));
                else
                    return std::invoke(self.fn);
#if BW_CPP_EXCEPTIONS
            } catch (...) {
                self.thrown = std::current_exception();
                return exception_rc;
            }
#endif
        }
    };
    template <class F> execution run(const char *key, F &f)
    {
        task<F> t
        {
            f
#if BW_CPP_EXCEPTIONS
                ,
                nullptr
#endif
        };
        execution x{BW_OK, 0, bw_report()};
        x.status = bw_pipeline_execute_key(p_, key, &task<F>::call, &t, &x.rc, &x.report);
#if BW_CPP_EXCEPTIONS
        if (t.thrown && !x.report.fallback)
            std::rethrow_exception(t.thrown);
#endif
        return x;
    }
#if BW_CPP_EXCEPTIONS
    error_code &scratch() noexcept
    {
        return last_;
    }
    pipeline &must(pipeline &self)
    {
        if (last_)
            detail::raise(last_.code(), &last_.detail());
        return self;
    }
    error_code last_; /* the throwing adds' error, while they run */
#endif
    bw_pipeline *p_ = nullptr;
    owned *owned_ = nullptr;
};

} // namespace bw

#endif
