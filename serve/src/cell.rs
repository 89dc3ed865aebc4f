//! Where `CL.THROTTLE`'s buckets live: one bucket per key, its TAT, under the quota each call
//! brings (redis-cell's meaning): in this process, in a [`Table`] bounded by the key budget; or,
//! with `--redis`, in Redis ([`AsyncRedisCell`]: one Redis key per key, shared by the fleet),
//! with a local table at this instance's share of each quota when the failure policy is
//! `local=N`.

use crate::backend::Checked;
use crate::tat::{Params, Table};
use leakgate::{Admitted, Clock, Denied, Quota};
use leakgate_redis::{AsyncRedisCell, FailurePolicy};
use std::time::Duration;

/// The buckets of `CL.THROTTLE`.
pub(crate) enum CellStore<C: Clock> {
    Memory(Table<C>),
    Redis {
        cell: AsyncRedisCell,
        /// With `FailurePolicy::Local`: this instance's buckets, at its share of each quota.
        local: Option<Table<C>>,
    },
}

impl<C: Clock + 'static> CellStore<C> {
    /// Decides cost `n` on `key` under `quota`.
    pub(crate) async fn check(&self, key: &[u8], quota: Quota, n: u64) -> Checked {
        match self {
            CellStore::Memory(table) => {
                Checked { decision: table.check(key, Params::of(quota), n), failed: false }
            }
            CellStore::Redis { cell, local } => {
                let fallback = || match (local, cell.failure_policy()) {
                    (Some(table), FailurePolicy::Local { expected_servers }) => {
                        match share(quota, expected_servers) {
                            Some(share) => table.check(key, Params::of(share), n),
                            None => Err(Denied::new(0, Duration::ZERO, None)),
                        }
                    }
                    // Only `Local` asks: refuse rather than admit if it ever did without a table.
                    _ => Err(Denied::new(0, Duration::ZERO, None)),
                };
                let (decision, failure) = cell.check_n_explained(key, quota, n, fallback).await;
                if let Some(e) = &failure {
                    tracing::debug!(error = %e, "Redis gave no decision: the failure policy answered");
                }
                Checked { decision, failed: failure.is_some() }
            }
        }
    }

    /// The table in this process: the buckets themselves in memory, the local fallback's with
    /// Redis.
    pub(crate) fn table(&self) -> Option<&Table<C>> {
        match self {
            CellStore::Memory(table) => Some(table),
            CellStore::Redis { local, .. } => local.as_ref(),
        }
    }

    /// The Redis side, when the buckets live there.
    pub(crate) fn redis(&self) -> Option<&AsyncRedisCell> {
        match self {
            CellStore::Memory(_) => None,
            CellStore::Redis { cell, .. } => Some(cell),
        }
    }
}

/// One instance's share of `quota` in a fleet of `servers`: the same count over `servers` times
/// the period, the burst divided (at least 1), as `leakgate-redis`'s local fallback shares its
/// quotas.
fn share(quota: Quota, servers: u32) -> Option<Quota> {
    let period = quota.period().checked_mul(servers.max(1))?;
    let burst = (quota.burst() / u64::from(servers.max(1))).max(1);
    Quota::new(quota.count(), period, burst).ok()
}

/// An admission that tracked nothing (no rule, no bucket).
pub(crate) fn untracked() -> Result<Admitted, Denied> {
    Ok(Admitted::new(u64::MAX, Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_the_quota_over_the_fleet() {
        let q: Quota = "100/s burst 40".parse().unwrap();
        let s = share(q, 20).unwrap();
        assert_eq!((s.count(), s.period(), s.burst()), (100, Duration::from_secs(20), 2));
        assert_eq!(share(q, 1), Some(q));
    }
}
