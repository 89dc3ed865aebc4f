//! `leakgate bench`: leakgate against governor and a mutex token bucket, on this machine, now.
//!
//! Every (scenario, threads) pair is measured in rounds; within a round each contender runs one
//! time slice in turn (A B C D, A B C D, ...), so drift in machine load hits all of them alike, and
//! the table reports each contender's median over the rounds.

use leakgate::{CoarseClock, TscClock};
use leakgate_baselines::{Gate, Scenario};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the run takes: rounds per measurement and the length of one slice.
struct Plan {
    rounds: usize,
    slice: Duration,
}

const THREADS: [usize; 3] = [1, 2, 4];
const KEYS: u64 = 1_000;
const CONTENDERS: [&str; 4] = ["leakgate (tsc)", "leakgate (coarse)", "governor", "mutex bucket"];

pub(crate) fn run(args: &[String]) -> ExitCode {
    let plan = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => Plan { rounds: 9, slice: Duration::from_millis(50) },
        ["--quick"] => Plan { rounds: 3, slice: Duration::from_millis(15) },
        other => {
            eprintln!(
                "leakgate bench: unexpected argument(s) {other:?}; usage: leakgate bench [--quick]"
            );
            return ExitCode::from(2);
        }
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "leakgate bench: the cost of one rate-limit decision on this machine ({cores} cores).\n\
         Threads share one limiter. 'allowed': every decision admits (and writes the state);\n\
         'denied': every decision refuses (leakgate and governor only read). ns/decision is wall\n\
         time over all decisions of all threads (lower is better); the median of {} rounds of\n\
         {:?} slices, contenders interleaved.\n",
        plan.rounds, plan.slice
    );
    let progress = std::io::stderr().is_terminal();
    let total = 2 * THREADS.len() * plan.rounds * CONTENDERS.len() + 2 * plan.rounds * 2;
    let mut done = 0;
    let mut rows = Vec::new();
    for (name, scenario) in [("allowed", Scenario::Allowed), ("denied", Scenario::Denied)] {
        let tsc = scenario.leakgate(TscClock::new());
        let coarse = scenario.leakgate(CoarseClock::new());
        let governor = scenario.governor();
        let mutex = scenario.mutex_bucket();
        let gates: [&dyn Gate; 4] = [&tsc, &coarse, &governor, &mutex];
        for threads in THREADS {
            let mut samples = vec![Vec::new(); gates.len()];
            for _ in 0..plan.rounds {
                for (i, gate) in gates.iter().enumerate() {
                    if progress {
                        done += 1;
                        eprint!(
                            "\r\x1b[K[{done}/{total}] {name}, {threads} thread(s), {}",
                            CONTENDERS[i]
                        );
                    }
                    samples[i].push(ns_per_decision(*gate, threads, plan.slice));
                }
            }
            let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
            rows.push((name, threads, medians));
        }
    }
    let keyed = KeyedGates::new();
    let keyed_gates: [&dyn Gate; 2] = [&keyed.leakgate, &keyed.governor];
    let mut keyed_rows = Vec::new();
    for threads in [1, 2] {
        let mut samples = vec![Vec::new(); 2];
        for _ in 0..plan.rounds {
            for (i, gate) in keyed_gates.iter().enumerate() {
                if progress {
                    done += 1;
                    eprint!("\r\x1b[K[{done}/{total}] keyed, {threads} thread(s)");
                }
                samples[i].push(ns_per_decision(*gate, threads, plan.slice));
            }
        }
        keyed_rows.push((threads, samples.iter_mut().map(|s| median(s)).collect::<Vec<_>>()));
    }
    if progress {
        eprint!("\r\x1b[K");
    }
    print_table(&rows);
    print_keyed_table(&keyed_rows);
    ExitCode::SUCCESS
}

/// Runs `threads` threads on `gate` for one slice; returns wall nanoseconds per decision.
fn ns_per_decision(gate: &dyn Gate, threads: usize, slice: Duration) -> f64 {
    let stop = AtomicBool::new(false);
    let barrier = std::sync::Barrier::new(threads + 1);
    let (decisions, elapsed) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let mut n = 0u64;
                    // Relaxed: a stop flag; being late by one batch is harmless.
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..256 {
                            std::hint::black_box(gate.allow());
                        }
                        n += 256;
                    }
                    n
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        let n: u64 = workers.into_iter().map(|w| w.join().expect("bench thread panicked")).sum();
        (n, start.elapsed())
    });
    elapsed.as_nanos() as f64 / decisions.max(1) as f64
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn print_table(rows: &[(&str, usize, Vec<f64>)]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:<9} {:>7}  {:<18} {:>12} {:>9} {:>12}",
        "scenario", "threads", "implementation", "ns/decision", "Mops/s", "vs governor"
    );
    for (name, threads, medians) in rows {
        let governor = medians[2];
        for (who, ns) in CONTENDERS.iter().zip(medians) {
            let _ = writeln!(
                out,
                "{name:<9} {threads:>7}  {who:<18} {ns:>12.2} {:>9.1} {:>11.2}x",
                1e3 / ns,
                governor / ns
            );
        }
    }
    let _ = writeln!(out, "\n'vs governor' is throughput relative to governor: above 1 is faster.");
}

/// Per-key limiters over [`KEYS`] keys that are all tracked and always allowed; each call checks
/// the next key of a per-thread scattered sequence.
struct KeyedGates {
    leakgate: KeyedGate<leakgate::KeyedLimiter<u64>>,
    governor: KeyedGate<governor::DefaultKeyedRateLimiter<u64>>,
}

struct KeyedGate<L>(L);

std::thread_local!(static NEXT_KEY: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });

/// The calling thread's next key, scattered over `0..KEYS`.
fn next_key() -> u64 {
    NEXT_KEY.with(|n| {
        let i = n.get().wrapping_add(1);
        n.set(i);
        (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16) % KEYS
    })
}

impl KeyedGates {
    fn new() -> Self {
        let allowed =
            leakgate::Quota::new(100_000_000_000, Duration::from_secs(1), 1_000_000_000_000)
                .expect("valid quota");
        let max = std::num::NonZeroU32::new(u32::MAX).expect("not zero");
        let gates = KeyedGates {
            leakgate: KeyedGate(leakgate::KeyedLimiter::with_capacity(allowed, 4 * KEYS as usize)),
            governor: KeyedGate(governor::RateLimiter::keyed(
                governor::Quota::per_second(max).allow_burst(max),
            )),
        };
        for key in 0..KEYS {
            assert!(
                gates.leakgate.0.check(&key).is_ok() && gates.governor.0.check_key(&key).is_ok()
            );
        }
        gates
    }
}

impl Gate for KeyedGate<leakgate::KeyedLimiter<u64>> {
    fn allow(&self) -> bool {
        self.0.check(&next_key()).is_ok()
    }
}

impl Gate for KeyedGate<governor::DefaultKeyedRateLimiter<u64>> {
    fn allow(&self) -> bool {
        self.0.check_key(&next_key()).is_ok()
    }
}

fn print_keyed_table(rows: &[(usize, Vec<f64>)]) {
    println!("\nkeyed: {KEYS} tracked u64 keys, always allowed, scattered order");
    println!(
        "{:>7}  {:<18} {:>12} {:>9} {:>12}",
        "threads", "implementation", "ns/decision", "Mops/s", "vs governor"
    );
    for (threads, medians) in rows {
        for (who, ns) in ["leakgate keyed", "governor keyed"].iter().zip(medians) {
            println!(
                "{threads:>7}  {who:<18} {ns:>12.2} {:>9.1} {:>11.2}x",
                1e3 / ns,
                medians[1] / ns
            );
        }
    }
}
