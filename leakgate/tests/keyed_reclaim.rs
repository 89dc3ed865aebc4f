//! `KeyedLimiter` reusing idle slots: a forgotten key never comes back with more than its lost
//! bucket would have given it (a thread that read the clock before the key was forgotten, a clock
//! that went back), and a key whose `Clone` panics mid-insert leaves the table as it was.

use leakgate::{Clock, KeyedLimiter, Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A clock that, for the thread flagged `STALL`, reads the time and then blocks before returning
/// it: a thread preempted right after reading a monotonic clock. The time itself only moves
/// forwards.
struct StallingClock {
    inner: ManualClock,
    stall_armed: AtomicBool,
    read_done: Barrier,
    resume: Barrier,
}

thread_local!(static STALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });

impl Clock for StallingClock {
    fn now_ns(&self) -> u64 {
        let t = self.inner.now_ns();
        if STALL.with(|s| s.get()) && self.stall_armed.swap(false, Ordering::SeqCst) {
            self.read_done.wait();
            self.resume.wait(); // "preempted" here, holding the reading `t`
        }
        t
    }
}

/// Regression (adversarial review, `keyed_reclaim_with_a_preempted_checker_over_admits`): key A's
/// idle slot was reclaimed at 1.2 s while a thread holding a clock reading of 0.6 s checked A;
/// that thread re-inserted A with a fresh bucket anchored at 0.6 s, and A got 30 units over
/// [0, 1.6 s] where the quota allows 26. A's new bucket now starts no earlier than 1.2 s.
#[test]
fn a_key_forgotten_while_its_checker_was_preempted_comes_back_no_emptier() {
    // T = 100 ms, burst 10 (tau = 1 s).
    let q = Quota::per_second(10).unwrap();
    let clock = Arc::new(StallingClock {
        inner: ManualClock::new(),
        stall_armed: AtomicBool::new(true),
        read_done: Barrier::new(2),
        resume: Barrier::new(2),
    });
    // One group of four slots: every key competes for them.
    let keyed = KeyedLimiter::<&str, _>::with_layout(q, 1, 4, clock.clone());
    let a_admitted = AtomicU64::new(0);
    let set = |t_ms: u64| clock.inner.set(ms(t_ms));

    set(0);
    assert!(keyed.check_n(&"A", 10).is_ok()); // TAT_A = 1.0 s
    a_admitted.fetch_add(10, Ordering::SeqCst);
    assert!(keyed.check_n(&"K1", 1).is_ok()); // TAT = 0.1 s
    set(500);
    assert!(keyed.check_n(&"K2", 10).is_ok()); // TAT 1.5 s
    assert!(keyed.check_n(&"K3", 10).is_ok()); // TAT 1.5 s
    set(600);
    std::thread::scope(|s| {
        let y = s.spawn(|| {
            STALL.with(|f| f.set(true));
            // Reads 0.6 s, is preempted, resumes after A was forgotten at 1.2 s.
            keyed.check_n(&"A", 10).is_ok()
        });
        clock.read_done.wait();
        set(1_200);
        assert!(keyed.check(&"B").is_ok()); // takes A's idle slot (A empty since 1.0 s)
        clock.resume.wait();
        if y.join().unwrap() {
            a_admitted.fetch_add(10, Ordering::SeqCst);
        }
    });
    set(1_600);
    if keyed.check_n(&"A", 10).is_ok() {
        a_admitted.fetch_add(10, Ordering::SeqCst);
    }
    // A per-key Limiter admits 20 here (0 s and 1.6 s); the GCRA bound over [0, 1.6 s] is 26.
    assert_eq!(a_admitted.load(Ordering::SeqCst), 20);
}

/// Regression (adversarial review, `keyed_reclaim_then_clock_back_over_admits`): A's slot was
/// reclaimed at 1.2 s, the clock went back to 0.6 s, and A came back with a fresh bucket; a
/// per-key Limiter would have denied it there.
#[test]
fn a_key_forgotten_at_a_later_time_comes_back_no_emptier_when_the_clock_goes_back() {
    let q = Quota::per_second(10).unwrap();
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::<&str, _>::with_layout(q, 1, 4, clock.clone());
    let per_key = Limiter::with_clock(q, clock.clone()); // what A alone would get
    let mut got = (0, 0);
    let mut a = |t: u64, n: u64| {
        clock.set(ms(t));
        got.0 += n * u64::from(per_key.check_n(n).is_ok());
        got.1 += n * u64::from(keyed.check_n(&"A", n).is_ok());
    };
    a(0, 10);
    clock.set(ms(0));
    keyed.check_n(&"K1", 1).unwrap();
    clock.set(ms(500));
    keyed.check_n(&"K2", 10).unwrap();
    keyed.check_n(&"K3", 10).unwrap();
    clock.set(ms(1_200));
    keyed.check(&"B").unwrap(); // takes A's slot
    let mut a = |t: u64, n: u64| {
        clock.set(ms(t));
        got.0 += n * u64::from(per_key.check_n(n).is_ok());
        got.1 += n * u64::from(keyed.check_n(&"A", n).is_ok());
    };
    a(600, 10);
    a(1_600, 10);
    assert_eq!(got, (20, 20), "(per-key Limiter, keyed A)");
}

/// A key whose `Clone` panics when asked to, for keys below 100.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Fragile(u32);

static CLONES_PANIC: AtomicBool = AtomicBool::new(false);

/// The tests that set `CLONES_PANIC` run one at a time.
static FRAGILE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if self.0 < 100 && CLONES_PANIC.load(Ordering::SeqCst) {
            panic!("cloning key {} failed", self.0);
        }
        Fragile(self.0)
    }
}

/// Regression (issue 10): an insert that reclaims a slot clones the group's other keys; a panic
/// there used to leave the slot sealed, and every later check of its key looped forever. The
/// keys are now cloned before the slot is touched.
#[test]
fn a_key_clone_panicking_inside_an_insert_leaves_the_table_as_it_was() {
    let _alone = FRAGILE.lock().unwrap_or_else(|e| e.into_inner());
    let clock = ManualClock::new();
    let q = Quota::per_second(1).unwrap();
    let keyed = KeyedLimiter::<Fragile, _>::with_layout(q, 1, 4, clock.clone());
    for k in 1..=4 {
        keyed.check(&Fragile(k)).unwrap();
    }
    clock.advance(ms(2_000)); // every bucket idle: a new key reclaims a slot
    CLONES_PANIC.store(true, Ordering::SeqCst);
    let insert = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        keyed.check(&Fragile(100)).is_ok()
    }));
    CLONES_PANIC.store(false, Ordering::SeqCst);
    assert!(insert.is_err(), "the clone of a group key panicked");
    let mut keys: Vec<u32> = keyed.snapshot().into_iter().map(|s| s.key.0).collect();
    keys.sort();
    assert_eq!(keys, [1, 2, 3, 4], "no slot was sealed or changed");
    for k in 1..=4 {
        assert!(keyed.check(&Fragile(k)).is_ok(), "key {k} answers");
        assert!(keyed.check(&Fragile(k)).is_err());
    }
    clock.advance(ms(2_000));
    assert!(keyed.check(&Fragile(100)).is_ok(), "the table still takes new keys");
}

/// The same for an insert into an unused slot, which clones the group's first key to fill the
/// array, and for the table's lock, which the panic poisons.
#[test]
fn a_key_clone_panicking_inside_a_fill_leaves_the_table_as_it_was() {
    let _alone = FRAGILE.lock().unwrap_or_else(|e| e.into_inner());
    let q = Quota::per_second(1).unwrap();
    let keyed = KeyedLimiter::<Fragile, _>::with_layout(q, 1, 4, ManualClock::new());
    keyed.check(&Fragile(1)).unwrap();
    CLONES_PANIC.store(true, Ordering::SeqCst);
    let insert = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        keyed.check(&Fragile(100)).is_ok()
    }));
    CLONES_PANIC.store(false, Ordering::SeqCst);
    assert!(insert.is_err(), "the clone of the group's first key panicked");
    assert!(keyed.check(&Fragile(1)).is_err(), "key 1 kept its bucket");
    assert!(keyed.check(&Fragile(101)).is_ok());
    assert_eq!(keyed.snapshot().len(), 2);
}

/// From the adversarial review (`snapshot_under_churn`): snapshots racing with constant
/// reclamation in a tiny table (two shards of two groups, 40 keys, real clock) never panic, never
/// list a key twice or more keys than slots, and report every level within the bucket's range.
/// A group keeps one lowering high-water for its four slots, and marks which slots were lowered:
/// a slot whose key gave back a far-ahead state (cancelled reservations) stays busy until that
/// state has passed, but its siblings do not. (With the high-water counted for every slot of the
/// group, a new key was refused here while three slots held empty buckets: fewer active keys
/// than the table's capacity.)
#[test]
fn a_lowering_in_one_slot_never_keeps_its_siblings_from_new_keys() {
    let clock = ManualClock::new();
    let q = Quota::per_second(1).unwrap();
    // One group of four slots: every key competes for them.
    let lim = KeyedLimiter::<u64, _>::with_layout(q, 1, 4, clock.clone());
    for key in 1..=4 {
        lim.check(&key).unwrap(); // busy until 1 s
    }
    // Key 1 queues 100 more units (its state 101 s ahead), then gives them all back: its word
    // was lowered from 101 s, so its slot stays busy until then.
    let queued: Vec<_> =
        (0..100).map(|_| lim.reserve_n(&1, 1, Duration::from_secs(200)).unwrap()).collect();
    for reservation in queued.into_iter().rev() {
        assert!(reservation.cancel(), "the latest reservation gives its unit back");
    }
    assert_eq!(lim.check(&1).unwrap_err().retry_after(), Some(Duration::from_secs(1)));
    clock.set(Duration::from_secs(5));
    // Keys 2, 3 and 4 are idle: three new keys take their slots.
    for key in 5..=7 {
        assert!(lim.check(&key).is_ok(), "new key {key} refused beside idle slots");
    }
    // Key 1's slot held 101 s: a fourth new key finds no room before then.
    assert!(lim.check(&8).is_err());
    assert_eq!(lim.overflow_denials(), 1);
    clock.set(Duration::from_secs(102));
    assert!(lim.check(&8).is_ok(), "key 1's slot is free once its high-water has passed");
}

#[test]
fn snapshots_under_constant_reclamation_list_each_key_once_within_range() {
    let q = Quota::new(10, Duration::from_millis(1), 10).unwrap();
    let keyed = KeyedLimiter::<u64, _>::with_layout(q, 2, 8, leakgate::TscClock::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Stops the checkers however this closure ends: a failed assertion below must fail the
        // test, not leave `scope` waiting for threads that never stop.
        let _stop_on_exit = StopOnDrop(&stop);
        for t in 0..3u64 {
            let (keyed, stop) = (&keyed, &stop);
            s.spawn(move || {
                let mut k = t;
                while !stop.load(Ordering::Relaxed) {
                    k = k.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let _ = keyed.check_n(&(k % 40), 1 + k % 10);
                }
            });
        }
        for _ in 0..2_000 {
            let snap = keyed.snapshot();
            let mut keys: Vec<_> = snap.iter().map(|s| s.key).collect();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), snap.len(), "a key listed twice");
            assert!(snap.len() <= 16);
            for s in &snap {
                assert!(s.remaining <= 10 && (0.0..=1.0).contains(&s.fill), "{s:?}");
            }
        }
    });
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

// ---- against a plain model, with a clock that goes back and forth ----

/// A one-group table as a plain model: four slots, each empty or holding a key and its `TAT` (ns,
/// `T` = 1 ms). A new key takes the first empty slot, else the first slot whose bucket is idle
/// (`TAT` strictly before now), else it is refused. A new bucket starts at the latest time a slot
/// was judged idle (0 before any), so it is never emptier than a bucket that was forgotten.
struct Slots {
    burst: u64,
    slots: [Option<(u8, u64)>; 4],
    forgotten_at: u64,
    overflow: u64,
}

const T: u64 = 1_000_000;

impl Slots {
    fn check(&mut self, key: u8, now: u64, n: u64) -> Option<u64> {
        let i = match self.slots.iter().position(|s| matches!(s, Some((k, _)) if *k == key)) {
            Some(i) => i,
            None => {
                let i = self.slots.iter().position(Option::is_none).or_else(|| {
                    let idle = self.slots.iter().position(|s| s.is_some_and(|(_, t)| t < now))?;
                    self.forgotten_at = self.forgotten_at.max(now);
                    Some(idle)
                });
                let Some(i) = i else {
                    self.overflow += 1;
                    return None;
                };
                self.slots[i] = Some((key, self.forgotten_at));
                i
            }
        };
        let (_, tat) = self.slots[i].as_mut().unwrap();
        let start = (*tat).max(now);
        (start + n * T - now <= self.burst * T).then(|| {
            *tat = start + n * T;
            (self.burst * T - (*tat - now)) / T
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Eight keys through four slots, the clock jumping back and forth: the table answers as the
    /// model, whose forgotten keys come back no emptier than the latest time a slot was judged
    /// idle. (Costs are within the burst: no request here takes nothing.)
    #[test]
    fn a_four_slot_table_with_a_clock_going_back_matches_the_model(
        burst in 1u64..4,
        steps in prop::collection::vec((0u8..8, 1u64..4, 0u64..6_000, any::<bool>()), 1..300),
    ) {
        let q = Quota::new(burst, Duration::from_nanos(T * burst), burst).unwrap();
        let clock = ManualClock::new();
        let table = KeyedLimiter::<u8, _>::with_layout(q, 1, 4, clock.clone());
        let mut model = Slots { burst, slots: [None; 4], forgotten_at: 0, overflow: 0 };
        let mut now = 0u64;
        for (key, n, t_us, jump) in steps {
            let n = n.min(burst);
            // Half the steps move forward a little, the others jump anywhere in 6 ms.
            now = if jump { t_us * 1_000 } else { now + t_us * 100 };
            clock.set(Duration::from_nanos(now));
            let want = model.check(key, now, n);
            let got = table.check_n(&key, n).ok().map(|a| a.remaining());
            prop_assert_eq!(got, want, "key {} n {} at {}", key, n, now);
            prop_assert_eq!(table.overflow_denials(), model.overflow);
        }
    }
}
