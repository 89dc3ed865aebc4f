//! `leakgate jobs every`: schedules, a job added to a lane on every tick of a cron expression
//! or an interval (payload = stdin), listed and removed by name.

use super::{block_on, lane, open, DbArg};
use crate::duration::parse_duration;
use leakgate_jobs::{Every, Missed, Schedule};
use serde_json::json;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

/// The arguments of `leakgate jobs every`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("when").args(["cron", "interval"])))]
#[command(group(clap::ArgGroup::new("what").required(true).args(["name", "list", "remove"])))]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArg,
    /// The schedule's name (storing one of a name already stored replaces it)
    #[arg(value_name = "NAME", requires = "when", requires = "lane")]
    name: Option<String>,
    /// The lane its jobs go to
    #[arg(value_name = "LANE")]
    lane: Option<OsString>,
    /// A cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds
    /// first, as "0 3 * * *"
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// The time zone of --cron (an IANA name such as Europe/Paris) [default: UTC]
    #[arg(long, value_name = "ZONE", requires = "cron")]
    zone: Option<String>,
    /// Every so often instead (30s, 5min, 1h; at least 1s), from now
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Ticks missed while no worker ran: skip them, or add one job for them all
    #[arg(long, value_name = "HOW", default_value = "skip", value_parser = ["skip", "once"])]
    missed: String,
    /// List the schedules (JSON, one a line)
    #[arg(long, conflicts_with_all = ["name", "remove"])]
    list: bool,
    /// Remove the schedule of this name (the jobs it added stay)
    #[arg(long, value_name = "NAME", conflicts_with = "name")]
    remove: Option<String>,
}

/// Runs `leakgate jobs every`.
pub(crate) fn run(args: Args) -> ExitCode {
    block_on("every", async move {
        if args.list {
            let queue = open(&args.db.db).await?;
            for s in queue.schedules().await.map_err(|e| e.to_string())? {
                let (cron, zone, interval) = match s.schedule.every() {
                    Every::Cron { expr, zone } => (Some(expr.clone()), zone.clone(), None),
                    Every::Interval(d) => (None, None, Some(d.as_secs_f64())),
                };
                let missed = if s.schedule.on_missed() == Missed::Once { "once" } else { "skip" };
                let line = json!({"name": s.schedule.name(), "lane": s.schedule.lane(), "cron": cron,
                    "zone": zone, "interval_s": interval, "missed": missed, "next_tick_ns": s.next_tick_ns});
                crate::out::outln!("{line}");
            }
            return Ok(());
        }
        if let Some(name) = &args.remove {
            let queue = open(&args.db.db).await?;
            return queue.remove_schedule(name).await.map_err(|e| e.to_string());
        }
        let (Some(name), Some(lane_arg)) = (&args.name, &args.lane) else {
            return Err("give NAME, --cron EXPR or --interval DURATION, and LANE".into());
        };
        let every = match (&args.cron, args.interval) {
            (Some(expr), None) => Every::cron(expr.clone(), args.zone.as_deref()),
            (None, Some(d)) => Every::Interval(d),
            _ => return Err("give one of --cron EXPR and --interval DURATION".into()),
        };
        let missed = if args.missed == "once" { Missed::Once } else { Missed::Skip };
        let payload = super::add::read_stdin()?;
        let schedule = Schedule::new(name, every, lane(lane_arg)?, payload).missed(missed);
        // Refused before the database is opened: a bad schedule writes nothing, not even a file.
        schedule.check().map_err(|e| e.to_string())?;
        let queue = open(&args.db.db).await?;
        queue.every(schedule).await.map_err(|e| e.to_string())
    })
}
