//! Rules by key path, kept in Redis: [`RedisRuleLimiter`] and [`AsyncRedisRuleLimiter`] enforce a
//! [`leakgate::Rules`] across every process that connects with it (the crate docs,
//! [Rules by key path](crate#rules-by-key-path), say what that means).
//!
//! * `compiled`: a set of rules, each rule's quotas compiled and its Redis key head;
//! * `in_force`: the rules in force and the earlier sets that put keys under other paths;
//! * `outcome`: a check's decision and counts from the script's reply;
//! * `fallback`: the failure policy, with a local `RuleLimiter` at each rule's share;
//! * `limiter` and `blocking`: the two faces;
//! * `pushed`: rules pushed to Redis for a fleet to follow (feature `rules-file`).

mod blocking;
mod compiled;
mod fallback;
mod in_force;
mod limiter;
mod outcome;
#[cfg(feature = "rules-file")]
mod pushed;

pub use blocking::RedisRuleLimiter;
pub use limiter::AsyncRedisRuleLimiter;
#[cfg(feature = "rules-file")]
pub use pushed::{
    fetch_rules, fetch_rules_cluster, push_rules, push_rules_cluster, rules_to_toml, FollowEvent,
    PushedRules, RulesFollower,
};
