/*
 * attach_timer.c — a breaker's auto-transition timer: an entry in the
 * scheduler its clock's breakers share (time/sched.h), whose deadline is the
 * machine's next timed transition and whose fire runs it (engine.h has the
 * locking).
 */
#include <stddef.h>

#include "core/engine.h"

static bw_breaker *owner_of(bw__sched_entry *e)
{
    return ((bw_timer *)((char *)e - offsetof(bw_timer, entry)))->b;
}

/* Run due timed transitions at `now` (on the scheduler's thread, or a manual clock's advance). */
static void timer_fire(bw__sched_entry *e, int64_t now)
{
    bw_breaker *b = owner_of(e);
    pending p;
    p.n = 0;
    change c = bw__change_begin(b);
    bw__machine_advance(&b->m, now);
    int after = bw__change_end(b, &c);
    bw__announce(b, &p, c.before, after, 0);
    if (c.trip)
        bw__coord_trip(b);
}

/* Called by the scheduler with its lock held: take only the machine's lock. */
static int64_t timer_deadline(bw__sched_entry *e)
{
    bw_breaker *b = owner_of(e);
    bw__spin_lock(&b->lock);
    int64_t d = bw__machine_deadline(&b->m);
    bw__spin_unlock(&b->lock);
    return d;
}

int bw__timer_attach(bw_breaker *b)
{
    bw_extra *x = bw__extra_of(b);
    if (!x)
        return BW_ENOMEM;
    bw_timer *t = &x->timer;
    t->sched = bw__sched_of(b->clock);
    if (!t->sched)
        return BW_ENOMEM;
    t->b = b;
    t->entry.deadline = timer_deadline;
    t->entry.fire = timer_fire;
    int rc = bw__sched_add(t->sched, &t->entry);
    if (rc == BW_OK)
        x->has_timer = 1;
    return rc;
}

void bw__timer_detach(bw_breaker *b)
{
    bw_timer *t = timer_of(b);
    if (!t)
        return;
    bw__sched_remove(t->sched, &t->entry); /* afterwards no timed transition of b runs or starts */
    b->extra->has_timer = 0;
}

BW_NOINLINE void bw__timer_kick(bw_breaker *b)
{
    bw_timer *t = timer_of(b);
    if (t)
        bw__sched_kick(t->sched, &t->entry);
}
