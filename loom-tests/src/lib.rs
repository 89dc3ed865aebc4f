//! Loom models live in `tests/`; this crate holds only what they share.

/// Runs `f` under loom, every interleaving with at most three preemptions. An execution may take
/// up to 5,000 branches (loom's default is 1,000): an insert past its window, which takes the
/// spill lock and a lock per shard and checks the quota's epoch under each, takes more than
/// 1,000 on its own.
#[cfg(loom)]
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.max_branches = 5_000;
    builder.check(f);
}

/// One unit a second (`T` = 1 s) with a burst of `burst`.
#[cfg(loom)]
pub fn per_second(burst: u64) -> leakgate::Quota {
    leakgate::Quota::per_second(1).and_then(|q| q.with_burst(burst)).expect("a valid quota")
}
