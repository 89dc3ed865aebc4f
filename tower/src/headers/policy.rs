//! [`Policy`]: what a response announces in `RateLimit-Policy`, and the `RateLimit` values of
//! its decisions, made through a per-thread cache of recent values.

use super::intern::{Interner, Keep, LIMIT};
use super::{sf_integer, whole_seconds_up, window, InvalidPolicyName, SF_INTEGER_MAX};
use http::HeaderValue;
use leakgate::Quota;
use sfv::{KeyRef, ListSerializer, StringRef};
use std::cell::RefCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

const Q: &KeyRef = KeyRef::constant("q");
const W: &KeyRef = KeyRef::constant("w");
const R: &KeyRef = KeyRef::constant("r");
const T: &KeyRef = KeyRef::constant("t");

/// What a response announces: the `RateLimit-Policy` items of one or more quotas, and the name
/// of the one `RateLimit` item that reports a decision on them. A clone is the same policy (its
/// `id` too).
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    /// The `RateLimit` item's name: the policy's name when there is one quota.
    name: sfv::String,
    /// The names of the `RateLimit-Policy` items, in order.
    items: Box<[sfv::String]>,
    /// The `RateLimit-Policy` field value, e.g. `"default";q=100;w=60`: interned text while the
    /// interner has room (cloned for free), else reference-counted bytes.
    field: HeaderValue,
    /// The largest `w` of the items: the largest `t` a `RateLimit` value of this policy says.
    max_w: u64,
    /// This policy's number, never given to another: names it in the per-thread cache of
    /// `RateLimit` values (an address could be reused once a policy is freed).
    id: u64,
}

/// A policy that lives as long as the program ([`Policy::interned`] kept it), or one shared by the
/// rules in force, freed with them. Either way a response points to it without copying it.
#[derive(Clone, Debug)]
pub(crate) enum PolicyRef {
    Static(&'static Policy),
    Shared(Arc<Policy>),
}

impl Deref for PolicyRef {
    type Target = Policy;

    #[inline]
    fn deref(&self) -> &Policy {
        match self {
            PolicyRef::Static(policy) => policy,
            PolicyRef::Shared(policy) => policy,
        }
    }
}

/// A name as a Structured Field String, or why not.
pub(crate) fn policy_name(name: &str) -> Result<sfv::String, InvalidPolicyName> {
    StringRef::from_str(name)
        .map(StringRef::to_owned)
        .map_err(|_| InvalidPolicyName { name: name.to_owned() })
}

impl Policy {
    /// The policy `name` for `quota`.
    pub(crate) fn new(name: sfv::String, quota: Quota) -> Self {
        Policy::with_items(name.clone(), vec![(name, quota)])
    }

    /// Several quotas, each its own `RateLimit-Policy` item, reported together by one
    /// `RateLimit` item named `name`.
    ///
    /// The items must determine `name` (one item: its name; a rule's items: `name#0`,
    /// `name#1`, ...): [`Policy::interned`] tells policies apart by their `RateLimit-Policy` value
    /// alone.
    pub(crate) fn with_items(name: sfv::String, items: Vec<(sfv::String, Quota)>) -> Self {
        let mut list = ListSerializer::new();
        let mut max_w = 0;
        for (item, quota) in &items {
            let (q, w) = window(*quota);
            // Capped as the field writes it, so that `t <= w` holds as the client reads them.
            max_w = max_w.max(w.min(SF_INTEGER_MAX));
            list.bare_item(item).parameter(Q, sf_integer(q)).parameter(W, sf_integer(w));
        }
        // An empty list does not finish: no items, an empty value (never sent: a rule without
        // quotas announces nothing).
        let field = interner().field_value(list.finish().unwrap_or_default());
        let items = items.into_iter().map(|(item, _)| item).collect();
        Policy { name, items, field, max_w, id: next_id() }
    }

    /// The `RateLimit` item's name.
    #[cfg(test)]
    pub(crate) fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The names of the `RateLimit-Policy` items.
    pub(crate) fn item_names(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|item| item.as_str())
    }

    /// This policy as responses point to it: kept for the rest of the program, one copy per
    /// distinct `RateLimit-Policy` value, while the interner has room; shared and freed with
    /// its last user once it has none (see [`intern`]).
    pub(crate) fn interned(self) -> PolicyRef {
        let kept = interner().keep(self);
        match kept {
            Ok(kept) => PolicyRef::Static(kept),
            Err(policy) => PolicyRef::Shared(Arc::new(policy)),
        }
    }

    /// The `RateLimit-Policy` field value.
    pub(crate) fn field(&self) -> HeaderValue {
        self.field.clone()
    }

    /// The `RateLimit-Policy` field value as text (printable ASCII, as sfv writes it).
    pub(crate) fn field_text(&self) -> &str {
        // sfv writes printable ASCII only; the fallback is never taken.
        self.field.to_str().unwrap_or("")
    }

    /// The `RateLimit` field value for a decision: `"name";r=remaining;t=reset_after`, with `t`
    /// at most the policy's `w` (see the module docs: a queue's waiting requests may keep a
    /// bucket full beyond `w`).
    pub(crate) fn service_limit(&self, remaining: u64, reset_after: Duration) -> HeaderValue {
        let t = whole_seconds_up(reset_after).min(self.max_w);
        RECENT.with(|recent| match recent.try_borrow_mut() {
            Ok(mut recent) => recent.get(self.id, remaining, t, || self.write(remaining, t)),
            Err(_) => self.write(remaining, t),
        })
    }

    /// Serialises a `RateLimit` value with sfv.
    fn write(&self, remaining: u64, t: u64) -> HeaderValue {
        let mut text = String::with_capacity(self.name.as_str().len() + 40);
        let mut list = ListSerializer::with_buffer(&mut text);
        list.bare_item(&self.name).parameter(R, sf_integer(remaining)).parameter(T, sf_integer(t));
        // A list with its one member always finishes.
        let _ = list.finish();
        // sfv writes printable ASCII only, always a valid field value.
        HeaderValue::from_maybe_shared(bytes::Bytes::from(text.into_bytes()))
            .unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

impl Keep for Policy {
    fn field_text(&self) -> &str {
        Policy::field_text(self)
    }

    /// Roughly the bytes this policy holds, for the interner's budget.
    fn footprint(&self) -> usize {
        let names: usize = self.items.iter().map(|item| item.as_str().len()).sum();
        std::mem::size_of::<Self>()
            + self.name.as_str().len()
            + names
            + self.items.len() * std::mem::size_of::<sfv::String>()
    }

    fn set_field(&mut self, field: HeaderValue) {
        debug_assert_eq!(field.as_bytes(), self.field.as_bytes());
        self.field = field;
    }
}

/// The program's interner of field values and policies (see `intern.rs`).
fn interner() -> MutexGuard<'static, Interner<Policy>> {
    static GLOBAL: OnceLock<Mutex<Interner<Policy>>> = OnceLock::new();
    // A panic while holding the lock leaves the tables consistent (each insert is one step).
    GLOBAL
        .get_or_init(|| Mutex::new(Interner::new(LIMIT)))
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The bytes the program's interner keeps.
#[cfg(test)]
pub(crate) fn interned_bytes() -> usize {
    interner().bytes()
}

/// Fills the program's interner to its limit, as a long-running program's new policies would.
#[cfg(test)]
pub(crate) fn fill_interner() {
    interner().fill();
}

/// A number no other policy has had.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Relaxed: only uniqueness matters, which the read-modify-write gives in any ordering; no
    // other memory is published through it.
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Slots in each thread's cache of recent `RateLimit` values.
const RECENT_SLOTS: usize = 64;

/// The `RateLimit` values this thread made last, by policy and figures: a busy bucket reports
/// the same few `(r, t)` pairs again and again, and cloning a made value costs a reference count
/// where serialising costs a formatting pass and an allocation.
struct Recent {
    slots: [Option<(u64, u64, u64, HeaderValue)>; RECENT_SLOTS],
}

impl Recent {
    /// The value for `(policy, r, t)`, made by `make` unless this thread made it recently.
    #[inline]
    fn get(
        &mut self,
        policy: u64,
        r: u64,
        t: u64,
        make: impl FnOnce() -> HeaderValue,
    ) -> HeaderValue {
        let mix =
            (r ^ t.rotate_left(32) ^ policy.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = &mut self.slots[(mix >> 58) as usize % RECENT_SLOTS];
        match slot {
            Some((p, sr, st, value)) if (*p, *sr, *st) == (policy, r, t) => value.clone(),
            _ => {
                let value = make();
                *slot = Some((policy, r, t, value.clone()));
                value
            }
        }
    }
}

thread_local! {
    static RECENT: RefCell<Recent> =
        const { RefCell::new(Recent { slots: [const { None }; RECENT_SLOTS] }) };
}
