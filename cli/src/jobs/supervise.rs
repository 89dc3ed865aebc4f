//! `leakgate jobs __supervise` (hidden): what `jobs work` runs for each job, between itself and
//! the job's command, so that the command never outlives its run.
//!
//! A worker killed with `kill -9` runs no code: a command it started in a process group of its
//! own would go on running, and once the job's lease ran out, run a second time beside the new
//! run. So the worker starts this supervisor (the same binary), which starts the command in a
//! process group of its own and stops that group, `SIGTERM` then `SIGKILL` after `--kill-after`,
//! when
//!
//! * the worker dies: the kernel sends the supervisor `SIGHUP` (`PR_SET_PDEATHSIG`, set on
//!   itself, a safe call; no code runs between `fork` and `exec`), and it checks that its
//!   parent really changed (the signal also comes when the worker's *thread* that started it
//!   exits); a look at the parent every second backs the signal up;
//! * the worker asks it to (`SIGTERM`: the run passed its `--timeout`).
//!
//! It is the command's children's subreaper, so that what is left of a stopped group is reaped
//! at once. `SIGINT` is ignored: a Ctrl-C at the terminal is for the worker, which lets running jobs
//! finish. Otherwise the supervisor ends as its command did: the same exit code, or the same
//! signal, so the worker reads the command's own status.

use crate::duration::parse_duration;
use rustix::process::{Pid, Signal};
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;
use tokio::process::Child;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

/// How often to look at the parent and at what is left of a stopped group.
const LOOK: Duration = Duration::from_secs(1);
const GONE_POLL: Duration = Duration::from_millis(20);

/// The arguments of `leakgate jobs __supervise`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The worker's process id: once it is gone, the command is stopped
    #[arg(long, value_name = "PID")]
    parent: i32,
    /// How long a stopped command's group has between SIGTERM and SIGKILL
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    kill_after: Duration,
    /// The command
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// Runs the command and ends as it did, or stops it (see the module docs).
pub(crate) fn run(args: Args) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start a runtime: {e}")),
    };
    match runtime.block_on(supervise(args)) {
        Ok(Ended::Code(code)) => ExitCode::from(code),
        Ok(Ended::Signal(sig)) => {
            drop(runtime);
            // Die of the same signal; if that fails, say so in the exit code.
            let _ = signal_hook::low_level::emulate_default_handler(sig);
            ExitCode::from(128u8.wrapping_add(sig as u8))
        }
        Err(e) => fail(&e),
    }
}

/// How the command ended.
enum Ended {
    Code(u8),
    Signal(i32),
}

async fn supervise(args: Args) -> Result<Ended, String> {
    // Handlers first, so that no signal is missed once the command runs.
    let handle = |kind| signal(kind).map_err(|e| format!("cannot handle signals: {e}"));
    let mut term = handle(SignalKind::terminate())?;
    let mut hup = handle(SignalKind::hangup())?;
    let mut int = handle(SignalKind::interrupt())?;
    rustix::process::set_parent_process_death_signal(Some(Signal::HUP))
        .map_err(|e| format!("cannot ask for the worker's death signal: {e}"))?;
    if parent_gone(args.parent) {
        return Err("the worker is gone: the command was not started".into());
    }
    // The command's children that outlive it come to this process, which reaps them: a zombie
    // left to init (which may reap late) would still count in the group being stopped.
    let me = rustix::process::getpid();
    rustix::process::set_child_subreaper(Some(me))
        .map_err(|e| format!("cannot become a subreaper: {e}"))?;
    let mut child = tokio::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", args.command[0]))?;
    let group =
        child.id().and_then(|id| Pid::from_raw(id as i32)).ok_or("the command has no id")?;
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(|e| format!("waiting for the command failed: {e}"))?;
                return Ok(ended(status));
            }
            _ = term.recv() => break,
            _ = hup.recv() => if parent_gone(args.parent) { break },
            _ = int.recv() => {}
            _ = tokio::time::sleep(LOOK) => if parent_gone(args.parent) { break },
        }
    }
    Ok(stop(group, &mut child, args.kill_after).await)
}

/// Stops the command's process group: `SIGTERM`, then, once the group is gone or `kill_after`
/// has passed, `SIGKILL` to whatever is left of it; reaps what it can of the group.
async fn stop(group: Pid, child: &mut Child, kill_after: Duration) -> Ended {
    let mut status = None;
    let _ = rustix::process::kill_process_group(group, Signal::TERM);
    let give_up = Instant::now() + kill_after;
    while !gone(group, child, &mut status) && Instant::now() < give_up {
        tokio::time::sleep(GONE_POLL).await;
    }
    if !gone(group, child, &mut status) {
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
        // SIGKILL cannot be caught: reap what it leaves, for a moment at most.
        let reaped = Instant::now() + Duration::from_secs(1);
        while !gone(group, child, &mut status) && Instant::now() < reaped {
            tokio::time::sleep(GONE_POLL).await;
        }
    }
    if status.is_none() {
        status = child.wait().await.ok();
    }
    status.map_or(Ended::Signal(Signal::KILL.as_raw()), ended)
}

/// Reaps the command (keeping its status in `status`) and then its children that it left to
/// this process (see the subreaper above); answers whether no process of the group is left.
/// A zombie would still count in its group.
fn gone(group: Pid, child: &mut Child, status: &mut Option<std::process::ExitStatus>) -> bool {
    if status.is_none() {
        *status = child.try_wait().ok().flatten();
    }
    if status.is_none() {
        return false;
    }
    let nohang = rustix::process::WaitOptions::NOHANG;
    while let Ok(Some(_)) = rustix::process::waitpgid(group, nohang) {}
    rustix::process::test_kill_process_group(group).is_err()
}

/// Whether the worker that started this supervisor is gone (it was re-parented).
fn parent_gone(parent: i32) -> bool {
    rustix::process::getppid().map(Pid::as_raw_nonzero).map(|p| p.get()) != Some(parent)
}

fn ended(status: std::process::ExitStatus) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Ended::Code(code as u8),
        (None, Some(sig)) => Ended::Signal(sig),
        (None, None) => Ended::Code(1),
    }
}

fn fail(message: &str) -> ExitCode {
    crate::out::errln!("leakgate jobs work: {message}");
    ExitCode::from(127)
}
