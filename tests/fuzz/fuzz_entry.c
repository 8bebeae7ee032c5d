/*
 * fuzz_entry.c (tests/fuzz/) — a libFuzzer target for what a store hands back:
 * the entry decoder (share/circuit.c) and the machine image decoder
 * (machine/image.c) behind it.
 *
 * Input: byte 0 picks the configuration and the operation (bits 0-1 and 7 the
 * window size, bit 2 the window kind, bit 3 the policy, bits 4-6 the
 * operation; bit 7 the sizes of time windows of buckets wider than a second,
 * image format 2, and of count windows near the largest that fits), bytes
 * 1-2 the entry's claimed length (little-endian; a store may claim more than
 * BW_STORE_DATA_MAX), the rest the entry's bytes. Any input must run without a
 * crash, a sanitizer report or a long loop; an update that writes must write an
 * entry that decodes again as a well-formed circuit. Built as a fuzzer with
 * clang (-DBW_FUZZ=ON); without it, replay.c drives the checked-in corpus
 * (real entries of every policy and window, tests/fuzz/make_entry_corpus.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/breakwater.h"
#include "machine/image.h"
#include "share/circuit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The configuration byte 0 names (make_entry_corpus.c uses the same). */
void bw_fuzz_entry_cfg(uint8_t sel, bw__mcfg *c);

void bw_fuzz_entry_cfg(uint8_t sel, bw__mcfg *c)
{
    static const uint32_t sizes[] = {1, 4, 10, 60};
    static const uint32_t time_wide[] = {61, 150, 3600, 30 * 86400}; /* buckets of 2 s, 3 s, 1 min, 12 h */
    static const uint32_t count_long[] = {100, 500, 891, 892};
    memset(c, 0, sizeof *c);
    c->policy = (sel & 8) ? BW_POLICY_CONSECUTIVE : BW_POLICY_RATE;
    c->window_kind = (sel & 4) ? BW_WINDOW_TIME : BW_WINDOW_COUNT;
    c->window_size = !(sel & 0x80) ? sizes[sel & 3] : (sel & 4) ? time_wide[sel & 3] : count_long[sel & 3];
    c->initial_state = BW_STATE_CLOSED;
    c->min_calls = 2;
    c->permitted = c->max_concurrent = 2;
    c->error_threshold = c->success_threshold = 2;
    c->half_open_capacity = 1;
    c->failure_rate = 0.5;
    c->slow_rate = 1;
    c->wait_multiplier = 2;
    c->wait = 10 * BW_NS_PER_S;
    c->max_wait_ho = 5 * BW_NS_PER_S;
}

static bw_store_verdict run(int op, const bw__mcfg *c, int64_t now, const bw_store_entry *cur, bw_store_entry *next,
                            bw__shared_op *out)
{
    bw_snapshot snap;
    memset(out, 0, sizeof *out);
    out->op = op;
    out->cfg = c;
    out->ttl = 86400 * BW_NS_PER_S;
    out->gen = op == BW__OP_RECORD && cur && cur->len >= 20 ? 0 : BW__GEN_NO_ENTRY;
    out->outcome = BW_FAILURE;
    out->state = BW_STATE_CLOSED;
    out->wait = 5 * BW_NS_PER_S; /* OPEN_FOR */
    out->quorum = 3;             /* a TRIP votes (share/circuit.c): the votes' decoder and encoder run too */
    out->instance = 0x77;
    out->snap = op == BW__OP_READ ? &snap : NULL;
    return bw__shared_apply(out, now, cur, next);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    bw__mcfg c;
    bw_fuzz_entry_cfg(data[0], &c);
    int op = ((data[0] >> 4) & 7) % 7; /* READ .. OPEN_FOR */
    static bw_store_entry cur, next;
    memset(&cur, 0, sizeof cur);
    cur.len = (uint32_t)data[1] | (uint32_t)data[2] << 8;
    cur.expires_at = BW_STORE_NEVER;
    size_t n = size - 3 < BW_STORE_DATA_MAX ? size - 3 : BW_STORE_DATA_MAX;
    memcpy(cur.data, data + 3, n);
    static const int64_t nows[] = {0, 1000 * BW_NS_PER_S, -1, INT64_MAX / 2, -(INT64_MAX / 2)};
    for (size_t i = 0; i < sizeof nows / sizeof nows[0]; i++) {
        /* A reader without a configuration (bw_store_read_circuit) decodes any bytes on their own shape. */
        bw_store_circuit sc;
        memset(&sc, 0, sizeof sc);
        if (cur.len <= BW_STORE_DATA_MAX && bw__shared_inspect(&cur, nows[i], &sc) == 0 &&
            (sc.snap.failed_calls > sc.snap.total_calls || sc.snap.state > BW_STATE_METRICS_ONLY))
            abort();
        bw__shared_op o;
        if (run(op, &c, nows[i], &cur, &next, &o) != BW_STORE_PUT)
            continue;
        if (next.len < 1 || next.len > BW_STORE_DATA_MAX)
            abort(); /* a write of a bad length */
        bw__shared_op back;
        bw_store_entry unused;
        run(BW__OP_READ, &c, nows[i], &next, &unused, &back);
        int state;
        uint64_t gen;
        /* What we write must decode, unless a generation grown past BW__GEN_MAX (from a stored one just below). */
        if (!back.found && bw__machine_image_peek(next.data + 12, next.len - 12, &state, &gen) == 0)
            abort();
    }
    return 0;
}
