//! One row of `GET /buckets` ([`Bucket`]), wherever its bucket lives: made from this process's
//! tables (`buckets.rs`) or from Redis (`redis_buckets.rs`).

use serde::Serialize;

/// One listed bucket.
#[derive(Serialize)]
pub(crate) struct Bucket {
    pub(crate) key: String,
    pub(crate) rule: String,
    pub(crate) quota_index: usize,
    pub(crate) quota: String,
    pub(crate) level: f64,
    pub(crate) fill: f64,
    pub(crate) remaining: u64,
    pub(crate) reset_after_ms: u128,
    /// Time since the key's last admitted request (not known for buckets in Redis).
    pub(crate) idle_ms: Option<u128>,
}
