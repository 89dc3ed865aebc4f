//! One rule: its quotas, shadow mode, and how its buckets are kept.

use crate::keyed::OverflowPolicy;
use crate::quota::Quota;
use std::fmt;

/// The default capacity of a rule's tables: keys tracked at once under one rule. Each quota of
/// each rule has its own [`KeyedLimiter`](crate::KeyedLimiter) table, whose slots are allocated in
/// pages as keys reach them (54 bytes a slot for `String` keys, plus the strings: see
/// [Memory and cost](crate::KeyedLimiter#memory-and-cost)), so a table of this capacity takes at
/// most about 220 KB; give the rules that match many keys (the default rule, per-client rules)
/// more with [`Rule::capacity`].
///
/// ```
/// assert_eq!(leakgate::DEFAULT_RULE_CAPACITY, 4096);
/// ```
pub const DEFAULT_RULE_CAPACITY: usize = 4096;

/// One rule: its quotas (all must conform), and how its buckets are kept.
///
/// ```
/// use leakgate::Rules;
/// let mut rules = Rules::new();
/// rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]).shadow(true).capacity(10_000);
/// let api = rules.get("api").unwrap();
/// assert_eq!(api.quotas().len(), 2);
/// assert!(api.is_shadow());
/// assert_eq!(api.table_capacity(), 10_000);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    quotas: Vec<Quota>,
    shadow: bool,
    capacity: usize,
    overflow: OverflowPolicy,
}

impl Rule {
    /// A rule of `quotas`, enforcing, with the default table.
    ///
    /// ```
    /// let rule = leakgate::Rule::new(["5/s".parse()?]);
    /// assert!(!rule.is_shadow());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(quotas: impl IntoIterator<Item = Quota>) -> Self {
        Rule {
            quotas: quotas.into_iter().collect(),
            shadow: false,
            capacity: DEFAULT_RULE_CAPACITY,
            overflow: OverflowPolicy::Deny,
        }
    }

    /// The quotas, in the order given: the i-th is the i-th bucket of each key (a reload carries
    /// levels by that order). A rule with none admits every key and tracks none.
    ///
    /// ```
    /// let rule = leakgate::Rule::new(["5/s".parse()?]);
    /// assert_eq!(rule.quotas()[0].to_string(), "5/s");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn quotas(&self) -> &[Quota] {
        &self.quotas
    }

    /// Shadow mode: decide and count as usual, but admit every request. A request the rule would
    /// refuse takes nothing from its buckets and is counted as denied in shadow.
    ///
    /// ```
    /// let mut rule = leakgate::Rule::new(["5/s".parse()?]);
    /// assert!(rule.shadow(true).is_shadow());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn shadow(&mut self, on: bool) -> &mut Self {
        self.shadow = on;
        self
    }

    /// Whether the rule is in shadow mode.
    ///
    /// ```
    /// assert!(!leakgate::Rule::new([]).is_shadow());
    /// ```
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// Keys the rule's tables hold at once (rounded up as for
    /// [`KeyedLimiter::with_capacity`](crate::KeyedLimiter::with_capacity)).
    ///
    /// ```
    /// let mut rule = leakgate::Rule::new(["5/s".parse()?]);
    /// assert_eq!(rule.capacity(1000).table_capacity(), 1000);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn capacity(&mut self, keys: usize) -> &mut Self {
        self.capacity = keys;
        self
    }

    /// The capacity asked for.
    ///
    /// ```
    /// assert_eq!(leakgate::Rule::new([]).table_capacity(), leakgate::DEFAULT_RULE_CAPACITY);
    /// ```
    pub fn table_capacity(&self) -> usize {
        self.capacity
    }

    /// What a new key gets when a table of the rule has no room (every slot it may use holds a
    /// busy bucket): denied ([`OverflowPolicy::Deny`], the default), or checked against a bucket
    /// shared by every such key ([`OverflowPolicy::SharedBucket`]). Each quota of the rule has its
    /// own table, so each has its own shared bucket with the policy's quota. A request checked
    /// against several buckets gives a shared bucket's charge back as any other when another
    /// bucket refuses; a reload hands a shared bucket's level over to the new rules' shared
    /// bucket of the same rule path and quota, if there is one.
    ///
    /// ```
    /// use leakgate::{OverflowPolicy, Rule};
    /// let mut rule = Rule::new(["1/s".parse()?]);
    /// rule.capacity(64).overflow(OverflowPolicy::SharedBucket("100/s".parse()?));
    /// assert_eq!(rule.to_string(), "1/s (capacity 64, overflow shared 100/s)");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn overflow(&mut self, policy: OverflowPolicy) -> &mut Self {
        self.overflow = policy;
        self
    }

    /// The overflow policy.
    ///
    /// ```
    /// use leakgate::{OverflowPolicy, Rule};
    /// assert_eq!(Rule::new([]).overflow_policy(), OverflowPolicy::Deny);
    /// ```
    pub fn overflow_policy(&self) -> OverflowPolicy {
        self.overflow
    }
}

/// An overflow policy as rules files write it: `deny`, or `shared QUOTA`.
pub(crate) fn policy_text(policy: OverflowPolicy) -> String {
    match policy {
        OverflowPolicy::Deny => "deny".to_string(),
        OverflowPolicy::SharedBucket(quota) => format!("shared {quota}"),
    }
}

impl fmt::Display for Rule {
    /// The quotas separated by `, `, then the options that differ from the defaults.
    ///
    /// ```
    /// let mut rule = leakgate::Rule::new(["10/s".parse()?, "1000/h".parse()?]);
    /// rule.shadow(true);
    /// assert_eq!(rule.to_string(), "10/s, 1000/h (shadow)");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.quotas.is_empty() {
            f.write_str("no limit")?;
        }
        for (i, quota) in self.quotas.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{quota}")?;
        }
        let mut options = Vec::new();
        if self.shadow {
            options.push("shadow".to_string());
        }
        if self.capacity != DEFAULT_RULE_CAPACITY {
            options.push(format!("capacity {}", self.capacity));
        }
        if self.overflow != OverflowPolicy::Deny {
            options.push(format!("overflow {}", policy_text(self.overflow)));
        }
        if !options.is_empty() {
            write!(f, " ({})", options.join(", "))?;
        }
        Ok(())
    }
}
