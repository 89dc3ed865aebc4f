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

mod keyed;

/// How long the run takes, and on how many threads.
#[derive(Debug)]
struct Plan {
    rounds: usize,
    slice: Duration,
    threads: Vec<usize>,
}

const USAGE: &str = "usage: leakgate bench [--quick] [--threads N,N,...]";
const CONTENDERS: [&str; 4] = ["leakgate (tsc)", "leakgate (coarse)", "governor", "mutex bucket"];
/// Index of the contender the others are compared with.
const GOVERNOR: usize = 2;

fn parse(args: &[String]) -> Result<Plan, String> {
    let mut plan = Plan { rounds: 9, slice: Duration::from_millis(50), threads: vec![1, 2, 4] };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => (plan.rounds, plan.slice) = (3, Duration::from_millis(15)),
            "--threads" => {
                let list = args.next().ok_or("--threads needs a list such as 1,2,4,8,16")?;
                plan.threads = list
                    .split(',')
                    .map(|n| match n.trim().parse::<usize>() {
                        Ok(n @ 1..=1024) => Ok(n),
                        _ => Err(format!("--threads: {n:?} is not a count from 1 to 1024")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Ok(plan)
}

pub(crate) fn run(args: &[String]) -> ExitCode {
    let plan = match parse(args) {
        Ok(plan) => plan,
        Err(why) => {
            eprintln!("leakgate bench: {why}; {USAGE}");
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
    let mut progress = Progress::new(
        (2 + keyed::KEY_COUNTS.len()) * plan.threads.len() * plan.rounds * CONTENDERS.len(),
    );
    let mut rows = Vec::new();
    for (name, scenario) in [("allowed", Scenario::Allowed), ("denied", Scenario::Denied)] {
        let tsc = scenario.leakgate(TscClock::new());
        let coarse = scenario.leakgate(CoarseClock::new());
        let governor = scenario.governor();
        let mutex = scenario.mutex_bucket();
        let gates: [&dyn Gate; 4] = [&tsc, &coarse, &governor, &mutex];
        rows.extend(measure(&plan, name, &gates, &mut progress));
    }
    let mut keyed_rows = Vec::new();
    for keys in keyed::KEY_COUNTS {
        progress.say(&format!("keyed: inserting {keys} keys"));
        let gates = keyed::KeyedGates::new(keys);
        keyed_rows.extend(measure(&plan, &format!("{keys} keys"), &gates.all(), &mut progress));
    }
    progress.say("");
    print_table("scenario", &CONTENDERS, GOVERNOR, &rows);
    println!(
        "\nkeyed: tracked u64 keys, every check allowed; each thread walks the shared keys in its \
         own scattered order.\n'coarse': both libraries on a clock refreshed every millisecond."
    );
    print_table("keys", &keyed::CONTENDERS, keyed::GOVERNOR, &keyed_rows);
    println!("\n'vs governor' is throughput relative to governor: above 1 is faster.");
    ExitCode::SUCCESS
}

/// One row per thread count: each contender's median ns/decision over the plan's rounds.
type Row = (String, usize, Vec<f64>);

/// Measures `gates` on every thread count of the plan, interleaved within each round.
fn measure(plan: &Plan, name: &str, gates: &[&dyn Gate], progress: &mut Progress) -> Vec<Row> {
    let mut rows = Vec::new();
    for &threads in &plan.threads {
        let mut samples = vec![Vec::new(); gates.len()];
        for _ in 0..plan.rounds {
            for (gate, samples) in gates.iter().zip(&mut samples) {
                progress.step(&format!("{name}, {threads} thread(s)"));
                samples.push(ns_per_decision(*gate, threads, plan.slice));
            }
        }
        rows.push((name.to_owned(), threads, samples.iter_mut().map(|s| median(s)).collect()));
    }
    rows
}

/// A one-line progress counter on stderr, when stderr is a terminal.
struct Progress {
    shown: bool,
    done: usize,
    total: usize,
}

impl Progress {
    fn new(total: usize) -> Self {
        Progress { shown: std::io::stderr().is_terminal(), done: 0, total }
    }

    fn step(&mut self, what: &str) {
        self.done += 1;
        let line = format!("[{}/{}] {what}", self.done, self.total);
        self.say(&line);
    }

    fn say(&self, line: &str) {
        if self.shown {
            eprint!("\r\x1b[K{line}");
        }
    }
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

fn print_table(label: &str, contenders: &[&str], governor: usize, rows: &[Row]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{label:<12} {:>7}  {:<18} {:>12} {:>9} {:>12}",
        "threads", "implementation", "ns/decision", "Mops/s", "vs governor"
    );
    for (name, threads, medians) in rows {
        for (who, ns) in contenders.iter().zip(medians) {
            let _ = writeln!(
                out,
                "{name:<12} {threads:>7}  {who:<18} {ns:>12.2} {:>9.1} {:>11.2}x",
                1e3 / ns,
                medians[governor] / ns
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn thread_lists_and_bad_arguments() {
        let plan = parse(&args("")).unwrap();
        assert_eq!((plan.rounds, plan.threads), (9, vec![1, 2, 4]));
        let plan = parse(&args("--threads 1,2,16 --quick")).unwrap();
        assert_eq!((plan.rounds, plan.threads), (3, vec![1, 2, 16]));
        assert!(parse(&args("--threads 0")).unwrap_err().contains("\"0\""));
        assert!(parse(&args("--threads 2,x")).unwrap_err().contains("\"x\""));
        assert!(parse(&args("--threads")).unwrap_err().contains("needs a list"));
        assert!(parse(&args("--fast")).unwrap_err().contains("--fast"));
    }
}
