//! Loom models of `ConcurrencyLimiter` (issue 28): acquires, releases and changes of `max`
//! racing on the one state word, a waiter woken by a release (no lost wakeup), and a waiter
//! cancelled while a release hands it its permit (nothing lost or leaked).
#![cfg(loom)]

use leakgate::ConcurrencyLimiter;
use leakgate_loom_tests::model;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::future::Future;
use std::task::{Context, Wake, Waker};

/// A waker that unparks a loom thread.
struct Unpark(loom::thread::Thread);

impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `fut` to completion on this loom thread, parking while it is pending.
fn block_on<F: Future>(fut: F) -> F::Output {
    let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

#[test]
fn two_acquirers_and_a_release_never_exceed_max() {
    model(|| {
        let c = Arc::new(ConcurrencyLimiter::new(1).unwrap());
        let held = Arc::new(AtomicU32::new(0));
        let first = c.try_acquire().unwrap();
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let (c, held) = (c.clone(), held.clone());
                thread::spawn(move || {
                    if let Some(p) = c.try_acquire() {
                        assert_eq!(held.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                        held.fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                })
            })
            .collect();
        drop(first);
        for r in racers {
            r.join().unwrap();
        }
        assert_eq!(c.in_flight(), 0);
    });
}

#[test]
fn lowering_max_racing_an_acquire_revokes_nothing_and_admits_within_one_of_the_limits() {
    model(|| {
        let c = Arc::new(ConcurrencyLimiter::new(2).unwrap());
        let first = c.try_acquire().unwrap();
        let acquirer = {
            let c = c.clone();
            thread::spawn(move || c.try_acquire().map(|p| p.count()).unwrap_or(0))
        };
        let lower = {
            let c = c.clone();
            thread::spawn(move || c.set_max(1))
        };
        let got = acquirer.join().unwrap();
        lower.join().unwrap();
        // Before the change the second fits; after it, it does not. Either way the first stays.
        assert!(got <= 1);
        assert_eq!(c.in_flight(), 1, "the first permit is still held; the second was dropped");
        assert_eq!(c.max(), 1);
        assert!(c.try_acquire().is_none());
        drop(first);
        assert!(c.try_acquire().is_some());
    });
}

#[test]
fn a_release_wakes_a_queued_waiter() {
    model(|| {
        // `std`'s `Arc`: owned permits need it (its count is not what is modelled).
        let c = std::sync::Arc::new(ConcurrencyLimiter::new(1).unwrap());
        let first = c.try_acquire_owned().unwrap();
        let waiter = {
            let c = c.clone();
            thread::spawn(move || block_on(c.acquire()).count())
        };
        drop(first);
        assert_eq!(waiter.join().unwrap(), 1);
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.waiting(), 0);
    });
}

#[test]
fn a_waiter_cancelled_as_a_release_grants_it_loses_and_leaks_nothing() {
    model(|| {
        // `std`'s `Arc`: owned permits need it (its count is not what is modelled).
        let c = std::sync::Arc::new(ConcurrencyLimiter::new(1).unwrap());
        let first = c.try_acquire_owned().unwrap();
        let waiter = {
            let c = c.clone();
            thread::spawn(move || {
                let mut fut = Box::pin(c.acquire());
                let mut cx = Context::from_waker(Waker::noop());
                // Queued (pending) or already granted (the release came first): then dropped.
                let done = fut.as_mut().poll(&mut cx).is_ready();
                drop(fut);
                done
            })
        };
        let releaser = thread::spawn(move || drop(first));
        waiter.join().unwrap();
        releaser.join().unwrap();
        assert_eq!(c.in_flight(), 0, "the granted permit came back");
        assert_eq!(c.waiting(), 0);
        assert!(c.try_acquire().is_some(), "the queue flag is down");
    });
}
