/*
 * heap.h — an intrusive binary min-heap of instants (internal; base layer).
 *
 * Each element embeds a bw__heap_node; the heap is an array of pointers to the
 * nodes, and every node knows its index, so that any element can be moved or
 * removed in O(log n). The owner of a heap provides the array and guarantees
 * room before a push: nothing here allocates. The scheduler (time/sched.c)
 * keeps its entries in one, and each store lane its coordinators
 * (share/lane.c). Not thread-safe: the owner's lock guards it.
 */
#ifndef BW_BASE_HEAP_H
#define BW_BASE_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct bw__heap_node {
    int64_t due;
    size_t slot; /* 1 + index in the heap, or 0 when not in it */
} bw__heap_node;

typedef struct bw__heap {
    bw__heap_node **a; /* room for every node that may be pushed: the owner's */
    size_t n;
} bw__heap;

static inline void bw__heap_put(bw__heap *h, size_t i, bw__heap_node *x)
{
    h->a[i] = x;
    x->slot = i + 1;
}

static inline void bw__heap_up(bw__heap *h, size_t i)
{
    bw__heap_node *x = h->a[i];
    while (i > 0 && h->a[(i - 1) / 2]->due > x->due) {
        bw__heap_put(h, i, h->a[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    bw__heap_put(h, i, x);
}

static inline void bw__heap_down(bw__heap *h, size_t i)
{
    bw__heap_node *x = h->a[i];
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= h->n)
            break;
        if (k + 1 < h->n && h->a[k + 1]->due < h->a[k]->due)
            k++;
        if (h->a[k]->due >= x->due)
            break;
        bw__heap_put(h, i, h->a[k]);
        i = k;
    }
    bw__heap_put(h, i, x);
}

/* Put x in the heap at `due`, or move it there if it is in it already. */
static inline void bw__heap_set(bw__heap *h, bw__heap_node *x, int64_t due)
{
    x->due = due;
    if (!x->slot)
        bw__heap_put(h, h->n++, x);
    bw__heap_down(h, x->slot - 1);
    bw__heap_up(h, x->slot - 1);
}

/* Take x out of the heap (nothing when it is not in it). */
static inline void bw__heap_remove(bw__heap *h, bw__heap_node *x)
{
    if (!x->slot)
        return;
    size_t i = x->slot - 1;
    x->slot = 0;
    bw__heap_node *last = h->a[--h->n];
    if (i == h->n)
        return;
    bw__heap_put(h, i, last);
    bw__heap_down(h, i);
    bw__heap_up(h, last->slot - 1);
}

/* The earliest node, or NULL when the heap is empty. */
static inline bw__heap_node *bw__heap_top(const bw__heap *h)
{
    return h->n ? h->a[0] : NULL;
}

#endif
