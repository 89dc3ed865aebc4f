//! Interning, within a budget: one copy of each distinct `RateLimit-Policy` value and rule
//! policy, kept for the life of the program, so that a response clones a field value without
//! touching a reference count (which every core would write) and points to its policy for free.
//!
//! What is kept is never freed, because responses may hold it for as long as they live. So the
//! interner keeps at most [`LIMIT`] bytes: layers and rules are usually few and fixed, and fit;
//! a program that builds ever new policies (live reloads with changing quotas, say) fills the
//! budget, and from then on its new policies are reference-counted and freed with the last rules
//! and responses that use them. Memory then stays bounded however long it runs, and only those
//! policies pay a reference count per response.

use bytes::Bytes;
use http::HeaderValue;
use std::collections::{HashMap, HashSet};

/// The most bytes the program's interner keeps (text, policies and their table entries): a few
/// thousand rule policies.
pub(crate) const LIMIT: usize = 1 << 20;

/// What one table entry costs beyond its text or policy (hash, pointer, length, spare room).
const ENTRY_OVERHEAD: usize = 32;

/// What the interner keeps besides text: a value named by its field value (a policy, by its
/// `RateLimit-Policy` text). A trait, so that this file needs nothing of `policy.rs`, which
/// holds the program's interner.
pub(crate) trait Keep: 'static {
    /// Its field value as text: what it is kept by.
    fn field_text(&self) -> &str;
    /// Roughly the bytes it holds, for the budget.
    fn footprint(&self) -> usize;
    /// Replaces its field value with the same text held elsewhere (the interner's kept copy).
    fn set_field(&mut self, field: HeaderValue);
}

/// Interned field texts and policies (`P`), and the bytes they hold.
pub(crate) struct Interner<P: 'static> {
    texts: HashSet<&'static str>,
    /// Kept policies, by their `RateLimit-Policy` text (which fixes their `RateLimit` name).
    policies: HashMap<&'static str, &'static P>,
    bytes: usize,
    limit: usize,
}

impl<P: Keep> Interner<P> {
    /// An empty interner that keeps at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Interner { texts: HashSet::new(), policies: HashMap::new(), bytes: 0, limit }
    }

    /// The bytes kept so far (never more than the limit).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `cost` bytes of the budget if they fit.
    fn spend(&mut self, cost: usize) -> bool {
        let fits = self.bytes.saturating_add(cost) <= self.limit;
        if fits {
            self.bytes += cost;
        }
        fits
    }

    /// `text` as a field value: the kept copy, or a new kept copy if it fits, or else a
    /// reference-counted one.
    pub(crate) fn field_value(&mut self, text: String) -> HeaderValue {
        if let Some(&kept) = self.texts.get(text.as_str()) {
            return static_value(kept);
        }
        if !self.spend(text.len() + ENTRY_OVERHEAD) {
            // sfv writes printable ASCII only, which is always a valid field value.
            return HeaderValue::from_maybe_shared(Bytes::from(text))
                .unwrap_or_else(|_| HeaderValue::from_static(""));
        }
        let kept: &'static str = Box::leak(text.into_boxed_str());
        self.texts.insert(kept);
        static_value(kept)
    }

    /// `policy` as responses point to it: the kept copy of a policy with its text, or a new kept
    /// copy if its text is kept and it fits (`Ok`), or else `policy` back, for the caller to
    /// share (`Err`).
    pub(crate) fn keep(&mut self, mut policy: P) -> Result<&'static P, P> {
        if let Some(&kept) = self.policies.get(policy.field_text()) {
            return Ok(kept);
        }
        let Some(&text) = self.texts.get(policy.field_text()) else {
            return Err(policy);
        };
        if !self.spend(policy.footprint() + ENTRY_OVERHEAD) {
            return Err(policy);
        }
        // Its field made from the kept text, so clones of it never count references.
        policy.set_field(static_value(text));
        let kept: &'static P = Box::leak(Box::new(policy));
        self.policies.insert(text, kept);
        Ok(kept)
    }

    /// Fills the interner to its limit, as a long-running program's new policies would.
    #[cfg(test)]
    pub(crate) fn fill(&mut self) {
        let mut i = 0u64;
        while self.bytes + 100 < self.limit {
            let _ = self.field_value(format!("\"fill-{i}\";q=1;w=1"));
            i += 1;
        }
    }
}

/// A field value over kept text: cloning it copies a pointer.
fn static_value(text: &'static str) -> HeaderValue {
    // sfv writes printable ASCII only, which is always a valid field value.
    HeaderValue::from_maybe_shared(Bytes::from_static(text.as_bytes()))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::{policy_name, Policy};
    use leakgate::Quota;
    use std::sync::Arc;

    fn policy(i: u64) -> Policy {
        Policy::new(policy_name("p").unwrap(), Quota::per_second(i + 1).unwrap())
    }

    /// Whether `value` is kept text of `interner` (cloned for free).
    fn is_kept(interner: &Interner<Policy>, value: &HeaderValue) -> bool {
        let text = value.to_str().unwrap();
        interner.texts.get(text).is_some_and(|kept| kept.as_ptr() == value.as_bytes().as_ptr())
    }

    #[test]
    fn the_same_text_is_kept_once() {
        let mut interner = Interner::<Policy>::new(LIMIT);
        let a = interner.field_value("\"a\";q=1;w=1".to_owned());
        let b = interner.field_value("\"a\";q=1;w=1".to_owned());
        assert!(is_kept(&interner, &a) && is_kept(&interner, &b));
        assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
        assert_eq!(interner.texts.len(), 1);
    }

    #[test]
    fn the_same_policy_is_kept_once_and_another_apart() {
        let mut interner = Interner::<Policy>::new(LIMIT);
        let mut keep = |i| {
            let p = policy(i);
            let _ = interner.field_value(p.field_text().to_owned());
            match interner.keep(p) {
                Ok(p) => p as *const Policy,
                Err(_) => panic!("shared while there is room"),
            }
        };
        let (a, b, c) = (keep(1), keep(1), keep(2));
        assert!(std::ptr::eq(a, b));
        assert!(!std::ptr::eq(a, c));
    }

    /// The bound: however many distinct policies come, the interner keeps at most its limit,
    /// goes on answering with correct values, and what it did not keep is freed with its users.
    #[test]
    fn what_is_kept_never_exceeds_the_limit_and_the_rest_is_freed() {
        let limit = 16 << 10;
        let mut interner = Interner::<Policy>::new(limit);
        let mut shared = Vec::new();
        for i in 0..5_000u64 {
            let text = format!("\"rule-{i}\";q={i};w=1");
            let value = interner.field_value(text.clone());
            assert_eq!(value.to_str().unwrap(), text, "the value is right, kept or not");
            assert!(interner.bytes() <= limit);
            let name = policy_name(&format!("rule-{i}")).unwrap();
            let p = Policy::new(name, Quota::per_second(i + 1).unwrap());
            match interner.keep(p) {
                Ok(_) => assert!(shared.is_empty(), "kept after the budget ran out"),
                Err(p) => shared.push(Arc::downgrade(&Arc::new(p))),
            }
            assert!(interner.bytes() <= limit);
        }
        assert!(interner.bytes() > limit - 1024, "the budget is used: {}", interner.bytes());
        assert!(shared.len() > 4_000, "most were not kept: {}", shared.len());
        assert!(shared.iter().all(|p| p.upgrade().is_none()), "a shared policy outlived its users");
        let late = interner.field_value("\"new\";q=1;w=1".to_owned());
        assert_eq!(late.to_str().unwrap(), "\"new\";q=1;w=1");
        assert!(!is_kept(&interner, &late));
    }
}
