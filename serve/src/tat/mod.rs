//! Buckets that keep only their theoretical arrival time (TAT), each call bringing its own
//! quota: redis-cell's bucket, which `CL.THROTTLE` keeps one of per key, and the buckets of
//! Envoy's descriptor `limit` overrides. Clients make these keys and quotas, so they live apart
//! from the rules limiter: a new quota is a number in a call, not a rule to compile, and the
//! memory every such key takes is bounded in bytes.
//!
//! * `gcra`: the exact integer GCRA step of one TAT under one call's quota;
//! * `budget`: the byte budget every table of client-made keys shares;
//! * `key`: a key's bytes, inside its entry when short;
//! * `table`: a sharded table of TATs by key, all or nothing across keys, bounded by the budget;
//! * `page`: a page of a table's buckets in key order after a cursor, for `/buckets`.
//!
//! Empty buckets hold nothing a new one would not: [`sweep_every`] forgets them, so idle keys
//! give their bytes back.

mod budget;
mod gcra;
mod key;
mod page;
mod table;
#[cfg(test)]
mod tests;

pub(crate) use budget::{Budget, DEFAULT_BYTES};
pub(crate) use gcra::Params;
pub(crate) use page::{page, Listed, Query};
pub(crate) use table::{Charge, Table, SHARDS};

use leakgate::Clock;
use std::time::Duration;
use tokio::sync::watch;

/// How often [`sweep_every`] sweeps.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Sweeps every table `tables` gives, every `every`, until `shutdown`; a shard at a time, yielding
/// to other tasks between shards, so no check waits for more than one shard's sweep.
pub(crate) async fn sweep_every<C: Clock + 'static, T: Send + Sync + 'static>(
    owner: std::sync::Arc<T>,
    tables: fn(&T) -> Vec<&Table<C>>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.changed() => return,
        }
        for shard in 0..SHARDS {
            for table in tables(&owner) {
                table.sweep_shard(shard);
            }
            if shard % 16 == 15 {
                tokio::task::yield_now().await;
            }
        }
    }
}
