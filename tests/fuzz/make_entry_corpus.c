/*
 * make_entry_corpus.c (tests/fuzz/) — writes the seed corpus of fuzz_entry.c:
 * real entries of every policy and window, taken from a store after a few calls
 * in each state, and opened for a Retry-After. Run by hand (./make_entry_corpus DIR); its output is checked
 * in under tests/fuzz/corpus/entry/.
 */
#include <stdio.h>
#include <string.h>

#include "breakwater/breakwater.h"
#include "share/circuit.h"

void bw_fuzz_entry_cfg(uint8_t sel, bw__mcfg *c);

static uint64_t voter; /* the instance a TRIP votes as (quorum 4) */

static bw_store_verdict apply(int op, const bw__mcfg *c, int64_t now, bw_store_entry *e, int *have, int outcome,
                              uint64_t *gen)
{
    bw__shared_op o;
    bw_store_entry next;
    memset(&o, 0, sizeof o);
    o.op = op;
    o.cfg = c;
    o.ttl = 86400 * BW_NS_PER_S;
    o.gen = *gen;
    o.outcome = outcome;
    o.state = BW_STATE_CLOSED;
    o.wait = 400 * BW_NS_PER_S; /* OPEN_FOR: a Retry-After longer than the configured wait */
    o.quorum = 4;
    o.instance = voter;
    bw_store_verdict v = bw__shared_apply(&o, now, *have ? e : NULL, &next);
    if (v == BW_STORE_PUT) {
        *e = next;
        *have = 1;
    } else if (v == BW_STORE_DELETE) {
        *have = 0;
    }
    if (op == BW__OP_ACQUIRE)
        *gen = o.out_gen;
    return v;
}

static int n_written;

static void dump(const char *dir, uint8_t sel, int op, const bw_store_entry *e)
{
    char path[512];
    snprintf(path, sizeof path, "%s/entry-%02x-%d-%02d", dir, sel, op, n_written++);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    uint8_t head[3] = {(uint8_t)(sel | (op << 4)), (uint8_t)(e->len & 0xff), (uint8_t)(e->len >> 8)};
    fwrite(head, 1, 3, f);
    fwrite(e->data, 1, e->len, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    for (int sel = 0; sel < 0x90; sel++) {
        if ((sel & 0x70) || ((sel & 8) && (sel & 0x87))) /* op bits; the consecutive policy has no window */
            continue;
        bw__mcfg c;
        bw_fuzz_entry_cfg((uint8_t)sel, &c);
        bw_store_entry e;
        int have = 0;
        uint64_t gen = BW__GEN_NO_ENTRY;
        int64_t now = 1000 * BW_NS_PER_S;
        static const int script[] = {BW_SUCCESS, BW_FAILURE, BW_FAILURE, BW_FAILURE, BW_SUCCESS, BW_SUCCESS};
        for (int i = 0; i < 6; i++) {
            apply(BW__OP_ACQUIRE, &c, now, &e, &have, 0, &gen);
            apply(BW__OP_RECORD, &c, now, &e, &have, script[i], &gen);
            if (have)
                dump(dir, (uint8_t)sel, 1 + i % 5, &e); /* CLOSED with history, OPEN, HALF_OPEN ... */
            now += 3 * BW_NS_PER_S;
        }
        apply(BW__OP_VERB, &c, now, &e, &have, 0, &gen);
        if (have)
            dump(dir, (uint8_t)sel, 2, &e);    /* a reset's fence */
        for (voter = 1; voter <= 3; voter++) { /* votes toward a quorum of 4: 1, 2, 3 of them */
            apply(BW__OP_TRIP, &c, now, &e, &have, 0, &gen);
            if (have)
                dump(dir, (uint8_t)sel, 3, &e);
            now += BW_NS_PER_S;
        }
        apply(BW__OP_OPEN_FOR, &c, now, &e, &have, 0, &gen);
        if (have)
            dump(dir, (uint8_t)sel, BW__OP_OPEN_FOR, &e); /* OPEN until a Retry-After's end */
    }
    printf("%d entries written to %s\n", n_written, dir);
    return 0;
}
