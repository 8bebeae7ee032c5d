/*
 * test_image.c (tests/unit/) — a machine as bytes (machine/image.c): format 1
 * images written by the versions before format 2 still load (their window
 * too, when the configuration still buckets it the same way), format 2 (a
 * time window of buckets wider than a second) round-trips, and the decoder
 * refuses what no encoder writes. The fuzz target (tests/fuzz/fuzz_entry.c)
 * covers the rest of the untrusted input.
 */
#include "harness.h"
#include "machine/image.h"
#include "share/circuit.h"

#define SEC INT64_C(1000000000)
#define MS INT64_C(1000000)

static unsigned char g_mem[4096];

/* The configuration the fixtures were written with (rate, time:N, min_calls). */
static bw__mcfg cfg_time(uint32_t n, uint32_t min_calls)
{
    bw__mcfg c;
    memset(&c, 0, sizeof c);
    c.policy = BW_POLICY_RATE;
    c.window_kind = BW_WINDOW_TIME;
    c.window_size = n;
    c.initial_state = BW_STATE_CLOSED;
    c.min_calls = min_calls;
    c.permitted = c.max_concurrent = 1;
    c.error_threshold = c.success_threshold = c.half_open_capacity = 1;
    c.failure_rate = 0.5;
    c.slow_rate = 1;
    c.wait_multiplier = 2;
    c.wait = 10 * SEC;
    c.max_wait_ho = 5 * SEC;
    return c;
}

static void call_at(bw__machine *m, int64_t t, int outcome, int slow)
{
    bw__now n = bw__now_at(t);
    uint64_t g;
    CHECK_INT(bw__machine_acquire(m, &n, &g), 1);
    CHECK_INT(bw__machine_record(m, g, outcome, slow, &n), 1);
}

static long long total_at(bw__machine *m, int64_t t)
{
    uint64_t total, failed, slow;
    bw__now n = bw__now_at(t);
    bw__machine_counts(m, &n, &total, &failed, &slow);
    return (long long)total;
}

static uint32_t u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/*
 * Written by breakwater before format 2 (bw__machine_save of a time:3 machine,
 * min_calls 3): a slow success at 100.2 s, a failure at 101.5 s, successes at
 * 101.7 s and 101.8 s. CLOSED, generation 0.
 */
static const unsigned char v1_time3[] = {
    0x42, 0x57, 0x4d, 0x31, 0x00, 0x01, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe4, 0x0b, 0x54, 0x02, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x65, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/*
 * The first 120 bytes of a time:70 image written before format 2 (min_calls
 * 2): failures at 100 s and 130 s tripped it, OPEN since 130 s, generation 1;
 * then 70 one-second buckets, of which slot 30 (second 100) and slot 60
 * (second 130) hold one failure each.
 */
static const unsigned char v1_time70_head[] = {
    0x42, 0x57, 0x4d, 0x31, 0x00, 0x01, 0x01, 0x00, 0x46, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x94, 0x9a, 0x44, 0x1e, 0x00, 0x00, 0x00, 0x00, 0xe4, 0x0b, 0x54, 0x02, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x00, 0x00,
};

static size_t v1_time70(unsigned char *buf)
{
    memset(buf, 0, 120 + 70 * 12);
    memcpy(buf, v1_time70_head, sizeof v1_time70_head);
    for (int slot = 30; slot <= 60; slot += 30) {
        put32(buf + 120 + slot * 12, 1);     /* total */
        put32(buf + 120 + slot * 12 + 4, 1); /* failed */
    }
    return 120 + 70 * 12;
}

/* An image of the old format loads with its window, and is written back as it was (older versions read it). */
static void test_format1_loads(void)
{
    bw__mcfg c = cfg_time(3, 3);
    bw__machine m;
    CHECK_INT(bw__machine_image_bytes(&c), sizeof v1_time3);
    CHECK_INT(bw__machine_load(&m, &c, g_mem, v1_time3, sizeof v1_time3), 0);
    unsigned char again[sizeof v1_time3];
    CHECK_INT(bw__machine_save(&m, again), sizeof v1_time3);
    CHECK(memcmp(again, v1_time3, sizeof v1_time3) == 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    CHECK_INT(m.gen, 0);
    CHECK_INT(total_at(&m, 102 * SEC), 4);
    CHECK_INT(m.win.failed, 1);
    CHECK_INT(m.win.slow, 1);
    CHECK_INT(total_at(&m, 103 * SEC), 3); /* second 100 gone: the slow success */
    CHECK_INT(m.win.failed, 1);
    CHECK_INT(m.win.slow, 0);
    CHECK_INT(total_at(&m, 104 * SEC), 0);
    /* A malformed old image is still refused: its buckets must sum to its totals. */
    unsigned char bad[sizeof v1_time3];
    memcpy(bad, v1_time3, sizeof bad);
    bad[120]++; /* slot 0's total */
    CHECK_INT(bw__machine_load(&m, &c, g_mem, bad, sizeof bad), -1);
    int policy, kind;
    uint32_t size;
    CHECK_INT(bw__machine_image_shape(v1_time3, sizeof v1_time3, &policy, &kind, &size), 0);
    CHECK_INT(size, 3);
}

/*
 * time:70 had 70 one-second buckets; it now has 35 of 2 s. Its old image keeps
 * the circuit (state, generation, open wait) with an empty window, as an image
 * of another configuration does, and is written back as format 2.
 */
static void test_format1_of_a_wider_window(void)
{
    unsigned char old[1024], out[1024];
    size_t n = v1_time70(old);
    bw__mcfg c = cfg_time(70, 2);
    bw__machine m;
    CHECK_INT(bw__machine_load(&m, &c, g_mem, old, n), 0);
    CHECK_INT(m.state, BW_STATE_OPEN);
    CHECK_INT(m.gen, 1);
    CHECK_INT(m.opened_at, 130 * SEC);
    CHECK_INT(m.open_wait, 10 * SEC);
    CHECK_INT(m.win.total, 0);
    size_t len = bw__machine_save(&m, out);
    CHECK_INT(len, bw__machine_image_bytes(&c));
    CHECK_INT(len, 80 + 44 + 35 * 12);
    CHECK(memcmp(out, "BWM2", 4) == 0);
    CHECK_INT(u32_at(out + 120), 2); /* the width */
    bw__machine m2;
    CHECK_INT(bw__machine_load(&m2, &c, g_mem, out, len), 0);
    CHECK_INT(m2.state, BW_STATE_OPEN);
}

/* A machine of time:1h (60 buckets of a minute) as format 2, into the image and back. */
static size_t hour_image(unsigned char *buf, bw__machine *m)
{
    bw__mcfg c = cfg_time(3600, 100);
    bw__machine_init(m, &c, g_mem);
    call_at(m, 1000 * SEC, BW_FAILURE, 0);     /* minute 16 */
    call_at(m, 1500 * SEC, BW_SUCCESS, 1);     /* minute 25 */
    call_at(m, 1559 * SEC, BW_SUCCESS, 0);     /* minute 25 */
    call_at(m, 4000 * SEC + 1, BW_FAILURE, 1); /* minute 66 */
    return bw__machine_save(m, buf);
}

static void test_format2_round_trip(void)
{
    unsigned char a[1024], b[1024];
    bw__machine m, m2;
    size_t len = hour_image(a, &m);
    bw__mcfg c = m.cfg;
    CHECK_INT(len, 80 + 44 + 60 * 12);
    CHECK_INT(len, bw__machine_image_bytes(&c));
    CHECK(memcmp(a, "BWM2", 4) == 0);
    CHECK_INT(u32_at(a + 120), 60);
    static unsigned char mem2[4096];
    CHECK_INT(bw__machine_load(&m2, &c, mem2, a, len), 0);
    CHECK_INT(bw__machine_save(&m2, b), len);
    CHECK(memcmp(a, b, len) == 0);
    CHECK_INT(m2.win.cur, 66);
    /* Both expire alike: minute 16 leaves at minute 76, minute 25 at 85, minute 66 at 126. */
    static const int64_t at[] = {4559 * SEC, 4560 * SEC, 5099 * SEC, 5100 * SEC, 7560 * SEC - 1, 7560 * SEC};
    static const long long want[] = {4, 3, 3, 1, 1, 0};
    for (int i = 0; i < 6; i++) {
        CHECK_INT(total_at(&m, at[i]), want[i]);
        CHECK_INT(total_at(&m2, at[i]), want[i]);
    }
    int policy, kind;
    uint32_t size;
    CHECK_INT(bw__machine_image_shape(a, len, &policy, &kind, &size), 0);
    CHECK_INT(policy, BW_POLICY_RATE);
    CHECK_INT(kind, BW_WINDOW_TIME);
    CHECK_INT(size, 3600);
}

/* What no encoder writes is refused; a well-formed image of another bucket width loads with an empty window. */
static void test_format2_refused(void)
{
    unsigned char good[1024], x[2048];
    bw__machine m;
    size_t len = hour_image(good, &m);
    bw__mcfg c = m.cfg;
    int policy, kind;
    uint32_t size;
#define LOAD(buf, n) bw__machine_load(&m, &c, g_mem, (buf), (n))
    CHECK_INT(LOAD(good, len), 0);
    CHECK_INT(LOAD(good, len - 1), -1);
    memcpy(x, good, len);
    x[len] = 0;
    CHECK_INT(LOAD(x, len + 1), -1);
    CHECK_INT(LOAD(good, 123), -1); /* shorter than its window's head */
    /* Widths no encoder writes, each with the length it would claim (1 s buckets are format 1's). */
    static const uint32_t widths[] = {0, 1, 3601, UINT32_MAX};
    static unsigned char big[124 + 3600 * 12];
    for (int i = 0; i < 4; i++) {
        memset(big, 0, sizeof big);
        memcpy(big, good, 124);
        put32(big + 120, widths[i]);
        size_t claimed = widths[i] ? 124 + (size_t)((3600 + (uint64_t)widths[i] - 1) / widths[i]) * 12 : len;
        CHECK_INT(LOAD(big, claimed), -1);
        CHECK_INT(LOAD(big, len), -1);
    }
    /* Width 120 s: 30 buckets, a layout this version does not make for time:1h: the state, an empty window. */
    memcpy(x, good, 124);
    put32(x + 120, 120);
    memset(x + 124, 0, 30 * 12);
    CHECK_INT(LOAD(x, 124 + 30 * 12), 0);
    CHECK_INT(m.win.total, 0);
    CHECK_INT(m.state, BW_STATE_CLOSED);
    /* Format 2 is a time window's: not a count window's nor the consecutive policy's. */
    memcpy(x, good, len);
    x[5] = BW_WINDOW_COUNT;
    CHECK_INT(LOAD(x, len), -1);
    CHECK_INT(bw__machine_image_shape(x, len, &policy, &kind, &size), -1);
    memcpy(x, good, len);
    x[4] = BW_POLICY_CONSECUTIVE;
    CHECK_INT(LOAD(x, len), -1);
    /* The buckets must sum to the totals, the newest bucket be in range and in its slot. */
    memcpy(x, good, len);
    put32(x + 124 + 6 * 12, u32_at(x + 124 + 6 * 12) + 1); /* slot 6: minute 66 */
    CHECK_INT(LOAD(x, len), -1);
    memcpy(x, good, len);
    x[104 + 7] = 0x7f; /* cur far beyond any instant */
    CHECK_INT(LOAD(x, len), -1);
    memcpy(x, good, len);
    put32(x + 116, 7); /* cur_slot */
    CHECK_INT(LOAD(x, len), -1);
    CHECK_INT(LOAD(good, len), 0);
    /* The longest window's image names its size; one second more is no configuration. */
    memcpy(x, good, len);
    put32(x + 8, BW__WINDOW_SECONDS_MAX);
    CHECK_INT(bw__machine_image_shape(x, len, &policy, &kind, &size), 0);
    put32(x + 8, BW__WINDOW_SECONDS_MAX + 1);
    CHECK_INT(bw__machine_image_shape(x, len, &policy, &kind, &size), -1);
#undef LOAD
}

/* Every time window fits a stored entry (machine image, entry header and all); count windows up to 892 calls. */
static void test_stored_windows_fit(void)
{
    bw__mcfg c = cfg_time(1, 1);
    long misfits = 0;
    for (uint32_t n = 1; n <= BW__WINDOW_SECONDS_MAX; n++) {
        c.window_size = n;
        misfits += !bw__shared_fits(&c);
    }
    CHECK_INT(misfits, 0);
    CHECK_INT(bw__shared_count_max(), 892);
    c.window_kind = BW_WINDOW_COUNT;
    c.window_size = 892;
    CHECK(bw__shared_fits(&c));
    c.window_size = 893;
    CHECK(!bw__shared_fits(&c));
}

int main(void)
{
    RUN(test_format1_loads);
    RUN(test_format1_of_a_wider_window);
    RUN(test_format2_round_trip);
    RUN(test_format2_refused);
    RUN(test_stored_windows_fit);
    return TEST_SUMMARY();
}
