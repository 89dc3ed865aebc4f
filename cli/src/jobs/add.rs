//! `leakgate jobs add`: one job from stdin, or one per stdin line, stored durably.

use super::{block_on, lane, open, DbArg};
use crate::duration::parse_duration;
use leakgate_jobs::{NewJob, MAX_PAYLOAD, MAX_PRIORITY};
use std::ffi::OsString;
use std::io::{BufRead, Read};
use std::process::ExitCode;
use std::time::Duration;

/// The arguments of `leakgate jobs add`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArg,
    /// The lane, like refunds/bank-a
    #[arg(value_name = "LANE")]
    lane: OsString,
    /// An idempotency key: if a job with this key is stored, add nothing and print its id
    #[arg(long, value_name = "KEY", conflicts_with = "lines")]
    key: Option<OsString>,
    /// Do not run the job before this delay has passed (30s, 5min, 1h)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    after: Option<Duration>,
    /// The job's priority within its lane, 0 to 2147483647: higher runs first [default: 0]
    #[arg(long, value_name = "P", value_parser = parse_priority, allow_hyphen_values = true)]
    priority: Option<u32>,
    /// One job per line of stdin (without its line end), all in one transaction; print the count
    #[arg(long)]
    lines: bool,
}

/// Runs `leakgate jobs add`: exits 0 only once every job is durably stored.
pub(crate) fn run(args: Args) -> ExitCode {
    block_on("add", async move {
        let lane = lane(&args.lane)?;
        let key = match &args.key {
            Some(k) => Some(
                k.to_str().ok_or_else(|| format!("the key {k:?} is not UTF-8 text"))?.to_string(),
            ),
            None => None,
        };
        let after = args.after.unwrap_or_default();
        let mut jobs =
            if args.lines { read_lines(&lane, after)? } else { vec![read_one(&lane, key, after)?] };
        if let Some(p) = args.priority {
            jobs = jobs.into_iter().map(|j| j.priority(p)).collect();
        }
        let queue = open(&args.db.db).await?;
        let added = queue.add_all(jobs).await.map_err(|e| e.to_string())?;
        if args.lines {
            crate::out::outln!("{}", added.iter().filter(|a| a.new).count());
        } else if let Some(job) = added.first() {
            crate::out::outln!("{}", job.id);
        }
        Ok(())
    })
}

/// A priority: a whole number from 0 to [`MAX_PRIORITY`], else refused before anything is read.
fn parse_priority(text: &str) -> Result<u32, String> {
    match text.parse::<u64>() {
        Ok(p) if p <= u64::from(MAX_PRIORITY) => Ok(p as u32),
        _ => Err(format!("a priority is a whole number from 0 to {MAX_PRIORITY}, found {text:?}")),
    }
}

/// The whole of stdin as one payload (at most [`MAX_PAYLOAD`] bytes).
fn read_one(lane: &str, key: Option<String>, after: Duration) -> Result<NewJob, String> {
    let payload = read_stdin()?;
    if payload.len() > MAX_PAYLOAD {
        return Err(format!("the payload on stdin is larger than the limit of {MAX_PAYLOAD} bytes (nothing was added)"));
    }
    let mut job = NewJob::new(lane, payload).after(after);
    if let Some(key) = key {
        job = job.key(key);
    }
    job.check().map_err(|e| e.to_string())?;
    Ok(job)
}

/// Stdin up to one byte past [`MAX_PAYLOAD`] (so that a caller can tell a payload over the
/// limit from one at it), for `add` and `every` alike.
pub(super) fn read_stdin() -> Result<Vec<u8>, String> {
    let mut payload = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_PAYLOAD as u64 + 1)
        .read_to_end(&mut payload)
        .map_err(|e| format!("cannot read the payload from stdin: {e}"))?;
    Ok(payload)
}

/// One job per line: the bytes before each `\n` (and a `\r` before it).
fn read_lines(lane: &str, after: Duration) -> Result<Vec<NewJob>, String> {
    let mut jobs = Vec::new();
    let mut input = std::io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut input)
            .take(MAX_PAYLOAD as u64 + 2)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read stdin: {e}"))?;
        if n == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if line.len() > MAX_PAYLOAD {
            return Err(format!(
                "line {} is longer than the limit of {MAX_PAYLOAD} bytes (nothing was added)",
                jobs.len() + 1
            ));
        }
        let job = NewJob::new(lane, line.clone()).after(after);
        job.check().map_err(|e| format!("line {}: {e} (nothing was added)", jobs.len() + 1))?;
        jobs.push(job);
    }
    Ok(jobs)
}
