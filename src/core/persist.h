/*
 * persist.h — a machine's state as portable bytes, so that a store can hold a
 * circuit (internal; layout in persist.c).
 */
#ifndef BW_PERSIST_H
#define BW_PERSIST_H

#include <stddef.h>

#include "machine.h"

/* Bytes an image of a machine with this configuration takes. */
size_t bw__machine_image_bytes(const bw__mcfg *cfg);

/* Write m's image to buf (bw__machine_image_bytes long); returns its length. */
size_t bw__machine_save(const bw__machine *m, unsigned char *buf);

/*
 * Load an image into m, an initialised machine with its configuration and
 * window memory. Returns 0, or -1 for a malformed image (m is then unchanged
 * except perhaps its window, which the caller should treat as fresh).
 */
int bw__machine_load(bw__machine *m, const unsigned char *buf, size_t len);

/*
 * Read only the state and generation of an image, without loading it. Returns 0,
 * or -1 for an image too short or not an image.
 */
int bw__machine_image_peek(const unsigned char *buf, size_t len, int *state, uint64_t *gen);

#endif
