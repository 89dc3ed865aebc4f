//! Queue mode: the [`QueueGate`] trait, and [`wait_turn`], the one way every gate waits.
//!
//! A gate turns a request into a future over leakgate's cancel-safe async wait
//! (`until_ready_n_timeout` on a [`Limiter`](leakgate::Limiter) or on a key of a
//! [`KeyedLimiter`](leakgate::KeyedLimiter)), handing it to [`wait_turn`], which notes whether the
//! request had to wait and reads the bucket's level once it may go.

use super::{Gate, Level};
use crate::key::{KeyError, OnKeyError};
use http::request::Parts;
use leakgate::{Admitted, Denied};
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::time::Duration;

/// How a queued request ended.
pub(crate) enum Waited {
    /// Its time came; the bucket's level as it went on, and whether it had to wait at all.
    Released { level: Level, queued: bool },
    /// It would have waited longer than `max_wait`: refused at once, nothing taken.
    Refused(Denied),
}

/// A queued request's wait: cancel-safe (dropping it gives its place back when possible).
pub(crate) type Wait = Pin<Box<dyn Future<Output = Waited> + Send>>;

/// A request placed in a queue: its wait, and whether it had no key and waits in the shared
/// keyless bucket (as [`Checked::keyless`](super::Checked) for a meter).
pub(crate) struct Queued {
    pub(crate) wait: Wait,
    pub(crate) keyless: bool,
}

/// A source of queue-mode decisions: requests wait for their turn, up to a bound.
pub(crate) trait QueueGate: Gate {
    /// Finds the bucket of `request` and returns its wait, which takes a place to go at most
    /// `max_wait` from now when first polled; `Err` as for [`Gate::check`].
    fn wait(
        self: Arc<Self>,
        request: &Parts,
        on_key_error: OnKeyError,
        max_wait: Duration,
    ) -> Result<Queued, KeyError>;
}

/// Runs `waiting`, a leakgate async wait (`until_ready_n_timeout`), to its end: released with
/// `level()` read as the request goes on, or refused. Dropping this drops `waiting`, whose
/// reservation is then cancelled: a client that hangs up gives its place back if no later request
/// was queued behind it.
pub(crate) async fn wait_turn(
    waiting: impl Future<Output = Result<(), Denied>>,
    level: impl FnOnce() -> Level,
) -> Waited {
    let mut waiting = pin!(waiting);
    let mut queued = false;
    let outcome = poll_fn(|cx| {
        let poll = waiting.as_mut().poll(cx);
        // Pending once means it had to wait for its time: a conforming request's wait is ready
        // on its first poll.
        queued |= poll.is_pending();
        poll
    })
    .await;
    match outcome {
        Ok(()) => Waited::Released { level: level(), queued },
        Err(denied) => Waited::Refused(denied),
    }
}

/// A bucket's level from a peek (`check_n(0)`). A peek always conforms; should a limiter ever
/// say otherwise, its figures still hold.
pub(crate) fn peeked(peek: Result<Admitted, Denied>) -> Level {
    match peek {
        Ok(peek) => Level { remaining: peek.remaining(), reset_after: peek.reset_after() },
        Err(peek) => Level { remaining: peek.remaining(), reset_after: peek.reset_after() },
    }
}
