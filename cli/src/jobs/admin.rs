//! `leakgate jobs requeue` and `leakgate jobs purge`.

use super::{block_on, lane, open, DbArg};
use crate::duration::parse_duration;
use leakgate_jobs::Requeue;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

/// The arguments of `leakgate jobs requeue`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["lane", "id", "all"])))]
pub(crate) struct RequeueArgs {
    #[command(flatten)]
    db: DbArg,
    /// Every dead job of this lane
    #[arg(value_name = "LANE")]
    lane: Option<OsString>,
    /// These dead jobs
    #[arg(long, value_name = "ID", num_args = 1..)]
    id: Vec<i64>,
    /// Every dead job
    #[arg(long)]
    all: bool,
}

/// The arguments of `leakgate jobs purge`.
#[derive(Debug, clap::Args)]
pub(crate) struct PurgeArgs {
    #[command(flatten)]
    db: DbArg,
    /// Remove done jobs finished longer ago than this (and the record of older runs)
    #[arg(long, value_name = "DURATION", default_value = "7days", value_parser = parse_duration)]
    older_than: Duration,
}

/// Runs `leakgate jobs requeue`: prints how many jobs went back.
pub(crate) fn run_requeue(args: RequeueArgs) -> ExitCode {
    block_on("requeue", async move {
        let which = match (&args.lane, args.all) {
            (_, true) => Requeue::All,
            (Some(l), _) => Requeue::Lane(lane(l)?),
            (None, false) => Requeue::Ids(args.id.clone()),
        };
        let queue = open(&args.db.db).await?;
        let n = queue.requeue(which).await.map_err(|e| e.to_string())?;
        crate::out::outln!("{n}");
        Ok(())
    })
}

/// Runs `leakgate jobs purge`: prints how many done jobs were removed.
pub(crate) fn run_purge(args: PurgeArgs) -> ExitCode {
    block_on("purge", async move {
        let queue = open(&args.db.db).await?;
        let n = queue.purge(args.older_than).await.map_err(|e| e.to_string())?;
        crate::out::outln!("{n}");
        Ok(())
    })
}
