/*
 * image.h — a machine's state as portable bytes, so that a store can hold a
 * circuit (internal; layout in image.c).
 */
#ifndef BW_MACHINE_IMAGE_H
#define BW_MACHINE_IMAGE_H

#include <stddef.h>

#include "machine/machine.h"

/* Bytes an image of a machine with this configuration takes. */
size_t bw__machine_image_bytes(const bw__mcfg *cfg);

/* Write m's image to buf (bw__machine_image_bytes long); returns its length. */
size_t bw__machine_save(const bw__machine *m, unsigned char *buf);

/*
 * Make m the machine of an image, with configuration cfg and window memory
 * window_mem (bw__machine_window_bytes long): m needs no bw__machine_init
 * first, and nothing is cleared twice. Returns 0, or -1 for a malformed image,
 * after which m must be initialised afresh before use.
 */
int bw__machine_load(bw__machine *m, const bw__mcfg *cfg, void *window_mem, const unsigned char *buf, size_t len);

/*
 * Read only the state and generation of an image, without loading it. Returns 0,
 * or -1 for an image too short or not an image.
 */
int bw__machine_image_peek(const unsigned char *buf, size_t len, int *state, uint64_t *gen);

/*
 * Read the policy, window kind and window size an image was written with (so
 * that a reader without the configuration can load it: bw_store_read_circuit).
 * Returns 0, or -1 for an image too short, not an image, or of values no
 * configuration has.
 */
int bw__machine_image_shape(const unsigned char *buf, size_t len, int *policy, int *kind, uint32_t *size);

#endif
