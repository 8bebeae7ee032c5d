/*
 * lifecycle.c — bw_fini: the end of what breakwater keeps for the whole
 * process (breakwater/common.h says what that is).
 */
#include "base/tick.h"
#include "breakwater/common.h"
#include "time/sched.h"

void bw_fini(void)
{
    bw__sched_fini(); /* the system clock's timer thread and its scheduler */
    bw__tick_fini();  /* the coarse clock's ticker */
}
