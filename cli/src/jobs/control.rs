//! `leakgate jobs cancel`, `leakgate jobs pause` and `leakgate jobs resume`.

use super::{block_on, lane, open, DbArg};
use std::ffi::OsString;
use std::process::ExitCode;

/// The arguments of `leakgate jobs cancel`.
#[derive(Debug, clap::Args)]
pub(crate) struct CancelArgs {
    #[command(flatten)]
    db: DbArg,
    /// The jobs (an id not in the DB is an error, and then nothing is cancelled)
    #[arg(value_name = "ID", required = true, num_args = 1..)]
    ids: Vec<i64>,
}

/// The arguments of `leakgate jobs pause` and `leakgate jobs resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct LaneArgs {
    #[command(flatten)]
    db: DbArg,
    /// The lane (one that never had a job is an error)
    #[arg(value_name = "LANE")]
    lane: OsString,
}

/// Runs `leakgate jobs cancel`: prints how many jobs were cancelled (done, dead and already
/// cancelled ones are left as they are).
pub(crate) fn run_cancel(args: CancelArgs) -> ExitCode {
    block_on("cancel", async move {
        let queue = open(&args.db.db).await?;
        let n = queue.cancel(&args.ids).await.map_err(|e| e.to_string())?;
        crate::out::outln!("{n}");
        Ok(())
    })
}

/// Runs `leakgate jobs pause` (`paused`) or `leakgate jobs resume`.
pub(crate) fn run_pause(args: LaneArgs, paused: bool) -> ExitCode {
    block_on(if paused { "pause" } else { "resume" }, async move {
        let lane = lane(&args.lane)?;
        let queue = open(&args.db.db).await?;
        let done = if paused { queue.pause(&lane).await } else { queue.resume(&lane).await };
        done.map_err(|e| e.to_string())
    })
}
