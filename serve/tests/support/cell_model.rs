//! The exact model of `CL.THROTTLE`, written from the contract's meaning of GCRA alone, in
//! exact integers: times in units of `1/count` ns, so `T = period` (in ns) exactly.

use std::collections::HashMap;

/// One call's reply: `[limited, max_burst + 1, remaining, retry_after_s, reset_after_s]`.
pub type Reply = [i64; 5];

#[derive(Default)]
pub struct CellModel {
    /// TAT of each (key, max_burst, count, period), in units of `1/count` ns.
    tat: HashMap<(String, u64, u64, u64), u128>,
}

/// `units / per_second` seconds, rounded up (`per_second` units make one second).
fn ceil_s(units: u128, per_second: u128) -> i64 {
    units.div_ceil(per_second) as i64
}

impl CellModel {
    pub fn throttle(
        &mut self,
        now_ns: u64,
        key: &str,
        max_burst: u64,
        count: u64,
        period_s: u64,
        n: u64,
    ) -> Reply {
        let burst = u128::from(max_burst) + 1;
        let count_u = u128::from(count);
        let t = u128::from(period_s) * 1_000_000_000; // T in units of 1/count ns
        let tau = burst * t;
        let now = u128::from(now_ns) * count_u;
        let per_second = 1_000_000_000 * count_u;
        let slot = (key.to_string(), max_burst, count, period_s);
        let stored = *self.tat.get(&slot).unwrap_or(&0);
        let tat = stored.max(now);
        let after = tat + u128::from(n) * t;
        let remaining = |tat_after: u128| {
            let backlog = tat_after.saturating_sub(now);
            ((tau - backlog.min(tau)) / t) as i64
        };
        if after - now <= tau {
            if n > 0 {
                self.tat.insert(slot, after);
            }
            [0, burst as i64, remaining(after), -1, ceil_s(after - now, per_second)]
        } else {
            let retry =
                if u128::from(n) > burst { -1 } else { ceil_s(after - tau - now, per_second) };
            [
                1,
                burst as i64,
                remaining(stored),
                retry,
                ceil_s(stored.saturating_sub(now), per_second),
            ]
        }
    }
}
