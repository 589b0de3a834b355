/*
 * coll/gpu base: time.
 */
#include "cgpu_clock.h"

uint64_t cgpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

struct timespec cgpu_deadline_after_ns(uint64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    ns += (uint64_t) t.tv_nsec;
    t.tv_sec += (time_t) (ns / 1000000000ull);
    t.tv_nsec = (long) (ns % 1000000000ull);
    return t;
}
