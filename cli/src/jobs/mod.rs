//! `leakgate jobs`: durable paced jobs from the shell, a thin face over `leakgate-jobs`.
//!
//! `add` stores jobs, `work` runs a command for each as its lane's pace allows, `status`, `dead`,
//! `requeue`, `purge`, `cancel`, `pause` and `resume` operate the queue, `ui` serves a dashboard for them, `demo` shows the refund case end to end. Every
//! subcommand opens the database named by `--db` (a file path for SQLite, created if missing, or
//! a `postgres://` URL), does its work in a tokio runtime of its own, and exits 0 on success,
//! 1 with a message on stderr on failure, 2 on a usage error.

mod add;
mod admin;
mod control;
mod demo;
mod every;
mod reply;
mod status;
mod supervise;
mod ui;
mod ui_api;
mod work;

use leakgate_jobs::Jobs;
use std::ffi::OsString;
use std::future::Future;
use std::process::ExitCode;

const LONG_HELP: &str = "\
A job is a payload (bytes) in a lane, a `/`-separated name such as refunds/bank-a. Lanes are paced
by a rules file (the format of `leakgate rules`: a lane gets the rule of its longest prefix and a
bucket of its own; a lane no rule matches is not paced), given to `work --rules` and stored in the
database for every worker. A rule written as a table may also set `max_in_flight` (runs of one
lane at once), `max_waiting` (jobs waiting in one lane; `add` beyond it is refused), `weight`
(the lane's share of the claims when several lanes are ready: that many jobs a turn, default 1)
and `adaptive = true` (a \"slow down\" halves the lane's rate, each done job wins back a
twentieth of the quota; `adaptive_floor = N`: never below N a period, default 1):

    \"refunds\" = \"1/s\"
    \"refunds/bank-a\" = { quotas = [\"1/s\", \"3000/h\"], max_in_flight = 1, max_waiting = 100000 }
    \"partner\" = { quota = \"100/s\", adaptive = true, adaptive_floor = 5 }

Every run of a job is charged to its lane's bucket when it is taken, in the transaction that claims
it, so the pace holds across every worker, process and restart. DB is a file (SQLite, the
default: several worker processes on one machine) or a postgres:// URL (workers on many servers).

Try `leakgate jobs demo`.";

/// The arguments of `leakgate jobs`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Store a job (payload = stdin) or one job per stdin line; print its id (or the count)
    Add(add::Args),
    /// Run COMMAND for each job as its lane's pace allows (payload on stdin)
    Work(work::Args),
    /// Each lane's waiting, running and dead jobs, next slot and recent runs
    Status(status::StatusArgs),
    /// List dead jobs (failed --max-attempts times), oldest first
    Dead(status::DeadArgs),
    /// Put dead jobs back in their lanes
    Requeue(admin::RequeueArgs),
    /// Remove done and cancelled jobs finished longer ago than a retention
    Purge(admin::PurgeArgs),
    /// Cancel jobs: a waiting one never runs; a running one is stopped and not retried
    Cancel(control::CancelArgs),
    /// Add a job to a lane on every tick of a cron expression or an interval (payload = stdin);
    /// --list, --remove NAME
    Every(every::Args),
    /// Pause a lane: its jobs are not taken until it is resumed (running ones finish)
    Pause(control::LaneArgs),
    /// Resume a paused lane
    Resume(control::LaneArgs),
    /// The dashboard: lanes, their pace, dead jobs; requeue, cancel, pause and resume
    Ui(ui::Args),
    /// The refund case end to end: two workers pace one lane, one is killed, nothing is lost
    Demo(demo::Args),
    /// (internal) What `work` runs each command under: stops it with its process group when
    /// the worker dies or asks
    #[command(name = "__supervise", hide = true)]
    Supervise(supervise::Args),
}

/// Runs `leakgate jobs`.
pub(crate) fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Add(args) => add::run(args),
        Command::Work(args) => work::run(args),
        Command::Status(args) => status::run_status(args),
        Command::Dead(args) => status::run_dead(args),
        Command::Requeue(args) => admin::run_requeue(args),
        Command::Purge(args) => admin::run_purge(args),
        Command::Cancel(args) => control::run_cancel(args),
        Command::Every(args) => every::run(args),
        Command::Pause(args) => control::run_pause(args, true),
        Command::Resume(args) => control::run_pause(args, false),
        Command::Ui(args) => ui::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Supervise(args) => supervise::run(args),
    }
}

/// The `--db` argument of every subcommand.
#[derive(Debug, clap::Args)]
struct DbArg {
    /// The database: a file path (SQLite, created if missing) or a postgres:// URL
    #[arg(long, value_name = "DB")]
    db: String,
}

/// Runs `body` on a runtime of its own; an error is printed as `leakgate jobs WHAT: ERROR` and
/// exits 1.
fn block_on<F>(what: &str, body: F) -> ExitCode
where
    F: Future<Output = Result<(), String>>,
{
    let runtime =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(rt) => rt,
            Err(e) => return fail(what, &format!("cannot start a runtime: {e}")),
        };
    match runtime.block_on(body) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(what, &e),
    }
}

fn fail(what: &str, message: &str) -> ExitCode {
    crate::out::errln!("leakgate jobs {what}: {message}");
    ExitCode::from(1)
}

/// Opens the database, the error said with the database's name.
async fn open(db: &str) -> Result<Jobs, String> {
    Jobs::open(db).await.map_err(|e| e.to_string())
}

/// A lane given on the command line: UTF-8 text, or a clear error.
fn lane(arg: &OsString) -> Result<String, String> {
    arg.to_str().map(str::to_string).ok_or_else(|| {
        format!("the lane {arg:?} is not UTF-8 text (lanes are text; payloads may be any bytes)")
    })
}
