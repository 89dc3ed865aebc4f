//! The leaky bucket as a queue, on a manual clock: reservation order, the `max_wait` bound,
//! cancellation and its refund, pacing with and without slack.

use leakgate::{Limiter, ManualClock, Quota};
use std::time::Duration;

fn limiter(q: Quota) -> (Limiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (Limiter::with_clock(q, clock.clone()), clock)
}

fn per_second(count: u64, burst: u64) -> Quota {
    Quota::per_second(count).unwrap().with_burst(burst).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The bucket's state as a duration ahead of the clock (`reset_after` of a peek).
fn backlog(lim: &Limiter<ManualClock>) -> Duration {
    lim.check_n(0).unwrap().reset_after()
}

#[test]
fn reservations_are_served_in_order_at_the_rate() {
    let (lim, _) = limiter(per_second(10, 1));
    let times: Vec<Duration> =
        (0..5).map(|_| lim.reserve(Duration::MAX).unwrap().ready_at()).collect();
    assert_eq!(times, [0, 100, 200, 300, 400].map(ms));
}

#[test]
fn racing_threads_get_distinct_evenly_spaced_places() {
    let (lim, _) = limiter(per_second(1000, 1));
    let mut times: Vec<Duration> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mine: Vec<Duration> =
                        (0..250).map(|_| lim.reserve(Duration::MAX).unwrap().ready_at()).collect();
                    assert!(mine.windows(2).all(|w| w[0] < w[1]), "FIFO within a thread");
                    mine
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().unwrap()).collect::<Vec<_>>()
    });
    times.sort_unstable();
    assert_eq!(times, (0..1000).map(ms).collect::<Vec<_>>(), "every millisecond exactly once");
}

#[test]
fn max_wait_bounds_the_queue() {
    let (lim, clock) = limiter(per_second(10, 1));
    let mut queued = 0;
    while lim.reserve(ms(250)).is_ok() {
        queued += 1;
    }
    assert_eq!(queued, 3, "waits of 0, 100 and 200 ms fit; 300 ms does not");
    let denied = lim.reserve(ms(250)).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(50)), "in 50 ms the next one waits exactly 250 ms");
    assert_eq!(backlog(&lim), ms(300), "a denial takes nothing");
    clock.advance(ms(50));
    assert_eq!(lim.reserve(ms(250)).unwrap().delay(), ms(250), "the boundary is included");
}

#[test]
fn cost_above_burst_is_never_queued() {
    let (lim, _) = limiter(Quota::per_second(10).unwrap());
    assert_eq!(lim.reserve_n(11, Duration::MAX).unwrap_err().retry_after(), None);
    assert_eq!(lim.check_n(0).unwrap().remaining(), 10, "nothing was taken");
}

#[test]
fn zero_cost_is_ready_now_and_takes_nothing() {
    let (lim, clock) = limiter(per_second(1, 1));
    lim.check().unwrap();
    clock.advance(ms(300));
    let r = lim.reserve_n(0, Duration::ZERO).unwrap();
    assert!(r.is_ready());
    assert_eq!(r.ready_at(), ms(300));
    assert!(!r.cancel(), "nothing to give back");
    assert_eq!(backlog(&lim), ms(700));
}

#[test]
fn zero_max_wait_is_a_check() {
    let (lim, _) = limiter(Quota::per_second(2).unwrap());
    assert!(lim.reserve(Duration::ZERO).unwrap().is_ready());
    assert!(lim.reserve(Duration::ZERO).unwrap().is_ready());
    assert!(lim.reserve(Duration::ZERO).is_err());
}

#[test]
fn a_clock_moved_back_never_gets_an_earlier_place() {
    let (lim, clock) = limiter(per_second(1, 1));
    clock.set(secs(100));
    assert_eq!(lim.reserve(Duration::MAX).unwrap().ready_at(), secs(100));
    clock.set(secs(10));
    let r = lim.reserve(Duration::MAX).unwrap();
    assert_eq!(r.ready_at(), secs(101), "after the place taken at 100 s");
    assert_eq!(r.delay(), secs(91));
}

#[test]
fn cancel_gives_the_units_back() {
    let (lim, _) = limiter(per_second(1, 1));
    lim.check().unwrap();
    let r = lim.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(r.delay(), secs(1));
    assert!(r.cancel());
    assert_eq!(lim.reserve(Duration::MAX).unwrap().delay(), secs(1), "the same place again");
}

#[test]
fn cancel_does_not_give_back_what_later_reservations_hold() {
    let (lim, _) = limiter(per_second(1, 1));
    lim.check().unwrap();
    let a = lim.reserve(Duration::MAX).unwrap(); // at 1 s
    let b = lim.reserve(Duration::MAX).unwrap(); // at 2 s, keeps its place
    assert!(!a.cancel(), "b was granted on top of a: nothing to give back");
    assert_eq!(b.ready_at(), secs(2));
    assert_eq!(lim.reserve(Duration::MAX).unwrap().ready_at(), secs(3));
}

#[test]
fn cancel_under_a_later_reservation_of_smaller_cost_gives_nothing_back() {
    // 1/s, burst 4: the bucket is full, then a (cost 3) at 3 s and b (cost 1) at 4 s.
    let (lim, _) = limiter(per_second(1, 4));
    lim.check_n(4).unwrap();
    let a = lim.reserve_n(3, Duration::MAX).unwrap();
    let b = lim.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!((a.ready_at(), b.ready_at()), (secs(3), secs(4)));
    assert!(!a.cancel(), "b keeps its place at 4 s: nothing comes back from under it");
    assert_eq!(backlog(&lim), secs(8));
    assert!(b.cancel(), "b is the last: undone");
    assert_eq!(backlog(&lim), secs(7), "a's 3 s stay lost: it was cancelled from under b");
}

/// Found by the property test in `queue_model.rs` against x/time/rate's refund rule (give back
/// the cost less what was reserved after it): after one partial refund, a second cancel below it
/// gave back units that a kept reservation's time depended on, and the next reservation pushed the
/// bucket past its burst.
#[test]
fn regression_two_cancels_in_a_row_never_give_back_too_much() {
    // 10/s, burst 4; the clock stays at 0. In intervals T = 100 ms:
    let (lim, _) = limiter(per_second(10, 4));
    let head = lim.reserve_n(3, Duration::ZERO).unwrap(); // 3 units, now
    let r4 = lim.reserve_n(3, ms(200)).unwrap(); // at 2T, state 6T
    let r5 = lim.reserve_n(4, ms(600)).unwrap(); // at 6T, state 10T
    let r6 = lim.reserve_n(1, ms(700)).unwrap(); // at 7T, state 11T: kept
    assert_eq!(r6.ready_at(), ms(700));
    let _ = (r5.cancel(), r4.cancel());
    let r7 = lim.reserve_n(4, ms(700));
    // Kept: 3 units at 0 and r6 (1 unit) at 7T. Four more at 7T would make 5 in one instant,
    // over the burst of 4: r7 may only go at 8T or later.
    if let Ok(r7) = r7 {
        assert!(r7.ready_at() >= ms(800), "{r7:?} goes too early");
    }
    drop(head);
}

#[test]
fn cancelling_everything_from_the_back_restores_the_bucket() {
    let (lim, _) = limiter(per_second(4, 2));
    lim.check_n(2).unwrap();
    let before = backlog(&lim);
    let mut queue: Vec<_> =
        (1..=2).cycle().take(6).map(|n| lim.reserve_n(n, Duration::MAX).unwrap()).collect();
    while let Some(r) = queue.pop() {
        assert!(r.cancel());
    }
    assert_eq!(backlog(&lim), before);
}

#[test]
fn cancel_after_its_time_gives_nothing_back() {
    let (lim, clock) = limiter(per_second(1, 1));
    lim.check().unwrap();
    let r = lim.reserve(Duration::MAX).unwrap();
    clock.advance(secs(1));
    assert!(r.is_ready());
    assert!(!r.cancel());
    assert!(lim.check().is_err(), "the unit was used");
}

#[test]
fn a_cancel_never_moves_the_state_behind_the_clock() {
    let (lim, clock) = limiter(per_second(1, 2));
    lim.check_n(2).unwrap();
    let r = lim.reserve_n(2, Duration::MAX).unwrap(); // at 2 s, state 4 s
    clock.advance(ms(1500));
    assert!(r.cancel());
    // Without the reservation the state would be 2 s; half a second of it is still ahead.
    assert_eq!(backlog(&lim), ms(500));
}

#[test]
fn burst_one_spaces_releases_exactly_even_for_a_fractional_interval() {
    let (lim, _) = limiter(per_second(3, 1));
    let times: Vec<u128> =
        (0..4).map(|_| lim.reserve(Duration::MAX).unwrap().ready_at().as_nanos()).collect();
    // T = 333_333_333.33 ns: each time is the first nanosecond at or after k * T; no drift.
    assert_eq!(times, [0, 333_333_334, 666_666_667, 1_000_000_000]);
}

#[test]
fn burst_one_lets_no_late_caller_catch_up() {
    let (lim, clock) = limiter(per_second(10, 1));
    lim.check().unwrap();
    clock.advance(ms(1000)); // nine slots missed
    let delays: Vec<Duration> =
        (0..3).map(|_| lim.reserve(Duration::MAX).unwrap().delay()).collect();
    assert_eq!(delays, [0, 100, 200].map(ms));
}

#[test]
fn slack_lets_a_late_caller_catch_up_by_a_bounded_amount() {
    // 10/s with a slack of 2 (burst 3): however late, at most 3 go at once, then 100 ms apart.
    let (lim, clock) = limiter(per_second(10, 3));
    for late in [ms(250), secs(60)] {
        clock.advance(late);
        let delays: Vec<Duration> =
            (0..5).map(|_| lim.reserve(Duration::MAX).unwrap().delay()).collect();
        let caught_up = delays.iter().filter(|d| d.is_zero()).count();
        assert!(caught_up <= 3, "{late:?}: {delays:?}");
        assert_eq!(delays[4] - delays[3], ms(100), "then back to the rate");
    }
    // Late by 250 ms after the queue drained: 2.5 slots missed, 2 whole ones made up plus the
    // one due now.
    let (lim, clock) = limiter(per_second(10, 3));
    lim.check_n(3).unwrap();
    clock.advance(ms(250));
    let delays: Vec<Duration> =
        (0..4).map(|_| lim.reserve(Duration::MAX).unwrap().delay()).collect();
    assert_eq!(delays, [0, 0, 50, 150].map(ms));
}
