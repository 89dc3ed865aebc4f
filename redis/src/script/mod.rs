//! The server-side script: its text, the arguments of one call, and what its reply means.
//!
//! The script (`gcra.lua`, `gcra_carry.lua` and `gcra_general.lua`) decides one request over every bucket of its keys, all or nothing,
//! in one round trip; Redis runs scripts one at a time, so no other decision interleaves. It
//! is sent with `EVALSHA` and loaded again (`SCRIPT LOAD`) when Redis answers `NOSCRIPT`, after
//! a restart or a `SCRIPT FLUSH`. Each call carries its deadline on Redis's clock: a script that
//! starts later (Redis was frozen, or slow) changes nothing and answers [`Answer::Late`].

pub(crate) mod units;

use crate::connection::cluster::slot;
use crate::error::Error;
use crate::script::units::{Rate, Split, NS_PER_MS};
use leakgate::{Admitted, Denied};
use std::time::Duration;

/// The script's source: the arguments, the reply and the fast path (`gcra.lua`), then the
/// general path's arithmetic and carry (`gcra_carry.lua`) and the general path
/// (`gcra_general.lua`).
pub(crate) const SOURCE: &str = concat!(
    include_str!("gcra.lua"),
    include_str!("gcra_carry.lua"),
    include_str!("gcra_general.lua")
);

/// The SHA-1 of [`SOURCE`], as `EVALSHA` wants it.
pub(crate) fn sha() -> String {
    redis::Script::new(SOURCE).get_hash().to_string()
}

/// One key of a call: its Redis key and its buckets.
#[derive(Debug)]
pub(crate) struct CallKey<'a> {
    /// The full Redis key.
    pub(crate) name: Vec<u8>,
    /// The quota of each of its buckets, in order.
    pub(crate) rates: &'a [Rate],
    /// How many times the request named it: its buckets are charged that many times `n`.
    pub(crate) times_named: u64,
    /// 0: its buckets decide with every other enforcing bucket; `g > 0`: shadow group `g`, whose
    /// buckets are charged only if they all conform, and never refuse the request.
    pub(crate) group: u32,
    /// With rules: the key's buckets under the other paths that earlier rules gave it, which the
    /// script takes in and keeps a marked copy at (see `gcra_general.lua`); empty otherwise.
    pub(crate) origins: Vec<Origin>,
}

/// A rule key's buckets under a path that earlier rules gave it.
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    /// The Redis key under that path.
    pub(crate) name: Vec<u8>,
    /// How many quotas that path's rule has.
    pub(crate) quotas: usize,
}

/// One call of the script.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    /// The keys, each once.
    pub(crate) keys: &'a [CallKey<'a>],
    /// Cost of the request.
    pub(crate) n: u64,
    /// The caller's clock in ns, or `None` for Redis `TIME`.
    pub(crate) now_ns: Option<u64>,
    /// How long the request may wait to go, in ns (0 for a meter).
    pub(crate) max_wait_ns: u64,
    /// Extra units to lease after an admission (0: none; one plain key only).
    pub(crate) lease_want: u64,
    /// With a lease: each quota's bucket's TAT (in its units) as the caller last saw it, or
    /// empty; the script finds a lost bucket by it.
    pub(crate) known_tat: &'a [u128],
    /// `false` for a peek: charge nothing, report the state (a rule key carried over to new
    /// quotas is still written in them).
    pub(crate) write: bool,
    /// Milliseconds a key lives beyond the moment its buckets are empty.
    pub(crate) expiry_slack_ms: u64,
    /// How the keys hold their buckets (see [`Keep`]).
    pub(crate) keep: Keep<'a>,
}

/// How a call's keys hold their buckets (the script's `ARGV[9]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep<'a> {
    /// The key's name fixes its quotas, and every key has the same ones in the same order.
    Plain,
    /// Rule buckets, each naming the quota it is kept in, carried over to the key's quotas when
    /// they change (see `gcra_carry.lua`); each key also brings the buckets that earlier rules
    /// gave it (its [`CallKey::origins`]).
    Rules,
    /// One bucket per key, its TAT, under the quota each call brings (redis-cell's bucket): a TAT
    /// kept in other units is read rounded up to the whole nanosecond. The note (the quota, as
    /// text) is kept with it, for listing.
    Tat(&'a str),
}

/// Which step of a call the script takes: a whole decision, or a phase of a call over several
/// Redis Cluster slots (see [`crate::connection::cross_slot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase<'a> {
    /// Decide (or peek) and charge, all in one script.
    Decide,
    /// Decide counting every live hold as charged; if the keys conform, record a hold with this
    /// id that expires at `expires_us` on Redis's clock, and charge nothing.
    Reserve {
        /// The call's id.
        id: &'a str,
        /// When the hold expires (and is committed by the next script that reads its key).
        expires_us: u64,
    },
    /// Charge the hold with this id, at its time.
    Commit(&'a str),
    /// Drop the hold with this id: nothing charged.
    Release(&'a str),
}

impl Call<'_> {
    /// The `EVALSHA` command for this call's `phase`, which decides nothing if it starts after
    /// `deadline_us` on Redis's clock (`TIME`, µs since the epoch). Every number is below 2^53
    /// (see [`crate::script::units`]). On a Redis Cluster (`one_slot`), the keys must share a
    /// hash slot (else [`Error::InvalidRequest`]), and an origin in another slot than its key is
    /// left out: the key starts afresh under its new path there (see the crate docs).
    pub(crate) fn command(
        &self,
        sha: &str,
        deadline_us: u64,
        one_slot: bool,
        phase: Phase<'_>,
    ) -> Result<redis::Cmd, Error> {
        if one_slot && !same_slot(self.keys.iter().map(|k| k.name.as_slice())) {
            return Err(Error::InvalidRequest(CROSS_SLOT));
        }
        let origins_of = |key| origins_in_slot(key, one_slot);
        // The quotas of the call, each once: the same `Rate` (by address) shared by several keys
        // (the keys of a plain limiter, or of one rule) is sent once.
        let mut quotas: Vec<&Rate> = Vec::new();
        for key in self.keys {
            for rate in key.rates {
                if !quotas.iter().any(|q| std::ptr::eq(*q, rate)) {
                    quotas.push(rate);
                }
            }
        }
        let mut cmd = redis::cmd("EVALSHA");
        let origins: usize = self.keys.iter().map(|key| origins_of(key).len()).sum();
        cmd.arg(sha).arg(self.keys.len() + origins);
        for key in self.keys {
            cmd.arg(key.name.as_slice());
            for origin in origins_of(key) {
                cmd.arg(origin.name.as_slice());
            }
        }
        match self.now_ns {
            None => cmd.arg("").arg(0),
            Some(ns) => cmd.arg(ns / NS_PER_MS).arg(ns % NS_PER_MS),
        };
        cmd.arg(quotas.len())
            .arg(self.max_wait_ns / NS_PER_MS)
            .arg(self.max_wait_ns % NS_PER_MS)
            .arg(self.lease_want)
            .arg(self.expiry_slack_ms.min(1 << 40))
            .arg(match phase {
                Phase::Decide if self.write => "1",
                Phase::Decide => "0",
                Phase::Reserve { .. } => "r",
                Phase::Commit(_) => "c",
                Phase::Release(_) => "x",
            })
            .arg(match self.keep {
                Keep::Plain => "0",
                Keep::Rules => "1",
                Keep::Tat(_) => "2",
            })
            .arg(deadline_us.min(MAX_EXACT));
        for rate in &quotas {
            let t =
                rate.split(rate.interval()).ok_or(Error::InvalidRequest("quota out of range"))?;
            let tau = rate.split(rate.tau()).ok_or(Error::InvalidRequest("quota out of range"))?;
            cmd.arg(rate.units_per_ns()).arg(rate.units_per_ms());
            cmd.arg(t.ms).arg(t.lo).arg(tau.ms).arg(tau.lo);
        }
        for key in self.keys {
            cmd.arg(key.group).arg(key.rates.len());
            let n = if self.write { self.n.saturating_mul(key.times_named) } else { 0 };
            for rate in key.rates {
                // Any cost above the burst refuses alike: one unit more keeps it in range.
                let n = n.min(rate.quota().burst().saturating_add(1));
                let cost =
                    rate.split(rate.cost(n)).ok_or(Error::InvalidRequest("cost out of range"))?;
                let j = 1 + quotas.iter().position(|q| std::ptr::eq(*q, rate)).unwrap_or(0);
                cmd.arg(j).arg(cost.ms).arg(cost.lo);
            }
            if self.keep == Keep::Rules {
                let origins = origins_of(key);
                cmd.arg(origins.len());
                for origin in origins {
                    cmd.arg(origin.quotas);
                }
            }
        }
        if let Keep::Tat(note) = self.keep {
            cmd.arg(note);
        }
        match phase {
            Phase::Decide => {}
            Phase::Reserve { id, expires_us } => {
                cmd.arg(id).arg(expires_us.min(MAX_EXACT));
            }
            Phase::Commit(id) | Phase::Release(id) => {
                cmd.arg(id).arg(0);
            }
        }
        if self.lease_want > 0 {
            for (j, rate) in quotas.iter().enumerate() {
                // Unknown, or out of the script's range: (0, 0) finds nothing lost.
                let known = self.known_tat.get(j).and_then(|&tat| rate.split(tat));
                let known = known.unwrap_or(Split { ms: 0, lo: 0 });
                cmd.arg(known.ms).arg(known.lo);
            }
        }
        Ok(cmd)
    }

    /// How many buckets the call decides over.
    pub(crate) fn buckets(&self) -> usize {
        self.keys.iter().map(|key| key.rates.len()).sum()
    }
}

/// A key's origins; on a Redis Cluster (`one_slot`), only those in the key's slot.
fn origins_in_slot<'k>(key: &'k CallKey<'_>, one_slot: bool) -> Vec<&'k Origin> {
    let home = one_slot.then(|| slot(&key.name));
    key.origins.iter().filter(|o| home.is_none_or(|s| slot(&o.name) == s)).collect()
}

/// Why a call over several hash slots is refused on a Redis Cluster.
pub(crate) const CROSS_SLOT: &str =
    "on a Redis Cluster, the keys of one call must share a hash slot: give them a common {tag}";

/// Whether every key hashes to one Redis Cluster slot (its `{tag}`, or the whole key).
pub(crate) fn same_slot<'a>(mut keys: impl Iterator<Item = &'a [u8]>) -> bool {
    let Some(first) = keys.next() else { return true };
    let home = slot(first);
    keys.all(|k| slot(k) == home)
}

/// The largest integer a Lua number holds exactly (2^53 - 1).
pub(crate) const MAX_EXACT: u64 = (1 << 53) - 1;

/// What the script answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It decided.
    Decided(Reply),
    /// It started after the call's deadline, and decided nothing; Redis's clock read `redis_us`.
    Late {
        /// Redis's `TIME` when the script started, in µs.
        redis_us: u64,
    },
}

/// What the script decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    /// Whether the request was granted (always for a peek).
    pub(crate) granted: bool,
    /// Whether the script found the key's buckets lost (a lease request only) and started them
    /// full.
    pub(crate) lost: bool,
    /// The time the script decided at, in ns since the clock's origin.
    pub(crate) now_ns: u64,
    /// When the request may go, in ns from `now_ns` (0 for a meter).
    pub(crate) delay_ns: u64,
    /// Extra units leased after the admission.
    pub(crate) leased: u64,
    /// Redis's `TIME` when the script ran, in µs since the epoch.
    pub(crate) redis_us: u64,
    /// `max(TAT - now, 0)` before the decision, in units, for each key (outer) and quota (inner).
    pub(crate) backlogs: Vec<u128>,
}

impl Answer {
    /// Reads the script's reply to `call`.
    pub(crate) fn parse(value: redis::Value, call: &Call<'_>) -> Result<Answer, Error> {
        let bad = || Error::Rejected("unexpected reply from the leakgate script".into());
        let numbers: Vec<i64> =
            redis::FromRedisValue::from_redis_value(value).map_err(|_| bad())?;
        if numbers.iter().any(|&v| v < 0) {
            return Err(bad());
        }
        if let [2, redis_us] = numbers[..] {
            return Ok(Answer::Late { redis_us: redis_us as u64 });
        }
        if numbers.len() != 7 + 2 * call.buckets() || numbers[0] > 3 {
            return Err(bad());
        }
        let at = |i: usize| numbers[i] as u64;
        let span = |ms: u64, ns: u64| ms.saturating_mul(NS_PER_MS).saturating_add(ns);
        let rates = call.keys.iter().flat_map(|key| key.rates);
        let backlogs = rates
            .enumerate()
            .map(|(x, rate)| rate.join(Split { ms: at(7 + 2 * x), lo: at(8 + 2 * x) }))
            .collect();
        Ok(Answer::Decided(Reply {
            granted: at(0) & 1 == 1,
            lost: at(0) & 2 == 2,
            now_ns: span(at(1), at(2)),
            delay_ns: span(at(3), at(4)),
            leased: at(5),
            redis_us: at(6),
            backlogs,
        }))
    }
}

impl Reply {
    /// Each bucket of `keys` (as sent) with its backlog before the decision.
    pub(crate) fn buckets<'a>(
        &'a self,
        keys: &'a [CallKey<'a>],
    ) -> impl Iterator<Item = (&'a CallKey<'a>, &'a Rate, u128)> + 'a {
        let buckets = keys.iter().flat_map(|key| key.rates.iter().map(move |rate| (key, rate)));
        buckets.zip(&self.backlogs).map(|((key, rate), &before)| (key, rate, before))
    }

    /// The backlog of each bucket after an admission of `n` per naming: `max(b, delay) + cost`,
    /// plus the leased units.
    pub(crate) fn backlogs_after<'a>(
        &'a self,
        keys: &'a [CallKey<'a>],
        n: u64,
    ) -> impl Iterator<Item = (&'a Rate, u128)> + 'a {
        self.buckets(keys).map(move |(key, rate, before)| {
            let delay = rate.ns_to_units(self.delay_ns);
            let extra = rate.cost(self.leased);
            (rate, before.max(delay) + rate.cost(n.saturating_mul(key.times_named)) + extra)
        })
    }

    /// The admission this reply reports: the smallest `remaining()` (leased units counted) and
    /// the largest `reset_after()` over the buckets.
    pub(crate) fn admitted(&self, keys: &[CallKey<'_>], n: u64) -> Admitted {
        let (mut remaining, mut reset_after) = (u64::MAX, Duration::ZERO);
        for (rate, backlog) in self.backlogs_after(keys, n) {
            remaining = remaining.min(rate.remaining(backlog));
            reset_after = reset_after.max(rate.units_to_duration_ceil(backlog));
        }
        Admitted::new(remaining.saturating_add(self.leased), reset_after)
    }

    /// The denial this reply reports; `never` for a cost above some bucket's burst.
    pub(crate) fn denied(&self, keys: &[CallKey<'_>], max_wait_ns: u64, never: bool) -> Denied {
        let (mut remaining, mut reset_after) = (u64::MAX, Duration::ZERO);
        for (_, rate, backlog) in self.buckets(keys) {
            remaining = remaining.min(rate.remaining(backlog));
            reset_after = reset_after.max(rate.units_to_duration_ceil(backlog));
        }
        let retry =
            (!never).then(|| Duration::from_nanos(self.delay_ns - max_wait_ns.min(self.delay_ns)));
        Denied::new(remaining, reset_after, retry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn parse(numbers: &[i64]) -> Result<Answer, Error> {
        let rates = [Rate::new("1000/s".parse().unwrap())];
        let keys = [CallKey {
            name: b"k".to_vec(),
            rates: &rates,
            times_named: 1,
            group: 0,
            origins: Vec::new(),
        }];
        let call = Call {
            keys: &keys,
            n: 1,
            now_ns: None,
            max_wait_ns: 0,
            lease_want: 0,
            known_tat: &[],
            write: true,
            expiry_slack_ms: 0,
            keep: Keep::Plain,
        };
        Answer::parse(Value::Array(numbers.iter().map(|&v| Value::Int(v)).collect()), &call)
    }

    #[test]
    fn a_late_script_is_told_apart_from_a_decision() {
        assert_eq!(
            parse(&[2, 1_700_000_000_000_123]).unwrap(),
            Answer::Late { redis_us: 1_700_000_000_000_123 }
        );
        let decided = parse(&[1, 1_700_000_000_000, 123_000, 0, 0, 0, 1_700_000_000_000_123, 0, 5]);
        let Ok(Answer::Decided(reply)) = decided else { panic!("{decided:?}") };
        assert!(reply.granted);
        assert_eq!(
            (reply.now_ns, reply.redis_us),
            (1_700_000_000_000_123_000, 1_700_000_000_000_123)
        );
        assert_eq!(reply.backlogs, [5]);
        // Anything else is not the script's.
        for bad in [&[1, 2, 3][..], &[2], &[-1, 5], &[1, 0, 0, 0, 0, 0, 0, 0]] {
            assert!(matches!(parse(bad), Err(Error::Rejected(_))), "{bad:?}");
        }
    }
}
