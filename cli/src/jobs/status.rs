//! `leakgate jobs status` and `leakgate jobs dead`.

use super::{block_on, lane, open, DbArg};
use leakgate_jobs::LaneStatus;
use serde_json::{json, Map, Value};
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// The arguments of `leakgate jobs status`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LEGEND)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    db: DbArg,
    /// JSON: {"lanes": {"LANE": {"waiting": n, "running": n, "dead": n, ...}}, "totals": {...}}
    #[arg(long)]
    json: bool,
}

/// The arguments of `leakgate jobs dead`.
#[derive(Debug, clap::Args)]
pub(crate) struct DeadArgs {
    #[command(flatten)]
    db: DbArg,
    /// Only this lane's dead jobs
    #[arg(value_name = "LANE")]
    lane: Option<OsString>,
    /// At most this many
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: usize,
    /// JSON lines, one object per job (payload as text if it is UTF-8, else as base16)
    #[arg(long)]
    json: bool,
}

/// Runs `leakgate jobs status`.
pub(crate) fn run_status(args: StatusArgs) -> ExitCode {
    block_on("status", async move {
        let queue = open(&args.db.db).await?;
        let lanes = queue.status().await.map_err(|e| e.to_string())?;
        if args.json {
            crate::out::outln!("{}", to_json(queue.backend(), &lanes));
        } else {
            print_table(&lanes);
        }
        Ok(())
    })
}

fn secs(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_secs_f64()))
}

/// The `--json` document (the shape is fixed by the contract: `lanes` by name).
pub(super) fn to_json(backend: &str, lanes: &[LaneStatus]) -> Value {
    let mut by_lane = Map::new();
    let mut totals = [0u64; 7];
    for l in lanes {
        for (t, n) in totals.iter_mut().zip([
            l.waiting(),
            l.ready,
            l.scheduled,
            l.running,
            l.dead,
            l.done,
            l.cancelled,
        ]) {
            *t += n;
        }
        by_lane.insert(
            l.lane.clone(),
            json!({
                "waiting": l.waiting(),
                "ready": l.ready,
                "scheduled": l.scheduled,
                "running": l.running,
                "dead": l.dead,
                "done": l.done,
                "cancelled": l.cancelled,
                "paused": l.paused,
                "oldest_waiting_s": secs(l.oldest_waiting),
                "next_slot_in_s": secs(l.next_slot_in),
                "runs_last_minute": l.runs_last_minute,
                "rule": l.rule,
                "rule_per_minute": l.rule_per_minute,
                "pace_per_minute": l.pace_per_minute,
            }),
        );
    }
    let [waiting, ready, scheduled, running, dead, done, cancelled] = totals;
    json!({
        "lanes": by_lane,
        "totals": {"waiting": waiting, "ready": ready, "scheduled": scheduled, "running": running, "dead": dead, "done": done, "cancelled": cancelled},
        "backend": backend,
    })
}

fn print_table(lanes: &[LaneStatus]) {
    if lanes.is_empty() {
        crate::out::outln!("no jobs");
        return;
    }
    let width = lanes.iter().map(|l| l.lane.len()).max().unwrap_or(4).max(4);
    crate::out::outln!(
        "{:<width$}  {:>8}  {:>8}  {:>6}  {:>8}  {:>8}  {:>10}  {:>9}  RULE",
        "LANE",
        "WAITING",
        "RUNNING",
        "DEAD",
        "DONE",
        "OLDEST",
        "NEXT SLOT",
        "RUNS/MIN"
    );
    for l in lanes {
        let rate = l.rule_per_minute.map_or(format!("{}", l.runs_last_minute), |r| {
            match l.pace_per_minute.filter(|&p| p < r) {
                // An adaptive lane backed off: the rate in force, then the rule's.
                Some(p) => format!("{}/{}<{}", l.runs_last_minute, short(p), short(r)),
                None => format!("{}/{}", l.runs_last_minute, short(r)),
            }
        });
        crate::out::outln!(
            "{:<width$}  {:>8}  {:>8}  {:>6}  {:>8}  {:>8}  {:>10}  {:>9}  {}",
            l.lane,
            l.waiting(),
            l.running,
            l.dead,
            l.done,
            l.oldest_waiting.map_or("-".into(), human),
            match (l.paused, l.next_slot_in) {
                (true, _) => "paused".to_string(),
                (false, None) => "now".to_string(),
                (false, Some(d)) => format!("in {}", human(d)),
            },
            rate,
            l.rule.as_deref().unwrap_or("not paced"),
        );
    }
    crate::out::outln!("{LEGEND}");
}

/// What the columns that are not plain counts mean, printed under the table.
const LEGEND: &str = "\
WAITING: ready or delayed (--after, a retry's backoff); OLDEST: how long the oldest has waited;
NEXT SLOT: when the lane's pace lets its next run start; RUNS/MIN: runs started in the last
minute / the most the lane's rule lets start in a minute (alone: not paced; `/30<60`: an
adaptive lane slowed down to 30 of its 60); a paused lane
(`jobs pause`) says \"paused\" for its next slot until it is resumed";

/// A rate per minute, short.
fn short(r: f64) -> String {
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.2}")
    }
}

/// A duration for a person: 850ms, 12.3s, 4m05s, 2h10m, 3d04h.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        1..=59 => format!("{:.1}s", d.as_secs_f64()),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// Runs `leakgate jobs dead`.
pub(crate) fn run_dead(args: DeadArgs) -> ExitCode {
    block_on("dead", async move {
        let lane = args.lane.as_ref().map(lane).transpose()?;
        let queue = open(&args.db.db).await?;
        let dead = queue.dead(lane.as_deref(), args.limit).await.map_err(|e| e.to_string())?;
        for job in &dead {
            let ago = SystemTime::now().duration_since(job.died).unwrap_or_default();
            let payload = match std::str::from_utf8(&job.payload) {
                Ok(text) => json!(text),
                Err(_) => {
                    json!({"base16": job.payload.iter().map(|b| format!("{b:02x}")).collect::<String>()})
                }
            };
            if args.json {
                let line = json!({"id": job.id, "lane": job.lane, "attempts": job.attempts, "error": job.error,
                    "died_s_ago": ago.as_secs_f64(), "key": job.key, "payload": payload});
                crate::out::outln!("{line}");
            } else {
                crate::out::outln!(
                    "{}  {}  {} runs, died {} ago: {}  payload {}",
                    job.id,
                    job.lane,
                    job.attempts,
                    human(ago),
                    job.error,
                    payload
                );
            }
        }
        if !args.json && dead.is_empty() {
            crate::out::outln!("no dead jobs");
        }
        Ok(())
    })
}
