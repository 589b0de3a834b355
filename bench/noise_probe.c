/*
 * noise_probe: how often the machine takes a CPU away from a thread that never yields.
 *
 * One thread per CPU named, pinned there, reads CLOCK_MONOTONIC (vDSO, no system call) in
 * a loop for the given seconds; every gap between two reads longer than the threshold is a
 * time the thread did not run (an interrupt, another thread, or the hypervisor holding the
 * virtual CPU). Prints per CPU: gaps by length, the longest, the time lost, and the steal
 * time /proc/stat counted for that CPU meanwhile; with a log path, every gap over 20 us as
 * "cpu start_ns length_ns" (CLOCK_MONOTONIC, comparable with bench_colls' stall log).
 *
 * SIGINT or SIGTERM ends the reads early and still prints (to probe while a job runs).
 *
 * Usage: noise_probe seconds threshold_us cpu,cpu,...|all [log]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 1024
#define MAX_LOGGED 4096
/* gap classes (us): threshold-20, 20-50, 50-200, 200-1000, over 1000 */
#define NCLASS 5

typedef struct {
    int cpu;
    int pinned;
    uint64_t gaps[NCLASS];
    uint64_t longest_ns, lost_ns, reads;
    int nlog;
    uint64_t log_start[MAX_LOGGED], log_len[MAX_LOGGED];
} probe_t;

static double seconds;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void) sig;
    stop = 1;
}
static uint64_t threshold_ns;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static int class_of(uint64_t ns)
{
    return ns < 20000 ? 0 : ns < 50000 ? 1 : ns < 200000 ? 2 : ns < 1000000 ? 3 : 4;
}

static void *spin(void *arg)
{
    probe_t *p = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->cpu, &set);
    p->pinned = 0 == pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    const uint64_t end = now_ns() + (uint64_t) (seconds * 1e9);
    uint64_t prev = now_ns();
    for (;;) {
        const uint64_t t = now_ns();
        const uint64_t d = t - prev;
        ++p->reads;
        if (d > threshold_ns) {
            ++p->gaps[class_of(d)];
            p->lost_ns += d;
            if (d > p->longest_ns) {
                p->longest_ns = d;
            }
            if (d >= 20000 && p->nlog < MAX_LOGGED) {
                p->log_start[p->nlog] = prev;
                p->log_len[p->nlog++] = d;
            }
        }
        if (t >= end || stop) {
            break;
        }
        prev = t;
    }
    return NULL;
}

/* steal ticks of each CPU from /proc/stat (the 8th value of a "cpuN" line) */
static void read_steal(unsigned long long *steal, int ncpu)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    if (NULL == f) {
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        int cpu;
        unsigned long long v[8];
        if (8 + 1 == sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0],
                            &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) &&
            cpu >= 0 && cpu < ncpu) {
            steal[cpu] = v[7];
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s seconds threshold_us cpu,cpu,...|all [log]\n", argv[0]);
        return 2;
    }
    seconds = atof(argv[1]);
    threshold_ns = (uint64_t) (atof(argv[2]) * 1000.0);
    const int ncpu = (int) sysconf(_SC_NPROCESSORS_ONLN);
    if (seconds <= 0 || threshold_ns == 0 || ncpu <= 0 || ncpu > MAX_CPUS) {
        fprintf(stderr, "noise_probe: bad seconds, threshold or CPU count\n");
        return 2;
    }
    int cpus[MAX_CPUS], n = 0;
    if (0 == strcmp(argv[3], "all")) {
        for (int c = 0; c < ncpu; ++c) {
            cpus[n++] = c;
        }
    } else {
        char *save = NULL, *list = strdup(argv[3]);
        for (char *tok = strtok_r(list, ",", &save); tok && n < MAX_CPUS;
             tok = strtok_r(NULL, ",", &save)) {
            const int c = atoi(tok);
            if (c < 0 || c >= ncpu) {
                fprintf(stderr, "noise_probe: no CPU %d (this machine has %d)\n", c, ncpu);
                return 2;
            }
            cpus[n++] = c;
        }
        free(list);
    }
    probe_t *p = calloc((size_t) n, sizeof(*p));
    pthread_t *th = calloc((size_t) n, sizeof(*th));
    unsigned long long *s0 = calloc((size_t) ncpu, sizeof(*s0)),
                       *s1 = calloc((size_t) ncpu, sizeof(*s1));
    if (!p || !th || !s0 || !s1) {
        fprintf(stderr, "noise_probe: out of memory\n");
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    read_steal(s0, ncpu);
    const uint64_t t_start = now_ns();
    for (int i = 0; i < n; ++i) {
        p[i].cpu = cpus[i];
        if (pthread_create(&th[i], NULL, spin, &p[i])) {
            fprintf(stderr, "noise_probe: no thread for CPU %d\n", cpus[i]);
            return 1;
        }
    }
    for (int i = 0; i < n; ++i) {
        pthread_join(th[i], NULL);
    }
    read_steal(s1, ncpu);
    const double ran_s = (double) (now_ns() - t_start) / 1e9;
    const long hz = sysconf(_SC_CLK_TCK);
    printf("# noise_probe: %.1f s, gaps over %.1f us, %d CPUs of %d\n", ran_s,
           threshold_ns / 1e3, n, ncpu);
    printf("%4s %6s %9s %8s %8s %8s %8s %10s %10s %9s\n", "cpu", "pinned", "<20us", "20-50",
           "50-200", "200-1000", ">1ms", "longest_us", "lost_us", "steal_ms");
    for (int i = 0; i < n; ++i) {
        const int c = p[i].cpu;
        printf("%4d %6s %9llu %8llu %8llu %8llu %8llu %10.1f %10.1f %9.1f\n", c,
               p[i].pinned ? "yes" : "NO", (unsigned long long) p[i].gaps[0],
               (unsigned long long) p[i].gaps[1], (unsigned long long) p[i].gaps[2],
               (unsigned long long) p[i].gaps[3], (unsigned long long) p[i].gaps[4],
               p[i].longest_ns / 1e3, p[i].lost_ns / 1e3,
               hz > 0 ? (double) (s1[c] - s0[c]) * 1000.0 / (double) hz : 0.0);
    }
    if (argc > 4) {
        FILE *f = fopen(argv[4], "w");
        if (NULL == f) {
            perror(argv[4]);
            return 1;
        }
        for (int i = 0; i < n; ++i) {
            for (int k = 0; k < p[i].nlog; ++k) {
                fprintf(f, "%d %llu %llu\n", p[i].cpu, (unsigned long long) p[i].log_start[k],
                        (unsigned long long) p[i].log_len[k]);
            }
        }
        fclose(f);
    }
    return 0;
}
