//! Loom models live in `tests/`; this crate holds only what they share.

/// Runs `f` under loom, every interleaving with at most three preemptions.
#[cfg(loom)]
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// One unit a second (`T` = 1 s) with a burst of `burst`.
#[cfg(loom)]
pub fn per_second(burst: u64) -> leakgate::Quota {
    leakgate::Quota::per_second(1).and_then(|q| q.with_burst(burst)).expect("a valid quota")
}
