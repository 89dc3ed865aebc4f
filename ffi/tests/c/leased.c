/*
 * The leased colour meters from C (lg_leased_srtcm, lg_leased_trtcm): 4 threads colour one
 * meter at a frozen caller time (through the meter, and each through its own handle,
 * lg_leased_srtcm_local); greens never pass CBS and fall short of it by at most E
 * (bytes left in leases), yellows never pass EBS. Built and run by ffi/tests/c/run.sh
 * (scripts/test.sh runs it); prints a cargo-style "test result:" line.
 */
#define _POSIX_C_SOURCE 200809L
#include "leakgate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define THREADS 4
#define PACKETS 20000
#define PACKET 64

static int failures;

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                       \
    } while (0)

static uint64_t frozen;
static atomic_long colours[3];

static void *sr_body(void *meter) {
    for (int i = 0; i < PACKETS; i++)
        atomic_fetch_add(&colours[lg_leased_srtcm_color_blind_at(meter, PACKET, frozen) & 3], 1);
    return NULL;
}

static void *tr_body(void *meter) {
    for (int i = 0; i < PACKETS; i++)
        atomic_fetch_add(&colours[lg_leased_trtcm_color_blind_at(meter, PACKET, frozen) & 3], 1);
    return NULL;
}

static void *sr_local_body(void *meter) {
    lg_leased_srtcm_local *local = NULL;
    CHECK(lg_leased_srtcm_local_new(meter, &local) == LG_OK);
    for (int i = 0; i < PACKETS; i++)
        atomic_fetch_add(&colours[lg_leased_srtcm_local_color_blind_at(local, PACKET, frozen) & 3], 1);
    lg_leased_srtcm_local_free(local);
    return NULL;
}

/* Runs `body` on THREADS threads on `meter`; the bytes of each colour. */
static void colour(void *(*body)(void *), void *meter, long bytes[3]) {
    pthread_t t[THREADS];
    for (int c = 0; c < 3; c++) atomic_store(&colours[c], 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, body, meter) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int c = 0; c < 3; c++) bytes[c] = PACKET * atomic_load(&colours[c]);
}

int main(void) {
    /* CIR 1 GB/s, CBS 1 MB (leases on), EBS 64 kB; PIR 2 GB/s, PBS 1 MB for the trTCM. */
    lg_quota cir, pir;
    CHECK(lg_quota_bytes(1000000000, 1000000000, 1000000, &cir) == LG_OK);
    CHECK(lg_quota_bytes(2000000000, 1000000000, 1000000, &pir) == LG_OK);
    frozen = lg_now_ns();
    long bytes[3];

    int before = failures;
    lg_leased_srtcm *sr = NULL;
    CHECK(lg_leased_srtcm_new(&cir, 64000, &sr) == LG_OK);
    long e = (long)lg_leased_srtcm_excess_bound(sr);
    CHECK(e > 0);
    colour(sr_body, sr, bytes);
    CHECK(bytes[LG_GREEN] <= 1000000 && bytes[LG_GREEN] >= 1000000 - e);
    CHECK(bytes[LG_YELLOW] <= 64000);
    lg_leased_srtcm_free(sr);
    printf("test leased_srtcm_keeps_its_bound ... %s\n", failures == before ? "ok" : "FAILED");
    int failed = failures != before;

    before = failures;
    lg_leased_trtcm *tr = NULL;
    CHECK(lg_leased_trtcm_new(&pir, &cir, &tr) == LG_OK);
    e = (long)lg_leased_trtcm_excess_bound(tr);
    CHECK(e > 0);
    colour(tr_body, tr, bytes);
    CHECK(bytes[LG_GREEN] <= 1000000 && bytes[LG_GREEN] >= 1000000 - e);
    CHECK(bytes[LG_GREEN] + bytes[LG_YELLOW] <= 1000000);
    lg_leased_trtcm_free(tr);
    printf("test leased_trtcm_keeps_its_bound ... %s\n", failures == before ? "ok" : "FAILED");
    failed += failures != before;

    /* Each thread with its own handle (lg_leased_srtcm_local), freed when it is done (its bytes
       go back to its slot). */
    before = failures;
    CHECK(lg_leased_srtcm_new(&cir, 64000, &sr) == LG_OK);
    e = (long)lg_leased_srtcm_excess_bound(sr);
    colour(sr_local_body, sr, bytes);
    CHECK(bytes[LG_GREEN] <= 1000000 && bytes[LG_GREEN] >= 1000000 - e);
    CHECK(bytes[LG_YELLOW] <= 64000);
    lg_leased_srtcm_free(sr);
    printf("test leased_srtcm_local_handles_keep_its_bound ... %s\n", failures == before ? "ok" : "FAILED");
    failed += failures != before;

    printf("test result: %s. %d passed; %d failed; 0 ignored; 0 measured; 0 filtered out\n",
           failed ? "FAILED" : "ok", 3 - failed, failed);
    return failed ? 1 : 0;
}
