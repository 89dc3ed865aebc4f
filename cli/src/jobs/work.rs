//! `leakgate jobs work`: runs COMMAND for each job, as its lane's pace allows.
//!
//! Each run's command is started through `leakgate jobs __supervise` (see [`super::supervise`]),
//! so that it is stopped with its whole process group when it passes `--timeout` and when the
//! worker dies. One line per finished run goes to stderr (not with `--quiet`); on a terminal, a
//! live line of counts stays below them.

use super::{block_on, DbArg};
use crate::duration::parse_duration;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leakgate_jobs::{Event, Job, Jobs, Outcome, Snapshot};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The arguments of `leakgate jobs work`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArg,
    /// The lane rules (TOML), stored in the database for every worker and reloaded when the
    /// file changes (checked every second)
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Jobs run at once by this worker
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// How long a taken job is held without renewal (renewed every third of it while the
    /// command runs); a job whose worker died runs again once it has run out
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    lease: Duration,
    /// Runs before a failing job is dead
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    max_attempts: u32,
    /// The wait before a failed job runs again, doubling with each attempt (plus up to a
    /// quarter at random)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    backoff: Duration,
    /// Exit 0 once no job is waiting or running in the database
    #[arg(long)]
    until_empty: bool,
    /// Claim a paced lane's run up to this long before its slot, charge it at its slot and
    /// start COMMAND then, never earlier (its lease starts at the claim; less than --lease).
    /// 0: claim only what may start at once [default: 40ms, at most half the --lease]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    claim_ahead: Option<Duration>,
    /// An exit code of COMMAND that means "slow down": the job runs again, not as a failure,
    /// and its lane pauses for --slow-down-pause, then resumes at its pace with no burst
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(i32).range(1..=255))]
    slow_down_exit: Option<i32>,
    /// How long a lane pauses after a "slow down"
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    slow_down_pause: Duration,
    /// Remove done jobs finished longer ago than this (their keys are forgotten with them)
    #[arg(long, value_name = "DURATION", default_value = "7days", value_parser = parse_duration)]
    retention: Duration,
    /// A run still going this long after it started is stopped (its whole process group:
    /// SIGTERM, then SIGKILL after --kill-after) and counts as a failed attempt, "timed out
    /// after DURATION". Without it a command may run for ever
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// How long a stopped command's process group has between SIGTERM and SIGKILL, when it
    /// passed --timeout or when this worker died [default: the shorter of 5s and half the
    /// --lease, so a command whose worker died is gone before its job can run again]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    kill_after: Option<Duration>,
    /// No line per finished run on stderr (the summary at the end and problems still are)
    #[arg(long, short)]
    quiet: bool,
    /// The command run for each job, in a process group of its own, with the payload on stdin
    /// and LEAKGATE_JOB_ID, LEAKGATE_JOB_LANE and LEAKGATE_JOB_ATTEMPT in its environment; exit
    /// 0 means done. It is stopped with its group if this worker dies (even by SIGKILL). A
    /// command that fails may write "retry-after DURATION" (this job again after DURATION) or
    /// "slow-down DURATION" (the lane pauses) to the file named by LEAKGATE_JOB_REPLY
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// Runs `leakgate jobs work` until stopped (SIGTERM, SIGINT) or, with --until-empty, until the
/// queue is empty.
pub(crate) fn run(args: Args) -> ExitCode {
    block_on("work", async move {
        check_command(&args.command[0])?;
        if args.lease < Duration::from_millis(10) {
            return Err("--lease must be at least 10ms".into());
        }
        if args.claim_ahead.is_some_and(|a| a >= args.lease) {
            return Err("--claim-ahead must be less than --lease".into());
        }
        let claim_ahead = args.claim_ahead.unwrap_or((args.lease / 2).min(DEFAULT_CLAIM_AHEAD));
        if args.timeout.is_some_and(|t| t.is_zero()) {
            return Err("--timeout must be more than 0".into());
        }
        let kill_after = args.kill_after.unwrap_or((args.lease / 2).min(DEFAULT_KILL_AFTER));
        let queue = Jobs::builder(&args.db.db)
            .lease(args.lease)
            .max_attempts(args.max_attempts)
            .backoff(args.backoff)
            .open()
            .await
            .map_err(|e| e.to_string())?;
        let bar = progress_bar();
        let events = bar.clone();
        let quiet = args.quiet;
        let mut worker = queue
            .worker()
            .concurrency(args.concurrency as usize)
            .until_empty(args.until_empty)
            .claim_ahead(claim_ahead)
            .retention(Some(args.retention))
            .timeout(args.timeout)
            // The supervisor stops the group within `kill_after`; the margin lets it finish
            // before the run's future is dropped.
            .stop_grace(kill_after + Duration::from_secs(2))
            .on_event(move |event| {
                if quiet && matches!(event, Event::Finished { .. }) {
                    return;
                }
                events.suspend(|| crate::out::errln!("leakgate jobs work: {event}"))
            });
        if let Some(rules) = &args.rules {
            worker = worker.rules_file(rules, Duration::from_secs(1));
        }
        let stop = worker.stopper();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) =
                (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
            else {
                return;
            };
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
            stop.stop();
        });
        let progress = worker.progress();
        let ticker = bar.clone();
        let ticking = tokio::spawn(async move {
            loop {
                ticker.set_message(line(&progress.snapshot()));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        let how = Arc::new(How {
            supervisor: supervisor(),
            command: args.command.clone(),
            kill_after,
            slow: args.slow_down_exit.map(|code| (code, args.slow_down_pause)),
            replies: super::reply::folder()?,
        });
        let summary =
            worker.run(move |job| run_one(how.clone(), job)).await.map_err(|e| match &args.rules {
                Some(path) => format!("{}: {e}", path.display()),
                None => e.to_string(),
            });
        ticking.abort();
        bar.finish_and_clear();
        let summary = summary?;
        crate::out::errln!("leakgate jobs work: {}", line(&summary));
        Ok(())
    })
}

/// One line of counts.
fn line(s: &Snapshot) -> String {
    format!(
        "{} started, {} done, {} failed, {} dead, {} slowed down, {} lost, {} cancelled; {} running, {} waiting or running in the queue",
        s.started, s.done, s.failed, s.dead, s.slowed, s.lost, s.cancelled, s.running, s.remaining
    )
}

/// A live line on stderr when it is a terminal.
fn progress_bar() -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} leakgate jobs work: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The default of `--claim-ahead` (when half the lease is longer): measured in `jobs/README.md`.
const DEFAULT_CLAIM_AHEAD: Duration = Duration::from_millis(40);

/// The default of `--kill-after` (when half the lease is longer).
const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);

/// How each job's command is run.
struct How {
    /// This program, to run as the supervisor.
    supervisor: PathBuf,
    command: Vec<OsString>,
    kill_after: Duration,
    /// The exit code that means "slow down", and the lane's pause then.
    slow: Option<(i32, Duration)>,
    /// Where each run's reply file is made (see [`super::reply`]), removed when the worker ends.
    replies: tempfile::TempDir,
}

/// This program: `/proc/self/exe` (still there when the file was replaced since), else the
/// path it was started as.
fn supervisor() -> PathBuf {
    let proc = PathBuf::from("/proc/self/exe");
    if proc.exists() {
        return proc;
    }
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("leakgate"))
}

/// The supervisor of one run; dropped before it ended (the run's future dropped), it is told to
/// stop the command.
struct Supervised(tokio::process::Child);

impl Supervised {
    /// Asks the supervisor to stop the command (`SIGTERM`; it then stops the command's group).
    fn stop(&self) {
        if let Some(pid) = self.0.id().and_then(|id| rustix::process::Pid::from_raw(id as i32)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs the command for one job, and reads its reply when it failed (see [`super::reply`]).
async fn run_one(how: Arc<How>, job: Job) -> Outcome {
    let reply = how.replies.path().join(format!("{}-{}", job.id(), job.attempt()));
    let _ = std::fs::remove_file(&reply); // a reply of an earlier run of this worker
    let outcome = supervised(&how, &job, &reply).await;
    let asked = match &outcome {
        Outcome::Failed(_) => Some(super::reply::read(&reply)),
        _ => None,
    };
    let _ = std::fs::remove_file(&reply);
    match (asked, outcome) {
        (Some(Ok(Some(asked))), _) => asked,
        (Some(Err(why)), Outcome::Failed(error)) => Outcome::Failed(format!("{error} ({why})")),
        (_, outcome) => outcome,
    }
}

/// Runs the command for one job, through the supervisor; stops it at the job's deadline.
async fn supervised(how: &How, job: &Job, reply: &Path) -> Outcome {
    let mut cmd = tokio::process::Command::new(&how.supervisor);
    cmd.arg0("leakgate")
        .args(["jobs", "__supervise", "--parent"])
        .arg(std::process::id().to_string())
        .arg("--kill-after")
        .arg(format!("{}ms", how.kill_after.as_millis()))
        .arg("--")
        .args(&how.command)
        .env("LEAKGATE_JOB_ID", job.id().to_string())
        .env("LEAKGATE_JOB_LANE", job.lane())
        .env("LEAKGATE_JOB_ATTEMPT", job.attempt().to_string())
        .env("LEAKGATE_JOB_REPLY", reply)
        .stdin(Stdio::piped())
        // Its own process group: a Ctrl-C at the terminal stops the worker taking jobs, and
        // lets the running commands finish.
        .process_group(0);
    if let Some(key) = job.key() {
        cmd.env("LEAKGATE_JOB_KEY", key);
    }
    let mut child = match cmd.spawn() {
        Ok(child) => Supervised(child),
        Err(e) => return Outcome::Failed(format!("cannot run {:?}: {e}", how.supervisor)),
    };
    if let Some(mut stdin) = child.0.stdin.take() {
        let payload = job.payload().to_vec();
        // A command that does not read its stdin is fine: a broken pipe is ignored.
        tokio::spawn(async move {
            let _ = stdin.write_all(&payload).await;
        });
    }
    let status = match job.deadline() {
        None => child.0.wait().await,
        Some(at) => tokio::select! {
            status = child.0.wait() => status,
            _ = tokio::time::sleep_until(at.into()) => {
                child.stop();
                let _ = child.0.wait().await;
                // The worker records "timed out after ..." whatever is answered now.
                return Outcome::Failed("stopped at its deadline".into());
            }
        },
    };
    match status {
        Ok(status) if status.success() => Outcome::Done,
        Ok(status) => match (status.code(), how.slow) {
            (Some(code), Some((slow_code, pause))) if code == slow_code => Outcome::SlowDown(pause),
            (Some(code), _) => Outcome::Failed(format!("exit status {code}")),
            (None, _) => Outcome::Failed(format!("killed by a signal ({status})")),
        },
        Err(e) => Outcome::Failed(format!("waiting for the command failed: {e}")),
    }
}

/// Refuses a command that cannot run before any job is taken.
fn check_command(program: &OsString) -> Result<(), String> {
    let path = Path::new(program);
    let found = if path.components().count() > 1 {
        is_executable(path)
    } else {
        std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(path))))
            .unwrap_or(false)
    };
    if found {
        Ok(())
    } else {
        Err(format!("cannot run {program:?}: no such executable (nothing was taken)"))
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
