//! One GCRA decision over a call's keys, what every limiter runs: one round trip when the keys
//! share a slot (always on one node), two phases when they live in several slots of a cluster
//! ([`cross_slot`]).
//!
//! Above both [`Client`] (one round trip) and `cross_slot` (built from those round trips), so
//! that each imports only what lies below it.

use crate::connection::client::Client;
use crate::connection::cross_slot;
use crate::error::Error;
use crate::script::{self, Call, Phase, Reply};
use std::time::Duration;

/// Runs the script for `call` within `budget` (the deadline, less what the call already
/// waited): see [`Client::call_in`] for what guards each round trip. On a cluster, a call whose
/// keys live in several slots is decided in two phases, all or nothing (see [`cross_slot`]).
pub(crate) async fn decide(
    client: &Client,
    call: &Call<'_>,
    budget: Duration,
) -> Result<Reply, Error> {
    let keys = || call.keys.iter().map(|key| key.name.as_slice());
    if client.is_cluster() && call.keys.len() > 1 && !script::same_slot(keys()) {
        return cross_slot::call(client, call, budget).await;
    }
    client.call_in(call, Phase::Decide, client.give_up_us(budget), budget).await
}
