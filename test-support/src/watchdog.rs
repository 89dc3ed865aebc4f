//! A process that cannot outlive the test that started it.
//!
//! Each program runs under a watchdog, a small `sh` that holds the read end of a pipe whose
//! write end only the test process holds. When the pipe closes (the [`Watched`] is dropped, or
//! the test process ends in any way, `SIGKILL` included: the kernel closes its descriptors), the
//! watchdog signals the program's whole process group (the program runs in a session of its
//! own, under `setsid`), waits for it, and removes its folder if it was given one. `std` opens
//! every pipe close-on-exec, so no other child of the test holds a write end open.
//!
//! The watchdog ignores `SIGINT`, `SIGHUP` and `SIGTERM` (set after the program is started, so
//! the program does not inherit them): a Ctrl-C to the test's process group ends the test,
//! which closes the pipe, which ends the program.
//!
//! ```
//! use leakgate_test_support::watchdog::{has_exited, Program, Watched};
//! let mut sleeper = Watched::start(Program::new("sleep").arg("600"));
//! let pid = sleeper.pid();
//! assert!(!has_exited(pid));
//! sleeper.finish();
//! assert!(has_exited(pid));
//! ```

use nix::unistd::Pid;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// `$1` the signal, `$2` the log file, `$3` a folder to remove ("" for none, or when a line
/// `keep` comes before the end), then the program and its arguments. Prints the program's pid; the program is not reaped before the signal
/// (the shell reaps only in `wait`), so its pid cannot be reused by then.
const WATCH: &str = r#"sig=$1 log=$2 dir=$3
shift 3
setsid "$@" </dev/null >"$log" 2>&1 &
child=$!
trap '' INT HUP TERM
echo "$child"
read -r line
kill -s "$sig" -- "-$child" 2>/dev/null || kill -s "$sig" "$child" 2>/dev/null
wait "$child" 2>/dev/null
[ -z "$dir" ] || [ "$line" = keep ] || rm -rf -- "$dir"
exit 0"#;

/// Removes the folder `$1` when standard input reaches its end (not after a line `keep`).
const WATCH_DIR: &str = r#"trap '' INT HUP TERM
read -r line
[ "$line" = keep ] || rm -rf -- "$1""#;

/// A program to run under a watchdog, and how to end it.
///
/// ```
/// use leakgate_test_support::watchdog::Program;
/// let program = Program::new("redis-server").arg("--port").arg("0").signal("TERM");
/// # let _ = program;
/// ```
#[derive(Clone, Debug)]
pub struct Program {
    args: Vec<OsString>,
    signal: &'static str,
    log: Option<PathBuf>,
    remove: Option<PathBuf>,
    user: Option<(u32, u32)>,
}

impl Program {
    /// `program`, ended with `SIGKILL`, its output discarded.
    ///
    /// ```
    /// let _ = leakgate_test_support::watchdog::Program::new("true");
    /// ```
    pub fn new(program: impl AsRef<OsStr>) -> Program {
        Program {
            args: vec![program.as_ref().to_owned()],
            signal: "KILL",
            log: None,
            remove: None,
            user: None,
        }
    }

    /// One more argument.
    ///
    /// ```
    /// let _ = leakgate_test_support::watchdog::Program::new("sleep").arg("1");
    /// ```
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Program {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// More arguments.
    ///
    /// ```
    /// let _ = leakgate_test_support::watchdog::Program::new("env").args(["-i", "true"]);
    /// ```
    pub fn args<A: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = A>) -> Program {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The signal that ends it, by name (`"KILL"`, `"QUIT"`, ...).
    ///
    /// ```
    /// let _ = leakgate_test_support::watchdog::Program::new("sleep").signal("TERM");
    /// ```
    pub fn signal(mut self, signal: &'static str) -> Program {
        self.signal = signal;
        self
    }

    /// Where its standard output and error go (else nowhere).
    ///
    /// ```
    /// let _ = leakgate_test_support::watchdog::Program::new("true").log("/dev/null");
    /// ```
    pub fn log(mut self, file: impl AsRef<Path>) -> Program {
        self.log = Some(file.as_ref().to_owned());
        self
    }

    /// A folder the watchdog removes once the program has ended.
    ///
    /// ```
    /// let _ = leakgate_test_support::watchdog::Program::new("true").remove("/nonexistent");
    /// ```
    pub fn remove(mut self, folder: impl AsRef<Path>) -> Program {
        self.remove = Some(folder.as_ref().to_owned());
        self
    }

    /// Runs it (and its watchdog) as user `uid`, group `gid`.
    ///
    /// ```
    /// let _ = leakgate_test_support::watchdog::Program::new("true").user(0, 0);
    /// ```
    pub fn user(mut self, uid: u32, gid: u32) -> Program {
        self.user = Some((uid, gid));
        self
    }
}

/// A program under a watchdog; ended when dropped.
///
/// ```
/// use leakgate_test_support::watchdog::{Program, Watched};
/// let sleeper = Watched::start(Program::new("sleep").arg("600"));
/// drop(sleeper); // the sleep is gone, and reaped
/// ```
#[derive(Debug)]
pub struct Watched {
    watchdog: Child,
    stdin: Option<ChildStdin>,
    pid: Pid,
}

impl Watched {
    /// Starts `program` under a new watchdog and returns once its pid is known (panics when
    /// `sh` cannot run).
    ///
    /// ```
    /// use leakgate_test_support::watchdog::{Program, Watched};
    /// let _sleeper = Watched::start(Program::new("sleep").arg("600"));
    /// ```
    pub fn start(program: Program) -> Watched {
        let dev_null = PathBuf::from("/dev/null");
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WATCH)
            .arg("leakgate-test-watchdog")
            .arg(program.signal)
            .arg(program.log.as_ref().unwrap_or(&dev_null))
            .arg(program.remove.as_deref().unwrap_or(Path::new("")))
            .args(&program.args);
        if let Some((uid, gid)) = program.user {
            command.uid(uid).gid(gid).env("HOME", "/tmp");
        }
        let mut watchdog = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh, for a test program's watchdog");
        let stdin = watchdog.stdin.take();
        let mut line = String::new();
        let stdout = watchdog.stdout.take().expect("piped");
        let _ = BufReader::new(stdout).read_line(&mut line);
        let pid = line.trim().parse::<i32>().unwrap_or_else(|_| {
            panic!("cannot run {:?} under sh: no pid", program.args[0]);
        });
        Watched { watchdog, stdin, pid: Pid::from_raw(pid) }
    }

    /// A watchdog that only removes `folder` when dropped or when the test process ends.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().to_owned();
    /// std::mem::forget(dir); // as if the test were killed before it removed the folder
    /// drop(leakgate_test_support::watchdog::Watched::remove_dir(&path));
    /// assert!(!path.exists());
    /// ```
    pub fn remove_dir(folder: &Path) -> Watched {
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCH_DIR)
            .arg("leakgate-test-dir")
            .arg(folder)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh, for a test folder's watchdog");
        let mut watched =
            Watched { pid: Pid::from_raw(watchdog.id() as i32), watchdog, stdin: None };
        watched.stdin = watched.watchdog.stdin.take();
        watched
    }

    /// The program's process id (also its process group's).
    ///
    /// ```
    /// use leakgate_test_support::watchdog::{Program, Watched};
    /// let sleeper = Watched::start(Program::new("sleep").arg("600"));
    /// assert!(sleeper.pid().as_raw() > 1);
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Closes the pipe and waits for the watchdog to have ended the program and exited.
    ///
    /// ```
    /// use leakgate_test_support::watchdog::{has_exited, Program, Watched};
    /// let mut sleeper = Watched::start(Program::new("sleep").arg("600"));
    /// sleeper.finish();
    /// assert!(has_exited(sleeper.pid()));
    /// ```
    pub fn finish(&mut self) {
        drop(self.stdin.take());
        let _ = self.watchdog.wait();
    }

    /// As [`finish`](Self::finish), but the watchdog leaves its folder where it is.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// leakgate_test_support::watchdog::Watched::remove_dir(dir.path()).keep_folder();
    /// assert!(dir.path().exists());
    /// ```
    pub fn keep_folder(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"keep\n");
        }
        self.finish();
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether process `pid` has ended (a zombie not yet reaped counts as ended).
///
/// ```
/// use leakgate_test_support::watchdog::has_exited;
/// assert!(!has_exited(nix::unistd::Pid::this()));
/// ```
pub fn has_exited(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
        Err(_) => true,
    }
}
