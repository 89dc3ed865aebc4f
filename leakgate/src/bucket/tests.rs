//! Unit tests of the bucket protocol's paths.

use super::*;

/// One per 10 ns, burst 4: tau = 160 units of a quarter nanosecond.
fn rate() -> Rate {
    Rate::new(1, 10, 4).unwrap()
}

#[test]
fn cas_path_admits_and_refuses_like_the_step() {
    let (word, r) = (AtomicU64::new(0), rate());
    assert_eq!(take(&word, &r, 400, 4, 0).unwrap(), Ok(560));
    let refused = take(&word, &r, 400, 1, 0).unwrap().unwrap_err();
    assert_eq!(refused, Refused { tat: 560, why: Refusal::Wait(40) });
    assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 560, "a denial writes nothing");
}

#[test]
fn requests_that_take_nothing_record_the_time() {
    let (word, r) = (AtomicU64::new(0), rate());
    assert_eq!(take(&word, &r, 1000, 0, 0).unwrap(), Ok(0));
    assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 1000);
    assert!(take(&word, &r, 2000, 5, 0).unwrap().is_err());
    assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 2000);
    // A busy word is not touched.
    assert_eq!(take(&word, &r, 1500, 0, 0).unwrap(), Ok(2000));
    assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 2000);
}

#[test]
fn add_path_admits_on_a_busy_word_and_takes_back_an_overshoot() {
    let (word, r) = (AtomicU64::new(440), rate());
    assert!(matches!(add(&word, &r, 400, 1, 0, 440), Added::Admitted(480)));
    // The bucket now holds 80 of 160 units; 3 more overshoot and are taken back exactly.
    let Added::Refused(refused) = add(&word, &r, 400, 3, 0, 480) else { panic!() };
    assert_eq!(refused, Refused { tat: 480, why: Refusal::Wait(40) });
    assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 480);
}

#[test]
fn add_path_starts_an_idle_bucket_at_now() {
    let (word, r) = (AtomicU64::new(100), rate());
    assert!(matches!(add(&word, &r, 400, 1, 0, 100), Added::Admitted(440)));
}

#[test]
fn add_path_gives_back_a_charge_on_a_lowered_word() {
    // Read busy at 500, but an undo lowered it to 300 before the add at time 400.
    let (word, r) = (AtomicU64::new(300), rate());
    assert!(matches!(add(&word, &r, 400, 1, 0, 500), Added::Lowered));
    assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 300);
}

#[test]
fn room_to_add_keeps_half_the_bucket_spare() {
    let r = rate(); // tau = 160, one unit of cost = 40
    assert!(room_to_add(&r, 0, 400, 440, 0), "empty after one: 120 of 160 spare");
    assert!(room_to_add(&r, 440, 400, 480, 0), "half full after: 80 spare");
    assert!(!room_to_add(&r, 480, 400, 520, 0), "three quarters full after");
    assert!(room_to_add(&r, 480, 400, 520, 1000), "a queue has its wait to spare too");
}

#[test]
fn undo_is_exact_or_nothing() {
    let word = AtomicU64::new(520);
    assert!(!undo(&word, 480, 40), "something was granted after it");
    assert!(undo(&word, 520, 40));
    assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 480);
}
