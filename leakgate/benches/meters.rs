//! Colour meters, per packet: srTCM and trTCM colour-blind, on one and two threads, on the meter's
//! own clock and with caller time (each thread reads the clock once per burst of 32 packets),
//! leakgate's meters beside the RFCs' token buckets behind a mutex
//! (`leakgate_baselines::MutexSrTcm`, `MutexTrTcm`) in one group. Two regimes: `green` (every
//! packet takes every bucket, so every check writes) and `red` (no bucket has room, so every
//! check only reads). 64-byte packets.
//!
//! `LEAKGATE_METER_ROUNDS=N cargo bench --bench meters` runs N interleaved rounds of every
//! contender instead (each a 200 ms slice, all contenders in turn in every round) and prints the
//! median ns per packet and leakgate's ratio to the mutex meter.
//!
//! Measured (two runs of 5 rounds, 2-core Xeon VM shared with other builds, load 3-7; ns per
//! packet, wall time over all threads, caller time; leakgate vs mutex): srTCM green 17.0-19.7
//! vs 15.9-20.3 on one thread, 16.5-20.8 vs 16.8-20.3 on two; srTCM red 3.8-4.6 vs 16.1-19.6
//! and 2.8-4.6 vs 20.4-20.8; trTCM green 14.1-14.5 vs 17.1-17.6 and 17.9-21.9 vs 15.7-21.1;
//! trTCM red 4.8-5.0 vs 15.7-18.6 and 4.6-5.1 vs 15.7-24.1. A green srTCM packet is two CASes,
//! as the mutex's lock and unlock are two atomic operations; a red one only reads.

mod support;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use leakgate::{Clock, Color, Quota, SrTcm, TrTcm, TscClock};
use leakgate_baselines::{median, MutexSrTcm, MutexTrTcm};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const PACKET: u64 = 64;
const BURST: u64 = 32;

/// A colour meter as the benchmark drives it: `now` is a caller time, or `None` for the meter's
/// own clock.
trait Meter: Sync {
    fn color(&self, bytes: u64, now: Option<u64>) -> Color;
    fn clock(&self) -> &TscClock;
}

/// leakgate's meters: colour-blind on their own clock, or at the caller's time.
macro_rules! leakgate_meter {
    ($($meter:ident),*) => {$(
        impl Meter for $meter<TscClock> {
            #[inline]
            fn color(&self, bytes: u64, now: Option<u64>) -> Color {
                match now {
                    Some(now) => self.color_blind_at(bytes, now),
                    None => self.color_blind(bytes),
                }
            }
            fn clock(&self) -> &TscClock {
                $meter::clock(self)
            }
        }
    )*};
}
leakgate_meter!(SrTcm, TrTcm);

/// A mutex meter on the same clock as leakgate's: read per packet, or given by the caller.
struct Locked<M> {
    meter: M,
    clock: TscClock,
}

/// The mutex meters: colour-blind at the caller's time or a reading of the same clock.
macro_rules! locked_meter {
    ($($meter:ident),*) => {$(
        impl Meter for Locked<$meter> {
            #[inline]
            fn color(&self, bytes: u64, now: Option<u64>) -> Color {
                self.meter.color_blind_at(bytes, now.unwrap_or_else(|| self.clock.now_ns()))
            }
            fn clock(&self) -> &TscClock {
                &self.clock
            }
        }
    )*};
}
locked_meter!(MutexSrTcm, MutexTrTcm);

/// One thread's packets: `n` of them, or until `stop`; with caller time the clock is read once
/// per [`BURST`]. Returns the packets metered.
#[inline(never)]
fn packets<M: Meter>(meter: &M, caller_time: bool, n: u64, stop: &AtomicBool) -> u64 {
    let mut done = 0;
    while done < n && !stop.load(Ordering::Relaxed) {
        let now = caller_time.then(|| meter.clock().now_ns());
        for _ in 0..BURST {
            black_box(meter.color(black_box(PACKET), now));
        }
        done += BURST;
    }
    done
}

/// Runs `threads` threads on `meter`, each for `per_thread` packets or about `slice`: wall time
/// and packets metered.
fn run<M: Meter>(
    meter: &M,
    threads: usize,
    caller: bool,
    per_thread: u64,
    slice: Option<Duration>,
) -> (Duration, u64) {
    support::threads_run(threads, slice, |stop| packets(meter, caller, per_thread, stop))
}

/// Fresh contenders of one meter kind and regime: leakgate's meter and the mutex meter.
fn contenders(kind: &str, regime: &str) -> [(&'static str, Box<dyn AnyMeter>); 2] {
    let green = regime == "green";
    let q = |s: &str| s.parse::<Quota>().expect("a valid quota");
    let clock = TscClock::new();
    if kind == "srtcm" {
        let (cir, cbs, ebs) = if green { (50e9, 1 << 30, 1 << 30) } else { (1.0, 1024, 1024) };
        let quota = q(if green { "50 GB/s burst 1 GiB" } else { "1 B/s burst 1 KiB" });
        let mutex = MutexSrTcm::new(cir, cbs, ebs);
        [
            ("leakgate", Box::new(SrTcm::new(quota, ebs).expect("a valid meter"))),
            ("mutex", Box::new(Locked { meter: mutex, clock })),
        ]
    } else {
        let (pir, cir, burst) = if green { (50e9, 40e9, 1 << 30) } else { (2.0, 1.0, 1024) };
        let (peak, committed) = if green {
            (q("50 GB/s burst 1 GiB"), q("40 GB/s burst 1 GiB"))
        } else {
            (q("2 B/s burst 1 KiB"), q("1 B/s burst 1 KiB"))
        };
        let mutex = MutexTrTcm::new(pir, burst, cir, burst);
        [
            ("leakgate", Box::new(TrTcm::new(peak, committed).expect("a valid meter"))),
            ("mutex", Box::new(Locked { meter: mutex, clock })),
        ]
    }
}

/// A meter behind a box, run by its own monomorphised loop.
trait AnyMeter: Sync {
    fn run(
        &self,
        threads: usize,
        caller: bool,
        per_thread: u64,
        slice: Option<Duration>,
    ) -> (Duration, u64);
}

impl<M: Meter> AnyMeter for M {
    fn run(
        &self,
        threads: usize,
        caller: bool,
        per_thread: u64,
        slice: Option<Duration>,
    ) -> (Duration, u64) {
        run(self, threads, caller, per_thread, slice)
    }
}

const KINDS: [&str; 2] = ["srtcm", "trtcm"];
const REGIMES: [&str; 2] = ["green", "red"];
const THREADS: [usize; 2] = [1, 2];
const TIMES: [(&str, bool); 2] = [("own_clock", false), ("caller_time", true)];

fn meters(c: &mut Criterion) {
    for kind in KINDS {
        let mut group = c.benchmark_group(format!("{kind}_blind"));
        for regime in REGIMES {
            for threads in THREADS {
                // Elements = packets metered per iteration: one per thread.
                group.throughput(Throughput::Elements(threads as u64));
                for (time, caller) in TIMES {
                    for (name, meter) in contenders(kind, regime) {
                        let id = BenchmarkId::new(format!("{name}/{regime}/{time}"), threads);
                        group.bench_function(id, |b| {
                            b.iter_custom(|iters| {
                                meter.run(threads, caller, iters.div_ceil(BURST) * BURST, None).0
                            })
                        });
                    }
                }
            }
        }
        group.finish();
    }
}

/// `rounds` interleaved rounds: every contender in turn, 200 ms each, on fresh meters; prints
/// medians.
fn interleaved(rounds: usize) {
    println!(
        "colour-blind ns per packet, median of {rounds} interleaved rounds; CPU: {}",
        support::cpu_model()
    );
    let mut cases = Vec::new();
    for kind in KINDS {
        for regime in REGIMES {
            for threads in THREADS {
                for (time, caller) in TIMES {
                    cases.push((kind, regime, threads, time, caller, Vec::new(), Vec::new()));
                }
            }
        }
    }
    for _ in 0..rounds {
        for (kind, regime, threads, _, caller, ours, theirs) in cases.iter_mut() {
            let [(_, leakgate), (_, mutex)] = contenders(kind, regime);
            for (meter, samples) in [(leakgate, ours), (mutex, theirs)] {
                let (elapsed, n) =
                    meter.run(*threads, *caller, u64::MAX, Some(Duration::from_millis(200)));
                // Wall time per packet over all threads: aggregate throughput's inverse.
                samples.push(elapsed.as_nanos() as f64 / n.max(1) as f64);
            }
        }
    }
    println!(
        "{:<6} {:<6} {:>7} {:<12} {:>9} {:>9} {:>6}",
        "meter", "regime", "threads", "time", "leakgate", "mutex", "ratio"
    );
    for (kind, regime, threads, time, _, ours, theirs) in cases.iter_mut() {
        let (a, b) = (median(ours), median(theirs));
        println!("{kind:<6} {regime:<6} {threads:>7} {time:<12} {a:>9.2} {b:>9.2} {:>6.2}", a / b);
    }
}

criterion_group! {
    name = benches;
    config = support::config(Duration::from_millis(500), Duration::from_secs(2), 20);
    targets = meters
}

fn main() {
    support::rounds_or_criterion("LEAKGATE_METER_ROUNDS", interleaved, benches);
}
