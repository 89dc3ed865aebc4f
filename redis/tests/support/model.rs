//! The exact rational GCRA over several buckets: what every decision must be.
//!
//! Times are nanoseconds; a bucket's `TAT` is kept multiplied by its quota's `count`, so that
//! `T = period / count` is the integer `period` and nothing is ever rounded.

use leakgate::Quota;
use std::collections::HashMap;
use std::time::Duration;

/// What the model decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted (a reservation granted with this delay in ns, 0 for a meter).
    Admitted { remaining: u64, reset_after_ns: u64, delay_ns: u64 },
    /// Denied; `retry_after_ns` is `None` for a cost above a burst.
    Denied { remaining: u64, reset_after_ns: u64, retry_after_ns: Option<u64> },
}

/// Buckets for any number of keys, each with one bucket per quota.
#[derive(Clone)]
pub struct Model {
    quotas: Vec<Quota>,
    /// `TAT * count`, per key, per quota (absent: empty).
    tat: HashMap<Vec<u8>, Vec<u128>>,
}

impl Model {
    pub fn new(quotas: Vec<Quota>) -> Model {
        Model { quotas, tat: HashMap::new() }
    }

    /// A request of cost `n` on every key (a key named twice charged twice) at `t` ns, that may
    /// wait `max_wait_ns` (0: a meter). The release time of a reservation is rounded up to the
    /// nanosecond, as the script does, and every bucket is charged from it.
    pub fn request(&mut self, keys: &[&[u8]], n: u64, t: u64, max_wait_ns: u64) -> Decision {
        let mut times: Vec<(&[u8], u64)> = Vec::new();
        for k in keys {
            match times.iter_mut().find(|(x, _)| x == k) {
                Some((_, c)) => *c += 1,
                None => times.push((k, 1)),
            }
        }
        let t = u128::from(t);
        let mut buckets = Vec::new(); // (key index, quota index, tat*count)
        for (i, (k, _)) in times.iter().enumerate() {
            for (j, q) in self.quotas.iter().enumerate() {
                let c = u128::from(q.count());
                let tat = self.tat.get(*k).map_or(0, |v| v[j]).max(t * c);
                buckets.push((i, j, tat));
            }
        }
        let backlog = |j: usize, tat: u128| tat - t * u128::from(self.quotas[j].count());
        let report = |b: &[(usize, usize, u128)], extra: &dyn Fn(usize, usize) -> u128| {
            let mut remaining = u64::MAX;
            let mut reset = 0u128;
            for &(i, j, tat) in b {
                let q = &self.quotas[j];
                let (c, p) = (u128::from(q.count()), q.period().as_nanos());
                let bl = backlog(j, tat) + extra(i, j);
                let free = (u128::from(q.burst()) * p).saturating_sub(bl) / p;
                remaining = remaining.min(free as u64);
                reset = reset.max(bl.div_ceil(c));
            }
            (remaining, reset as u64)
        };
        let never =
            times.iter().any(|&(_, c)| self.quotas.iter().any(|q| n.saturating_mul(c) > q.burst()));
        if n == 0 || never {
            let (remaining, reset_after_ns) = report(&buckets, &|_, _| 0);
            return if n == 0 {
                Decision::Admitted { remaining, reset_after_ns, delay_ns: 0 }
            } else {
                Decision::Denied { remaining, reset_after_ns, retry_after_ns: None }
            };
        }
        // The wait of each bucket, in whole ns rounded up; the request's delay is the largest.
        let mut delay = 0u128;
        for &(i, j, tat) in &buckets {
            let q = &self.quotas[j];
            let (c, p) = (u128::from(q.count()), q.period().as_nanos());
            let cost = u128::from(n * times[i].1) * p;
            let tau = u128::from(q.burst()) * p;
            let over = (backlog(j, tat) + cost).saturating_sub(tau);
            delay = delay.max(over.div_ceil(c));
        }
        if delay > u128::from(max_wait_ns) {
            let (remaining, reset_after_ns) = report(&buckets, &|_, _| 0);
            let retry = (delay - u128::from(max_wait_ns)) as u64;
            return Decision::Denied { remaining, reset_after_ns, retry_after_ns: Some(retry) };
        }
        let go = t + delay;
        let mut after = Vec::new();
        for &(i, j, tat) in &buckets {
            let q = &self.quotas[j];
            let (c, p) = (u128::from(q.count()), q.period().as_nanos());
            let new = tat.max(go * c) + u128::from(n * times[i].1) * p;
            after.push((i, j, new));
            let entry =
                self.tat.entry(times[i].0.to_vec()).or_insert_with(|| vec![0; self.quotas.len()]);
            entry[j] = new;
        }
        let (remaining, reset_after_ns) = report(&after, &|_, _| 0);
        Decision::Admitted { remaining, reset_after_ns, delay_ns: delay as u64 }
    }
}

/// The model's view of a limiter's answer, for comparison.
pub fn observed(decision: Result<(leakgate::Admitted, u64), leakgate::Denied>) -> Decision {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap();
    match decision {
        Ok((ok, delay_ns)) => Decision::Admitted {
            remaining: ok.remaining(),
            reset_after_ns: ns(ok.reset_after()),
            delay_ns,
        },
        Err(no) => Decision::Denied {
            remaining: no.remaining(),
            reset_after_ns: ns(no.reset_after()),
            retry_after_ns: no.retry_after().map(ns),
        },
    }
}
