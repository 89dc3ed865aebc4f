//! The GCRA step of a bucket that keeps only its theoretical arrival time (TAT), under the quota
//! each call brings: redis-cell's bucket, exact, in integers.
//!
//! # Implementation details
//!
//! A call's quota is `count` per `period_ns` with a burst: its emission interval
//! `T = period_ns / count` ns is an exact rational. The call counts time in units of `1/D` ns,
//! `D = count / gcd(count, period_ns)`, so that `T = period_ns / gcd` units exactly and every
//! step is an integer sum: nothing drifts, and a key called with one quota gets exactly the
//! rational model's decisions and reports (reports rounded up to the nanosecond).
//!
//! A TAT is kept as whole nanoseconds plus a remainder in units of `1/D` ns of the quota that
//! wrote it ([`Tat`]). A call whose `D` differs (another count, or a period that changes the
//! denominator) reads the TAT rounded *up* to the whole nanosecond, so a key's TAT only grows
//! and never by more than 1 ns: a decision can differ from the rational model only when the
//! call's clock reading lies within 1 ns of its boundary, and then it refuses where the model
//! admits (never the other way round). `leakgate-redis`'s script rounds the same way.
//!
//! Every product fits `u128`: `now_ns * D < 2^128` (both below `2^64`), and a [`leakgate::Quota`]
//! keeps `tau` within `2^64` ns, so `tau * D < 2^128`; sums saturate rather than wrap.

use leakgate::{Admitted, Denied, Quota};
use std::time::Duration;

/// A call's quota, as the bucket needs it: `count` per `period_ns`, at most `burst` at once. Made
/// from a valid [`Quota`], so every field is at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Params {
    pub(crate) count: u64,
    pub(crate) period_ns: u64,
    pub(crate) burst: u64,
}

/// A TAT: whole nanoseconds, and a remainder below `den`, in units of `1/den` ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tat {
    pub(crate) ns: u64,
    pub(crate) rem: u64,
    /// The `D` of the quota that wrote it (at least 1).
    pub(crate) den: u64,
}

impl Tat {
    /// The TAT of a new bucket: empty at any time.
    pub(crate) const EMPTY: Tat = Tat { ns: 0, rem: 0, den: 1 };

    /// Whether the bucket is empty at `now_ns` (`TAT <= now`): it then holds nothing that a new
    /// bucket would not, and may be forgotten.
    pub(crate) fn is_empty_at(self, now_ns: u64) -> bool {
        self.ns < now_ns || (self.ns == now_ns && self.rem == 0)
    }

    /// This TAT in units of `1/d` ns: exact when `d` is the denominator it was written in,
    /// otherwise rounded up to the whole nanosecond.
    fn in_units(self, d: u128) -> u128 {
        if u128::from(self.den) == d {
            u128::from(self.ns) * d + u128::from(self.rem)
        } else {
            u128::from(self.ns).saturating_add(u128::from(self.rem > 0)).saturating_mul(d)
        }
    }

    /// `units` of `1/d` ns as a TAT (saturating at the end of the clock's range).
    fn from_units(units: u128, d: u128) -> Tat {
        let ns = u64::try_from(units / d).unwrap_or(u64::MAX);
        // Below d, which came from a u64.
        let rem = (units % d) as u64;
        Tat { ns, rem, den: d as u64 }
    }
}

impl Params {
    /// The quota's figures.
    pub(crate) fn of(quota: Quota) -> Params {
        let period_ns = u64::try_from(quota.period().as_nanos()).unwrap_or(u64::MAX);
        Params { count: quota.count(), period_ns, burst: quota.burst() }
    }

    /// The quota these figures came from.
    pub(crate) fn quota(self) -> Option<Quota> {
        Quota::new(self.count, Duration::from_nanos(self.period_ns), self.burst).ok()
    }

    /// `(D, T, tau)`: units per nanosecond, and the emission interval and the bucket's span in
    /// those units.
    fn units(self) -> (u128, u128, u128) {
        let g = gcd(self.count, self.period_ns);
        let (d, t) = (u128::from(self.count / g), u128::from(self.period_ns / g));
        (d, t, t.saturating_mul(u128::from(self.burst)))
    }

    /// The emission interval, rounded up to the nanosecond.
    pub(crate) fn interval(self) -> Duration {
        Duration::from_nanos(self.period_ns.div_ceil(self.count))
    }

    /// The bucket's span `tau = burst * T`, rounded up to the nanosecond.
    pub(crate) fn tau(self) -> Duration {
        let (d, _, tau) = self.units();
        duration(tau, d)
    }
}

/// What one call found and did.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) decision: Result<Admitted, Denied>,
    /// The TAT to store when the call charged the bucket (`None`: nothing to write).
    pub(crate) charged: Option<Tat>,
}

/// Decides a request of cost `n` at `now_ns` on a bucket at `tat`, under `params`.
///
/// It conforms iff `max(TAT, now) + n*T - now <= tau`; then `TAT := max(TAT, now) + n*T`.
/// `n = 0` peeks (conforming unless an earlier call's larger burst left the bucket past this
/// quota's `tau`); `n > burst` never conforms (no retry time). Reports as
/// [`leakgate::Admitted`] and [`leakgate::Denied`] define them, rounded up to the nanosecond.
pub(crate) fn decide(tat: Tat, params: Params, now_ns: u64, n: u64) -> Step {
    let (d, t, tau) = params.units();
    let now = u128::from(now_ns) * d;
    let start = tat.in_units(d).max(now);
    let remaining = |backlog: u128| {
        let left = tau - backlog.min(tau);
        u64::try_from(left / t).unwrap_or(u64::MAX)
    };
    let before = start - now;
    if n == 0 {
        // A peek conforms unless the bucket is past this quota's tau (a larger burst filled
        // it): then, as the inequality says (and redis-cell answers), it is limited until then.
        let decision = match before.checked_sub(tau).filter(|&over| over > 0) {
            None => Ok(Admitted::new(remaining(before), duration(before, d))),
            Some(over) => Err(Denied::new(0, duration(before, d), Some(duration(over, d)))),
        };
        return Step { decision, charged: None };
    }
    let after = start.saturating_add(u128::from(n).saturating_mul(t));
    if n <= params.burst && after - now <= tau {
        let backlog = after - now;
        let decision = Ok(Admitted::new(remaining(backlog), duration(backlog, d)));
        return Step { decision, charged: Some(Tat::from_units(after, d)) };
    }
    let retry = (n <= params.burst).then(|| duration(after - now - tau, d));
    Step {
        decision: Err(Denied::new(remaining(before), duration(before, d), retry)),
        charged: None,
    }
}

/// The answer to a new key that finds no room: as from a full bucket (nothing left, empty again
/// after `tau`, worth asking again after one emission interval), as a full table answers.
pub(crate) fn no_room(params: Params) -> Denied {
    Denied::new(0, params.tau(), Some(params.interval()))
}

/// `units` of `1/d` ns as a duration, rounded up to the nanosecond.
fn duration(units: u128, d: u128) -> Duration {
    Duration::from_nanos(u64::try_from(units.div_ceil(d)).unwrap_or(u64::MAX))
}

/// The greatest common divisor (both at least 1).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(count: u64, period_s: u64, burst: u64) -> Params {
        Params { count, period_ns: period_s * 1_000_000_000, burst }
    }

    /// Runs calls `(now_ns, n)` on one bucket; each decision's limited flag and remaining.
    fn run(p: Params, calls: &[(u64, u64)]) -> Vec<(bool, u64)> {
        let mut tat = Tat::EMPTY;
        let mut out = Vec::new();
        for &(now, n) in calls {
            let step = decide(tat, p, now, n);
            if let Some(next) = step.charged {
                tat = next;
            }
            out.push(match step.decision {
                Ok(ok) => (false, ok.remaining()),
                Err(no) => (true, no.remaining()),
            });
        }
        out
    }

    #[test]
    fn a_burst_then_one_per_interval() {
        // 30 per 60 s, 16 at once: 16 go, the 17th waits 2 s.
        let p = params(30, 60, 16);
        let calls: Vec<(u64, u64)> = (0..17).map(|_| (0, 1)).collect();
        let got = run(p, &calls);
        assert_eq!(got[0], (false, 15));
        assert_eq!(got[15], (false, 0));
        assert_eq!(got[16], (true, 0));
        let mut tat = Tat::EMPTY;
        for _ in 0..16 {
            tat = decide(tat, p, 0, 1).charged.unwrap();
        }
        let no = decide(tat, p, 0, 1).decision.unwrap_err();
        assert_eq!(no.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(no.reset_after(), Duration::from_secs(32));
        assert!(decide(tat, p, 2_000_000_000, 1).decision.is_ok());
    }

    #[test]
    fn a_third_of_a_second_never_drifts() {
        // 3 per second, burst 3: a whole burst every second fits exactly, for ever. Were T
        // rounded up to 333,333,334 ns, the bucket would be 2 ns short of empty each second and
        // refuse at once.
        let p = Params { count: 3, period_ns: 1_000_000_000, burst: 3 };
        let mut tat = Tat::EMPTY;
        for k in 0..1000u64 {
            let step = decide(tat, p, k * 1_000_000_000, 3);
            tat = step.charged.unwrap_or_else(|| panic!("refused at {k} s"));
        }
        assert_eq!(tat, Tat { ns: 1_000_000_000_000, rem: 0, den: 3 });
    }

    #[test]
    fn peeks_and_oversize_requests_change_nothing() {
        let p = params(1, 1, 2);
        let step = decide(Tat::EMPTY, p, 5, 0);
        assert_eq!((step.decision.unwrap().remaining(), step.charged), (2, None));
        let step = decide(Tat::EMPTY, p, 5, 3);
        assert_eq!(step.decision.unwrap_err().retry_after(), None);
        assert_eq!(step.charged, None);
    }

    #[test]
    fn other_parameters_apply_to_the_same_tat() {
        // max_burst 4 (burst 5), one a minute: 5 at once; then burst 6: one more, not six.
        let small = params(1, 60, 5);
        let large = params(1, 60, 6);
        let mut tat = Tat::EMPTY;
        let mut admitted = 0;
        for p in [small; 8].into_iter().chain([large; 8]) {
            if let Some(next) = decide(tat, p, 0, 1).charged {
                tat = next;
                admitted += 1;
            }
        }
        assert_eq!(admitted, 6);
        // A smaller burst later: the TAT is past the new tau, so it refuses, and tells the
        // time until the bucket is empty.
        let tiny = params(1, 60, 1);
        let no = decide(tat, tiny, 0, 1).decision.unwrap_err();
        assert_eq!((no.remaining(), no.reset_after()), (0, Duration::from_secs(360)));
        assert_eq!(no.retry_after(), Some(Duration::from_secs(360)));
        // A peek says so too: 300 s until the bucket is within that quota.
        let peek = decide(tat, tiny, 0, 0);
        assert_eq!(peek.decision.unwrap_err().retry_after(), Some(Duration::from_secs(300)));
        assert_eq!(peek.charged, None);
    }

    #[test]
    fn another_denominator_rounds_the_tat_up_to_the_nanosecond() {
        let thirds = Params { count: 3, period_ns: 1_000_000_000, burst: 10 };
        let tat = decide(Tat::EMPTY, thirds, 0, 1).charged.unwrap();
        assert_eq!(tat, Tat { ns: 333_333_333, rem: 1, den: 3 });
        let halves = Params { count: 2, period_ns: 1_000_000_000, burst: 10 };
        let next = decide(tat, halves, 0, 1).charged.unwrap();
        assert_eq!(next, Tat { ns: 833_333_334, rem: 0, den: 1 });
        assert!(!tat.is_empty_at(333_333_333));
        assert!(tat.is_empty_at(333_333_334));
    }

    #[test]
    fn the_end_of_the_clock_saturates_without_panicking() {
        let p = Params { count: 7, period_ns: 3, burst: 5 };
        let step = decide(Tat { ns: u64::MAX, rem: 6, den: 7 }, p, u64::MAX, 5);
        assert!(step.decision.is_ok() || step.decision.is_err());
        let q = Params { count: 1, period_ns: u64::MAX, burst: 1 };
        let _ = decide(Tat::EMPTY, q, u64::MAX, 1);
    }
}
