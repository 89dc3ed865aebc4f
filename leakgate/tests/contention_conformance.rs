//! Many threads, the real (TSC) clock. Every admission is logged with the exact clock
//! reading the limiter decided at (a wrapping clock records each thread's last read), and the kept
//! events are replayed in time order through an exact GCRA: each must conform.

use leakgate::{Clock, KeyedLimiter, Limiter, Quota, TscClock};
use leakgate_test_support::Rng;
use std::cell::Cell;
use std::sync::Mutex;
use std::time::Duration;

thread_local!(static LAST_READ: Cell<u64> = const { Cell::new(0) });

/// The TSC clock, remembering per thread the last value it returned.
#[derive(Clone)]
struct Recording(TscClock);
impl Clock for Recording {
    fn now_ns(&self) -> u64 {
        let t = self.0.now_ns();
        LAST_READ.with(|c| c.set(t));
        t
    }
}

/// Replays (time_ns, n) events in time order through an exact GCRA; returns the worst excess
/// (scaled by count) over tau, or None if all conform.
fn replay(q: Quota, mut events: Vec<(u64, u64)>) -> Option<(u128, usize)> {
    events.sort();
    let count = u128::from(q.count());
    let t = q.period().as_nanos();
    let tau = u128::from(q.burst()) * t;
    let tol = count; // 1 ns scaled
    let mut tat = 0u128;
    let mut worst = None;
    for (i, &(at, n)) in events.iter().enumerate() {
        let at = u128::from(at) * count;
        tat = tat.max(at) + u128::from(n) * t;
        if tat - at > tau + tol {
            let ex = tat - at - tau;
            if worst.is_none_or(|(w, _)| ex > w) {
                worst = Some((ex, i));
            }
        }
    }
    worst
}

#[test]
fn limiter_checks_reserves_cancels_under_contention_conform() {
    for (q, threads) in [
        (Quota::new(1_000, Duration::from_millis(10), 20).unwrap(), 6u64),
        (Quota::new(7, Duration::from_micros(300), 5).unwrap(), 4), // fractional T
        (Quota::new(1, Duration::from_micros(50), 1).unwrap(), 6),
    ] {
        let clock = Recording(TscClock::new());
        let lim = Limiter::with_clock(q, clock.clone());
        let log = Mutex::new(Vec::new());
        let stop = clock.0.now_ns() + 400_000_000;
        std::thread::scope(|s| {
            for seed in 0..threads {
                let (lim, log, clock) = (&lim, &log, &clock);
                s.spawn(move || {
                    let mut rng =
                        Rng::new(0x9e37_79b9_7f4a_7c15 ^ (seed + 1).wrapping_mul(0x1234_5678_9abc));
                    let mut mine = Vec::new();
                    while clock.0.now_ns() < stop {
                        let n = 1 + rng.next() % q.burst();
                        match rng.next() % 4 {
                            0 | 1 => {
                                if lim.check_n(n).is_ok() {
                                    mine.push((LAST_READ.with(Cell::get), n));
                                }
                            }
                            _ => {
                                let max_wait = Duration::from_nanos(rng.next() % 2_000_000);
                                if let Ok(r) = lim.reserve_n(n, max_wait) {
                                    let at = r.ready_at().as_nanos() as u64;
                                    if rng.next().is_multiple_of(2) {
                                        if !r.cancel() {
                                            mine.push((at, n)); // not refunded: counts as kept
                                        }
                                    } else {
                                        mine.push((at, n));
                                    }
                                }
                            }
                        }
                        if rng.next().is_multiple_of(64) {
                            std::thread::yield_now();
                        }
                    }
                    log.lock().unwrap().extend(mine);
                });
            }
        });
        let events = log.into_inner().unwrap();
        assert!(!events.is_empty());
        assert_eq!(replay(q, events.clone()), None, "{q}: {} events", events.len());
    }
}

/// Keyed, on a table far smaller than the active key set (one group of 4 slots, 7 keys), so
/// slots are reclaimed constantly, with threads preempted between reading the clock and deciding.
/// Each key's admissions, in clock order, must conform to that key's GCRA.
fn keyed_stress(
    q: Quota,
    keys: u64,
    threads: u64,
    shards: usize,
    slots: usize,
    run_ms: u64,
) -> Vec<String> {
    let clock = Recording(TscClock::new());
    let keyed = KeyedLimiter::<u64, _>::with_layout(q, shards, slots, clock.clone());
    let log = Mutex::new(Vec::new());
    let stop = clock.0.now_ns() + run_ms * 1_000_000;
    std::thread::scope(|s| {
        for seed in 0..threads {
            let (keyed, log, clock) = (&keyed, &log, &clock);
            s.spawn(move || {
                let mut rng =
                    Rng::new(0x2545_f491_4f6c_dd1d ^ (seed + 7).wrapping_mul(0x9e37_79b9));
                let mut mine = Vec::new();
                while clock.0.now_ns() < stop {
                    let key = rng.next() % keys;
                    let n = 1 + rng.next() % q.burst();
                    if keyed.check_n(&key, n).is_ok() {
                        mine.push((key, LAST_READ.with(Cell::get), n));
                    }
                    match rng.next() % 512 {
                        0 => std::thread::sleep(Duration::from_micros(rng.next() % 3_000)),
                        1..=8 => std::thread::yield_now(),
                        _ => {}
                    }
                }
                log.lock().unwrap().extend(mine);
            });
        }
    });
    let events = log.into_inner().unwrap();
    let mut bad = Vec::new();
    for k in 0..keys {
        let mine: Vec<_> = events.iter().filter(|e| e.0 == k).map(|e| (e.1, e.2)).collect();
        if let Some((ex, i)) = replay(q, mine.clone()) {
            bad.push(format!(
                "key {k}: {} admissions, event {i} exceeds tau by {} ns (overflow denials {})",
                mine.len(),
                ex / u128::from(q.count()),
                keyed.overflow_denials()
            ));
        }
    }
    bad
}

#[test]
fn keyed_tiny_table_many_keys_conforms_per_key() {
    // T = 50 us, burst 20 (tau = 1 ms)
    let q = Quota::new(20, Duration::from_millis(1), 20).unwrap();
    let bad = keyed_stress(q, 7, 8, 1, 4, 1500);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn keyed_colliding_keys_without_reclaim_conform_per_key() {
    // 4 keys in one 4-slot group: collisions in one cache line, but never a reclaim.
    let q = Quota::new(20, Duration::from_millis(1), 20).unwrap();
    let bad = keyed_stress(q, 4, 8, 1, 4, 800);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn keyed_small_sharded_table_conforms_per_key() {
    // 4 shards x 8 slots, 40 keys
    let q = Quota::new(5, Duration::from_micros(500), 5).unwrap();
    let bad = keyed_stress(q, 40, 8, 4, 8, 1200);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The TSC clock as a preempted thread sees it: now and then the thread is descheduled right
/// after reading the (monotonic) clock, for up to 2 ms, as an OS may do at any instruction.
#[derive(Clone)]
struct Preempted(TscClock);
thread_local!(static PRNG: Cell<u64> = const { Cell::new(0x1234_5678_9abc_def1) });
impl Clock for Preempted {
    fn now_ns(&self) -> u64 {
        let t = self.0.now_ns();
        LAST_READ.with(|c| c.set(t));
        let r = PRNG.with(|p| {
            let mut x = p.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p.set(x);
            x
        });
        if r.is_multiple_of(50) {
            std::thread::sleep(Duration::from_micros(r % 2_000));
        }
        t
    }
}

/// Six threads for 3 s on `clock`, each sending bursts to random keys of 6 through `check(key,
/// n)` and now and then pausing, so buckets fill, go idle and (in a table) get reclaimed while
/// other threads hold older clock readings: every admission as (key, clock read, n).
fn preempted_traffic(
    q: Quota,
    clock: &Preempted,
    check: impl Fn(u64, u64) -> bool + Sync,
) -> Vec<(u64, u64, u64)> {
    let log = Mutex::new(Vec::new());
    let stop = clock.0.now_ns() + 3_000_000_000;
    std::thread::scope(|s| {
        for seed in 0..6u64 {
            let (check, log) = (&check, &log);
            s.spawn(move || {
                PRNG.with(|p| p.set(0x2545_f491_4f6c_dd1d ^ (seed + 3).wrapping_mul(0x9e37_79b9)));
                let mut rng =
                    Rng::new(0x9e37_79b9_7f4a_7c15 ^ (seed + 11).wrapping_mul(0x1234_5678_9abc));
                let mut mine = Vec::new();
                while clock.0.now_ns() < stop {
                    let key = rng.next() % 6;
                    let n = if rng.next().is_multiple_of(2) {
                        q.burst()
                    } else {
                        1 + rng.next() % q.burst()
                    };
                    if check(key, n) {
                        mine.push((key, LAST_READ.with(Cell::get), n));
                    }
                    if rng.next().is_multiple_of(4) {
                        std::thread::sleep(Duration::from_micros(rng.next() % 1_500));
                    }
                }
                log.lock().unwrap().extend(mine);
            });
        }
    });
    log.into_inner().unwrap()
}

/// Key `k`'s admissions among `events`, as (clock read, n).
fn of_key(events: &[(u64, u64, u64)], k: u64) -> Vec<(u64, u64)> {
    events.iter().filter(|e| e.0 == k).map(|e| (e.1, e.2)).collect()
}

/// Keyed, one group of 4 slots, 6 keys, under [`preempted_traffic`].
#[test]
fn keyed_reclaim_with_random_preemption_conforms_per_key() {
    let q = Quota::new(10, Duration::from_millis(1), 10).unwrap(); // T = 100 us, tau = 1 ms
    let clock = Preempted(TscClock::new());
    let keyed = KeyedLimiter::<u64, _>::with_layout(q, 1, 4, clock.clone());
    let events = preempted_traffic(q, &clock, |key, n| keyed.check_n(&key, n).is_ok());
    let mut bad = Vec::new();
    for k in 0..6 {
        let mine = of_key(&events, k);
        if let Some((ex, i)) = replay(q, mine.clone()) {
            bad.push(format!(
                "key {k}: {} admissions, event {i} exceeds tau by {} ns",
                mine.len(),
                ex / u128::from(q.count())
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} events, overflow denials {}: {bad:#?}",
        events.len(),
        keyed.overflow_denials()
    );
}

/// Control: the same traffic and preemption on per-key Limiters (no table) always conforms.
#[test]
fn per_key_limiters_with_random_preemption_conform() {
    let q = Quota::new(10, Duration::from_millis(1), 10).unwrap();
    let clock = Preempted(TscClock::new());
    let lims: Vec<_> = (0..6).map(|_| Limiter::with_clock(q, clock.clone())).collect();
    let events = preempted_traffic(q, &clock, |key, n| lims[key as usize].check_n(n).is_ok());
    for k in 0..6 {
        assert_eq!(replay(q, of_key(&events, k)), None, "key {k}");
    }
}
