/*
 * fake_component.c — a sqlite component's library of another release
 * (test_components: the core must refuse it, saying so).
 */
#include "base/component.h"

__attribute__((visibility("default"))) const bw__component bw__component_sqlite = {1, 0x2, NULL};
