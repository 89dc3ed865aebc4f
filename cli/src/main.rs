//! `leakgate`: the command-line face of the leakgate crate.
//!
//! * `leakgate bench`: compares leakgate with a mutex token bucket and `governor` on this machine.
//! * `leakgate pace RATE`: passes stdin to stdout at a rate (queue), or drops what does not conform.

use std::process::ExitCode;

mod bench;
mod pace;

const USAGE: &str = "\
leakgate: exact, lock-free GCRA rate limiting

USAGE:
    leakgate bench [--quick] [--threads 1,2,4]
                                             compare leakgate, a mutex token bucket and governor
    leakgate pace RATE [--burst B] [--max-wait D] [--drop]
                                             pass stdin to stdout at RATE (e.g. 1/s, 100/min)
    leakgate help                            this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("bench") => bench::run(&args[1..]),
        Some("pace") => pace::run(&args[1..]),
        Some("help" | "--help" | "-h") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("leakgate: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprint!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
