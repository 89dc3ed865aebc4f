//! Rule keys as a fleet of Redis rules limiters keeps them across reloads, exactly: what every
//! decision must be when quotas and rule paths change (the contract's "Rules", reload).
//!
//! For quotas whose emission interval `T` is a whole number of nanoseconds, so that every time is
//! a whole number of nanoseconds. Each stored bucket is `(T, tau, TAT)` under its Redis key
//! `(rule path, key)`. A check under a client's rules:
//! 1. reads the key's buckets under its path; a bucket kept in another quota than its rule's
//!    `i`-th is carried to it, as of now: the units it could admit (`tau - backlog`, as
//!    intervals) become the new quota's, rounded down to the ns and capped at the new burst;
//!    a backlog beyond tau stays a debt beyond the new tau (rounded up); a quota without a
//!    bucket starts empty;
//! 2. takes in the key's buckets under each path the client's earlier rules gave it, unless
//!    marked as a copy: each carried to the key's quotas, and the fuller bucket kept;
//! 3. decides over every bucket of every key (all or nothing) and charges them if it admits;
//! 4. writes the key's buckets if charged or changed by 1-2, and a marked copy of them (as they
//!    are, each in its quota) under each such earlier path, keeping the buckets found there
//!    beyond the key's, up to the number of quotas of that path's rule.
//!
//! Nothing expires: tests run well within the limiters' expiry slack.

use super::model::Decision;
use leakgate::{Quota, Rules};
use std::collections::HashMap;

/// A bucket: its quota's `T` and `tau` in ns, and its `TAT` in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    t: u128,
    tau: u128,
    tat: u128,
}

/// What a Redis key holds.
#[derive(Clone, Debug)]
struct Stored {
    marked: bool,
    buckets: Vec<Bucket>,
}

/// One client: its rules in force and, latest first, those it had before.
struct Client {
    now: Rules,
    earlier: Vec<Rules>,
}

/// Every client's rules and the buckets they share.
pub struct Fleet {
    clients: Vec<Client>,
    store: HashMap<(String, String), Stored>,
}

fn t_of(q: &Quota) -> u128 {
    let t = q.period().as_nanos() / u128::from(q.count());
    assert_eq!(t * u128::from(q.count()), q.period().as_nanos(), "{q}: T is not whole ns");
    t
}

fn empty(q: &Quota, now: u128) -> Bucket {
    let t = t_of(q);
    Bucket { t, tau: t * u128::from(q.burst()), tat: now }
}

/// `b` carried to quota `q` as of `now`.
fn carry(b: Bucket, q: &Quota, now: u128) -> Bucket {
    let to = empty(q, now);
    if (b.t, b.tau) == (to.t, to.tau) {
        return Bucket { tat: b.tat.max(now), ..to };
    }
    let backlog = b.tat.saturating_sub(now);
    let new_backlog = if backlog <= b.tau {
        let available = b.tau - backlog;
        let available = if b.t == to.t { available } else { available * to.t / b.t };
        to.tau - available.min(to.tau)
    } else {
        let debt = backlog - b.tau;
        to.tau + if b.t == to.t { debt } else { (debt * to.t).div_ceil(b.t) }
    };
    Bucket { tat: now + new_backlog, ..to }
}

impl Fleet {
    /// `clients` clients, all on `rules`.
    pub fn new(clients: usize, rules: &Rules) -> Fleet {
        let clients =
            (0..clients).map(|_| Client { now: rules.clone(), earlier: Vec::new() }).collect();
        Fleet { clients, store: HashMap::new() }
    }

    /// Client `c` puts `rules` in force.
    pub fn reload(&mut self, c: usize, rules: &Rules) {
        let client = &mut self.clients[c];
        let before = std::mem::replace(&mut client.now, rules.clone());
        client.earlier.retain(|r| r != &before && r != rules);
        client.earlier.insert(0, before);
    }

    /// A check of cost `n` (0: a peek) by client `c` on `keys` (each once) at `now` ns.
    pub fn check(&mut self, c: usize, keys: &[&str], n: u64, now: u128) -> Decision {
        let client = &self.clients[c];
        // (path, key, buckets, changed, the key's earlier paths with their rules' quota counts)
        let mut read = Vec::new();
        for &key in keys {
            let Some((path, rule)) = client.now.rule_for(key) else { continue };
            if rule.quotas().is_empty() {
                continue;
            }
            let stored = self.store.get(&(path.to_string(), key.to_string()));
            let mut dirty = stored.is_some_and(|s| s.buckets.len() != rule.quotas().len());
            let mut buckets: Vec<Bucket> = Vec::new();
            for (i, q) in rule.quotas().iter().enumerate() {
                let b = match stored.and_then(|s| s.buckets.get(i)) {
                    Some(&b) => {
                        let carried = carry(b, q, now);
                        dirty |= (b.t, b.tau) != (carried.t, carried.tau);
                        carried
                    }
                    None => empty(q, now),
                };
                buckets.push(b);
            }
            let mut origins: Vec<(String, usize)> = Vec::new();
            for earlier in &client.earlier {
                let Some((then, rule_then)) = earlier.rule_for(key) else { continue };
                if then == path || rule_then.quotas().is_empty() {
                    continue;
                }
                if origins.iter().any(|(p, _)| p == then) {
                    continue;
                }
                origins.push((then.to_string(), rule_then.quotas().len()));
                let Some(found) = self.store.get(&(then.to_string(), key.to_string())) else {
                    continue;
                };
                if !found.marked {
                    for ((b, q), theirs) in
                        buckets.iter_mut().zip(rule.quotas()).zip(&found.buckets)
                    {
                        b.tat = b.tat.max(carry(*theirs, q, now).tat);
                    }
                    dirty = true;
                }
            }
            read.push((path.to_string(), key.to_string(), buckets, dirty, origins));
        }
        if read.is_empty() {
            return Decision::Admitted { remaining: u64::MAX, reset_after_ns: 0, delay_ns: 0 };
        }
        let all = || read.iter().flat_map(|r| r.2.iter());
        let cost = |b: &Bucket| u128::from(n) * b.t;
        let refuses = |b: &Bucket| b.tat.saturating_sub(now) + cost(b) > b.tau;
        let denied = n > 0 && all().any(refuses);
        let report = |extra: u128| {
            let mut remaining = u64::MAX;
            let mut reset = 0u128;
            for b in all() {
                let backlog = b.tat.saturating_sub(now) + extra * b.t;
                remaining = remaining.min((b.tau.saturating_sub(backlog) / b.t) as u64);
                reset = reset.max(backlog);
            }
            (remaining, reset as u64)
        };
        let decision = if denied {
            let (remaining, reset_after_ns) = report(0);
            let retry = all().filter(|b| refuses(b)).try_fold(0u128, |longest, b| {
                (cost(b) <= b.tau).then(|| longest.max(b.tat.saturating_sub(now) + cost(b) - b.tau))
            });
            Decision::Denied { remaining, reset_after_ns, retry_after_ns: retry.map(|r| r as u64) }
        } else {
            let (remaining, reset_after_ns) = report(u128::from(n));
            Decision::Admitted { remaining, reset_after_ns, delay_ns: 0 }
        };
        let charged = n > 0 && !denied;
        for (path, key, mut buckets, dirty, origins) in read {
            if !charged && !dirty {
                continue;
            }
            if charged {
                for b in &mut buckets {
                    b.tat = b.tat.max(now) + cost(b);
                }
            }
            for (then, quotas_then) in origins {
                let at = (then, key.clone());
                let found = self.store.get(&at).map_or(&[][..], |s| &s.buckets[..]);
                let kept = found.iter().take(quotas_then).skip(buckets.len());
                let copy = buckets.iter().chain(kept).copied().collect();
                self.store.insert(at, Stored { marked: true, buckets: copy });
            }
            self.store.insert((path, key), Stored { marked: false, buckets });
        }
        decision
    }
}
