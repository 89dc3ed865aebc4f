//! A `#![no_std]` crate built on leakgate with its default features off: it uses every item of
//! the core that needs no `std` (quotas parsed from text and printed, their errors, a [`Limiter`]
//! and the colour meters [`SrTcm`] and [`TrTcm`] on a clock the caller sets once per burst,
//! shared or held by one owner, a quota's exact units for stored state, [`ExactRate`]), so
//! that CI, building it for a target that has no `std` at all (`x86_64-unknown-none`), fails if
//! a `std` creeps into leakgate's core or its dependencies. With the feature `alloc` it also uses
//! what needs an allocator ([`leakgate::ManualClock`], a `Clock` for `Arc`).
//!
//! Its tests run on the host (`cargo test -p leakgate-nostd-check`), where leakgate is then built
//! without `std` too: the spin lock that serialises `set_quota`, and parse errors cut to fit
//! without an allocator, are tested there.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(test)]
extern crate std;

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use leakgate::{
    Admitted, Clock, Color, Denied, ExactRate, Limiter, MeterError, ParseMessage, Quota,
    QuotaError, SrTcm, TrTcm, MAX_BYTE_RATE_PER_SECOND, MAX_RATE_PER_SECOND,
};

/// Time as a packet loop reads it, once per burst: nanoseconds since the loop's origin, set by
/// the caller (from a hardware timer, say).
#[derive(Debug, Default)]
pub struct BurstClock {
    /// The time last set. Relaxed everywhere: a lone value that publishes no other memory.
    ns: AtomicU64,
}

impl BurstClock {
    /// A clock at time zero.
    pub const fn new() -> Self {
        BurstClock { ns: AtomicU64::new(0) }
    }

    /// Sets the time for the next burst.
    pub fn set(&self, ns: u64) {
        self.ns.store(ns, Ordering::Relaxed);
    }
}

impl Clock for BurstClock {
    fn now_ns(&self) -> u64 {
        self.ns.load(Ordering::Relaxed)
    }
}

/// Why a [`Gate`] could not be built.
#[derive(Debug)]
pub enum GateError {
    /// A quota string did not parse or is out of range.
    Quota(QuotaError),
    /// A colour meter could not be built.
    Meter(MeterError),
}

impl From<QuotaError> for GateError {
    fn from(e: QuotaError) -> Self {
        GateError::Quota(e)
    }
}

impl From<MeterError> for GateError {
    fn from(e: MeterError) -> Self {
        GateError::Meter(e)
    }
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Both are `core::error::Error`s.
        let e: &dyn core::error::Error = match self {
            GateError::Quota(e) => e,
            GateError::Meter(e) => e,
        };
        fmt::Display::fmt(e, f)
    }
}

/// What a burst of packets got: how many of each colour from each meter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Colours {
    /// Packets the srTCM marked green, yellow, red (in that order).
    pub single_rate: [u32; 3],
    /// Packets the trTCM marked green, yellow, red.
    pub two_rate: [u32; 3],
}

/// A request limiter and two packet meters on one caller-set clock.
pub struct Gate<'c> {
    requests: Limiter<&'c BurstClock>,
    single_rate: SrTcm<&'c BurstClock>,
    two_rate: TrTcm<&'c BurstClock>,
}

impl<'c> Gate<'c> {
    /// A gate from quota strings: `requests` for [`Gate::admit`], an srTCM of `committed` with
    /// an excess burst of `ebs` bytes, and a trTCM of `peak` over `committed`.
    pub fn new(
        clock: &'c BurstClock,
        requests: &str,
        committed: &str,
        ebs: u64,
        peak: &str,
    ) -> Result<Self, GateError> {
        let requests: Quota = requests.parse()?;
        let (committed, peak): (Quota, Quota) = (committed.parse()?, peak.parse()?);
        Ok(Gate {
            requests: Limiter::with_clock(requests, clock),
            single_rate: SrTcm::with_clock(committed, ebs, clock)?,
            two_rate: TrTcm::with_clock(peak, committed, clock)?,
        })
    }

    /// A request of cost `n`, at the clock's time.
    pub fn admit(&self, n: u64) -> Result<Admitted, Denied> {
        if n == 1 {
            self.requests.check()
        } else {
            self.requests.check_n(n)
        }
    }

    /// A request of cost `n` at the time `now_ns` the caller read (once per burst, say).
    pub fn admit_at(&self, n: u64, now_ns: u64) -> Result<Admitted, Denied> {
        if n == 1 {
            self.requests.check_at(now_ns)
        } else {
            self.requests.check_n_at(n, now_ns)
        }
    }

    /// Units of requests that would conform now.
    pub fn room(&self) -> u64 {
        self.requests.peek()
    }

    /// Puts a new request quota in force (without `std`, changes take a spin lock).
    pub fn set_requests(&self, quota: Quota) {
        self.requests.set_quota(quota);
    }

    /// The request quota in force.
    pub fn requests(&self) -> Quota {
        self.requests.quota()
    }

    /// Meters a burst of packets (their lengths in bytes) at the time `now_ns`, which the caller
    /// read once for the whole burst and also set on the clock; `pre` colours them for the
    /// colour-aware mode (`None`: colour-blind).
    pub fn meter(&self, now_ns: u64, packets: &[u64], pre: Option<Color>) -> Colours {
        self.requests.clock().set(now_ns);
        let mut colours = Colours::default();
        for &bytes in packets {
            let (sr, tr) = match pre {
                None => (
                    self.single_rate.color_blind_at(bytes, now_ns),
                    self.two_rate.color_blind_at(bytes, now_ns),
                ),
                Some(pre) => (
                    self.single_rate.color_aware_at(bytes, pre, now_ns),
                    self.two_rate.color_aware_at(bytes, pre, now_ns),
                ),
            };
            colours.single_rate[sr as usize] += 1;
            colours.two_rate[tr as usize] += 1;
        }
        colours
    }

    /// [`Gate::meter`] for a gate that one thread owns (one per core or queue): the same
    /// colours, with plain reads and writes of the meters' words (`&mut self`: no other thread
    /// can meter at the same time).
    pub fn meter_owned(&mut self, now_ns: u64, packets: &[u64], pre: Option<Color>) -> Colours {
        self.requests.clock().set(now_ns);
        let mut colours = Colours::default();
        for &bytes in packets {
            let (sr, tr) = match pre {
                None => (
                    self.single_rate.color_blind_at_mut(bytes, now_ns),
                    self.two_rate.color_blind_at_mut(bytes, now_ns),
                ),
                Some(pre) => (
                    self.single_rate.color_aware_mut(bytes, pre),
                    self.two_rate.color_aware_mut(bytes, pre),
                ),
            };
            colours.single_rate[sr as usize] += 1;
            colours.two_rate[tr as usize] += 1;
        }
        colours
    }

    /// The meters' tokens at `now_ns`: the srTCM's (C, E), then the trTCM's (P, C).
    pub fn tokens(&self, now_ns: u64) -> [(u64, u64); 2] {
        [self.single_rate.tokens_at(now_ns), self.two_rate.tokens_at(now_ns)]
    }

    /// Writes the gate's quotas as text, with no allocation (e.g. into a fixed buffer).
    pub fn describe(&self, out: &mut impl fmt::Write) -> fmt::Result {
        let (sr, tr) = (&self.single_rate, &self.two_rate);
        write!(
            out,
            "requests {}; srTCM {} ebs {}; trTCM peak {} committed {}",
            self.requests.quota(),
            sr.committed(),
            sr.excess_burst(),
            tr.peak(),
            tr.committed()
        )
    }
}

/// Why `text` is not a quota, if it is not one: the parser's message.
pub fn parse_error(text: &str) -> Option<ParseMessage> {
    match text.parse::<Quota>() {
        Err(QuotaError::Parse(why)) => Some(why),
        _ => None,
    }
}

/// The limits a quota is checked against, as built from numbers: a quota at each.
pub fn quotas_at_the_limits() -> Result<[Quota; 3], QuotaError> {
    Ok([
        Quota::per_second(MAX_RATE_PER_SECOND)?,
        Quota::bytes_per_second(MAX_BYTE_RATE_PER_SECOND)?,
        Quota::new(3, core::time::Duration::from_millis(1500), 1)?.with_burst(2)?,
    ])
}

/// A bucket of `quota` kept outside the process (a device's flash, a peer's table): its TAT
/// after `n` units charged at `now_ns` to an empty bucket, as whole nanoseconds and the rest in
/// the quota's exact units ([`ExactRate`]), and the units that still conform then.
pub fn stored_after(quota: Quota, now_ns: u64, n: u64) -> ((u128, u64), u64) {
    let rate = ExactRate::new(quota);
    let backlog = rate.cost(n);
    (rate.split_ns(rate.ns_to_units(now_ns) + backlog), rate.remaining(backlog))
}

/// With an allocator: a limiter on leakgate's `ManualClock`, shared through an `Arc`.
#[cfg(feature = "alloc")]
pub fn manual_limiter(
    quota: Quota,
) -> (leakgate::ManualClock, Limiter<alloc::sync::Arc<leakgate::ManualClock>>) {
    let clock = leakgate::ManualClock::new();
    (clock.clone(), Limiter::with_clock(quota, alloc::sync::Arc::new(clock)))
}

#[cfg(test)]
mod tests;
