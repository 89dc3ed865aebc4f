/*
 * leakgate's C ABI from C: handles shared by 4 threads on a frozen caller time admit exactly
 * what their quotas allow, meters colour exactly as the RFCs say (shared by threads, and
 * through the _excl functions by one owner), and bad input gets error codes. Built and run by ffi/tests/c/run.sh (scripts/test.sh runs it); prints a cargo-style
 * "test result:" line.
 */
#define _POSIX_C_SOURCE 200809L
#include "leakgate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define THREADS 4

/* Checks that failed (any thread); a test fails if any of its checks did. */
static atomic_int failures;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            atomic_fetch_add(&failures, 1);                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
        }                                                                                 \
    } while (0)

#define CHECK_EQ(a, b)                                                                    \
    do {                                                                                  \
        long long a_ = (long long)(a), b_ = (long long)(b);                               \
        if (a_ != b_) {                                                                   \
            atomic_fetch_add(&failures, 1);                                               \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, \
                    #a, #b, a_, b_);                                                      \
        }                                                                                 \
    } while (0)

static int passed, failed;

/* Runs one test and prints its line, as cargo's test runner does. */
static void run(const char *name, void (*test)(void)) {
    int before = atomic_load(&failures);
    test();
    int ok = atomic_load(&failures) == before;
    printf("test %s ... %s\n", name, ok ? "ok" : "FAILED");
    if (ok)
        passed++;
    else
        failed++;
}

/* Runs `body` on THREADS threads started together; each gets its index. */
struct job {
    void *(*body)(void *);
    void *shared;
    int index;
};
static pthread_barrier_t start;

static void *trampoline(void *arg) {
    struct job *job = arg;
    pthread_barrier_wait(&start);
    return job->body(job);
}

static void run_threads(void *(*body)(void *), void *shared) {
    pthread_t threads[THREADS];
    struct job jobs[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct job){body, shared, i};
        CHECK_EQ(pthread_create(&threads[i], NULL, trampoline, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
}

/* ---- a limiter shared by 4 threads, frozen caller time: exactly its burst ---- */

static uint64_t frozen;
static atomic_long admitted;

static void *limiter_body(void *arg) {
    struct job *job = arg;
    const lg_limiter *lim = job->shared;
    long mine = 0;
    for (int i = 0; i < 1000; i++) {
        if (lg_limiter_check_at(lim, frozen, NULL) == LG_OK) mine++;
    }
    /* Cost 3, on the same frozen time: none fits any more. */
    if (lg_limiter_check_n_at(lim, 3, frozen, NULL) == LG_OK) mine += 3;
    atomic_fetch_add(&admitted, mine);
    return NULL;
}

static void limiter_admits_its_burst(void) {
    lg_quota q;
    lg_limiter *lim = NULL;
    CHECK_EQ(lg_quota_parse("100/s burst 1000", LG_NUL_TERMINATED, &q, NULL, 0), LG_OK);
    CHECK_EQ(lg_limiter_new(&q, &lim), LG_OK);
    frozen = lg_now_ns();
    atomic_store(&admitted, 0);
    run_threads(limiter_body, lim);
    CHECK_EQ(atomic_load(&admitted), 1000);

    lg_report r;
    CHECK_EQ(lg_limiter_check_at(lim, frozen, &r), LG_DENIED);
    CHECK_EQ(r.remaining, 0);
    CHECK_EQ(r.retry_after_ns, 10000000); /* one more unit in 10 ms */
    CHECK_EQ(r.reset_after_ns, 10000000000ULL);
    CHECK_EQ(lg_limiter_check_n_at(lim, 1001, frozen, &r), LG_DENIED);
    CHECK(r.retry_after_ns == LG_NEVER);
    /* 50 ms later: 5 units. */
    CHECK_EQ(lg_limiter_check_n_at(lim, 5, frozen + 50000000, &r), LG_OK);
    CHECK_EQ(lg_limiter_check_at(lim, frozen + 50000000, NULL), LG_DENIED);
    lg_limiter_free(lim);
}

/* ---- keyed limiters: 64 keys of burst 10, 4 threads checking each key 20 times ---- */

static void *keyed_body(void *arg) {
    struct job *job = arg;
    const lg_keyed *keyed = job->shared;
    long mine = 0;
    for (int round = 0; round < 20; round++) {
        for (uint64_t key = 0; key < 64; key++) {
            if (lg_keyed_check_at(keyed, key * 0x9e3779b97f4a7c15ULL, frozen, NULL) == LG_OK) mine++;
        }
    }
    atomic_fetch_add(&admitted, mine);
    return NULL;
}

static void *keyed_batch_body(void *arg) {
    struct job *job = arg;
    const lg_keyed *keyed = job->shared;
    uint64_t keys[32], costs[32];
    uint8_t ok[32];
    long mine = 0;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 32; i++) {
            keys[i] = (uint64_t)((round * 32 + i) % 64);
            costs[i] = 1;
        }
        size_t count = 0;
        CHECK_EQ(lg_keyed_check_batch_at(keyed, keys, costs, 32, frozen, ok, &count), LG_OK);
        size_t counted = 0;
        for (int i = 0; i < 32; i++) counted += ok[i];
        CHECK_EQ(counted, count);
        mine += (long)count;
    }
    atomic_fetch_add(&admitted, mine);
    return NULL;
}

static void *bytes_body(void *arg) {
    struct job *job = arg;
    const lg_keyed_bytes *keyed = job->shared;
    char name[32];
    long mine = 0;
    for (int round = 0; round < 20; round++) {
        for (int key = 0; key < 64; key++) {
            int len = snprintf(name, sizeof name, "10.0.%d.%d", key / 8, key % 8);
            if (lg_keyed_bytes_check_n_at(keyed, (const uint8_t *)name, (size_t)len, 2, frozen,
                                          NULL) == LG_OK)
                mine += 2;
        }
    }
    atomic_fetch_add(&admitted, mine);
    return NULL;
}

static void keyed_limiters_admit_each_keys_burst(void) {
    lg_quota q;
    CHECK_EQ(lg_quota_new(10, 1000000000, 10, &q), LG_OK); /* 10/s per key */
    lg_keyed *keyed = NULL;
    CHECK_EQ(lg_keyed_new(&q, 1000, &keyed), LG_OK);
    frozen = lg_now_ns();
    atomic_store(&admitted, 0);
    run_threads(keyed_body, keyed);
    CHECK_EQ(atomic_load(&admitted), 64 * 10);
    lg_keyed_free(keyed);

    keyed = NULL;
    CHECK_EQ(lg_keyed_new(&q, 0, &keyed), LG_OK);
    atomic_store(&admitted, 0);
    run_threads(keyed_batch_body, keyed);
    CHECK_EQ(atomic_load(&admitted), 64 * 10);
    lg_keyed_free(keyed);

    lg_keyed_bytes *bytes = NULL;
    CHECK_EQ(lg_keyed_bytes_new(&q, 0, &bytes), LG_OK);
    atomic_store(&admitted, 0);
    run_threads(bytes_body, bytes);
    CHECK_EQ(atomic_load(&admitted), 64 * 10);
    lg_keyed_bytes_free(bytes);
}

/* ---- colour meters shared by 4 threads on a frozen caller time ---- */

static atomic_long colours[3];

static void count_colour(lg_color c) {
    if (c <= LG_RED) atomic_fetch_add(&colours[c], 1);
}

static void *srtcm_body(void *arg) {
    struct job *job = arg;
    for (int i = 0; i < 100; i++) count_colour(lg_srtcm_color_blind_at(job->shared, 100, frozen));
    return NULL;
}

static void *trtcm_body(void *arg) {
    struct job *job = arg;
    for (int i = 0; i < 100; i++) count_colour(lg_trtcm_color_blind_at(job->shared, 100, frozen));
    return NULL;
}

static void *keyed_srtcm_body(void *arg) {
    struct job *job = arg;
    for (int i = 0; i < 100; i++)
        for (uint64_t flow = 0; flow < 4; flow++)
            count_colour(lg_keyed_srtcm_color_blind_at(job->shared, flow, 100, frozen));
    return NULL;
}

static void *keyed_trtcm_body(void *arg) {
    struct job *job = arg;
    for (int i = 0; i < 100; i++)
        for (uint64_t flow = 0; flow < 4; flow++)
            count_colour(lg_keyed_trtcm_color_aware_at(job->shared, flow, 100, LG_GREEN, frozen));
    return NULL;
}

static void reset_colours(void) {
    for (int c = 0; c < 3; c++) atomic_store(&colours[c], 0);
}

static void meters_colour_exactly(void) {
    /* CIR one byte an hour, CBS 10000, EBS 5000: 100-byte packets, 400 of them: 100 green,
       50 yellow, 250 red. (A slow CIR: a packet that loses a race for green after charging
       the excess bucket gives the charge back less the ticks since its caller time, and
       ticks an hour long never pass during the test.) */
    lg_quota cir, pir;
    CHECK_EQ(lg_quota_parse("1000 B/s burst 10000 B", LG_NUL_TERMINATED, &cir, NULL, 0), LG_OK);
    CHECK_EQ(cir.bytes, 1);
    CHECK_EQ(cir.count, 1000);
    CHECK_EQ(lg_quota_bytes(1, 3600000000000ULL, 10000, &cir), LG_OK);
    lg_srtcm *sr = NULL;
    CHECK_EQ(lg_srtcm_new(&cir, 5000, &sr), LG_OK);
    frozen = lg_now_ns();
    reset_colours();
    run_threads(srtcm_body, sr);
    CHECK_EQ(atomic_load(&colours[LG_GREEN]), 100);
    CHECK_EQ(atomic_load(&colours[LG_YELLOW]), 50);
    CHECK_EQ(atomic_load(&colours[LG_RED]), 250);
    uint64_t tc = 1, te = 1;
    CHECK_EQ(lg_srtcm_tokens_at(sr, frozen, &tc, &te), LG_OK);
    CHECK_EQ(tc, 0);
    CHECK_EQ(te, 0);
    lg_srtcm_free(sr);

    /* PIR 2 bytes an hour with PBS 15000, CIR as above: 100 green, 50 yellow. */
    CHECK_EQ(lg_quota_bytes(2, 3600000000000ULL, 15000, &pir), LG_OK);
    lg_trtcm *tr = NULL;
    CHECK_EQ(lg_trtcm_new(&pir, &cir, &tr), LG_OK);
    reset_colours();
    run_threads(trtcm_body, tr);
    CHECK_EQ(atomic_load(&colours[LG_GREEN]), 100);
    CHECK_EQ(atomic_load(&colours[LG_YELLOW]), 50);
    CHECK_EQ(atomic_load(&colours[LG_RED]), 250);
    lg_trtcm_free(tr);

    /* One meter per flow: 4 flows, each 100 green and 50 yellow of its 400 packets. */
    lg_keyed_srtcm *ksr = NULL;
    CHECK_EQ(lg_keyed_srtcm_new(&cir, 5000, 64, &ksr), LG_OK);
    reset_colours();
    run_threads(keyed_srtcm_body, ksr);
    CHECK_EQ(atomic_load(&colours[LG_GREEN]), 4 * 100);
    CHECK_EQ(atomic_load(&colours[LG_YELLOW]), 4 * 50);
    lg_keyed_srtcm_free(ksr);

    lg_keyed_trtcm *ktr = NULL;
    CHECK_EQ(lg_keyed_trtcm_new(&pir, &cir, 64, &ktr), LG_OK);
    reset_colours();
    run_threads(keyed_trtcm_body, ktr);
    CHECK_EQ(atomic_load(&colours[LG_GREEN]), 4 * 100);
    CHECK_EQ(atomic_load(&colours[LG_YELLOW]), 4 * 50);
    lg_keyed_trtcm_free(ktr);
}

/* ---- the exclusive functions (one owner, one thread): exact colours, as the shared ones ---- */

struct packet {
    uint64_t bytes;
    lg_color pre;      /* LG_GREEN: colour-blind */
    lg_color expected;
};

static void exclusive_meters_colour_exactly(void) {
    /* Rates of a byte or two an hour: nothing refills during the test. */
    lg_quota cir, pir;
    CHECK_EQ(lg_quota_bytes(1, 3600000000000ULL, 1000, &cir), LG_OK);
    CHECK_EQ(lg_quota_bytes(2, 3600000000000ULL, 1500, &pir), LG_OK);
    uint64_t now = lg_now_ns();

    /* srTCM CBS 1000, EBS 500 (RFC 2697). */
    static const struct packet sr_packets[] = {
        {600, LG_GREEN, LG_GREEN},   /* Tc 400 */
        {600, LG_GREEN, LG_RED},     /* neither bucket holds 600 */
        {400, LG_GREEN, LG_GREEN},   /* Tc 0 */
        {300, LG_GREEN, LG_YELLOW},  /* Te 200 */
        {200, LG_YELLOW, LG_YELLOW}, /* Te 0 */
        {1, LG_GREEN, LG_RED},
        {0, LG_RED, LG_RED},
        {0, LG_YELLOW, LG_YELLOW},
    };
    lg_srtcm *sr = NULL, *sr_shared = NULL;
    CHECK_EQ(lg_srtcm_new(&cir, 500, &sr), LG_OK);
    CHECK_EQ(lg_srtcm_new(&cir, 500, &sr_shared), LG_OK);
    for (size_t i = 0; i < sizeof sr_packets / sizeof sr_packets[0]; i++) {
        const struct packet *p = &sr_packets[i];
        lg_color owned = p->pre == LG_GREEN && i % 2 == 0
                             ? lg_srtcm_color_blind_at_excl(sr, p->bytes, now)
                             : lg_srtcm_color_aware_at_excl(sr, p->bytes, p->pre, now);
        CHECK_EQ(owned, p->expected);
        CHECK_EQ(lg_srtcm_color_aware_at(sr_shared, p->bytes, p->pre, now), p->expected);
    }
    uint64_t tc = 1, te = 1;
    CHECK_EQ(lg_srtcm_tokens_at(sr, now, &tc, &te), LG_OK);
    CHECK_EQ(tc, 0);
    CHECK_EQ(te, 0);
    /* The clock-reading forms, and the plain functions on the same meter afterwards. */
    CHECK_EQ(lg_srtcm_color_blind_excl(sr, 1), LG_RED);
    CHECK_EQ(lg_srtcm_color_aware_excl(sr, 1, LG_YELLOW), LG_RED);
    CHECK_EQ(lg_srtcm_color_blind_at(sr, 1, now), LG_RED);
    CHECK_EQ(lg_srtcm_color_aware_excl(sr, 1, 3), LG_COLOR_ERROR); /* not a colour */
    CHECK_EQ(lg_srtcm_color_blind_at_excl(NULL, 1, now), LG_COLOR_ERROR);
    lg_srtcm_free(sr);
    lg_srtcm_free(sr_shared);

    /* 400 packets of 100 bytes on CBS 10000, EBS 5000: exactly 100 green, then 50 yellow,
       then red, in that order. */
    lg_quota big;
    CHECK_EQ(lg_quota_bytes(1, 3600000000000ULL, 10000, &big), LG_OK);
    CHECK_EQ(lg_srtcm_new(&big, 5000, &sr), LG_OK);
    int out_of_order = 0;
    for (int i = 0; i < 400; i++) {
        lg_color expected = i < 100 ? LG_GREEN : i < 150 ? LG_YELLOW : LG_RED;
        out_of_order += lg_srtcm_color_blind_at_excl(sr, 100, now) != expected;
    }
    CHECK_EQ(out_of_order, 0);
    lg_srtcm_free(sr);

    /* trTCM PIR 2 B/h with PBS 1500, CIR 1 B/h with CBS 1000 (RFC 2698). */
    static const struct packet tr_packets[] = {
        {600, LG_GREEN, LG_GREEN},   /* Tp 900, Tc 400 */
        {600, LG_GREEN, LG_YELLOW},  /* Tp 300 */
        {300, LG_GREEN, LG_GREEN},   /* Tp 0, Tc 100 */
        {1, LG_GREEN, LG_RED},
        {1, LG_YELLOW, LG_RED},
        {0, LG_YELLOW, LG_YELLOW},
        {0, LG_RED, LG_RED},
    };
    lg_trtcm *tr = NULL, *tr_shared = NULL;
    CHECK_EQ(lg_trtcm_new(&pir, &cir, &tr), LG_OK);
    CHECK_EQ(lg_trtcm_new(&pir, &cir, &tr_shared), LG_OK);
    for (size_t i = 0; i < sizeof tr_packets / sizeof tr_packets[0]; i++) {
        const struct packet *p = &tr_packets[i];
        lg_color owned = p->pre == LG_GREEN && i % 2 == 0
                             ? lg_trtcm_color_blind_at_excl(tr, p->bytes, now)
                             : lg_trtcm_color_aware_at_excl(tr, p->bytes, p->pre, now);
        CHECK_EQ(owned, p->expected);
        CHECK_EQ(lg_trtcm_color_aware_at(tr_shared, p->bytes, p->pre, now), p->expected);
    }
    uint64_t tp = 1;
    tc = 1;
    CHECK_EQ(lg_trtcm_tokens_at(tr, now, &tp, &tc), LG_OK);
    CHECK_EQ(tp, 0);
    CHECK_EQ(tc, 100);
    CHECK_EQ(lg_trtcm_color_blind_excl(tr, 1), LG_RED);
    CHECK_EQ(lg_trtcm_color_aware_excl(tr, 0, LG_GREEN), LG_GREEN);
    CHECK_EQ(lg_trtcm_color_aware_at_excl(tr, 1, 200, now), LG_COLOR_ERROR);
    CHECK_EQ(lg_trtcm_color_blind_excl(NULL, 1), LG_COLOR_ERROR);
    lg_trtcm_free(tr);
    lg_trtcm_free(tr_shared);
}

/* ---- bad input: codes, never a crash ---- */

static void bad_input_is_an_error_code(void) {
    lg_quota q;
    memset(&q, 0, sizeof q);
    char err[64] = {0};
    CHECK_EQ(lg_quota_parse("10/fortnight", 12, &q, err, sizeof err), LG_ERR_QUOTA);
    CHECK(strlen(err) > 0 && strlen(err) < sizeof err);
    CHECK_EQ(lg_quota_parse(NULL, 4, &q, NULL, 0), LG_ERR_NULL);
    CHECK_EQ(lg_quota_parse("0/s", LG_NUL_TERMINATED, &q, NULL, 0), LG_ERR_QUOTA);
    CHECK_EQ(lg_quota_new(0, 1000000000, 1, &q), LG_ERR_QUOTA);   /* a zero rate */
    CHECK_EQ(lg_quota_new(1, 0, 1, &q), LG_ERR_QUOTA);            /* a zero period */
    CHECK_EQ(lg_quota_bytes(100000000000ULL, 1000000000, 1, &q), LG_ERR_QUOTA); /* > 400 Gbit/s */

    lg_quota zero = {0, 1000000000, 10, 0}; /* filled by hand: checked by the constructor */
    lg_limiter *lim = NULL;
    CHECK_EQ(lg_limiter_new(&zero, &lim), LG_ERR_QUOTA);
    CHECK(lim == NULL);
    CHECK_EQ(lg_limiter_new(NULL, &lim), LG_ERR_NULL);
    CHECK_EQ(lg_limiter_check(NULL, NULL), LG_ERR_NULL);
    CHECK_EQ(lg_keyed_check_n_at(NULL, 1, 1, 0, NULL), LG_ERR_NULL);
    CHECK_EQ(lg_keyed_bytes_check(NULL, NULL, 0, NULL), LG_ERR_NULL);
    CHECK_EQ(lg_srtcm_color_blind(NULL, 64), LG_COLOR_ERROR);
    CHECK_EQ(lg_trtcm_color_blind_at(NULL, 64, 0), LG_COLOR_ERROR);

    lg_quota ok;
    CHECK_EQ(lg_quota_new(1, 1000000000, 1, &ok), LG_OK);
    lg_keyed *keyed = NULL;
    CHECK_EQ(lg_keyed_new(&ok, (size_t)1 << 40, &keyed), LG_ERR_ARGUMENT);
    lg_srtcm *sr = NULL;
    CHECK_EQ(lg_srtcm_new(&ok, 0, &sr), LG_OK);
    CHECK_EQ(lg_srtcm_color_aware(sr, 1, 3), LG_COLOR_ERROR); /* not a colour */
    lg_srtcm_free(sr);
    lg_trtcm *tr = NULL;
    lg_quota faster;
    CHECK_EQ(lg_quota_new(2, 1000000000, 1, &faster), LG_OK);
    CHECK_EQ(lg_trtcm_new(&ok, &faster, &tr), LG_ERR_QUOTA); /* PIR below CIR */
    CHECK(tr == NULL);

    lg_limiter_free(NULL);
    lg_keyed_free(NULL);
    CHECK(strcmp(lg_status_str(LG_ERR_QUOTA), "invalid quota") == 0);
    CHECK(lg_status_str(12345) != NULL);
}

int main(void) {
    run("limiter_admits_its_burst", limiter_admits_its_burst);
    run("keyed_limiters_admit_each_keys_burst", keyed_limiters_admit_each_keys_burst);
    run("meters_colour_exactly", meters_colour_exactly);
    run("exclusive_meters_colour_exactly", exclusive_meters_colour_exactly);
    run("bad_input_is_an_error_code", bad_input_is_an_error_code);
    printf("test result: %s. %d passed; %d failed; 0 ignored; 0 measured; 0 filtered out\n",
           failed ? "FAILED" : "ok", passed, failed);
    return failed ? 1 : 0;
}
