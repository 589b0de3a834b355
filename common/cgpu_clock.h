/*
 * coll/gpu base: time and spinning.
 */
#ifndef CGPU_CLOCK_H
#define CGPU_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/** CLOCK_MONOTONIC in nanoseconds: durations, timeouts, trace timestamps. */
uint64_t cgpu_now_ns(void);

/** The CLOCK_REALTIME time @p ns from now: the deadline of a pthread timed wait. */
struct timespec cgpu_deadline_after_ns(uint64_t ns);

/** One iteration of a spin-wait: tells the core that this thread is polling. */
static inline void cgpu_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#ifdef __cplusplus
}
#endif

#endif /* CGPU_CLOCK_H */
