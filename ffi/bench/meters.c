/*
 * Colour-blind srTCM and trTCM per packet: DPDK's rte_meter beside leakgate's meters through
 * the C ABI, in one process, contenders interleaved round by round, medians reported.
 *
 * Every contender reads its clock once per burst of 32 packets of 64 bytes and meters the
 * burst at that time (caller time): rte_meter with rte_rdtsc() (CPU cycles, its unit),
 * leakgate with lg_now_ns(). Two regimes: green (rates far above the offered load: every
 * packet takes its buckets, so every check writes) and red (a tiny rate whose buckets are
 * empty: every packet is refused). On 1 thread: rte_meter vs leakgate's shared (lock-free)
 * functions and its _excl functions (the meter owned by the thread, as an rte_meter is), and
 * in green the floor of the shared path: a loop doing only the two uncontended lock cmpxchg a
 * green packet does. On 2 threads sharing one meter: rte_meter is not thread-safe, so it is
 * behind a pthread mutex, taken per packet or per burst; leakgate's meters are lock-free and
 * shared as they are; and the leased meters (lg_leased_srtcm, lg_leased_trtcm: green packets
 * from per-thread-slot leases of green bytes, on 1 and 2 threads; and through each thread's own
 * handle, lg_leased_*_local). ns per packet is wall time
 * over the packets of all threads.
 *
 * Then a bound check: 2 threads race for a committed burst of 100 packets at one time, 200
 * times; leakgate never colours more than 100 green, rte_meter without its lock may.
 *
 * Built and run by ffi/bench/run.sh (not part of CI). Without DPDK (-DNO_DPDK) only leakgate's
 * figures are printed.
 */
#define _GNU_SOURCE
#include "leakgate.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef NO_DPDK
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_meter.h>
#endif

#define BURST 32
#define PACKET 64
#define MAX_THREADS 2
#define MAX_CONTENDERS 16

static long slice_bursts = 1L << 15; /* bursts per thread per slice: 1M packets */

static double wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- the meters, behind one signature: meter a burst, count colours ---- */

enum kind { SR, TR };

struct meter {
    enum kind kind;
    lg_srtcm *lg_sr;
    lg_trtcm *lg_tr;
    lg_leased_srtcm *lg_leased_sr;
    lg_leased_trtcm *lg_leased_tr;
#ifndef NO_DPDK
    struct rte_meter_srtcm_profile sr_profile;
    struct rte_meter_trtcm_profile tr_profile;
    struct rte_meter_srtcm sr;
    struct rte_meter_trtcm tr;
#endif
    pthread_mutex_t lock;
};

typedef void (*burst_fn)(struct meter *, long colours[3]);

static void lg_burst(struct meter *m, long colours[3]) {
    uint64_t now = lg_now_ns();
    if (m->kind == SR)
        for (int i = 0; i < BURST; i++) colours[lg_srtcm_color_blind_at(m->lg_sr, PACKET, now) & 3]++;
    else
        for (int i = 0; i < BURST; i++) colours[lg_trtcm_color_blind_at(m->lg_tr, PACKET, now) & 3]++;
}

/* The leased meters: a green packet from the calling thread's slot's lease, no write to the
   meter's words; every other packet the shared meter's decision. */
static void lg_leased_burst(struct meter *m, long colours[3]) {
    uint64_t now = lg_now_ns();
    if (m->kind == SR)
        for (int i = 0; i < BURST; i++) colours[lg_leased_srtcm_color_blind_at(m->lg_leased_sr, PACKET, now) & 3]++;
    else
        for (int i = 0; i < BURST; i++) colours[lg_leased_trtcm_color_blind_at(m->lg_leased_tr, PACKET, now) & 3]++;
}

/* The same, each thread naming its slot (its index, as a pinned core passes its number): no
   thread-local lookup. */
static _Thread_local size_t my_slot;

static void lg_leased_slot_burst(struct meter *m, long colours[3]) {
    uint64_t now = lg_now_ns();
    size_t slot = my_slot;
    if (m->kind == SR)
        for (int i = 0; i < BURST; i++)
            colours[lg_leased_srtcm_color_blind_at_slot(m->lg_leased_sr, slot, PACKET, now) & 3]++;
    else
        for (int i = 0; i < BURST; i++)
            colours[lg_leased_trtcm_color_blind_at_slot(m->lg_leased_tr, slot, PACKET, now) & 3]++;
}

/* Each thread's own handle on the leased meter (lg_leased_*_local): a green packet is a
   subtraction from the handle's lease, no atomic write. Made at the thread's first burst and
   freed when the thread's slice ends (work()), giving its bytes back to its slot. */
static _Thread_local lg_leased_srtcm_local *my_sr_local;
static _Thread_local lg_leased_trtcm_local *my_tr_local;

static void lg_local_burst(struct meter *m, long colours[3]) {
    uint64_t now = lg_now_ns();
    if (m->kind == SR) {
        if (!my_sr_local && lg_leased_srtcm_local_new(m->lg_leased_sr, &my_sr_local) != LG_OK) exit(1);
        lg_leased_srtcm_local *local = my_sr_local;
        for (int i = 0; i < BURST; i++) colours[lg_leased_srtcm_local_color_blind_at(local, PACKET, now) & 3]++;
    } else {
        if (!my_tr_local && lg_leased_trtcm_local_new(m->lg_leased_tr, &my_tr_local) != LG_OK) exit(1);
        lg_leased_trtcm_local *local = my_tr_local;
        for (int i = 0; i < BURST; i++) colours[lg_leased_trtcm_local_color_blind_at(local, PACKET, now) & 3]++;
    }
}

/* The exclusive functions: the meter is this thread's alone (one meter per core or queue, as
   an rte_meter is), so leakgate reads and writes its words without atomic read-modify-writes. */
static void lg_excl_burst(struct meter *m, long colours[3]) {
    uint64_t now = lg_now_ns();
    if (m->kind == SR)
        for (int i = 0; i < BURST; i++) colours[lg_srtcm_color_blind_at_excl(m->lg_sr, PACKET, now) & 3]++;
    else
        for (int i = 0; i < BURST; i++) colours[lg_trtcm_color_blind_at_excl(m->lg_tr, PACKET, now) & 3]++;
}

/* The floor of the shared path for a green packet: what its two buckets' atomics cost and
   nothing else. Per burst the same clock read as the meters; per packet two uncontended
   compare-and-swaps (x86: lock cmpxchg), each on a word loaded just before, both words on one
   cache line: word A then word C of an srTCM, P then C of a trTCM (an acquire load and a
   relaxed CAS, as leakgate's; on x86 every ordering is the same mov and lock cmpxchg). No rate
   arithmetic, no call through the C ABI. */
static struct {
    _Alignas(128) _Atomic uint64_t words[2];
} floor_words;

static void floor_burst(struct meter *m, long colours[3]) {
    (void)m;
    uint64_t now = lg_now_ns();
    for (int i = 0; i < BURST; i++) {
        int green = 1;
        for (int w = 0; w < 2; w++) {
            uint64_t old = atomic_load_explicit(&floor_words.words[w], memory_order_acquire);
            uint64_t new = (old > now ? old : now) + PACKET;
            green &= atomic_compare_exchange_weak_explicit(&floor_words.words[w], &old, new,
                                                            memory_order_relaxed, memory_order_relaxed);
        }
        colours[green ? 0 : 2]++;
    }
}

#ifndef NO_DPDK
static inline int rte_one(struct meter *m, uint64_t now) {
    return m->kind == SR ? rte_meter_srtcm_color_blind_check(&m->sr, &m->sr_profile, now, PACKET)
                         : rte_meter_trtcm_color_blind_check(&m->tr, &m->tr_profile, now, PACKET);
}

static void rte_burst(struct meter *m, long colours[3]) {
    uint64_t now = rte_rdtsc();
    for (int i = 0; i < BURST; i++) colours[rte_one(m, now) & 3]++;
}

/* The lock taken for each packet: what sharing one rte_meter between cores costs per check. */
static void rte_locked_packet(struct meter *m, long colours[3]) {
    uint64_t now = rte_rdtsc();
    for (int i = 0; i < BURST; i++) {
        pthread_mutex_lock(&m->lock);
        int c = rte_one(m, now);
        pthread_mutex_unlock(&m->lock);
        colours[c & 3]++;
    }
}

/* The lock held for a whole burst: cheaper, but each core's burst waits for the other's. */
static void rte_locked_burst(struct meter *m, long colours[3]) {
    pthread_mutex_lock(&m->lock);
    uint64_t now = rte_rdtsc();
    for (int i = 0; i < BURST; i++) colours[rte_one(m, now) & 3]++;
    pthread_mutex_unlock(&m->lock);
}
#endif

/* ---- a slice: one contender on N threads for slice_bursts bursts each ---- */

/* Threads start together: each spins until all have arrived (a futex barrier would wake them
   tens of microseconds apart). */
struct start_line {
    atomic_int arrived;
    int threads;
};

static void wait_for_all(struct start_line *line) {
    atomic_fetch_add(&line->arrived, 1);
    while (atomic_load(&line->arrived) < line->threads) {
    }
}

struct worker {
    struct meter *meter;
    burst_fn fn;
    struct start_line *start;
    long colours[3];
    double began, ended;
    int index;
};

static void *work(void *arg) {
    struct worker *w = arg;
    wait_for_all(w->start);
    w->began = wall_ns();
    my_slot = (size_t)w->index;
    for (long b = 0; b < slice_bursts; b++) w->fn(w->meter, w->colours);
    w->ended = wall_ns();
    lg_leased_srtcm_local_free(my_sr_local);
    lg_leased_trtcm_local_free(my_tr_local);
    my_sr_local = NULL;
    my_tr_local = NULL;
    return NULL;
}

/* ns per packet: wall time from the first thread's start to the last one's end, over the
   packets of all threads. Adds the colours seen to `seen`. */
static double slice(struct meter *m, burst_fn fn, int threads, long seen[3]) {
    pthread_t tid[MAX_THREADS];
    struct worker w[MAX_THREADS];
    struct start_line start = {0, threads};
    for (int t = 0; t < threads; t++) {
        w[t] = (struct worker){m, fn, &start, {0, 0, 0}, 0, 0, t};
        pthread_create(&tid[t], NULL, work, &w[t]);
    }
    double began = 0, ended = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        began = t == 0 || w[t].began < began ? w[t].began : began;
        ended = w[t].ended > ended ? w[t].ended : ended;
        for (int c = 0; c < 3; c++) seen[c] += w[t].colours[c];
    }
    return (ended - began) / ((double)threads * (double)slice_bursts * BURST);
}

/* ---- meters of each regime ---- */

static void make_meter(struct meter *m, enum kind kind, int green) {
    memset(m, 0, sizeof *m);
    m->kind = kind;
    pthread_mutex_init(&m->lock, NULL);
    /* Green: 50 GB/s (leakgate's highest byte rate, 400 Gbit/s) and 1 MB buckets, far above
       two threads' offered load. Red: 1000 bytes a second and 1500-byte buckets. */
    uint64_t rate = green ? 50000000000ULL : 1000, size = green ? 1000000 : 1500;
    lg_quota committed, peak;
    if (lg_quota_bytes(rate, 1000000000, size, &committed) != LG_OK ||
        lg_quota_bytes(rate, 1000000000, size, &peak) != LG_OK ||
        (kind == SR ? lg_srtcm_new(&committed, size, &m->lg_sr)
                    : lg_trtcm_new(&peak, &committed, &m->lg_tr)) != LG_OK ||
        (kind == SR ? lg_leased_srtcm_new(&committed, size, &m->lg_leased_sr)
                    : lg_leased_trtcm_new(&peak, &committed, &m->lg_leased_tr)) != LG_OK) {
        fprintf(stderr, "leakgate meter: bad quota\n");
        exit(1);
    }
#ifndef NO_DPDK
    int ret;
    if (kind == SR) {
        struct rte_meter_srtcm_params p = {.cir = rate, .cbs = size, .ebs = size};
        ret = rte_meter_srtcm_profile_config(&m->sr_profile, &p) ||
              rte_meter_srtcm_config(&m->sr, &m->sr_profile);
    } else {
        struct rte_meter_trtcm_params p = {.cir = rate, .pir = rate, .cbs = size, .pbs = size};
        ret = rte_meter_trtcm_profile_config(&m->tr_profile, &p) ||
              rte_meter_trtcm_config(&m->tr, &m->tr_profile);
    }
    if (ret) {
        fprintf(stderr, "rte_meter: config failed\n");
        exit(1);
    }
#endif
    if (!green) { /* empty the buckets: from here on every packet is red */
        long drain[3] = {0, 0, 0};
        for (int i = 0; i < 200; i++) {
            lg_burst(m, drain);
            lg_leased_burst(m, drain);
#ifndef NO_DPDK
            rte_burst(m, drain);
#endif
        }
    }
}

static void free_meter(struct meter *m) {
    lg_srtcm_free(m->lg_sr);
    lg_trtcm_free(m->lg_tr);
    lg_leased_srtcm_free(m->lg_leased_sr);
    lg_leased_trtcm_free(m->lg_leased_tr);
    pthread_mutex_destroy(&m->lock);
}

/* ---- the benchmark: every case's contenders interleaved in each round ---- */

struct contender {
    const char *name;
    burst_fn fn;
    int threads;
    int green_only; /* measured in the green cases only (the floor: red packets take no CAS) */
    double ns[64];
    long seen[3];
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    double s[64];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof s[0], cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static int setup(struct contender *c) {
    int n = 0;
#ifndef NO_DPDK
    c[n++] = (struct contender){.name = "rte_meter", .fn = rte_burst, .threads = 1};
#endif
    c[n++] = (struct contender){.name = "leakgate (C ABI)", .fn = lg_burst, .threads = 1};
    c[n++] = (struct contender){.name = "leakgate _excl (C ABI)", .fn = lg_excl_burst, .threads = 1};
    c[n++] = (struct contender){.name = "floor: 2 lock cmpxchg", .fn = floor_burst, .threads = 1, .green_only = 1};
    c[n++] = (struct contender){.name = "leakgate leased (C ABI)", .fn = lg_leased_burst, .threads = 1};
    c[n++] = (struct contender){.name = "leakgate leased, slot given", .fn = lg_leased_slot_burst, .threads = 1};
    c[n++] = (struct contender){.name = "leakgate leased, local handle", .fn = lg_local_burst, .threads = 1};
#ifndef NO_DPDK
    c[n++] = (struct contender){.name = "rte_meter + mutex per packet", .fn = rte_locked_packet, .threads = 2};
    c[n++] = (struct contender){.name = "rte_meter + mutex per burst", .fn = rte_locked_burst, .threads = 2};
#endif
    c[n++] = (struct contender){.name = "leakgate (C ABI), lock-free", .fn = lg_burst, .threads = 2};
    c[n++] = (struct contender){.name = "leakgate leased (C ABI)", .fn = lg_leased_burst, .threads = 2};
    c[n++] = (struct contender){.name = "leakgate leased, slot given", .fn = lg_leased_slot_burst, .threads = 2};
    c[n++] = (struct contender){.name = "leakgate leased, local handle", .fn = lg_local_burst, .threads = 2};
    return n;
}

static void bench(int rounds) {
    const char *cases[4] = {"srTCM green", "srTCM red", "trTCM green", "trTCM red"};
    struct contender c[4][MAX_CONTENDERS];
    int n = 0;
    for (int k = 0; k < 4; k++) n = setup(c[k]);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 4; k++) {
            struct meter m;
            make_meter(&m, k < 2 ? SR : TR, k % 2 == 0);
            for (int i = 0; i < n; i++)
                if (k % 2 == 0 || !c[k][i].green_only)
                    c[k][i].ns[r] = slice(&m, c[k][i].fn, c[k][i].threads, c[k][i].seen);
            free_meter(&m);
        }
    }
    printf("\n%-14s %-30s %7s %9s %9s %9s\n", "case", "contender", "threads", "median", "min", "green %");
    for (int k = 0; k < 4; k++) {
        double base[MAX_THREADS + 1] = {0}, base_lo[MAX_THREADS + 1] = {0};
        for (int i = 0; i < n; i++) {
            struct contender *x = &c[k][i];
            if (k % 2 == 1 && x->green_only) continue;
            double med = median(x->ns, rounds), lo = x->ns[0];
            for (int r = 0; r < rounds; r++) lo = x->ns[r] < lo ? x->ns[r] : lo;
            long all = x->seen[0] + x->seen[1] + x->seen[2];
            printf("%-14s %-30s %7d %6.2f ns %6.2f ns %8.1f%%", cases[k], x->name, x->threads, med, lo,
                   100.0 * (double)x->seen[0] / (double)(all ? all : 1));
            if (strncmp(x->name, "rte_meter", 9) == 0 && (base[x->threads] == 0 || med < base[x->threads])) {
                base[x->threads] = med;
                base_lo[x->threads] = lo;
            }
            if ((strncmp(x->name, "leakgate", 8) == 0 || strncmp(x->name, "floor", 5) == 0) &&
                base[x->threads] > 0)
                printf("   %.2fx (min %.2fx) the best rte_meter", med / base[x->threads],
                       lo / base_lo[x->threads]);
            printf("\n");
        }
    }
}

/* ---- the bound: 2 threads race for a committed burst of 100 packets ---- */

#define RACE_PACKETS 200

struct racer {
    struct meter *meter;
    int use_rte;
    struct start_line *start;
    uint64_t now;
    long green;
};

static void *race(void *arg) {
    struct racer *r = arg;
    wait_for_all(r->start);
    for (int i = 0; i < RACE_PACKETS; i++) {
#ifndef NO_DPDK
        if (r->use_rte) {
            r->green += rte_meter_srtcm_color_blind_check(&r->meter->sr, &r->meter->sr_profile, r->now,
                                                          PACKET) == RTE_COLOR_GREEN;
            continue;
        }
#endif
        r->green += lg_srtcm_color_blind_at(r->meter->lg_sr, PACKET, r->now) == LG_GREEN;
    }
    return NULL;
}

static void bound(int trials) {
    long worst[2] = {0, 0}, over[2] = {0, 0};
    int sides = 1;
#ifndef NO_DPDK
    sides = 2;
#endif
    for (int t = 0; t < trials; t++) {
        for (int side = 0; side < sides; side++) {
            struct meter m;
            memset(&m, 0, sizeof m);
            m.kind = SR;
            lg_quota q;
            lg_quota_bytes(1000, 1000000000, 100 * PACKET, &q); /* CBS: 100 packets */
            lg_srtcm_new(&q, 0, &m.lg_sr);
#ifndef NO_DPDK
            struct rte_meter_srtcm_params p = {.cir = 1000, .cbs = 100 * PACKET, .ebs = 0};
            rte_meter_srtcm_profile_config(&m.sr_profile, &p);
            rte_meter_srtcm_config(&m.sr, &m.sr_profile);
#endif
            struct start_line start = {0, 2};
            pthread_t tid[2];
            struct racer r[2];
#ifndef NO_DPDK
            uint64_t now = side ? rte_rdtsc() : lg_now_ns();
#else
            uint64_t now = lg_now_ns();
#endif
            for (int i = 0; i < 2; i++) {
                r[i] = (struct racer){&m, side, &start, now, 0};
                pthread_create(&tid[i], NULL, race, &r[i]);
            }
            for (int i = 0; i < 2; i++) pthread_join(tid[i], NULL);
            long green = r[0].green + r[1].green;
            worst[side] = green > worst[side] ? green : worst[side];
            over[side] += green > 100;
            lg_srtcm_free(m.lg_sr);
        }
    }
    printf("\nbound: CBS of 100 packets, 2 threads x %d packets at one time, %d trials:\n",
           RACE_PACKETS, trials);
    printf("  leakgate (lock-free)      most green %ld, trials over 100: %ld\n", worst[0], over[0]);
    if (sides == 2)
        printf("  rte_meter without a lock  most green %ld, trials over 100: %ld\n", worst[1], over[1]);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1 || rounds > 64) rounds = 7;
    if (argc > 2) slice_bursts = atol(argv[2]);
#ifndef NO_DPDK
    /* rte_meter's profiles need the TSC frequency, which EAL measures at init: no hugepages,
       no PCI devices, no shared files, one lcore; then the main thread's CPU mask (EAL pins it
       to lcore 0) is put back so the benchmark's threads may run on every core. */
    cpu_set_t cpus;
    sched_getaffinity(0, sizeof cpus, &cpus);
    char *eal[] = {argv[0], "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry", "-l", "0",
                   "-m", "16", "--log-level", "lib.*:error", NULL};
    if (rte_eal_init(11, eal) < 0) {
        fprintf(stderr, "rte_eal_init failed\n");
        return 1;
    }
    sched_setaffinity(0, sizeof cpus, &cpus);
    printf("TSC %.3f GHz (EAL); ", (double)rte_get_tsc_hz() / 1e9);
#else
    printf("built without DPDK: leakgate only; ");
#endif
    printf("%d rounds, %ld packets of %d bytes per thread per slice, bursts of %d\n", rounds,
           slice_bursts * BURST, PACKET, BURST);
    bench(rounds);
    bound(200);
#ifndef NO_DPDK
    rte_eal_cleanup();
#endif
    return 0;
}
