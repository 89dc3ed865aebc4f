//! Queue mode per key: a keyed limiter's reservations and waits answer for every key exactly as
//! that key's own `Limiter`'s do (places, bounds, cancels), and owned reservations move between
//! threads.

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn places_are_fifo_per_key_and_independent_across_keys() {
    let clock = ManualClock::new();
    let keyed =
        KeyedLimiter::with_clock(Quota::per_second(4).unwrap().with_burst(1).unwrap(), clock);
    let a: Vec<_> = (0..3).map(|_| keyed.reserve("a", Duration::MAX).unwrap().delay()).collect();
    let b = keyed.reserve("b", Duration::MAX).unwrap().delay();
    assert_eq!(a, [ms(0), ms(250), ms(500)]);
    assert_eq!(b, ms(0));
    let denied = keyed.reserve("a", ms(600)).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(150)));
}

#[test]
fn cancel_gives_back_only_the_last_place_of_the_key() {
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::with_clock(Quota::per_second(1).unwrap(), clock.clone());
    keyed.check(&1u32).unwrap();
    let first = keyed.reserve_n(&1u32, 1, Duration::MAX).unwrap();
    let second = keyed.reserve_n(&1u32, 1, Duration::MAX).unwrap();
    let other = keyed.reserve_n(&2u32, 1, Duration::MAX).unwrap();
    assert!(!other.cancel(), "due at once: nothing to give back");
    assert!(!first.cancel(), "the second stands on it");
    assert!(second.cancel());
    assert_eq!(keyed.reserve_n(&1u32, 1, Duration::MAX).unwrap().delay(), Duration::from_secs(2));
    // Once due, a cancel gives nothing back.
    let due = keyed.reserve_n(&1u32, 1, Duration::MAX).unwrap();
    clock.advance(Duration::from_secs(3));
    assert!(!due.cancel());
}

#[test]
fn owned_reservations_and_waits_move_to_other_threads() {
    let keyed =
        Arc::new(KeyedLimiter::new(Quota::per_second(1000).unwrap().with_burst(1).unwrap()));
    let handles: Vec<_> = (0..4u64)
        .map(|i| {
            let r = keyed.reserve_n_owned(&(i % 2), 1, Duration::MAX).unwrap();
            std::thread::spawn(move || r.wait())
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    keyed.wait(&7u64).unwrap();
    assert!(keyed.wait_n(&7u64, 2).is_err(), "above the burst");
}

#[test]
fn a_key_with_no_room_cannot_queue_in_the_shared_overflow_bucket() {
    use leakgate::OverflowPolicy;
    let q = Quota::per_hour(1).unwrap();
    let keyed = KeyedLimiter::<u64, _>::with_capacity_and_clock(q, 50, ManualClock::new())
        .with_overflow(OverflowPolicy::SharedBucket(Quota::per_second(100).unwrap()));
    for k in 0..64 {
        keyed.check(&k).unwrap();
    }
    assert!(keyed.check(&1000).is_ok(), "a meter is served by the shared bucket");
    assert!(keyed.reserve(&1000, Duration::MAX).is_err(), "a queue is not");
}

fn quotas() -> impl Strategy<Value = Quota> {
    (1u64..10, prop_oneof![Just(1_000_000_000u64), 1u64..10_000_000], 1u64..4)
        .prop_filter_map("valid", |(c, p, b)| Quota::new(c, Duration::from_nanos(p), b).ok())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Reservations, checks and cancels of three keys against a `Limiter` per key, the clock
    /// moving forward: the same places, the same refusals, the same cancels.
    #[test]
    fn keyed_reservations_answer_as_a_limiter_per_key(
        q in quotas(),
        steps in prop::collection::vec((0u8..3, 0u64..2_000, any::<u8>()), 1..120),
    ) {
        let clock = ManualClock::new();
        let keyed = KeyedLimiter::<u8, _>::with_clock(q, clock.clone());
        let per_key: Vec<_> = (0..3).map(|_| Limiter::with_clock(q, clock.clone())).collect();
        let interval = (q.period().as_nanos() / u128::from(q.count())) as u64;
        let mut held = Vec::new();
        for (key, step, pick) in steps {
            clock.advance(Duration::from_nanos(interval / 1000 * step));
            let lim = &per_key[usize::from(key)];
            let n = 1 + u64::from(pick) % q.burst();
            let max_wait = Duration::from_nanos(interval * u64::from(pick % 5));
            match pick % 4 {
                0 => prop_assert_eq!(keyed.check_n(&key, n).is_ok(), lim.check_n(n).is_ok()),
                1 => {
                    if let Some((k, mine, theirs)) = held.pop() {
                        let (mine, theirs): (leakgate::Reservation<'_>, leakgate::Reservation<'_>) = (mine, theirs);
                        prop_assert_eq!(mine.cancel(), theirs.cancel(), "cancel of key {}", k);
                    }
                }
                _ => match (keyed.reserve_n(&key, n, max_wait), lim.reserve_n(n, max_wait)) {
                    (Ok(mine), Ok(theirs)) => {
                        prop_assert_eq!(mine.ready_at(), theirs.ready_at());
                        held.push((key, mine, theirs));
                    }
                    (Err(mine), Err(theirs)) => prop_assert_eq!(mine.retry_after(), theirs.retry_after()),
                    (mine, theirs) => prop_assert!(false, "{:?} vs {:?}", mine, theirs),
                },
            }
        }
    }
}
