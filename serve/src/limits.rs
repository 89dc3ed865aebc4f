//! The limits the service enforces: the rules in force (the rules file, or rules pushed through
//! Redis, plus the rules made for Envoy's per-descriptor `limit` overrides) in one limiter, and
//! the buckets of `CL.THROTTLE` (whose quota comes with each call) in a store of their own.
//!
//! Clients make keys and quotas; nothing they send compiles a rule or makes a reload. A
//! `CL.THROTTLE` quota is a number in a call ([`crate::cell`]). An override's quota gets a rule
//! path (`~override/<n>/<unit>`, at most [`MAX_OVERRIDES`] of them, for the metrics' labels),
//! but in memory its buckets live in a [`Table`] of their own, checked all or nothing with the
//! rules limiter ([`crate::checks`]), so making one costs nothing proportional to the keys
//! tracked; with Redis the override rules join the Redis rules limiter, whose reload only
//! compiles rules. Every table of client-made keys takes its memory from one [`Budget`].

use crate::backend::{Backend, Checked};
use crate::cell::CellStore;
use crate::metrics::Metrics;
use crate::rules::replaces::Replaces;
use crate::rules::settle::Settle;
use crate::rules::LoadedRules;
use crate::tat::{Budget, Table};
use arc_swap::ArcSwap;
use leakgate::{Clock, Quota, Rule, Rules};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Rule paths that start with this are made by the service (`~override/...`); a rules file may
/// not use them.
pub(crate) const RESERVED: char = '~';

/// The start of the rule paths of descriptor overrides.
pub(crate) const OVERRIDE_HEAD: &str = "~override/";

/// The most distinct override quotas the service makes rule paths for.
pub(crate) const MAX_OVERRIDES: usize = 256;
/// Keys each override rule tracks at once in a local fallback (with Redis).
pub(crate) const DYNAMIC_RULE_CAPACITY: usize = 65_536;
/// How `CL.THROTTLE`'s buckets are named in `/buckets` (`cl.throttle/<key>`) and `/metrics`.
pub(crate) const CELL_HEAD: &str = "cl.throttle";

/// The longest key a client may name, in bytes, on every listener: a `CL.THROTTLE` or `LG.`
/// key, a descriptor's key (`D/k1/v1/...`), a `/buckets` prefix.
pub(crate) const MAX_KEY: usize = 4096;

/// The error for a key longer than [`MAX_KEY`].
pub(crate) fn key_too_long(len: usize) -> String {
    format!("the key is {len} bytes long: keys may have at most {MAX_KEY} bytes")
}

/// The rules in force, as the request handlers read them.
#[derive(Debug, Default)]
pub(crate) struct InForce {
    /// Every rule in force: the loaded ones and the overrides.
    pub(crate) rules: Rules,
    pub(crate) replaces: Replaces,
    /// Where the loaded rules came from (`file PATH`, `redis version N`).
    pub(crate) source: String,
}

/// A `CL.THROTTLE` quota as the command gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CellQuota {
    pub(crate) max_burst: u64,
    pub(crate) count: u64,
    pub(crate) period_s: u64,
}

impl CellQuota {
    /// `count` per `period_s` seconds, `max_burst + 1` at once: redis-cell's bucket.
    pub(crate) fn quota(self) -> Result<Quota, String> {
        let burst = self.max_burst.checked_add(1).ok_or("max_burst is too large")?;
        Quota::new(self.count, Duration::from_secs(self.period_s), burst).map_err(|e| e.to_string())
    }
}

/// Everything the listeners share.
pub(crate) struct Limits<C: Clock> {
    pub(crate) rules: Backend<C>,
    pub(crate) cell: CellStore<C>,
    /// In memory: the buckets of descriptor overrides (with Redis they are rules there).
    pub(crate) overrides: Option<Table<C>>,
    /// The bytes client-made keys may take, shared by every table of them.
    pub(crate) budget: Arc<Budget>,
    in_force: ArcSwap<InForce>,
    /// The loaded rules (without overrides) and the override rules, changed together.
    loaded: Mutex<(LoadedRules, String, BTreeMap<String, Rule>)>,
    pub(crate) metrics: Metrics,
    /// With Redis: its URL, for listing the buckets kept there.
    pub(crate) redis_url: Option<String>,
    /// With a Redis Cluster: its seed URLs, for listing the buckets on every master.
    pub(crate) redis_cluster: Vec<String>,
    /// What the rules file watcher has seen and applied (SIGHUP tells it too).
    pub(crate) rules_file: Mutex<Settle>,
    /// The permits of `LG.ACQUIRE` (set by the server once it has connected their store).
    pub(crate) permits: Option<crate::permits::PermitStore<C>>,
}

impl<C: Clock + 'static> Limits<C> {
    pub(crate) fn new(
        (rules, cell, overrides): (Backend<C>, CellStore<C>, Option<Table<C>>),
        budget: Arc<Budget>,
        loaded: LoadedRules,
        source: String,
    ) -> Self {
        let in_force = InForce {
            rules: loaded.rules.clone(),
            replaces: loaded.replaces.clone(),
            source: source.clone(),
        };
        Limits {
            rules,
            cell,
            overrides,
            budget,
            in_force: ArcSwap::from_pointee(in_force),
            loaded: Mutex::new((loaded, source, BTreeMap::new())),
            metrics: Metrics::default(),
            redis_url: None,
            redis_cluster: Vec::new(),
            rules_file: Mutex::new(Settle::new(None)),
            permits: None,
        }
    }

    /// The rules in force now.
    pub(crate) fn in_force(&self) -> Arc<InForce> {
        self.in_force.load_full()
    }

    /// Every table of client-made keys in this process (for the sweeper).
    pub(crate) fn tables(&self) -> Vec<&Table<C>> {
        self.cell.table().into_iter().chain(self.overrides.as_ref()).collect()
    }

    /// Puts newly loaded rules in force (with the overrides made so far), every tracked key
    /// keeping its level. Returns how many rules were loaded; on error the rules in force stay.
    pub(crate) fn put_rules(&self, loaded: LoadedRules, source: String) -> Result<usize, String> {
        check_reserved(&loaded.rules)?;
        let mut state = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let count = loaded.rules.len();
        self.apply(&loaded, &source, &state.2, true)?;
        *state = (loaded, source, std::mem::take(&mut state.2));
        Ok(count)
    }

    /// Puts `loaded` and `overrides` in force together; `reload` says whether the loaded rules
    /// changed (in memory, the rules limiter holds them alone: the overrides' buckets are
    /// elsewhere, so a new override reloads nothing).
    fn apply(
        &self,
        loaded: &LoadedRules,
        source: &str,
        overrides: &BTreeMap<String, Rule>,
        reload: bool,
    ) -> Result<(), String> {
        let mut rules = loaded.rules.clone();
        for (path, rule) in overrides {
            rules.insert_rule(path.clone(), rule.clone());
        }
        match self.overrides {
            Some(_) if reload => self.rules.reload(loaded.rules.clone())?,
            Some(_) => {}
            None => self.rules.reload(rules.clone())?,
        }
        let replaces = loaded.replaces.clone();
        self.in_force.store(Arc::new(InForce { rules, replaces, source: source.to_string() }));
        Ok(())
    }

    /// The rule path of the override `quota` (Envoy's descriptor `limit`), made if new.
    pub(crate) fn ensure_override(&self, name: &str, quota: Quota) -> Result<String, String> {
        let path = format!("{OVERRIDE_HEAD}{name}");
        if self.in_force.load().rules.get(&path).is_some() {
            return Ok(path);
        }
        let mut state = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if state.2.contains_key(&path) {
            return Ok(path);
        }
        if state.2.len() >= MAX_OVERRIDES {
            return Err(format!(
                "too many distinct descriptor limits: this service makes buckets for at most \
                 {MAX_OVERRIDES}"
            ));
        }
        let mut rule = Rule::new([quota]);
        rule.capacity(DYNAMIC_RULE_CAPACITY);
        state.2.insert(path.clone(), rule);
        let (loaded, source, overrides) = &*state;
        if let Err(e) = self.apply(loaded, source, overrides, false) {
            state.2.remove(&path);
            return Err(e);
        }
        tracing::info!(rule = %path, quota = %quota, "made a rule for a descriptor limit");
        Ok(path)
    }

    /// Checks `CL.THROTTLE` cost `n` on `key` under `quota`, counting the decision under the
    /// label `cl.throttle`.
    pub(crate) async fn cell_check(
        &self,
        quota: CellQuota,
        key: &[u8],
        n: u64,
    ) -> Result<Checked, String> {
        let quota = quota.quota()?;
        let checked = self.cell.check(key, quota, n).await;
        let extra = self.metrics.rule(CELL_HEAD);
        // Relaxed: statistics.
        if checked.failed {
            extra.errors.fetch_add(1, Ordering::Relaxed);
        } else if n > 0 {
            let count = if checked.decision.is_ok() { &extra.admitted } else { &extra.refused };
            count.fetch_add(1, Ordering::Relaxed);
        }
        Ok(checked)
    }

    /// Counts a check the failure policy answered against the rule of each key.
    pub(crate) fn count_failure(&self, rules: &Rules, keys: &[&str]) {
        for key in keys {
            if let Some((path, _)) = rules.rule_for(key) {
                self.metrics.rule(path).errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Peeks at `key` (cost 0) to read its own figures, and counts the peek so that it is taken
    /// out of the rule's admitted count.
    pub(crate) async fn peek(&self, in_force: &InForce, key: &str) -> Checked {
        if let Some((path, _)) = in_force.rules.rule_for(key) {
            self.metrics.rule(path).internal_peeks.fetch_add(1, Ordering::Relaxed);
        }
        self.check_all(in_force, &[key], 0).await
    }

    /// [`Limits::peek`] on the rules limiter (`rules` are its rules in force).
    pub(crate) async fn peek_on(&self, backend: &Backend<C>, rules: &Rules, key: &str) -> Checked {
        if let Some((path, _)) = rules.rule_for(key) {
            self.metrics.rule(path).internal_peeks.fetch_add(1, Ordering::Relaxed);
        }
        backend.check_all(&[key], 0).await
    }
}

/// Runs `f`, which may take long (a reload hands every tracked key over), telling a
/// multi-threaded tokio runtime to move its other tasks to another worker meanwhile.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Refuses rules whose path starts with [`RESERVED`].
fn check_reserved(rules: &Rules) -> Result<(), String> {
    match rules.iter().find(|(path, _)| path.starts_with(RESERVED)) {
        Some((path, _)) => Err(format!(
            "rule {path:?}: paths that start with '{RESERVED}' are reserved for the rules the \
             service makes itself"
        )),
        None => Ok(()),
    }
}

/// Writes `key` into `out` so that distinct byte strings stay distinct: valid UTF-8 without a
/// backslash as it is; otherwise each backslash doubled and each byte of invalid UTF-8 as
/// `\xNN`.
pub(crate) fn write_key(out: &mut String, key: &[u8]) {
    match std::str::from_utf8(key) {
        Ok(text) if !text.contains('\\') => out.push_str(text),
        _ => {
            for chunk in key.utf8_chunks() {
                for c in chunk.valid().chars() {
                    if c == '\\' {
                        out.push_str("\\\\");
                    } else {
                        out.push(c);
                    }
                }
                for byte in chunk.invalid() {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\x{byte:02x}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_distinct_when_written() {
        let write = |key: &[u8]| {
            let mut out = String::new();
            write_key(&mut out, key);
            out
        };
        assert_eq!(write(b"user/1"), "user/1");
        assert_eq!(write(b"a\\b"), "a\\\\b");
        assert_eq!(write(b"\xff"), "\\xff");
        assert_ne!(write(b"\xff"), write(b"\\xff"));
    }

    #[test]
    fn a_cell_quota_is_redis_cells_bucket() {
        let q = CellQuota { max_burst: 15, count: 30, period_s: 60 }.quota().unwrap();
        assert_eq!((q.burst(), q.emission_interval()), (16, Duration::from_secs(2)));
        assert!(CellQuota { max_burst: 0, count: 0, period_s: 1 }.quota().is_err());
        assert!(CellQuota { max_burst: u64::MAX, count: 1, period_s: 1 }.quota().is_err());
        assert!(key_too_long(MAX_KEY + 1).contains("4096"));
    }
}
