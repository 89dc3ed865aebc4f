//! Rules by key path against a plain keyed limiter, and per-rule counting.
//!
//! Group `rules` (one thread, 1,000 tracked keys, quotas that always admit, both on the TSC
//! clock): a plain `KeyedLimiter<String>` check; a `RuleLimiter` check of a key whose rule has one
//! quota (the issue asks for at most 1.3x the keyed check); `check_all_n` over three keys of three
//! rules (at most 3.5x); and the same three keys as three separate keyed checks, for scale.
//!
//! Before criterion, the same contenders (and a key no rule matches: the cost of resolving a key
//! alone) are timed interleaved, round after round, and their medians printed as ratios.
//!
//! Group `rules_counting`: what counting one decision costs, per thread count: leakgate's
//! per-thread counter blocks beside one shared `AtomicU64` (`fetch_add`), the design a shared
//! counter collapses to under threads.

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use leakgate::{BenchCounters, KeyedLimiter, Quota, RuleLimiter, Rules};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const KEYS: usize = 1000;

fn always() -> Quota {
    Quota::per_second(1_000_000_000).unwrap()
}

fn rules() -> Rules {
    let mut rules = Rules::new();
    for path in ["user", "tenant", "global"] {
        rules.insert(path, [always()]).capacity(4 * KEYS);
    }
    rules
}

/// The keys (users, and the tenant of each), and both limiters with every key tracked.
struct Setup {
    users: Vec<String>,
    tenants: Vec<String>,
    keyed: KeyedLimiter<String>,
    lim: RuleLimiter,
}

fn setup() -> Setup {
    let users: Vec<String> = (0..KEYS).map(|i| format!("user/{i}")).collect();
    let tenants: Vec<String> = (0..KEYS).map(|i| format!("tenant/{}", i % 16)).collect();
    let keyed = KeyedLimiter::<String>::with_capacity(always(), 4 * KEYS);
    let lim = RuleLimiter::new(rules());
    for (user, tenant) in users.iter().zip(&tenants) {
        keyed.check(user.as_str()).unwrap();
        keyed.check(tenant.as_str()).unwrap();
        lim.check_all_n(&[tenant, user, "global"], 1).unwrap();
    }
    keyed.check("global").unwrap();
    Setup { users, tenants, keyed, lim }
}

fn single_thread(c: &mut Criterion) {
    let Setup { users, tenants, keyed, lim } = setup();
    let mut group = c.benchmark_group("rules");
    group.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    let mut next = move || {
        i = (i + 1) % KEYS;
        i
    };
    group.bench_function("keyed_check", |b| b.iter(|| keyed.check(users[next()].as_str()).is_ok()));
    group.bench_function("rules_check", |b| b.iter(|| lim.check(&users[next()]).is_ok()));
    group.bench_function("rules_check_all_n_3_keys", |b| {
        b.iter(|| {
            let k = next();
            lim.check_all_n(&[&tenants[k], &users[k], "global"], 1).is_ok()
        })
    });
    group.bench_function("keyed_check_3_keys", |b| {
        b.iter(|| {
            let k = next();
            keyed.check(tenants[k].as_str()).is_ok()
                & keyed.check(users[k].as_str()).is_ok()
                & keyed.check("global").is_ok()
        })
    });
    group.finish();
}

/// `threads` threads each count `iters` decisions; the slowest thread's time.
fn count_on(threads: usize, iters: u64, count: &(impl Fn() + Sync)) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        count();
                    }
                    start.elapsed()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).max().unwrap_or_default()
    })
}

fn counting(c: &mut Criterion) {
    let mut group = c.benchmark_group("rules_counting");
    for threads in [1usize, 2, 4, 8, 16] {
        group.throughput(Throughput::Elements(threads as u64));
        let counters = BenchCounters::new();
        group.bench_with_input(
            BenchmarkId::new("per_thread_blocks", threads),
            &threads,
            |b, &t| b.iter_custom(|iters| count_on(t, iters, &|| counters.admitted())),
        );
        black_box(counters.total());
        let shared = AtomicU64::new(0);
        group.bench_with_input(
            BenchmarkId::new("one_shared_atomic", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    count_on(t, iters, &|| {
                        shared.fetch_add(1, Ordering::Relaxed);
                    })
                })
            },
        );
    }
    group.finish();
}

/// The ratios, measured with the contenders interleaved (round after round, each timing
/// a batch of checks, in turn) so that a noisy machine slows them alike; medians per contender.
fn interleaved_ratios() {
    let Setup { users, tenants, keyed, lim } = setup();
    const BATCH: usize = 20_000;
    let time = |f: &dyn Fn(usize) -> bool| {
        let start = Instant::now();
        let mut ok = 0usize;
        for i in 0..BATCH {
            ok += usize::from(f(i % KEYS));
        }
        black_box(ok);
        start.elapsed().as_nanos() as f64 / BATCH as f64
    };
    let others: Vec<String> = (0..KEYS).map(|i| format!("web/{i}")).collect();
    let contenders: [(&str, &dyn Fn(usize) -> bool); 5] = [
        ("keyed_check", &|k| keyed.check(users[k].as_str()).is_ok()),
        ("rules_check", &|k| lim.check(&users[k]).is_ok()),
        // No rule matches: what finding the rule (and the rules in force) costs alone.
        ("rules_check_untracked", &|k| lim.check(&others[k]).is_ok()),
        ("rules_check_all_n_3_keys", &|k| {
            lim.check_all_n(&[&tenants[k], &users[k], "global"], 1).is_ok()
        }),
        ("keyed_check_3_keys", &|k| {
            keyed.check(tenants[k].as_str()).is_ok()
                & keyed.check(users[k].as_str()).is_ok()
                & keyed.check("global").is_ok()
        }),
    ];
    let mut samples = vec![Vec::new(); contenders.len()];
    for _ in 0..200 {
        for (i, (_, f)) in contenders.iter().enumerate() {
            samples[i].push(time(*f));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let medians: Vec<f64> = samples.iter_mut().map(median).collect();
    println!("interleaved medians (ns/check), 200 rounds of {BATCH}:");
    for ((name, _), m) in contenders.iter().zip(&medians) {
        println!("  {name:<28} {m:7.1}  ({:.2}x keyed_check)", m / medians[0]);
    }
}

criterion_group!(benches, single_thread, counting);

fn main() {
    interleaved_ratios();
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
}
