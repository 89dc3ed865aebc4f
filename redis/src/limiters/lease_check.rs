//! How an [`AsyncRedisLimiter`] with leases answers a hot key: from its lease when it can, and
//! renewing the lease in the round trip of a request when it cannot (see [`crate::limiters::lease_table`]).

use crate::error::Error;
use crate::limiters::lease_table::{Lease, LeaseTable, Local, Schedule};
use crate::limiters::limiter::AsyncRedisLimiter;
use crate::script::{CallKey, Reply};
use leakgate::{Admitted, Denied};
use std::sync::Arc;
use std::time::Duration;

impl AsyncRedisLimiter {
    /// Answers from the lease table alone, when it can (no await: the blocking API uses it too).
    pub(crate) fn try_local(&self, key: &[u8], n: u64) -> Option<Result<Admitted, Denied>> {
        let table = self.shared.leases.as_ref()?;
        if n == 0 || n > self.shared.min_burst {
            // A peek, or a cost that never conforms: Redis reports those.
            return None;
        }
        let stats = &self.shared.client.stats;
        match table.serve(key, self.shared.client.local_clock.now_ns(), n) {
            Local::Admitted(left) => {
                stats.local_admitted.inc();
                Some(Ok(Admitted::new(left, Duration::ZERO)))
            }
            Local::Denied(retry) => {
                stats.local_denied.inc();
                Some(Err(Denied::new(0, Duration::ZERO, Some(Duration::from_nanos(retry)))))
            }
            Local::Ask => None,
        }
    }

    /// `check_n` for a key that may hold a lease: one caller at a time renews it.
    pub(crate) async fn leased_check(
        &self,
        table: &LeaseTable,
        key: &[u8],
        n: u64,
    ) -> Result<Admitted, Denied> {
        let c = &self.shared.client;
        let Some(slot) = table.slot(key, c.local_clock.now_ns()) else {
            return self.or_policy(&[key], n, self.decide(&[key], n, 0).await);
        };
        // One deadline for the whole call: waiting for the renewer, then the round trip.
        let started = std::time::Instant::now();
        let _renewing = match slot.refill.try_lock() {
            Ok(renewing) => renewing,
            Err(_) => {
                if let Some(wait) = slot.refuse_while_renewing(c.local_clock.now_ns()) {
                    c.stats.local_denied.inc();
                    let retry = Some(Duration::from_nanos(wait));
                    return Err(Denied::new(0, Duration::ZERO, retry));
                }
                match tokio::time::timeout(c.deadline, slot.refill.lock()).await {
                    Ok(renewing) => renewing,
                    Err(_) => {
                        c.stats.timeouts.inc();
                        return self.or_policy(&[key], n, Err(Error::Timeout(c.deadline)));
                    }
                }
            }
        };
        // Another caller may have renewed the lease while this one waited.
        if let Some(decided) = self.try_local(key, n) {
            return decided;
        }
        let origin = c.local_clock.now_ns();
        let config = table.config();
        let lease = slot.lease.load_full();
        let want = lease.next_size(origin, config.hot_ns(), config.max_units());
        let known: Vec<u128> = lease.known_tat().collect();
        let now = c.caller_clock.as_ref().map(|_| origin);
        let budget = c.deadline.saturating_sub(started.elapsed());
        let decided = self.decide_leasing(&[key], n, 0, (want, &known), now, budget).await;
        if let Ok((decision, reply)) = &decided {
            let answered = c.local_clock.now_ns();
            match decision {
                Ok(admitted) => {
                    slot.lease.store(Arc::new(self.lease_from(origin, reply, n)));
                    // `remaining` counts the units just leased too; the buckets' own room is
                    // what is left beyond them.
                    if admitted.remaining() <= reply.leased {
                        slot.note_full(answered, self.shortest_interval_ns());
                    } else {
                        slot.note_room();
                    }
                }
                Err(no) if n == 1 => {
                    if let Some(retry) = no.retry_after() {
                        let retry = u64::try_from(retry.as_nanos()).unwrap_or(u64::MAX);
                        slot.deny_until(origin, retry);
                    }
                    slot.note_full(answered, self.shortest_interval_ns());
                }
                Err(_) => {}
            }
        }
        self.or_policy(&[key], n, decided)
    }

    /// The shortest emission interval among the quotas, in ns (rounded down).
    fn shortest_interval_ns(&self) -> u64 {
        let interval =
            |rate: &crate::script::units::Rate| rate.interval() / u128::from(rate.units_per_ns());
        let shortest = self.shared.rates.iter().map(interval).min().unwrap_or(0);
        u64::try_from(shortest).unwrap_or(u64::MAX)
    }

    /// The lease an admission of cost `n` took (possibly of no units: it still records when).
    fn lease_from(&self, origin: u64, reply: &Reply, n: u64) -> Lease {
        let c = &self.shared.client;
        let call_key = CallKey {
            name: Vec::new(),
            rates: &self.shared.rates,
            times_named: 1,
            group: 0,
            origins: Vec::new(),
        };
        let after = reply.backlogs_after(std::slice::from_ref(&call_key), n);
        let schedules = self
            .shared
            .rates
            .iter()
            .zip(&reply.backlogs)
            .zip(after)
            .map(|((rate, &before), (_, after))| Schedule {
                units_per_ns: u128::from(rate.units_per_ns()),
                interval: rate.interval(),
                first: before + rate.cost(n),
                tat: rate.ns_to_units(reply.now_ns) + after,
            })
            .collect();
        Lease::new(origin, c.caller_clock.is_none(), schedules, reply.leased)
    }
}
