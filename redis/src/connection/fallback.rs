//! What a call answers when Redis could not decide: the [`FailurePolicy`] applied.

use crate::connection::policy::FailurePolicy;
use crate::error::Error;
use crate::stats::Counters;
use leakgate::{Admitted, Clock, Denied, KeyedLimiter, Quota};
use std::sync::Arc;
use std::time::Duration;

/// The clock every local structure reads: the caller's, or a monotonic one.
pub(crate) type LocalClock = Arc<dyn Clock>;

/// The failure policy, with its local limiters when it has some.
pub(crate) struct Fallback {
    policy: FailurePolicy,
    /// One keyed limiter per quota, at the process's share of it.
    local: Vec<KeyedLimiter<Vec<u8>, LocalClock>>,
}

impl Fallback {
    /// The policy for these quotas.
    pub(crate) fn new(
        policy: FailurePolicy,
        quotas: &[Quota],
        clock: &LocalClock,
    ) -> Result<Fallback, Error> {
        let local = match policy {
            FailurePolicy::Local { expected_servers } => quotas
                .iter()
                .map(|q| share(q, expected_servers.max(1)))
                .map(|q| q.map(|q| KeyedLimiter::with_clock(q, clock.clone())))
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        Ok(Fallback { policy, local })
    }

    /// The answer to a request of cost `n` on `keys` that Redis could not decide; `retry` is
    /// when asking Redis again may help.
    pub(crate) fn decide(
        &self,
        keys: &[&[u8]],
        n: u64,
        retry: Duration,
        stats: &Counters,
    ) -> Result<Admitted, Denied> {
        answer(self.policy, retry, stats, || {
            // Each (key, quota) in turn; a denial leaves the earlier ones charged, which can
            // only refuse more, never admit more than each local bucket allows.
            let mut remaining = u64::MAX;
            let mut reset_after = Duration::ZERO;
            for key in keys {
                for lim in &self.local {
                    let ok = lim.check_n(*key, n)?;
                    remaining = remaining.min(ok.remaining());
                    reset_after = reset_after.max(ok.reset_after());
                }
            }
            Ok(Admitted::new(remaining, reset_after))
        })
    }
}

/// What `policy` answers a request that Redis could not decide, counted: [`FailurePolicy::Deny`]
/// and [`FailurePolicy::Allow`] by themselves, [`FailurePolicy::Local`] by `local`, the decision
/// of this process's local limiters; `retry` is when asking Redis again may help.
pub(crate) fn answer(
    policy: FailurePolicy,
    retry: Duration,
    stats: &Counters,
    local: impl FnOnce() -> Result<Admitted, Denied>,
) -> Result<Admitted, Denied> {
    match policy {
        FailurePolicy::Deny => {
            stats.policy_denied.inc();
            Err(Denied::new(0, Duration::ZERO, Some(retry)))
        }
        FailurePolicy::Allow => {
            stats.policy_admitted.inc();
            Ok(Admitted::new(0, Duration::ZERO))
        }
        FailurePolicy::Local { .. } => {
            let decision = local();
            match decision {
                Ok(_) => stats.fallback_admitted.inc(),
                Err(_) => stats.fallback_denied.inc(),
            }
            decision
        }
    }
}

/// One server's share of a quota: the same count over `servers` times the period, with the burst
/// divided (at least 1).
pub(crate) fn share(quota: &Quota, servers: u32) -> Result<Quota, Error> {
    let period = quota.period().checked_mul(servers);
    let burst = (quota.burst() / u64::from(servers)).max(1);
    period.and_then(|p| Quota::new(quota.count(), p, burst).ok()).ok_or_else(|| {
        Error::Config(format!("cannot divide the quota {quota} by {servers} servers"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakgate::ManualClock;

    #[test]
    fn local_share_is_quota_over_servers() {
        let q: Quota = "100/s burst 40".parse().unwrap();
        let s = share(&q, 20).unwrap();
        assert_eq!((s.count(), s.period(), s.burst()), (100, Duration::from_secs(20), 2));
    }

    #[test]
    fn policies_answer_and_count() {
        let clock: LocalClock = Arc::new(ManualClock::new());
        let q: Quota = "10/s".parse().unwrap();
        let stats = Counters::default();
        let r = Duration::from_millis(250);
        let deny = Fallback::new(FailurePolicy::Deny, &[q], &clock).unwrap();
        assert_eq!(deny.decide(&[b"k"], 1, r, &stats).unwrap_err().retry_after(), Some(r));
        let allow = Fallback::new(FailurePolicy::Allow, &[q], &clock).unwrap();
        assert!(allow.decide(&[b"k"], 1, r, &stats).is_ok());
        let local =
            Fallback::new(FailurePolicy::Local { expected_servers: 5 }, &[q], &clock).unwrap();
        // 10/s over 5 servers: 2 per second here, burst 2.
        assert!(local.decide(&[b"k"], 2, r, &stats).is_ok());
        assert!(local.decide(&[b"k"], 1, r, &stats).is_err());
        let s = stats.snapshot();
        assert_eq!((s.policy_denied, s.policy_admitted), (1, 1));
        assert_eq!((s.fallback_admitted, s.fallback_denied), (1, 1));
    }
}
