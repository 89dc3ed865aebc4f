//! One srTCM shared by 1 and 2 threads, every packet green (64 bytes, CIR 50 GB/s, CBS and EBS
//! 1 GiB): the exact `SrTcm`, the `LeasedSrTcm` (default `Leases`: leases of 65,534 bytes, 1,023
//! packets) and the RFC's buckets behind a per-packet mutex (`leakgate_baselines::MutexSrTcm`),
//! on the meter's own clock (read per packet) and with caller time (read once per burst of 32).
//!
//! `LEAKGATE_LEASED_METER_ROUNDS=N cargo bench --bench leased_meters` runs N interleaved rounds
//! instead (each contender 200 ms in turn in every round, on fresh meters) and prints the median
//! ns per packet (wall time over all threads) and the ratios to the mutex meter;
//! `LEAKGATE_LEASED_METER_THREADS=1,2,4,8` names the thread counts of those rounds (default 1, 2).
//!
//! Measured (3 runs of 3 interleaved rounds, 2-core AMD EPYC VM shared with other builds, load
//! 3.4-6.3; ns per packet, wall time over all threads; exact / leased / mutex): one thread, own
//! clock 16.2-22.5 / 16.3-21.7 / 15.0-19.9, caller time 12.6-17.5 / 12.6-21.3 / 12.4-19.1; two
//! threads, own clock 14.0-22.9 / 14.7-23.0 / 14.3-25.1, caller time 11.8-20.6 / 12.4-18.3 /
//! 12.1-18.9. Leased/mutex 0.75-1.23, exact/mutex 0.91-1.19: parity within the noise. On this
//! VM two threads never ran at once long enough to show the shared line (no contender's time
//! per packet halves or grows from one thread to two), so the case the leases are for is not
//! shown here; it needs a machine with idle cores.

mod support;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use leakgate::{Clock, Color, LeasedSrTcm, Leases, Quota, SrTcm, TscClock};
use leakgate_baselines::{median, MutexSrTcm};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const PACKET: u64 = 64;
const BURST: u64 = 32;
const THREADS: [usize; 2] = [1, 2];
const TIMES: [(&str, bool); 2] = [("own_clock", false), ("caller_time", true)];
const NAMES: [&str; 3] = ["exact", "leased", "mutex"];

/// A contender: a packet's colour at caller time `now`, or on its own clock for `None`.
enum Meter {
    Exact(SrTcm<TscClock>),
    Leased(LeasedSrTcm<TscClock>),
    Mutex(MutexSrTcm, TscClock),
}

impl Meter {
    /// Fresh contender `name` (one of [`NAMES`]).
    fn new(name: &str) -> Meter {
        let quota: Quota = "50 GB/s burst 1 GiB".parse().expect("a valid quota");
        let ebs = 1 << 30;
        match name {
            "exact" => Meter::Exact(SrTcm::new(quota, ebs).expect("a valid meter")),
            "leased" => Meter::Leased(
                LeasedSrTcm::with_leases(quota, ebs, TscClock::new(), Leases::new())
                    .expect("a valid meter"),
            ),
            _ => Meter::Mutex(MutexSrTcm::new(50e9, 1 << 30, ebs), TscClock::new()),
        }
    }

    fn clock(&self) -> &TscClock {
        match self {
            Meter::Exact(m) => m.clock(),
            Meter::Leased(m) => m.clock(),
            Meter::Mutex(_, clock) => clock,
        }
    }

    /// One thread's packets, `n` of them or until `stop`: the packets metered. One loop per
    /// contender, so each is compiled for its own meter.
    #[inline(never)]
    fn packets(&self, caller: bool, n: u64, stop: &AtomicBool) -> u64 {
        match self {
            Meter::Exact(m) => drive(self, caller, n, stop, |b, now| match now {
                Some(now) => m.color_blind_at(b, now),
                None => m.color_blind(b),
            }),
            Meter::Leased(m) => drive(self, caller, n, stop, |b, now| match now {
                Some(now) => m.color_blind_at(b, now),
                None => m.color_blind(b),
            }),
            Meter::Mutex(m, clock) => drive(self, caller, n, stop, |b, now| {
                m.color_blind_at(b, now.unwrap_or_else(|| clock.now_ns()))
            }),
        }
    }
}

#[inline(always)]
fn drive(
    meter: &Meter,
    caller: bool,
    n: u64,
    stop: &AtomicBool,
    colour: impl Fn(u64, Option<u64>) -> Color,
) -> u64 {
    let mut done = 0;
    while done < n && !stop.load(Ordering::Relaxed) {
        let now = caller.then(|| meter.clock().now_ns());
        for _ in 0..BURST {
            black_box(colour(black_box(PACKET), now));
        }
        done += BURST;
    }
    done
}

/// `threads` threads on `meter`, each for `per_thread` packets or about `slice`: wall time and
/// packets metered.
fn run(
    meter: &Meter,
    threads: usize,
    caller: bool,
    per_thread: u64,
    slice: Option<Duration>,
) -> (Duration, u64) {
    support::threads_run(threads, slice, |stop| meter.packets(caller, per_thread, stop))
}

fn leased_meters(c: &mut Criterion) {
    let mut group = c.benchmark_group("leased_srtcm_green");
    for threads in THREADS {
        // Elements = packets metered per iteration: one per thread.
        group.throughput(Throughput::Elements(threads as u64));
        for (time, caller) in TIMES {
            for name in NAMES {
                let meter = Meter::new(name);
                group.bench_function(BenchmarkId::new(format!("{name}/{time}"), threads), |b| {
                    b.iter_custom(|iters| {
                        run(&meter, threads, caller, iters.div_ceil(BURST) * BURST, None).0
                    })
                });
            }
        }
    }
    group.finish();
}

/// `rounds` interleaved rounds of every contender; prints medians and ratios.
fn interleaved(rounds: usize) {
    println!(
        "srTCM green ns per packet, median of {rounds} interleaved rounds; CPU: {}",
        support::cpu_model()
    );
    let mut cases: Vec<(usize, &str, bool, [Vec<f64>; 3])> = Vec::new();
    let threads_list: Vec<usize> = std::env::var("LEAKGATE_LEASED_METER_THREADS")
        .ok()
        .map(|list| list.split(',').filter_map(|t| t.trim().parse().ok()).collect())
        .unwrap_or_else(|| THREADS.to_vec());
    for threads in threads_list {
        for (time, caller) in TIMES {
            cases.push((threads, time, caller, Default::default()));
        }
    }
    for _ in 0..rounds {
        for (threads, _, caller, samples) in cases.iter_mut() {
            for (name, samples) in NAMES.iter().zip(samples.iter_mut()) {
                let meter = Meter::new(name);
                let slice = Some(Duration::from_millis(200));
                let (elapsed, n) = run(&meter, *threads, *caller, u64::MAX, slice);
                samples.push(elapsed.as_nanos() as f64 / n.max(1) as f64);
            }
        }
    }
    println!(
        "{:>7} {:<12} {:>8} {:>8} {:>8} {:>13} {:>13}",
        "threads", "time", "exact", "leased", "mutex", "exact/mutex", "leased/mutex"
    );
    for (threads, time, _, [exact, leased, mutex]) in cases.iter_mut() {
        let (e, l, m) = (median(exact), median(leased), median(mutex));
        println!(
            "{threads:>7} {time:<12} {e:>8.2} {l:>8.2} {m:>8.2} {:>13.2} {:>13.2}",
            e / m,
            l / m
        );
    }
}

criterion_group! {
    name = benches;
    config = support::config(Duration::from_millis(500), Duration::from_secs(2), 20);
    targets = leased_meters
}

fn main() {
    support::rounds_or_criterion("LEAKGATE_LEASED_METER_ROUNDS", interleaved, benches);
}
