//! The limiters, each a user of `crate::connection` and `crate::script`.
//!
//! * `limiter` ([`AsyncRedisLimiter`](crate::AsyncRedisLimiter)) and `blocking`
//!   ([`RedisLimiter`](crate::RedisLimiter)): one quota set for every key;
//! * `lease_config`, `lease_table` and `lease_check`: leases for hot keys (the settings, the local table,
//!   and the limiter's use of them);
//! * `reservation`: queue mode's answer;
//! * `concurrency`, `permit`, `permit_set` and `token`: permits held as leases
//!   ([`AsyncRedisConcurrency`](crate::AsyncRedisConcurrency)), each a
//!   [`RedisPermit`](crate::RedisPermit) that can renew itself in the background;
//! * `cell`: redis-cell's bucket ([`AsyncRedisCell`](crate::AsyncRedisCell));
//! * `rules`: rules by key path.

pub(crate) mod blocking;
pub(crate) mod cell;
pub(crate) mod concurrency;
mod lease_check;
pub(crate) mod lease_config;
pub(crate) mod lease_table;
pub(crate) mod limiter;
pub(crate) mod permit;
pub(crate) mod permit_set;
pub(crate) mod reservation;
pub(crate) mod rules;
pub(crate) mod token;
