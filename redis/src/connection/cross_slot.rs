//! A call whose keys live in several slots of a Redis Cluster, decided all or nothing, exactly:
//! reserve on every slot, then commit everywhere or release everywhere.
//!
//! A script runs on one node, so keys in different slots cannot be decided in one. Charging each
//! slot and giving the charge back on a refusal is not exact: GCRA's charge
//! `TAT := max(TAT, now) + c` does not commute with another caller's (charge 10 at t = 0,
//! another charges 1 at t = 5, give 10 back: the TAT is 1, where only the other caller's charge
//! would leave 6). So a call over several slots holds instead of charging:
//!
//! 1. **Reserve**, one script per slot (its keys together): every bucket must conform counting
//!    each live hold on it as already charged (`max(TAT, now) + sum of holds + cost - now <=
//!    tau`). If all do, the script records a hold `{id, t = now, expiry, cost per bucket}` on
//!    each key of the slot, charging nothing; else it records nothing and refuses.
//! 2. If every slot reserved, **commit** on every slot: the hold becomes the charge at its time,
//!    `TAT := max(TAT, t) + c`. If any slot refused (or failed), **release** the others: the hold
//!    is dropped, nothing charged.
//!
//! Every script that reads a plain bucket counts its live holds as charged (the fast path hands
//! a key with holds to the general path), and commits a hold past its expiry: its caller may
//! have been admitted, so dropping it could admit more than the quota. The hold expires one
//! deadline after the call's (on Redis's clock), so that phase 2 has a deadline of its own even
//! when a slot's reserve took the whole first one; a release drops its hold even past expiry
//! (its caller was not admitted) if no other script has committed it first.
//!
//! **Why the state never falls below the exact model's.** Let `f(x) = max(x, t) + c` be a charge
//! at time `t`. For `t_a <= t_b`, applying the earlier charge last gives at least the time order:
//! `f_a(f_b(x)) = max(x, t_b) + c_b + c_a >= max(max(x, t_a) + c_a, t_b) + c_b = f_b(f_a(x))`,
//! and each `f` is monotone, so every order of the charges, each at its own time, leaves a TAT at
//! least the one that applies them in time order. The exact model is that time order, with each
//! cross-slot request at its reserve. A commit applies the hold's charge at `t` after later
//! checks: by the above, never below the model. A check decides on `max(TAT, now) + holds`,
//! which is at least the model's TAT with every held request admitted at its reserve (the same
//! inequality, the holds applied last at `now >= t`); a released hold only made it larger. So a
//! request is admitted only if the exact model over the admitted requests (each linearized at
//! its check, a cross-slot one at its reserve) admits it too.
//!
//! **Guarantee.** Never more admitted than that exact model allows. A refused call leaves no
//! charge, unless its caller dies between the phases (or its release is later than the hold's
//! expiry and another script touched the key meanwhile): then its holds are committed, at most
//! its held units as a charge. While a hold is in flight, another caller on the same key sees its
//! units as charged: it may be refused by up to those units until the commit or release, which is
//! one round trip normally and at most twice the deadline (a caller that stalls or dies). The
//! deadline, breaker and failure policy cover phase 1: a slot that fails to reserve fails the
//! call (the policy answers), the others are released. Phase 2 then takes one more round trip
//! (on the healthy nodes; at most one more deadline). A commit that fails after every slot
//! reserved (a node went down) leaves its holds, which commit at their expiry: the call stays
//! admitted.
//!
//! **Rule buckets** (a rules limiter's keys) hold the same way, and every script that reads a
//! rule bucket counts and commits its holds as above, so the same guarantee holds. Two cases are
//! settled against the caller (never admitting more): a key whose quotas changed (a reload)
//! while holds were on it has them committed at once, in the quota they were held in, before
//! its buckets are carried over (a hold released after that leaves its charge); and holds on an
//! origin (the key under an earlier rule's path, held by a server still on those rules) are kept
//! there for that server and counted by this key as charged when it takes the origin in (once:
//! a hold released there later leaves its charge here). Each slot's part brings its
//! keys' origins in that slot, as a single-slot call does.
//!
//! Checks only: a cross-slot reservation (`max_wait`) or lease is refused as before
//! ([`CROSS_SLOT`]). Cost: two round trips (each phase in parallel on every
//! slot) instead of one; a single-slot call is unchanged.

use crate::connection::client::Client;
use crate::connection::cluster::slot;
use crate::error::Error;
use crate::script::Call;
use crate::script::{CallKey, Keep, Phase, Reply, CROSS_SLOT, MAX_EXACT};
use futures_util::future::{join, join_all};
use std::time::{Duration, Instant};

/// Decides `call`, whose keys live in several slots, all or nothing (see the module docs).
pub(crate) async fn call(
    client: &Client,
    call: &Call<'_>,
    budget: Duration,
) -> Result<Reply, Error> {
    if !matches!(call.keep, Keep::Plain | Keep::Rules)
        || call.max_wait_ns > 0
        || call.lease_want > 0
    {
        return Err(Error::InvalidRequest(CROSS_SLOT));
    }
    let started = Instant::now();
    // The keys of each slot, in the order of first appearance; `at[i]`: key i's slot part.
    let mut slots: Vec<u16> = Vec::new();
    let mut at = Vec::with_capacity(call.keys.len());
    for key in call.keys {
        let s = slot(&key.name);
        let part = slots.iter().position(|&o| o == s).unwrap_or_else(|| {
            slots.push(s);
            slots.len() - 1
        });
        at.push(part);
    }
    let parts: Vec<Vec<CallKey<'_>>> = (0..slots.len())
        .map(|p| {
            let keys = call.keys.iter().zip(&at).filter(|(_, &q)| q == p);
            keys.map(|(key, _)| CallKey {
                name: key.name.clone(),
                rates: key.rates,
                times_named: key.times_named,
                group: key.group,
                origins: key.origins.clone(),
            })
            .collect()
        })
        .collect();
    let calls: Vec<Call<'_>> = parts
        .iter()
        .map(|keys| Call {
            keys,
            n: call.n,
            now_ns: call.now_ns,
            max_wait_ns: 0,
            lease_want: 0,
            known_tat: &[],
            write: call.write,
            expiry_slack_ms: call.expiry_slack_ms,
            keep: call.keep,
        })
        .collect();
    let give_up = client.give_up_us(budget);
    if !call.write {
        // A peek charges nothing: each slot reports its state.
        let phase = Phase::Decide;
        let replies = join_all(calls.iter().map(|c| client.call_in(c, phase, give_up, budget)));
        let replies = replies.await.into_iter().collect::<Result<Vec<_>, _>>()?;
        return Ok(combine(call, &at, &parts, replies));
    }
    let id = format!("{:032x}", crate::new_permit_token());
    // A hold outlives the call's deadline by one more, phase 2's: a release that comes after a
    // slot timed out still finds its holds on the others.
    let deadline_us = u64::try_from(client.deadline.as_micros()).unwrap_or(u64::MAX);
    let reserve = Phase::Reserve { id: &id, expires_us: give_up.saturating_add(deadline_us) };
    let reserved = join_all(calls.iter().map(|c| client.call_in(c, reserve, give_up, budget)));
    let reserved = reserved.await;
    let all = reserved.iter().all(|r| matches!(r, Ok(reply) if reply.granted));
    let second = if all { Phase::Commit(&id) } else { Phase::Release(&id) };
    // Phase 2 on every slot that holds, within one more deadline (a failure leaves the holds to
    // be committed at their expiry). A release also goes to a slot whose reserve failed, within
    // what is left of the call's budget (its script may have run after the call gave up; it
    // changes nothing if it finds no hold).
    let left = budget.saturating_sub(started.elapsed());
    let (held, failed): (Vec<_>, Vec<_>) = calls
        .iter()
        .zip(&reserved)
        .filter(|(_, r)| !matches!(r, Ok(reply) if !reply.granted))
        .partition(|(_, r)| r.is_ok());
    let held = held.into_iter().map(|(c, _)| client.call_in(c, second, MAX_EXACT, client.deadline));
    let failed = failed.into_iter().map(|(c, _)| client.call_in(c, second, MAX_EXACT, left));
    let _ = join(join_all(held), join_all(failed)).await;
    let replies = reserved.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(combine(call, &at, &parts, replies))
}

/// One reply for the whole call from each slot's: granted iff every slot granted, each key's
/// backlogs in the call's order.
fn combine(
    call: &Call<'_>,
    at: &[usize],
    parts: &[Vec<CallKey<'_>>],
    replies: Vec<Reply>,
) -> Reply {
    // Where each part's keys start in its reply's backlogs, key by key.
    let mut next = vec![0usize; parts.len()];
    let mut backlogs = Vec::with_capacity(call.buckets());
    for (key, &p) in call.keys.iter().zip(at) {
        let from = next[p];
        let got = replies.get(p).and_then(|r| r.backlogs.get(from..from + key.rates.len()));
        backlogs.extend_from_slice(got.unwrap_or(&[]));
        next[p] = from + key.rates.len();
    }
    Reply {
        granted: replies.iter().all(|r| r.granted),
        lost: false,
        now_ns: replies.iter().map(|r| r.now_ns).min().unwrap_or(0),
        delay_ns: replies.iter().map(|r| r.delay_ns).max().unwrap_or(0),
        leased: 0,
        redis_us: replies.iter().map(|r| r.redis_us).max().unwrap_or(0),
        backlogs,
    }
}
