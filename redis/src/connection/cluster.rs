//! Where a limiter's connection goes: one Redis node, or a Redis Cluster reached from seed URLs.
//!
//! # Implementation details
//!
//! A cluster connection is the `redis` crate's async cluster client: it reads the slot map from
//! any seed, sends each command to the master of its first key's hash slot, follows `MOVED`
//! (and refreshes the map) and `ASK`, and reconnects to nodes that went away. Every script call
//! of a limiter names keys of one slot (the same `{tag}`, or a single key), so one node decides
//! it in one script run, exactly as on a single Redis. `SCRIPT LOAD` goes to every master (the
//! crate's routing for it), so a `NOSCRIPT` from a promoted replica or a new master is answered
//! by loading the script everywhere and sending the call again, as on one node.
//!
//! What this file does not change: the deadline, the breaker, the bound on calls in flight and
//! the failure policy wrap a cluster call exactly as a single node's (`client.rs`). The cluster
//! client's own retries (after a `MOVED`, a reconnect, a failover) run inside the call's deadline:
//! a call that cannot be placed in time is answered by the failure policy, and its script, if it
//! still runs later, decides nothing (the deadline the script is sent).
//!
//! **Clocks.** With Redis `TIME`, each key is decided on the clock of the master that holds it,
//! and a call's deadline is mapped through the answers of every node: the masters' clocks must be
//! synced (NTP), and a skew of `s` between two masters moves the deadline a script checks by up
//! to `s`. Keys on different masters never share a bucket, so a skew changes no decision's bound.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::time::Duration;

/// Hash slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16_384;

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its `{tag}` (the bytes between its
/// first `{` and the next `}`, when not empty) or else of the whole key, modulo [`SLOTS`].
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(key)) % SLOTS
}

/// What a limiter connects to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// One Redis (or Valkey) node, by URL.
    One(String),
    /// A Redis Cluster, by the URLs of any of its nodes (seeds).
    Cluster(Vec<String>),
}

/// A connection to a [`Target`]; cheap to clone (both kinds share one multiplexed connection).
#[derive(Clone)]
pub(crate) enum Conn {
    /// One node, reconnected by the connection manager.
    One(ConnectionManager),
    /// A cluster, routed by slot.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::One(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// `WAIT replicas timeout_ms` on the node that holds `key` (on one node: that node): how many
    /// replicas have every write this connection sent it so far. `timeout_ms` is at least 1
    /// (`WAIT` with 0 would block for ever).
    pub(crate) async fn wait(
        &mut self,
        key: &[u8],
        replicas: u32,
        timeout_ms: u64,
    ) -> redis::RedisResult<u64> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout_ms.max(1));
        let value = match self {
            Conn::One(c) => c.req_packed_command(&cmd).await?,
            Conn::Cluster(c) => {
                let node = Route::with_key(key, SlotAddr::Master);
                let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(node));
                c.route_command(cmd, at).await?
            }
        };
        Ok(redis::from_redis_value(value.extract_error()?)?)
    }
}

/// A cluster connection to `seeds`, made in the background (the first command, or the link's
/// keeper, waits for it). Each node is given `connect_timeout` to connect and `response_timeout`
/// to answer; the client's retries (after `MOVED`, a lost node, a failover) stop at the overall
/// `response_timeout`, and the call's own deadline is shorter still.
pub(crate) fn open(
    seeds: &[String],
    connect_timeout: Duration,
    response_timeout: Duration,
) -> Result<ClusterConnection, redis::RedisError> {
    let client = ClusterClient::builder(seeds.iter().map(String::as_str))
        .connection_timeout(connect_timeout)
        .response_timeout(response_timeout)
        .retries(4)
        .min_retry_wait(5)
        .max_retry_wait(100)
        .build()?;
    let config = redis::cluster::ClusterConfig::new()
        .set_connection_timeout(connect_timeout)
        .set_response_timeout(response_timeout);
    Ok(client.get_pending_async_connection_with_config(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn slots_are_the_redis_crates_and_redis_own() {
        // `CLUSTER KEYSLOT` on a real node: "a" 15495, "b" 3300.
        assert_eq!((slot(b"a"), slot(b"b")), (15495, 3300));
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        for key in [&b""[..], b"{}", b"{}x", b"x{", b"x}{y}", b"{a}{b}", b"\xff{\x00}", b"k{t}a"] {
            assert_eq!(Slot::new(slot(key)), Some(Slot::for_key(key)), "{key:?}");
        }
    }
}
