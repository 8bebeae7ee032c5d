/*
 * test_window.c (tests/unit/) — unit tests of the count and time sliding
 * windows (window.h), against the "Windows (rate policy)" section of
 * docs/states.md: one-second buckets up to time:60, wider ones beyond (at most
 * 60 buckets, so a day's window costs what a minute's does).
 */
#include "harness.h"
#include "breakwater/breakwater.h"
#include "machine/window.h"

#define SEC INT64_C(1000000000)
#define MS INT64_C(1000000)

/* Memory for the windows under test: big enough for any size used here. */
static bw__bucket g_buckets[64];
static uint8_t g_slots[256];

static void count_window(bw__window *w, uint32_t n)
{
    if (bw__window_bytes(BW_WINDOW_COUNT, n) > sizeof g_slots)
        abort();
    bw__window_init(w, BW_WINDOW_COUNT, n, g_slots);
}

static void time_window(bw__window *w, uint32_t n)
{
    if (bw__window_bytes(BW_WINDOW_TIME, n) > sizeof g_buckets)
        abort();
    bw__window_init(w, BW_WINDOW_TIME, n, g_buckets);
}

/* Expire a time window to `t` and return its total. */
static long long total_at(bw__window *w, int64_t t)
{
    bw__window_expire(w, t);
    return (long long)w->total;
}

static void test_window_bytes(void)
{
    CHECK_INT(bw__window_bytes(BW_WINDOW_COUNT, 100), 100);
    CHECK_INT(bw__window_bytes(BW_WINDOW_COUNT, 1), 1);
    CHECK_INT(bw__window_bytes(BW_WINDOW_TIME, 3), 3 * sizeof(bw__bucket));
    CHECK_INT(bw__window_bytes(BW_WINDOW_TIME, 1), sizeof(bw__bucket));
    /* At most 60 buckets, whatever the length. */
    CHECK_INT(bw__window_bytes(BW_WINDOW_TIME, 60), 60 * sizeof(bw__bucket));
    CHECK_INT(bw__window_bytes(BW_WINDOW_TIME, 61), 31 * sizeof(bw__bucket));
    CHECK_INT(bw__window_bytes(BW_WINDOW_TIME, 3600), 60 * sizeof(bw__bucket));
    CHECK_INT(bw__window_bytes(BW_WINDOW_TIME, 86400), 60 * sizeof(bw__bucket));
    CHECK_INT(bw__window_bytes(BW_WINDOW_TIME, BW__WINDOW_SECONDS_MAX), 60 * sizeof(bw__bucket));
}

/* time:N has buckets of ceil(N / 60) s, as few as cover N: exactly N for N <= 60 and whole minutes. */
static void test_bucket_widths(void)
{
    static const uint32_t table[][3] = {{1, 1, 1},        {2, 1, 2},         {59, 1, 59},        {60, 1, 60},
                                        {61, 2, 31},      {74, 2, 37},       {119, 2, 60},       {120, 2, 60},
                                        {121, 3, 41},     {600, 10, 60},     {3600, 60, 60},     {3601, 61, 60},
                                        {21600, 360, 60}, {86400, 1440, 60}, {172800, 2880, 60}, {2592000, 43200, 60}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        CHECK_INT(bw__window_width(table[i][0]), table[i][1]);
        CHECK_INT(bw__window_buckets(table[i][0]), table[i][2]);
    }
    CHECK_INT(BW__WINDOW_SECONDS_MAX, 30 * 86400);
    /* Every length: at most 60 buckets, covering N, and one fewer would not. */
    long bad = 0;
    for (uint32_t n = 1; n <= BW__WINDOW_SECONDS_MAX; n++) {
        uint64_t w = bw__window_width(n), b = bw__window_buckets(n);
        bad += !(b >= 1 && b <= BW__WINDOW_BUCKETS && b * w >= n && (b - 1) * w < n && (n % 60 || b * w == n));
    }
    CHECK_INT(bad, 0);
}

/* A breaker with a day's time window holds 60 buckets, not 86400 (striped or not). */
static void test_day_window_memory(void)
{
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "window=time:1d", NULL));
    bw_breaker *day = NULL, *minute = NULL;
    CHECK_OK(bw_breaker_new("day", c, &day, NULL));
    CHECK_OK(bw_config_parse(c, "window=time:60s", NULL));
    CHECK_OK(bw_breaker_new("minute", c, &minute, NULL));
    if (day && minute)
        CHECK_INT(bw_breaker_bytes(day), bw_breaker_bytes(minute));
    CHECK(bw_breaker_bytes(day) < 16 * 1024);
    bw_breaker_free(day);
    bw_breaker_free(minute);
    bw_config_free(c);
}

static void test_init_is_empty(void)
{
    bw__window w;
    memset(g_slots, 0xff, sizeof g_slots);
    count_window(&w, 5);
    CHECK_INT(w.total, 0);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
    /* Garbage in the memory before init must not look like held outcomes. */
    for (int i = 0; i < 5; i++)
        bw__window_record(&w, 0, 0, 0);
    CHECK_INT(w.total, 5);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);

    memset(g_buckets, 0xff, sizeof g_buckets);
    time_window(&w, 3);
    CHECK_INT(w.total, 0);
    bw__window_record(&w, 1, 0, 10 * SEC);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 0);
    CHECK_INT(total_at(&w, 12 * SEC), 1);
    CHECK_INT(total_at(&w, 13 * SEC), 0);
}

/* count:N holds the last N outcomes; the (N+1)th overwrites the oldest. */
static void test_count_evicts_oldest(void)
{
    bw__window w;
    count_window(&w, 3);
    bw__window_record(&w, 1, 1, 0); /* slow failure: the oldest */
    bw__window_record(&w, 0, 0, 0);
    /* N-1 */
    CHECK_INT(w.total, 2);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    bw__window_record(&w, 1, 0, 0);
    /* N */
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 2);
    CHECK_INT(w.slow, 1);
    bw__window_record(&w, 0, 0, 0);
    /* N+1: the slow failure is gone */
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 0);
    bw__window_record(&w, 0, 1, 0); /* evicts the success */
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    bw__window_record(&w, 0, 0, 0); /* evicts the failure */
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 1);
    bw__window_record(&w, 0, 0, 0); /* evicts the success (2nd lap) */
    bw__window_record(&w, 0, 0, 0); /* evicts the slow success */
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
}

/* Many laps of a count window agree with a brute-force "last N" count. */
static void test_count_matches_model(void)
{
    enum { N = 7, CALLS = 500 };
    uint8_t hist[CALLS][2];
    bw__window w;
    count_window(&w, N);
    uint32_t x = 12345;
    for (int i = 0; i < CALLS; i++) {
        x = x * 1103515245u + 12345u;
        int f = (x >> 16) & 1, s = (x >> 17) & 1;
        hist[i][0] = (uint8_t)f;
        hist[i][1] = (uint8_t)s;
        bw__window_record(&w, f, s, 0);
        long long et = 0, ef = 0, es = 0;
        for (int j = i; j >= 0 && j > i - N; j--) {
            et++;
            ef += hist[j][0];
            es += hist[j][1];
        }
        if ((long long)w.total != et || (long long)w.failed != ef || (long long)w.slow != es) {
            CHECK_INT(w.total, et);
            CHECK_INT(w.failed, ef);
            CHECK_INT(w.slow, es);
            return;
        }
    }
    CHECK_INT(w.total, N);
}

static void test_count_n1(void)
{
    bw__window w;
    count_window(&w, 1);
    bw__window_record(&w, 1, 1, 0);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    bw__window_record(&w, 0, 0, 0);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
    bw__window_record(&w, 1, 0, 0);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 0);
}

/* The count window does not use the clock. */
static void test_count_ignores_time(void)
{
    bw__window w;
    count_window(&w, 4);
    bw__window_record(&w, 1, 0, 0);
    bw__window_record(&w, 1, 0, 1000 * SEC);
    bw__window_record(&w, 0, 1, -5 * SEC);
    bw__window_expire(&w, 100000 * SEC);
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 2);
    CHECK_INT(w.slow, 1);
}

static void test_clear(void)
{
    bw__window w;
    count_window(&w, 3);
    for (int i = 0; i < 3; i++)
        bw__window_record(&w, 1, 1, 0);
    bw__window_clear(&w);
    CHECK_INT(w.total, 0);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
    /* After a clear, the first N records evict nothing. */
    for (int i = 0; i < 3; i++)
        bw__window_record(&w, 0, 0, 0);
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);

    time_window(&w, 3);
    bw__window_record(&w, 1, 1, 5 * SEC);
    bw__window_record(&w, 1, 0, 6 * SEC);
    bw__window_clear(&w);
    CHECK_INT(w.total, 0);
    bw__window_record(&w, 0, 0, 7 * SEC);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 0);
    CHECK_INT(total_at(&w, 8 * SEC), 1);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
}

/* docs/states.md: N=3, outcomes at 0.0 s and 0.99 s count at 2.99 s, gone at 3.0 s. */
static void test_time_n3_doc_example(void)
{
    bw__window w;
    time_window(&w, 3);
    bw__window_record(&w, 1, 0, 0);
    bw__window_record(&w, 0, 0, 990 * MS);
    CHECK_INT(w.total, 2);
    CHECK_INT(w.failed, 1);
    CHECK_INT(total_at(&w, 1 * SEC), 2);
    CHECK_INT(total_at(&w, 2990 * MS), 2);
    CHECK_INT(w.failed, 1);
    CHECK_INT(total_at(&w, 3 * SEC - 1), 2);
    CHECK_INT(total_at(&w, 3 * SEC), 0);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
}

/* N=1: the current whole second only. */
static void test_time_n1(void)
{
    bw__window w;
    time_window(&w, 1);
    bw__window_record(&w, 1, 1, 5 * SEC);
    bw__window_record(&w, 0, 0, 6 * SEC - 1);
    CHECK_INT(w.total, 2);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    CHECK_INT(total_at(&w, 6 * SEC - 1), 2);
    CHECK_INT(total_at(&w, 6 * SEC), 0);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
    bw__window_record(&w, 0, 1, 6 * SEC);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.slow, 1);
    /* A record in the next second replaces the bucket. */
    bw__window_record(&w, 1, 0, 7 * SEC + 500 * MS);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 0);
}

/* Records one second apart expire one second at a time. */
static void test_time_incremental_expiry(void)
{
    bw__window w;
    time_window(&w, 3);
    bw__window_record(&w, 1, 0, 500 * MS);  /* second 0 */
    bw__window_record(&w, 0, 1, 1500 * MS); /* second 1 */
    bw__window_record(&w, 1, 1, 2500 * MS); /* second 2 */
    bw__window_record(&w, 0, 0, 2600 * MS); /* second 2 */
    CHECK_INT(w.total, 4);
    CHECK_INT(w.failed, 2);
    CHECK_INT(w.slow, 2);
    CHECK_INT(total_at(&w, 3 * SEC), 3); /* second 0 gone */
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 2);
    CHECK_INT(total_at(&w, 4 * SEC), 2); /* second 1 gone */
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    CHECK_INT(total_at(&w, 5 * SEC - 1), 2);
    CHECK_INT(total_at(&w, 5 * SEC), 0); /* second 2 gone */
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);

    /* Records interleaved with expiry: a record advances the window too. */
    time_window(&w, 3);
    for (int s = 0; s < 10; s++) {
        bw__window_record(&w, s & 1, 0, s * SEC + 100 * MS);
        long long want = s < 2 ? s + 1 : 3;
        CHECK_INT(w.total, want);
    }
    /* Seconds 7, 8, 9 remain: 7 and 9 failed. */
    CHECK_INT(w.failed, 2);
}

/* A gap of the window's length or more clears every bucket. */
static void test_time_gap_clears(void)
{
    bw__window w;
    time_window(&w, 3);
    bw__window_record(&w, 1, 1, 0);
    bw__window_record(&w, 1, 1, 1 * SEC);
    bw__window_record(&w, 1, 1, 2 * SEC);
    CHECK_INT(total_at(&w, 4 * SEC), 1); /* gap N-1: second 2 remains */
    CHECK_INT(w.failed, 1);

    time_window(&w, 3);
    bw__window_record(&w, 1, 1, 0);
    bw__window_record(&w, 1, 1, 1 * SEC);
    bw__window_record(&w, 1, 1, 2 * SEC);
    CHECK_INT(total_at(&w, 5 * SEC), 0); /* gap exactly N */
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
    /* The old buckets must be zero: filling the next lap shows no leftovers. */
    bw__window_record(&w, 0, 0, 5 * SEC);
    bw__window_record(&w, 0, 0, 6 * SEC);
    bw__window_record(&w, 0, 0, 7 * SEC);
    CHECK_INT(w.total, 3);
    CHECK_INT(w.failed, 0);
    CHECK_INT(total_at(&w, 8 * SEC), 2);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);

    time_window(&w, 3);
    for (int i = 0; i < 3; i++)
        bw__window_record(&w, 1, 0, i * SEC);
    CHECK_INT(total_at(&w, 100 * SEC), 0); /* a long gap */
    bw__window_record(&w, 0, 0, 100 * SEC);
    bw__window_record(&w, 0, 0, 101 * SEC);
    CHECK_INT(total_at(&w, 102 * SEC), 2);
    CHECK_INT(w.failed, 0);
    CHECK_INT(total_at(&w, 103 * SEC), 1);
    CHECK_INT(total_at(&w, 104 * SEC), 0);
    CHECK_INT(w.failed, 0);

    /* A record after a long gap also clears, without an expire first. */
    time_window(&w, 3);
    bw__window_record(&w, 1, 1, 0);
    bw__window_record(&w, 0, 0, 50 * SEC);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
}

/* A clock that goes back is treated as standing still. */
static void test_time_clock_back(void)
{
    bw__window w;
    time_window(&w, 3);
    bw__window_record(&w, 0, 0, 5 * SEC);
    bw__window_record(&w, 1, 0, 3 * SEC); /* back 2 s: lands in second 5 */
    CHECK_INT(w.total, 2);
    CHECK_INT(w.failed, 1);
    /* Expiring to an earlier instant drops nothing. */
    CHECK_INT(total_at(&w, 1 * SEC), 2);
    CHECK_INT(total_at(&w, -100 * SEC), 2);
    /* At 7.99 s the window is seconds 5..7: both still counted (had the late
     * record gone into second 3's bucket, it would have been cleared at 6 s). */
    CHECK_INT(total_at(&w, 6 * SEC), 2);
    CHECK_INT(total_at(&w, 7990 * MS), 2);
    CHECK_INT(w.failed, 1);
    CHECK_INT(total_at(&w, 8 * SEC), 0);
    CHECK_INT(w.failed, 0);

    /* After the clock went back, time standing still ends where it was. */
    time_window(&w, 2);
    bw__window_record(&w, 1, 0, 10 * SEC);
    bw__window_record(&w, 1, 0, 2 * SEC);
    CHECK_INT(total_at(&w, 11 * SEC), 2);
    CHECK_INT(total_at(&w, 12 * SEC), 0);
}

/* Negative instants land in floor(t / 1 s). */
static void test_time_negative_floor(void)
{
    bw__window w;
    time_window(&w, 2);
    bw__window_record(&w, 1, 0, -1500 * MS); /* second -2 */
    bw__window_record(&w, 0, 0, -500 * MS);  /* second -1 */
    CHECK_INT(w.total, 2);
    CHECK_INT(w.failed, 1);
    CHECK_INT(total_at(&w, -1), 2); /* second -1: window -2..-1 */
    CHECK_INT(total_at(&w, 0), 1);  /* second 0: window -1..0 */
    CHECK_INT(w.failed, 0);
    CHECK_INT(total_at(&w, 1 * SEC - 1), 1);
    CHECK_INT(total_at(&w, 1 * SEC), 0);

    /* -1 ns is second -1, -1 s exactly is second -1, -1 s - 1 ns is second -2. */
    time_window(&w, 1);
    bw__window_record(&w, 1, 0, -1);
    CHECK_INT(total_at(&w, -1 * SEC), 1); /* same second: clock back, still there */
    CHECK_INT(total_at(&w, 0), 0);

    time_window(&w, 1);
    bw__window_record(&w, 1, 0, -1 * SEC);
    CHECK_INT(total_at(&w, -1), 1);
    CHECK_INT(total_at(&w, 0), 0);

    time_window(&w, 1);
    bw__window_record(&w, 1, 0, -1 * SEC - 1);
    CHECK_INT(total_at(&w, -1 * SEC - 1), 1);
    CHECK_INT(total_at(&w, -1 * SEC), 0);

    /* Odd window size across zero (bucket index of a negative second). */
    time_window(&w, 3);
    for (int64_t s = -4; s <= 4; s++) {
        bw__window_record(&w, 1, 0, s * SEC + 1);
        long long want = s - (-4) + 1 < 3 ? s - (-4) + 1 : 3;
        CHECK_INT(w.total, want);
        CHECK_INT(w.failed, want);
    }
}

/*
 * Randomised walk of time:n against a brute-force model: a record counts while
 * its bucket (floor(t / width), of the newest instant seen: a clock that goes
 * back stands still) is one of the newest `buckets`. Time steps scale with the
 * width, so that walks of wide buckets cross as many boundaries.
 */
static void time_matches_model(uint32_t n)
{
    enum { STEPS = 3000 };
    static int64_t rec_b[STEPS];
    static uint8_t rec_fail[STEPS], rec_slow[STEPS];
    int nrec = 0;
    bw__window w;
    time_window(&w, n);
    const int64_t width = (int64_t)bw__window_width(n) * SEC, nb = bw__window_buckets(n);
    int64_t t = -7 * width, newest = INT64_MIN;
    uint32_t x = 99 + n;
    for (int i = 0; i < STEPS; i++) {
        x = x * 1103515245u + 12345u;
        uint32_t r = (x >> 8) % 100;
        if (r < 60)
            t += (int64_t)((x >> 4) % 700) * (width / 1000); /* small step */
        else if (r < 75)
            t -= (int64_t)((x >> 4) % 3000) * (width / 1000); /* clock goes back */
        else if (r < 85)
            t += (int64_t)((x >> 4) % (uint32_t)(nb + 7)) * width; /* jump, maybe past the window */
        else
            t += 1; /* tick */
        int64_t b = t >= 0 ? t / width : -((-t + width - 1) / width);
        if (b > newest)
            newest = b;
        int f = (x >> 20) & 1, sl = (x >> 22) & 1;
        if (r % 2 == 0) {
            bw__window_record(&w, f, sl, t);
            rec_slow[nrec] = (uint8_t)sl;
            rec_b[nrec] = newest; /* a clock that goes back stands still */
            rec_fail[nrec] = (uint8_t)f;
            nrec++;
        } else {
            bw__window_expire(&w, t);
        }
        long long et = 0, ef = 0, es = 0;
        for (int j = 0; j < nrec; j++)
            if (rec_b[j] >= newest - nb + 1 && rec_b[j] <= newest) {
                et++;
                ef += rec_fail[j];
                es += rec_slow[j];
            }
        if ((long long)w.total != et || (long long)w.failed != ef || (long long)w.slow != es) {
            fprintf(stderr, "time:%u step %d t=%lld\n", n, i, (long long)t);
            CHECK_INT(w.total, et);
            CHECK_INT(w.failed, ef);
            CHECK_INT(w.slow, es);
            return;
        }
    }
    CHECK(nrec > 100);
}

static void test_time_matches_model(void)
{
    time_matches_model(5);    /* one-second buckets */
    time_matches_model(61);   /* 31 buckets of 2 s */
    time_matches_model(150);  /* 50 buckets of 3 s */
    time_matches_model(3600); /* 60 buckets of a minute */
}

/*
 * Wider buckets (docs/states.md): a call leaves the window when the bucket
 * `buckets` after its own begins, between N - width and N seconds after it
 * settled when the width divides N, and never before N - width otherwise.
 */
static void test_time_wide_boundaries(void)
{
    bw__window w;
    /* time:1h: 60 buckets of 1 min, on minute boundaries since the clock's zero. */
    time_window(&w, 3600);
    CHECK_INT(w.size, 60);
    bw__window_record(&w, 1, 0, 0);             /* minute 0 */
    bw__window_record(&w, 0, 1, 60 * SEC - 1);  /* minute 0, its last instant */
    bw__window_record(&w, 1, 1, 60 * SEC);      /* minute 1 */
    CHECK_INT(total_at(&w, 3600 * SEC - 1), 3); /* minute 59: all three */
    CHECK_INT(total_at(&w, 3600 * SEC), 1);     /* minute 60: minute 0 gone, 1 ns and 3540 s after */
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    CHECK_INT(total_at(&w, 3660 * SEC - 1), 1);
    CHECK_INT(total_at(&w, 3660 * SEC), 0); /* exactly 3600 s after the call of minute 1 */
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);

    /* time:61 rounds up to 31 buckets of 2 s: a call may count up to 62 s. */
    time_window(&w, 61);
    bw__window_record(&w, 1, 0, 0);
    CHECK_INT(total_at(&w, 61 * SEC), 1);
    CHECK_INT(total_at(&w, 62 * SEC - 1), 1);
    CHECK_INT(total_at(&w, 62 * SEC), 0);
    bw__window_record(&w, 1, 0, 63 * SEC + 999 * MS); /* bucket 31 ([62, 64) s) */
    CHECK_INT(total_at(&w, 124 * SEC - 1), 1);        /* 60.001 s after: N - width < age */
    CHECK_INT(total_at(&w, 124 * SEC), 0);

    /* time:1d: buckets of 24 min; a gap of a day empties it, a clock that goes back stands still. */
    time_window(&w, 86400);
    bw__window_record(&w, 1, 0, 100 * SEC);
    bw__window_record(&w, 1, 0, 50 * SEC); /* back: lands in the newest bucket */
    CHECK_INT(total_at(&w, 86400 * SEC - 1), 2);
    CHECK_INT(total_at(&w, 86400 * SEC), 0);
    bw__window_record(&w, 0, 0, 86400 * SEC);
    CHECK_INT(total_at(&w, 3 * 86400 * SEC), 0);

    /* Negative instants floor to their bucket: -1 ns is in bucket -1 of time:120 (2 s). */
    time_window(&w, 120);
    bw__window_record(&w, 1, 0, -1);
    CHECK_INT(bw__window_bucket_of(&w, -1), -1);
    CHECK_INT(bw__window_bucket_of(&w, -2 * SEC), -1);
    CHECK_INT(bw__window_bucket_of(&w, -2 * SEC - 1), -2);
    CHECK_INT(total_at(&w, 118 * SEC - 1), 1);
    CHECK_INT(total_at(&w, 118 * SEC), 0);
}

/* Any non-zero flag counts as one. */
static void test_flags_are_booleans(void)
{
    bw__window w;
    count_window(&w, 2);
    bw__window_record(&w, 5, 2, 0);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    bw__window_record(&w, 0, 0, 0);
    bw__window_record(&w, 0, 0, 0);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
    time_window(&w, 2);
    bw__window_record(&w, -1, 7, 0);
    CHECK_INT(w.total, 1);
    CHECK_INT(w.failed, 1);
    CHECK_INT(w.slow, 1);
    CHECK_INT(total_at(&w, 2 * SEC), 0);
    CHECK_INT(w.failed, 0);
    CHECK_INT(w.slow, 0);
}

static double rate(uint64_t part, uint64_t total)
{
    return total ? (double)part / (double)total : 0.0;
}

/* failure_rate = failed / total as IEEE doubles: 1/2 >= 0.5, 1/3 is not. */
static void test_rate_boundaries(void)
{
    bw__window w;
    count_window(&w, 2);
    bw__window_record(&w, 1, 1, 0);
    bw__window_record(&w, 0, 0, 0);
    CHECK(rate(w.failed, w.total) >= 0.5);
    CHECK(rate(w.slow, w.total) >= 0.5);
    CHECK_DBL(rate(w.failed, w.total), 0.5);

    count_window(&w, 3);
    bw__window_record(&w, 1, 1, 0);
    bw__window_record(&w, 0, 0, 0);
    bw__window_record(&w, 0, 0, 0);
    CHECK(!(rate(w.failed, w.total) >= 0.5));
    CHECK(!(rate(w.slow, w.total) >= 0.5));

    count_window(&w, 10);
    for (int i = 0; i < 10; i++)
        bw__window_record(&w, i < 3, i < 3, 0);
    CHECK(rate(w.failed, w.total) == 0.3);
    CHECK(rate(w.failed, w.total) >= 0.3);

    count_window(&w, 8);
    for (int i = 0; i < 8; i++)
        bw__window_record(&w, i < 2, 0, 0);
    CHECK(rate(w.failed, w.total) == 0.25);

    time_window(&w, 2);
    bw__window_record(&w, 1, 0, 0);
    bw__window_record(&w, 0, 0, 1 * SEC);
    CHECK(rate(w.failed, w.total) >= 0.5);
    bw__window_expire(&w, 2 * SEC); /* the failure expires */
    CHECK_DBL(rate(w.failed, w.total), 0.0);
    CHECK_INT(w.total, 1);
}

int main(void)
{
    RUN(test_window_bytes);
    RUN(test_bucket_widths);
    RUN(test_day_window_memory);
    RUN(test_init_is_empty);
    RUN(test_count_evicts_oldest);
    RUN(test_count_matches_model);
    RUN(test_count_n1);
    RUN(test_count_ignores_time);
    RUN(test_clear);
    RUN(test_time_n3_doc_example);
    RUN(test_time_n1);
    RUN(test_time_incremental_expiry);
    RUN(test_time_gap_clears);
    RUN(test_time_clock_back);
    RUN(test_time_negative_floor);
    RUN(test_time_matches_model);
    RUN(test_time_wide_boundaries);
    RUN(test_flags_are_booleans);
    RUN(test_rate_boundaries);
    return TEST_SUMMARY();
}
