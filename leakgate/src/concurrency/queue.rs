//! The wait queue: waiters in arrival order, each handed its permits by whoever frees them.
//!
//! # Implementation details
//!
//! A waiter is a [`Node`] in a `VecDeque` under one mutex. Room is never left for waiters to
//! race for: whoever frees it (a release that saw `QUEUED`, a rise of `max`, a waiter leaving)
//! takes the lock and *grants* from the head while the head fits, adding the head's permits to
//! `in_flight` on its behalf and marking its node; the waiter finds its permits already counted.
//! So the order is first come, first served, and a large request at the head is not overtaken by
//! smaller ones behind it (they wait for it, as in a fair semaphore). `QUEUED` in the state word
//! is set and cleared only under this lock, and is set whenever the queue is not empty.
//!
//! A waiter that leaves (a timeout, a dropped future) takes the lock: granted already, it gives
//! the permits back and serves the queue; not yet, it takes its node out and serves the queue
//! (the head may have changed). Either way nothing is lost or leaked.

use super::state::State;
use crate::sync::{lock, Arc, AtomicBool, Condvar, Mutex, MutexGuard, Ordering};
use std::collections::VecDeque;
use std::task::Waker;
use std::time::Instant;

/// One waiter.
#[derive(Debug)]
pub(crate) struct Node {
    /// Permits it waits for.
    n: u32,
    /// Set once, when its permits were added to `in_flight` for it. Written and read only with the
    /// queue's lock held, which orders it; atomic only to be written through a shared `Arc`.
    granted: AtomicBool,
    /// A blocking waiter sleeps on this (always with the queue's lock).
    wake_thread: Condvar,
}

impl Node {
    fn is_granted(&self) -> bool {
        // Relaxed: read under the queue's lock, which orders it (see the field).
        self.granted.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct Entry {
    node: Arc<Node>,
    /// An async waiter's waker (the latest poll's); `None` for a blocking one.
    waker: Option<Waker>,
}

/// The waiters, first come first.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    waiters: Mutex<VecDeque<Entry>>,
}

/// What an enqueue found.
pub(crate) enum Enqueued {
    /// The permits were there: taken at once.
    Granted,
    /// Waiting, as this node.
    Waiting(Arc<Node>),
}

impl Queue {
    /// Queues a request for `n` permits (granted at once if it is the head and fits).
    pub(crate) fn enqueue(&self, state: &State, n: u32, waker: Option<Waker>) -> Enqueued {
        let mut waiters = lock(&self.waiters);
        let node =
            Arc::new(Node { n, granted: AtomicBool::new(false), wake_thread: Condvar::new() });
        waiters.push_back(Entry { node: node.clone(), waker });
        state.set_queued(true);
        // A release before the flag went up freed room nobody handed on: serve it now.
        grant(&mut waiters, state);
        if node.is_granted() {
            Enqueued::Granted
        } else {
            Enqueued::Waiting(node)
        }
    }

    /// Hands the room there is to the head of the queue (after a release that saw `QUEUED`, or a
    /// rise of `max`).
    pub(crate) fn serve(&self, state: &State) {
        grant(&mut lock(&self.waiters), state);
    }

    /// Blocks until `node` is granted (true) or `deadline` passes (false, and it leaves).
    pub(crate) fn wait_until(&self, state: &State, node: &Arc<Node>, deadline: Instant) -> bool {
        let mut waiters = lock(&self.waiters);
        loop {
            if node.is_granted() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                leave(&mut waiters, state, node);
                return false;
            }
            waiters = wait_timeout(&node.wake_thread, waiters, deadline - now);
        }
    }

    /// Whether `node` was granted; if not, `waker` is the one to wake when it is.
    pub(crate) fn poll(&self, node: &Arc<Node>, waker: &Waker) -> bool {
        let mut waiters = lock(&self.waiters);
        if node.is_granted() {
            return true;
        }
        if let Some(entry) = waiters.iter_mut().find(|e| Arc::ptr_eq(&e.node, node)) {
            match &entry.waker {
                Some(w) if w.will_wake(waker) => {}
                _ => entry.waker = Some(waker.clone()),
            }
        }
        false
    }

    /// `node`'s waiter gives up (a dropped future): its permits, if granted, go back.
    pub(crate) fn cancel(&self, state: &State, node: &Arc<Node>) {
        leave(&mut lock(&self.waiters), state, node);
    }

    /// How many wait.
    pub(crate) fn len(&self) -> usize {
        lock(&self.waiters).len()
    }
}

/// Under the lock: a granted node's permits go back; a waiting one leaves the queue. Then the
/// queue is served, since either may have made room for the (new) head.
fn leave(waiters: &mut MutexGuard<'_, VecDeque<Entry>>, state: &State, node: &Arc<Node>) {
    if node.is_granted() {
        state.release(node.n);
    } else if let Some(at) = waiters.iter().position(|e| Arc::ptr_eq(&e.node, node)) {
        waiters.remove(at);
    }
    grant(waiters, state);
}

/// Under the lock: grants from the head while it fits, then clears `QUEUED` if nobody is left.
fn grant(waiters: &mut MutexGuard<'_, VecDeque<Entry>>, state: &State) {
    while let Some(head) = waiters.front() {
        if !state.try_add(head.node.n, false) {
            break;
        }
        let Some(mut head) = waiters.pop_front() else { break };
        // Relaxed: under the lock (see `Node::granted`).
        head.node.granted.store(true, Ordering::Relaxed);
        head.node.wake_thread.notify_one();
        if let Some(waker) = head.waker.take() {
            waker.wake();
        }
    }
    if waiters.is_empty() {
        state.set_queued(false);
    }
}

fn wait_timeout<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    d: std::time::Duration,
) -> MutexGuard<'a, T> {
    match cv.wait_timeout(guard, d) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}
