//! Rules by key path, kept in Redis: [`RedisRuleLimiter`] and [`AsyncRedisRuleLimiter`] enforce a
//! [`leakgate::Rules`] across every process that connects with it (the crate docs,
//! [Rules by key path](crate#rules-by-key-path), say what that means).
//!
//! * `compiled`: a set of rules, each rule's quotas compiled and its Redis key head;
//! * `in_force`: the rules in force and the earlier sets that put keys under other paths;
//! * `outcome`: a check's decision and counts from the script's reply;
//! * `fallback`: the failure policy, with a local `RuleLimiter` at each rule's share;
//! * `limiter` and `blocking`: the two faces.

mod blocking;
mod compiled;
mod fallback;
mod in_force;
mod limiter;
mod outcome;

pub use blocking::RedisRuleLimiter;
pub use limiter::AsyncRedisRuleLimiter;
