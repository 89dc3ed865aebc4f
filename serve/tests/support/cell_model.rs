//! The exact model of `CL.THROTTLE`, written from the contract's meaning of GCRA alone: one TAT
//! per key (redis-cell's bucket), an exact rational number of nanoseconds (`leakgate-test-support`'s `Ns`), and each call's own
//! parameters applied to it.

pub use leakgate_test_support::exact::Ns;
use std::collections::HashMap;

/// One call's reply: `[limited, max_burst + 1, remaining, retry_after_s, reset_after_s]`.
pub type Reply = [i64; 5];

#[derive(Default)]
pub struct CellModel {
    /// Each key's TAT.
    tat: HashMap<String, Ns>,
}

impl CellModel {
    /// `CL.THROTTLE key max_burst count period_s n` at `now_ns`: the reply, changing the key's
    /// TAT when admitted.
    pub fn throttle(
        &mut self,
        now_ns: u64,
        key: &str,
        max_burst: u64,
        count: u64,
        period_s: u64,
        n: u64,
    ) -> Reply {
        let burst = max_burst + 1;
        let t = Ns::new(u128::from(period_s) * 1_000_000_000, u128::from(count));
        let tau = t.times(burst);
        let now = Ns::whole(now_ns);
        let stored = self.tat.get(key).copied().unwrap_or(Ns::whole(0));
        let start = stored.max(now);
        let after = start.add(t.times(n));
        let remaining = |tat: Ns| {
            let backlog = tat.sub(now).min(tau);
            tau.sub(backlog).div_floor(t) as i64
        };
        if after.sub(now) <= tau {
            if n > 0 {
                self.tat.insert(key.to_string(), after);
            }
            [0, burst as i64, remaining(after), -1, after.sub(now).ceil_s()]
        } else {
            let retry = if n > burst { -1 } else { after.sub(tau).sub(now).ceil_s() };
            [1, burst as i64, remaining(stored), retry, stored.sub(now).ceil_s()]
        }
    }

    /// How far the call `(now_ns, max_burst, count, period_s, n)` is from its boundary: the
    /// rational `tau - (max(TAT, now) + n*T - now)` when it conforms (its slack), `None` when
    /// it does not.
    pub fn slack(
        &self,
        now_ns: u64,
        key: &str,
        (max_burst, count, period_s, n): (u64, u64, u64, u64),
    ) -> Option<Ns> {
        let t = Ns::new(u128::from(period_s) * 1_000_000_000, u128::from(count));
        let tau = t.times(max_burst + 1);
        let now = Ns::whole(now_ns);
        let stored = self.tat.get(key).copied().unwrap_or(Ns::whole(0));
        let backlog = stored.max(now).add(t.times(n)).sub(now);
        (backlog <= tau).then(|| tau.sub(backlog))
    }

    /// Whether `slack` is below one nanosecond.
    pub fn within_a_nanosecond(slack: Ns) -> bool {
        slack < Ns::whole(1)
    }
}
