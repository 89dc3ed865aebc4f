//! `leakgate bench`: leakgate (exact, and leased: `LeasedLimiter`, shared or through a
//! `LocalLease` per thread) against governor and a mutex token bucket, on this machine, now.
//!
//! Every (scenario, threads) pair is measured in rounds; within a round each contender runs in
//! turn (A B C D, A B C D, ...), so drift in machine load hits all of them alike. The contenders,
//! scenarios and measuring loops are `leakgate-baselines`', shared with the criterion benches.

mod report;
mod tail;
mod throughput;

use crate::out::{self, Delivery};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::process::ExitCode;

const LONG_HELP: &str = "\
Throughput (the default): threads share one limiter. 'allowed': every decision admits (and
writes the state); 'denied': a limiter of one per hour that has admitted its unit, so every
decision refuses. 'leakgate (leased)' is a LeasedLimiter: per-thread leases of the shared
bucket (under 'denied', one an hour, its leases are off and it decides exactly); 'leakgate
(local)' is the same limiter checked through a LocalLease handle each thread keeps (its lease in
a plain counter: no clock reading, no atomic write per unit). Then keyed
limiters with 1,000 and 1,000,000 tracked keys. ns/decision is wall time over all decisions of
all threads; each figure is the median of the rounds.

--tail: every check of one always-allowing shared limiter is timed (two raw TSC reads) and
counted in a histogram: p50, p99, p99.99 and the slowest check per thread count, leakgate
(exact, leased, and leased through a LocalLease per thread) beside governor and a mutex bucket. 'timer only' times an empty decision:
the measuring overhead.

Threads beyond the machine's cores share them, so the slowest checks then include whole
scheduler time slices: compare contenders within one run.";

/// The arguments of `leakgate bench`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    /// Fewer, shorter rounds (a quick look, noisier)
    #[arg(long)]
    quick: bool,

    /// Thread counts to measure [default: 1,2,4; with --tail 1,2,4,8,16]
    #[arg(long, value_name = "N,N,...", value_delimiter = ',',
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<Vec<u16>>,

    /// Time every check of one shared limiter: p50, p99.99 and the slowest check
    #[arg(long)]
    tail: bool,

    /// With --tail: checks per thread in each round [default: 200000; --quick 20000]
    #[arg(long, value_name = "N", requires = "tail",
          value_parser = clap::value_parser!(u64).range(1..))]
    checks: Option<u64>,

    /// Print the results as JSON on stdout instead of tables
    #[arg(long)]
    json: bool,
}

/// Runs `leakgate bench`.
pub(crate) fn run(args: Args) -> ExitCode {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let default_threads: &[u16] = if args.tail { &[1, 2, 4, 8, 16] } else { &[1, 2, 4] };
    let threads: Vec<usize> =
        args.threads.as_deref().unwrap_or(default_threads).iter().map(|&n| n.into()).collect();
    let report = if args.tail {
        let plan = tail::Plan {
            rounds: 3,
            checks: args.checks.unwrap_or(if args.quick { 20_000 } else { 200_000 }),
            threads,
        };
        let results = tail::measure(&plan);
        report::tail(&plan, cores, &results, args.json)
    } else {
        let plan = throughput::Plan::new(args.quick, threads);
        let results = throughput::measure(&plan);
        report::throughput(&plan, cores, &results, args.json)
    };
    // A reader that left early (`| head`) is not a failure: the report was made.
    match out::print(&report) {
        Delivery::Written | Delivery::ReaderGone => ExitCode::SUCCESS,
        Delivery::Failed => ExitCode::FAILURE,
    }
}

/// A progress bar on stderr over `steps` steps, drawn only when stderr is a terminal.
fn progress(steps: u64) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(steps), target);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} (about {eta} left)")
            .expect("a valid template"),
    );
    bar
}
