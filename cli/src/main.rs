//! `leakgate`: the command-line face of the leakgate crate.
//!
//! * `leakgate pace RATE`: passes stdin to stdout at a rate (queue), or drops what does not conform.
//! * `leakgate demo [RATE]`: `pace` on a built-in example, each line shown with its time.
//! * `leakgate bench`: compares leakgate with governor and a mutex token bucket on this machine.
//! * `leakgate rules check FILE` / `leakgate rules explain FILE KEY`: validate a rules file, and
//!   show which rule a key gets.
//! * `leakgate serve --rules FILE [--grpc ADDR] [--resp ADDR] [--http ADDR] [--redis URL]`: the
//!   rate-limit service (Envoy's gRPC API, redis-cell's `CL.THROTTLE`, metrics and a page).
//!
//! Each subcommand is one variant of [`Command`] with its own `clap::Args` struct and a `run`
//! function returning the process's exit code; adding one is adding a variant and a match arm.
#![forbid(unsafe_code)]
// Every write goes through `out`, which never panics (a closed pipe would make these panic).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod demo;
mod duration;
mod jobs;
mod out;
mod pace;
mod rules;
mod rules_push;
mod serve;

/// Exact, lock-free GCRA rate limiting, from the shell.
#[derive(Debug, Parser)]
#[command(name = "leakgate", version, propagate_version = true)]
#[command(after_help = "Run `leakgate help COMMAND` or `leakgate COMMAND --help` for details.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pass stdin to stdout at a rate, evenly spaced (or drop what does not conform)
    Pace(pace::Args),
    /// Pace 20 built-in refund requests at RATE (default 5/s), showing when each leaves
    Demo(demo::Args),
    /// Compare leakgate with governor and a mutex token bucket on this machine
    Bench(bench::Args),
    /// Validate a rules file, or show which rule a key gets
    Rules(rules::Args),
    /// Durable paced jobs: add, work, status, dead, requeue, purge, demo
    Jobs(jobs::Args),
    /// Serve limit checks to any language: Envoy's gRPC API, redis-cell's CL.THROTTLE, metrics
    Serve(serve::Args),
}

fn main() -> ExitCode {
    // Usage errors exit 2 with clap's message; --help and --version print and exit 0.
    let cli = Cli::parse();
    match cli.command {
        Command::Pace(args) => pace::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Rules(args) => rules::run(args),
        Command::Jobs(args) => jobs::run(args),
        Command::Serve(args) => serve::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
