/*
 * view.c — adopting the fleet's circuit into a coordinated breaker's view (view.h).
 */
#include "machine/view.h"

void bw__view_init(bw__view *v)
{
    v->state = BW_STATE_CLOSED;
    v->until = 0;
    v->gen = 0;
    v->wait = 0;
    v->failed = 0;
}

void bw__view_adopt(bw__view *v, bw__machine *m, int state, uint64_t gen, int64_t left, int64_t wait, uint32_t failed,
                    int64_t now)
{
    int prev = v->state;
    uint64_t prev_gen = v->gen;
    if (state == BW_STATE_OPEN) {
        v->state = BW_STATE_OPEN;
        v->until = bw__sat_add(now, left);
    } else if (state == BW_STATE_HALF_OPEN) {
        v->state = BW_STATE_HALF_OPEN;
    } else {
        v->state = BW_STATE_CLOSED;
        /* A shared recovery cuts this process's own OPEN short (interlock's rule). */
        if ((prev == BW_STATE_OPEN || prev == BW_STATE_HALF_OPEN) && gen > prev_gen &&
            (m->state == BW_STATE_OPEN || m->state == BW_STATE_HALF_OPEN)) {
            bw__machine_reset(m);
            m->why = BW_REASON_SHARED;
        }
    }
    v->gen = gen;
    v->wait = wait;
    v->failed = failed;
}
