//! Where `LG.ACQUIRE`'s permits live: in this process, in a table whose keys and permits count
//! against the service's key budget (like every client-grown table), or, with `--redis` or
//! `--redis-cluster`, in Redis ([`AsyncRedisConcurrency`]: one sorted set per key, shared by the
//! fleet). Either way a permit is a lease: it returns by itself once `ttl_ms` has passed, and
//! never more than `max` permits of a key are held at once.

use crate::tat::Budget;
use leakgate::Clock;
use leakgate_redis::{AsyncRedisConcurrency, Error};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one held permit is charged against the budget: its token, its expiry and the vector's
/// slack.
const PERMIT_BYTES: usize = 32;
/// How often at most a full budget sweeps every key's expired permits (ns).
const SWEEP_EVERY_NS: u64 = 1_000_000_000;

/// The answer to an acquire.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// The permit's token (32 hex digits) and the permits held with it.
    Yes { token: String, in_flight: u64 },
    /// `max` already held: how many, and when the earliest expires.
    No { in_flight: u64, retry_after: Duration },
}

/// The permits of `LG.ACQUIRE`.
pub(crate) enum PermitStore<C: Clock> {
    Memory(MemoryPermits<C>),
    Redis(AsyncRedisConcurrency),
}

impl<C: Clock> PermitStore<C> {
    /// Takes one of `key`'s `max` permits for `ttl` (both already checked in range).
    pub(crate) async fn acquire(
        &self,
        key: &[u8],
        max: u64,
        ttl: Duration,
    ) -> Result<Acquired, String> {
        match self {
            PermitStore::Memory(m) => m.acquire(key, max, ttl),
            PermitStore::Redis(r) => match r.try_acquire(key, max, ttl).await {
                Ok(Ok(p)) => {
                    let in_flight = p.in_flight();
                    Ok(Acquired::Yes { token: p.into_token(), in_flight })
                }
                Ok(Err(busy)) => {
                    Ok(Acquired::No { in_flight: busy.in_flight, retry_after: busy.retry_after })
                }
                Err(e) => Err(no_answer(&e)),
            },
        }
    }

    /// Releases `token` of `key`: whether it was held.
    pub(crate) async fn release(&self, key: &[u8], token: &[u8]) -> Result<bool, String> {
        match self {
            PermitStore::Memory(m) => Ok(m.release(key, token)),
            PermitStore::Redis(r) => {
                // A token this server never gives out is not held anywhere.
                if parse_token(token).is_none() {
                    return Ok(false);
                }
                let token = std::str::from_utf8(token).unwrap_or("");
                r.release_token(key, token).await.map_err(|e| no_answer(&e))
            }
        }
    }
}

fn no_answer(e: &Error) -> String {
    format!("TRYAGAIN no permit decision: {e}")
}

/// Permits in this process: per key, its held permits (token, expiry on the clock in ns).
pub(crate) struct MemoryPermits<C: Clock> {
    clock: C,
    budget: Arc<Budget>,
    keys: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    held: HashMap<Vec<u8>, Vec<(u128, u64)>>,
    last_sweep_ns: u64,
}

impl<C: Clock> MemoryPermits<C> {
    pub(crate) fn new(clock: C, budget: Arc<Budget>) -> Self {
        MemoryPermits { clock, budget, keys: Mutex::new(Table::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding it cannot leave the table inconsistent with the budget beyond
        // one entry's charge: go on with it.
        self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn acquire(&self, key: &[u8], max: u64, ttl: Duration) -> Result<Acquired, String> {
        let now = self.clock.now_ns();
        let ttl_ns = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
        let mut t = self.lock();
        let held = match t.held.get_mut(key) {
            Some(permits) => {
                let before = permits.len();
                permits.retain(|&(_, until)| until > now);
                self.budget.give_back((before - permits.len()) * PERMIT_BYTES);
                permits.len() as u64
            }
            None => 0,
        };
        if held >= max {
            let earliest = t.held.get(key).and_then(|p| p.iter().map(|&(_, u)| u).min());
            let wait = earliest.map_or(0, |u| u.saturating_sub(now));
            return Ok(Acquired::No { in_flight: held, retry_after: Duration::from_nanos(wait) });
        }
        let new_key = !t.held.contains_key(key);
        let cost = PERMIT_BYTES + if new_key { Budget::cost(key.len()) } else { 0 };
        if !self.budget.try_take(cost) {
            let swept = now.saturating_sub(t.last_sweep_ns) >= SWEEP_EVERY_NS;
            if !(swept && self.sweep(&mut t, now) > 0 && self.budget.try_take(cost)) {
                self.budget.count_refused();
                return Err(
                    "ERR no room for another permit (the service's key memory is full)".into()
                );
            }
        }
        let token = leakgate_redis::new_permit_token();
        let permits = t.held.entry(key.to_vec()).or_default();
        permits.push((token, now.saturating_add(ttl_ns)));
        let in_flight = permits.len() as u64;
        Ok(Acquired::Yes { token: format!("{token:032x}"), in_flight })
    }

    fn release(&self, key: &[u8], token: &[u8]) -> bool {
        let Some(token) = parse_token(token) else { return false };
        let now = self.clock.now_ns();
        let mut t = self.lock();
        let Some(permits) = t.held.get_mut(key) else { return false };
        let before = permits.len();
        let mut was_held = false;
        permits.retain(|&(tok, until)| {
            let this = tok == token && until > now;
            was_held |= this;
            !this && until > now
        });
        self.budget.give_back((before - permits.len()) * PERMIT_BYTES);
        if permits.is_empty() {
            t.held.remove(key);
            self.budget.give_back(Budget::cost(key.len()));
        }
        was_held
    }

    /// Drops every expired permit and empty key; the bytes given back.
    fn sweep(&self, t: &mut Table, now: u64) -> usize {
        t.last_sweep_ns = now;
        let mut freed = 0;
        t.held.retain(|key, permits| {
            let before = permits.len();
            permits.retain(|&(_, until)| until > now);
            freed += (before - permits.len()) * PERMIT_BYTES;
            if permits.is_empty() {
                freed += Budget::cost(key.len());
                return false;
            }
            true
        });
        self.budget.give_back(freed);
        freed
    }

    /// Permits held now (expired ones not counted), for tests.
    #[cfg(test)]
    fn in_flight(&self, key: &[u8]) -> usize {
        let now = self.clock.now_ns();
        self.lock().held.get(key).map_or(0, |p| p.iter().filter(|&&(_, u)| u > now).count())
    }
}

/// A token as this server writes it (32 lowercase hex digits), or `None`.
fn parse_token(text: &[u8]) -> Option<u128> {
    if text.len() != 32 || !text.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return None;
    }
    u128::from_str_radix(std::str::from_utf8(text).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakgate::ManualClock;

    fn yes(a: Result<Acquired, String>) -> String {
        match a.unwrap() {
            Acquired::Yes { token, .. } => token,
            no => panic!("{no:?}"),
        }
    }

    #[test]
    fn at_most_max_held_expiry_and_release() {
        let clock = ManualClock::new();
        let budget = Arc::new(Budget::new(1 << 20));
        let m = MemoryPermits::new(clock.clone(), budget.clone());
        let ttl = Duration::from_millis(100);
        let a = yes(m.acquire(b"k", 2, ttl));
        let b = yes(m.acquire(b"k", 2, ttl));
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        let no = m.acquire(b"k", 2, ttl).unwrap();
        assert_eq!(no, Acquired::No { in_flight: 2, retry_after: ttl });
        clock.advance(Duration::from_millis(40));
        assert!(m.release(b"k", a.as_bytes()));
        assert!(!m.release(b"k", a.as_bytes()));
        assert!(!m.release(b"k", b"zz"));
        let c = yes(m.acquire(b"k", 2, ttl));
        // b expires at 100 ms; c at 140 ms.
        clock.advance(Duration::from_millis(60));
        assert_eq!(m.in_flight(b"k"), 1);
        assert!(!m.release(b"k", b.as_bytes()), "expired");
        clock.advance(Duration::from_millis(40));
        assert_eq!(m.in_flight(b"k"), 0);
        assert!(!m.release(b"k", c.as_bytes()));
        assert_eq!(budget.used(), 0, "everything given back");
    }

    #[test]
    fn the_budget_bounds_permits_and_expired_ones_make_room() {
        let clock = ManualClock::new();
        let per = PERMIT_BYTES + Budget::cost(1);
        let budget = Arc::new(Budget::new(per * 3));
        let m = MemoryPermits::new(clock.clone(), budget.clone());
        let ttl = Duration::from_millis(10);
        for k in [b"a", b"b", b"c"] {
            yes(m.acquire(k, 5, ttl));
        }
        assert!(m.acquire(b"d", 5, ttl).unwrap_err().contains("memory"));
        clock.advance(Duration::from_secs(2));
        yes(m.acquire(b"d", 5, ttl));
        assert!(budget.used() <= per * 3);
    }

    /// One step of a random run.
    #[derive(Clone, Debug)]
    enum Op {
        Acquire {
            key: u8,
            max: u64,
            ttl_ms: u64,
        },
        /// The `i`-th token given so far (modulo how many).
        Release {
            key: u8,
            i: usize,
        },
        Advance(u64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u8..3, 1u64..4, 1u64..50).prop_map(|(key, max, ttl_ms)| Op::Acquire {
                key,
                max,
                ttl_ms
            }),
            (0u8..3, 0usize..64).prop_map(|(key, i)| Op::Release { key, i }),
            (0u64..40).prop_map(Op::Advance),
        ]
    }

    proptest::proptest! {
        /// Against a plain model (per key, a list of (token, expiry)): the same answers, never
        /// more than `max` held, and every byte given back once everything has expired.
        #[test]
        fn matches_a_plain_model(ops in proptest::collection::vec(op(), 1..200)) {
            let clock = ManualClock::new();
            let budget = Arc::new(Budget::new(1 << 20));
            let m = MemoryPermits::new(clock.clone(), budget.clone());
            let mut model: HashMap<u8, Vec<(String, u64)>> = HashMap::new();
            let mut given: Vec<(u8, String)> = Vec::new();
            let mut now = 0u64;
            for op in ops {
                match op {
                    Op::Acquire { key, max, ttl_ms } => {
                        let held = model.entry(key).or_default();
                        held.retain(|&(_, until)| until > now);
                        let got = m.acquire(&[key], max, Duration::from_millis(ttl_ms)).unwrap();
                        if (held.len() as u64) < max {
                            let Acquired::Yes { token, in_flight } = got else { panic!("{got:?}") };
                            held.push((token.clone(), now + ttl_ms * 1_000_000));
                            proptest::prop_assert_eq!(in_flight, held.len() as u64);
                            given.push((key, token));
                        } else {
                            let earliest = held.iter().map(|&(_, u)| u).min().unwrap();
                            let want = Acquired::No {
                                in_flight: held.len() as u64,
                                retry_after: Duration::from_nanos(earliest - now),
                            };
                            proptest::prop_assert_eq!(got, want);
                        }
                        proptest::prop_assert_eq!(m.in_flight(&[key]), held.len());
                    }
                    Op::Release { key, i } => {
                        if given.is_empty() {
                            continue;
                        }
                        let (_, token) = &given[i % given.len()];
                        let held = model.entry(key).or_default();
                        held.retain(|&(_, until)| until > now);
                        let had = held.iter().any(|(t, _)| t == token);
                        held.retain(|(t, _)| t != token);
                        proptest::prop_assert_eq!(m.release(&[key], token.as_bytes()), had);
                        proptest::prop_assert_eq!(m.in_flight(&[key]), held.len());
                    }
                    Op::Advance(ms) => {
                        now += ms * 1_000_000;
                        clock.advance(Duration::from_millis(ms));
                    }
                }
            }
            // Once everything has expired, a sweep gives every byte back.
            let later = now + 1_000_000_000;
            let mut t = m.lock();
            m.sweep(&mut t, later);
            proptest::prop_assert!(t.held.is_empty());
            proptest::prop_assert_eq!(budget.used(), 0);
        }
    }
}
