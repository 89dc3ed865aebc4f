//! The connection to Redis, and what answers when it cannot.
//!
//! * `builder`: [`Builder`](crate::Builder), every setting of a limiter (each `connect*` lives
//!   beside the limiter it builds, in `crate::limiters`);
//! * `policy`: [`FailurePolicy`](crate::FailurePolicy);
//! * `cluster`: the target (one node or a cluster) and the connection to it;
//! * `link`: one connection, remade in the background, and the map from this process's clock to
//!   Redis's;
//! * `breaker`: the circuit breaker;
//! * `client`: one call with its deadline, in-flight bound and breaker (what every limiter uses);
//! * `cross_slot`: a call over several slots of a cluster, all or nothing (holds);
//! * `decide`: one decision over a call's keys (one slot or several), what every limiter runs;
//! * `fallback`: the local limiter of [`FailurePolicy::Local`](crate::FailurePolicy::Local);
//! * `runtime`: the tokio runtime a blocking limiter runs on.

pub(crate) mod breaker;
pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod cluster;
pub(crate) mod cross_slot;
pub(crate) mod decide;
pub(crate) mod fallback;
pub(crate) mod link;
pub(crate) mod policy;
pub(crate) mod runtime;
