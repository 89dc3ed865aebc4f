//! [`FailurePolicy`]: what a call answers when Redis cannot.

/// What a call answers when Redis gives no decision within the deadline (down, slow, the circuit
/// breaker open, too many calls in flight) or answers with an error.
///
/// ```
/// use leakgate_redis::FailurePolicy;
/// assert_eq!(FailurePolicy::default(), FailurePolicy::Deny);
/// let fleet_share = FailurePolicy::Local { expected_servers: 20 };
/// # let _ = fleet_share;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Fail closed: deny. The quota is never exceeded because Redis is away.
    #[default]
    Deny,
    /// Fail open: admit. Nothing is limited while Redis is away.
    Allow,
    /// Limit locally at `quota / expected_servers` (count unchanged, period times the number of
    /// servers, burst divided by it and at least 1), one bucket per key in this process. If the
    /// fleet has the expected number of servers, it admits about the quota while Redis is away.
    Local {
        /// How many servers share the limit (at least 1).
        expected_servers: u32,
    },
}
