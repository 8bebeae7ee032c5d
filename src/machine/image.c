/*
 * image.c — the machine as bytes, for stores (see image.h).
 *
 * Layout (little-endian, fixed width), format 1:
 *   u32 magic "BWM1"  u8 policy  u8 window kind  u8 state  u8 0  u32 window size
 *   u64 gen  i64 opened_at  i64 open_wait  i64 ho_since
 *   u32 failed_rounds admitted in_flight completed probe_failures probe_slows
 *       inconclusive cerr csucc
 *   rate policy only: u64 total failed slow  i64 cur  u32 head cur_slot,
 *       then the window's memory (count: one byte a call; time: three u32 a
 *       bucket, one bucket a second: `size` of them, cur a second)
 * Format 2, for a time window whose buckets are wider than a second (time:N
 * with N > 60, window.h): magic "BWM2", the same fields, and after cur_slot a
 * u32 width (seconds a bucket; in [2, size]), then ceil(size / width) buckets
 * (cur a bucket number: floor(t / width)).
 *
 * Compatibility. Every other image is still written as format 1, which the
 * versions before format 2 read (their time windows had one-second buckets and
 * at most 74 of them), so a fleet that upgrades one process at a time keeps its
 * circuits. Both formats are read. An image whose policy or window (kind,
 * size, bucket width) differs from the machine's configuration loads its state
 * and counters but an empty window: clients of one stored circuit are
 * expected to share its configuration, and a format-1 image of time:61 to
 * time:74 (one-second buckets, now two) is such an image.
 */
#include "machine/image.h"

#include "breakwater/common.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAGIC 0x314d5742u  /* "BWM1" */
#define MAGIC2 0x324d5742u /* "BWM2": a time window of buckets wider than a second */

typedef struct cursor {
    unsigned char *p;
    const unsigned char *r;
    size_t left;
    int bad;
} cursor;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_IS_LE 1 /* the image's byte order: copy fields as they are */
#else
#define HOST_IS_LE 0
#endif

static void put(cursor *c, uint64_t v, int bytes)
{
    if (HOST_IS_LE) {
        memcpy(c->p, &v, (size_t)bytes);
        c->p += bytes;
        return;
    }
    for (int i = 0; i < bytes; i++)
        *c->p++ = (unsigned char)(v >> (8 * i));
}

/* Read `bytes` that the caller knows are there (the length was checked once). */
static uint64_t rd(cursor *c, int bytes)
{
    uint64_t v = 0;
    if (HOST_IS_LE)
        memcpy(&v, c->r, (size_t)bytes);
    else
        for (int i = 0; i < bytes; i++)
            v |= (uint64_t)c->r[i] << (8 * i);
    c->r += bytes;
    return v;
}

static uint64_t get(cursor *c, int bytes)
{
    if (c->left < (size_t)bytes) {
        c->bad = 1;
        return 0;
    }
    c->left -= (size_t)bytes;
    return rd(c, bytes);
}

#define HEAD_BYTES (4 + 4 + 4 + 8 * 4 + 4 * 9)
#define WIN_HEAD_BYTES (8 * 4 + 4 * 2)
#define WIDTH_BYTES 4 /* format 2's bucket width */

/* Whether a machine of this configuration is written as format 2: a time window of buckets wider than a second. */
static int wide(const bw__mcfg *cfg)
{
    return cfg->policy == BW_POLICY_RATE && cfg->window_kind == BW_WINDOW_TIME &&
           cfg->window_size > BW__WINDOW_BUCKETS; /* bw__window_width > 1 */
}

size_t bw__machine_image_bytes(const bw__mcfg *cfg)
{
    size_t n = HEAD_BYTES;
    if (cfg->policy == BW_POLICY_RATE)
        n += WIN_HEAD_BYTES + (wide(cfg) ? WIDTH_BYTES : 0) + bw__window_bytes(cfg->window_kind, cfg->window_size);
    return n;
}

size_t bw__machine_save(const bw__machine *m, unsigned char *buf)
{
    cursor c = {buf, NULL, 0, 0};
    int v2 = wide(&m->cfg);
    put(&c, v2 ? MAGIC2 : MAGIC, 4);
    put(&c, m->cfg.policy, 1);
    put(&c, m->cfg.window_kind, 1);
    put(&c, m->state, 1);
    put(&c, 0, 1);
    put(&c, m->cfg.window_size, 4);
    put(&c, m->gen, 8);
    put(&c, (uint64_t)m->opened_at, 8);
    put(&c, (uint64_t)m->open_wait, 8);
    put(&c, (uint64_t)m->ho_since, 8);
    const uint32_t u[] = {m->failed_rounds, m->admitted,     m->in_flight, m->completed, m->probe_failures,
                          m->probe_slows,   m->inconclusive, m->cerr,      m->csucc};
    for (int i = 0; i < 9; i++)
        put(&c, u[i], 4);
    if (m->cfg.policy == BW_POLICY_RATE) {
        const bw__window *w = &m->win;
        put(&c, w->total, 8);
        put(&c, w->failed, 8);
        put(&c, w->slow, 8);
        put(&c, (uint64_t)w->cur, 8);
        put(&c, w->head, 4);
        put(&c, w->cur_slot, 4);
        if (v2)
            put(&c, (uint64_t)(w->width / 1000000000), 4);
        size_t wb = bw__window_bytes(w->kind, m->cfg.window_size);
        if (w->kind == BW_WINDOW_COUNT) {
            memcpy(c.p, w->mem, wb);
            c.p += wb;
        } else {
            const bw__bucket *b = w->mem;
            for (uint32_t i = 0; i < w->size; i++) {
                put(&c, b[i].total, 4);
                put(&c, b[i].failed, 4);
                put(&c, b[i].slow, 4);
            }
        }
    }
    return (size_t)(c.p - buf);
}

static int magic_ok(uint64_t m)
{
    return m == MAGIC || m == MAGIC2;
}

int bw__machine_image_peek(const unsigned char *buf, size_t len, int *state, uint64_t *gen)
{
    cursor c = {NULL, buf, len, 0};
    if (!magic_ok(get(&c, 4)))
        return -1;
    get(&c, 2);
    *state = (int)get(&c, 1);
    get(&c, 5);
    *gen = get(&c, 8);
    return c.bad || *gen > BW__GEN_MAX ? -1 : 0;
}

int bw__machine_image_shape(const unsigned char *buf, size_t len, int *policy, int *kind, uint32_t *size)
{
    cursor c = {NULL, buf, len, 0};
    uint64_t magic = get(&c, 4);
    if (!magic_ok(magic))
        return -1;
    *policy = (int)get(&c, 1);
    *kind = (int)get(&c, 1);
    if (magic == MAGIC2 && (*policy != BW_POLICY_RATE || *kind != BW_WINDOW_TIME))
        return -1; /* format 2 is a time window's */
    get(&c, 2);
    *size = (uint32_t)get(&c, 4);
    if (c.bad || (*policy != BW_POLICY_RATE && *policy != BW_POLICY_CONSECUTIVE) ||
        (*kind != BW_WINDOW_COUNT && *kind != BW_WINDOW_TIME))
        return -1;
    if (*policy == BW_POLICY_RATE &&
        (*size < 1 || *size > (*kind == BW_WINDOW_COUNT ? 1000000u : BW__WINDOW_SECONDS_MAX)))
        return -1;
    return 0;
}

/*
 * What the encoder can produce, and so all a decoder accepts: an image is read
 * from a store, as untrusted as a file from disk. Instants (and a time window's newest bucket, in ns)
 * lie within +-BW__INSTANT_MAX and waits within [0, BW__WAIT_CEILING], so no
 * sum or difference the machine forms of them overflows; the generation leaves
 * room to grow and never reaches the "no entry" mark; probe counts are
 * consistent with each other; the window's counts are exactly the sum of its
 * memory. Nothing here loops more than the window's size, which comes from the
 * configuration, not from the image.
 */
static int instant_ok(int64_t t)
{
    return t >= -BW__INSTANT_MAX && t <= BW__INSTANT_MAX;
}

/*
 * A count window's slots: flag bits only (used | failed | slow, window.c), no
 * failed or slow without used, and the counts their sums. Sixteen slots a step
 * with SSE2 (every x86-64 has it); the last partial step on a zero-padded copy
 * (an empty slot is valid and counts nothing). No early exit.
 */
#ifdef __SSE2__
typedef struct slot_sums {
    __m128i bad, t, f, s;
} slot_sums;

static void slots16(slot_sums *a, const unsigned char *p)
{
    const __m128i one = _mm_set1_epi8(1), seven = _mm_set1_epi8(7), zero = _mm_setzero_si128();
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* Shifts within 16-bit lanes: the bits a byte gets from its neighbour are masked off. */
    __m128i used = _mm_and_si128(v, one), fb = _mm_and_si128(_mm_srli_epi16(v, 1), one),
            sb = _mm_and_si128(_mm_srli_epi16(v, 2), one);
    a->bad = _mm_or_si128(a->bad, _mm_andnot_si128(seven, v));
    a->bad = _mm_or_si128(a->bad, _mm_andnot_si128(used, _mm_or_si128(fb, sb)));
    a->t = _mm_add_epi64(a->t, _mm_sad_epu8(used, zero)); /* two sums of eight bytes each */
    a->f = _mm_add_epi64(a->f, _mm_sad_epu8(fb, zero));
    a->s = _mm_add_epi64(a->s, _mm_sad_epu8(sb, zero));
}

static uint64_t sum2(__m128i v)
{
    return (uint64_t)_mm_cvtsi128_si64(v) + (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v));
}

static int count_window_ok(const unsigned char *mem, uint32_t size, uint64_t total, uint64_t failed, uint64_t slow)
{
    slot_sums a = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
    uint32_t i = 0;
    for (; i + 16 <= size; i += 16)
        slots16(&a, mem + i);
    if (i < size) {
        unsigned char tail[16] = {0};
        memcpy(tail, mem + i, size - i);
        slots16(&a, tail);
    }
    return _mm_movemask_epi8(_mm_cmpeq_epi8(a.bad, _mm_setzero_si128())) == 0xffff && sum2(a.t) == total &&
           sum2(a.f) == failed && sum2(a.s) == slow;
}
#else
static int count_window_ok(const unsigned char *mem, uint32_t size, uint64_t total, uint64_t failed, uint64_t slow)
{
    uint64_t t = 0, f = 0, sl = 0;
    unsigned bad = 0;
    for (uint32_t i = 0; i < size; i++) {
        unsigned v = mem[i], used = v & 1u, fb = (v >> 1) & 1u, sb = (v >> 2) & 1u;
        bad |= (v & ~7u) | ((fb | sb) & ~used);
        t += used;
        f += fb;
        sl += sb;
    }
    return !bad && t == total && f == failed && sl == slow;
}
#endif

int bw__machine_load(bw__machine *m, const bw__mcfg *cfg, void *window_mem, const unsigned char *buf, size_t len)
{
    bw__machine_bind(m, cfg, window_mem);
    bw__window *w = &m->win;
    cursor c = {NULL, buf, len, 0};
    /* The length first: exactly what the image's own format, policy, kind, size (and width) take. */
    if (len < HEAD_BYTES)
        return -1;
    uint32_t magic = (uint32_t)rd(&c, 4);
    unsigned policy = (unsigned)rd(&c, 1), kind = (unsigned)rd(&c, 1), state = (unsigned)rd(&c, 1);
    unsigned pad = (unsigned)rd(&c, 1);
    uint32_t size = (uint32_t)rd(&c, 4);
    if (pad != 0 || (policy != BW_POLICY_RATE && policy != BW_POLICY_CONSECUTIVE) ||
        (kind != BW_WINDOW_COUNT && kind != BW_WINDOW_TIME))
        return -1;
    /* Format 1: `size` slots (calls, or one-second buckets). Format 2: a time window's ceil(size / width) buckets. */
    uint64_t width = 1, slots = size;
    size_t win_head = WIN_HEAD_BYTES;
    int v2 = magic != MAGIC;
    if (v2) {
        if (magic != MAGIC2 || policy != BW_POLICY_RATE || kind != BW_WINDOW_TIME ||
            len < HEAD_BYTES + WIN_HEAD_BYTES + WIDTH_BYTES)
            return -1;
        cursor at = {NULL, buf + HEAD_BYTES + WIN_HEAD_BYTES, WIDTH_BYTES, 0};
        width = rd(&at, WIDTH_BYTES);
        if (width < 2 || width > size)
            return -1; /* one-second buckets are written as format 1 */
        slots = (size + width - 1) / width;
        win_head += WIDTH_BYTES;
    }
    if ((uint64_t)len !=
        HEAD_BYTES +
            (policy == BW_POLICY_RATE ? win_head + slots * (kind == BW_WINDOW_TIME ? sizeof(bw__bucket) : 1) : 0))
        return -1;
    uint64_t gen = rd(&c, 8);
    int64_t opened_at = (int64_t)rd(&c, 8), open_wait = (int64_t)rd(&c, 8), ho_since = (int64_t)rd(&c, 8);
    uint32_t u[9];
    for (int i = 0; i < 9; i++)
        u[i] = (uint32_t)rd(&c, 4);
    if (state > BW_STATE_METRICS_ONLY || gen > BW__GEN_MAX || !instant_ok(opened_at) || !instant_ok(ho_since) ||
        open_wait < 0 || open_wait > BW__WAIT_CEILING)
        return -1;
    /* admitted <= the most a round may admit (so it never wraps), and every probe admitted is in flight or
     * completed (machine.c: so no outcome counted makes completed pass admitted); completed >= probe failures,
     * probe slows. */
    if (u[1] > BW__PROBES_MAX || (uint64_t)u[2] + u[3] > u[1] || u[4] > u[3] || u[5] > u[3])
        return -1;
    m->state = (uint8_t)state;
    m->gen = gen;
    m->opened_at = opened_at;
    m->open_wait = open_wait;
    m->ho_since = ho_since;
    m->failed_rounds = u[0];
    m->admitted = u[1];
    m->in_flight = u[2];
    m->completed = u[3];
    m->probe_failures = u[4];
    m->probe_slows = u[5];
    m->inconclusive = u[6];
    m->cerr = u[7];
    m->csucc = u[8];
    if (m->cfg.policy != BW_POLICY_RATE)
        return 0;
    if (policy != m->cfg.policy || kind != w->kind || size != m->cfg.window_size ||
        (kind == BW_WINDOW_TIME && (int64_t)width * 1000000000 != w->width)) {
        bw__window_clear(w); /* another configuration's window: start it empty */
        return 0;
    }
    uint64_t total = rd(&c, 8), failed = rd(&c, 8), slow = rd(&c, 8);
    int64_t cur = (int64_t)rd(&c, 8);
    uint32_t head = (uint32_t)rd(&c, 4), cur_slot = (uint32_t)rd(&c, 4);
    if (v2)
        rd(&c, WIDTH_BYTES); /* read above */
    /* The configuration is the image's: w->size == slots, and what is left is the window's memory. */
    if (head >= w->size || cur_slot >= w->size || failed > total || slow > total)
        return -1;
    if (w->kind == BW_WINDOW_COUNT) {
        if (cur != INT64_MIN || cur_slot != 0 || total > w->size || !count_window_ok(c.r, w->size, total, failed, slow))
            return -1;
        memcpy(w->mem, c.r, w->size);
    } else {
        /* A bucket in range (so cur * width fits), its slot, and the counts the buckets' sums. */
        if (head != 0 || (cur == INT64_MIN ? total != 0 || cur_slot != 0
                                           : cur < bw__window_bucket_of(w, -BW__INSTANT_MAX) ||
                                                 cur > bw__window_bucket_of(w, BW__INSTANT_MAX)))
            return -1;
        bw__bucket *b = w->mem;
        uint64_t t = 0, f = 0, sl = 0;
        for (uint32_t i = 0; i < w->size; i++) {
            b[i].total = (uint32_t)rd(&c, 4);
            b[i].failed = (uint32_t)rd(&c, 4);
            b[i].slow = (uint32_t)rd(&c, 4);
            if (b[i].failed > b[i].total || b[i].slow > b[i].total)
                return -1;
            t += b[i].total;
            f += b[i].failed;
            sl += b[i].slow;
        }
        if (t != total || f != failed || sl != slow)
            return -1;
    }
    w->total = total;
    w->failed = failed;
    w->slow = slow;
    w->head = head;
    w->cur_slot = cur_slot;
    if (cur != INT64_MIN) {
        bw__window_set_bucket(w, cur);
        if (w->cur_slot != cur_slot)
            return -1;
    }
    return 0;
}
