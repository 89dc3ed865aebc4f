//! A real `redis-server` for one test: on a free 127.0.0.1 port, in a temporary directory, and
//! gone with its directory when the test lets go of it, also when the test panics or the whole
//! test binary is killed.
//!
//! Each server runs under a watchdog, a small `sh` that holds the read end of a pipe whose write
//! end only this process holds. When the pipe closes (the `RedisServer` is dropped, or this
//! process ends in any way, `SIGKILL` included: the kernel closes its descriptors), the watchdog
//! kills the server and reaps it. A second watchdog removes the directory the same way, so a
//! killed test binary leaves neither a process nor a folder behind. (`std` opens every pipe
//! close-on-exec, so no other child, test worker or watchdog, holds a write end open.)

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `"$@"` (redis-server and its arguments) in the background, prints its pid, and kills it
/// when standard input reaches its end. The server is not reaped before the kill (the shell
/// reaps only in `wait`), so its pid cannot be reused by then.
const WATCH_SERVER: &str = r#""$@" </dev/null >/dev/null 2>&1 &
server=$!
echo "$server"
read -r _
kill -KILL "$server" 2>/dev/null
wait "$server" 2>/dev/null
exit 0"#;

/// Removes the directory `$1` when standard input reaches its end.
const WATCH_DIR: &str = r#"read -r _
rm -rf -- "$1""#;

/// A process under a watchdog: closing `stdin` tells the watchdog to finish.
struct Watched {
    watchdog: Child,
    stdin: Option<ChildStdin>,
}

impl Watched {
    /// Starts `sh -c script name args...` with a pipe on its standard input.
    fn start(script: &str, name: &str, args: &[&std::ffi::OsStr], stdout: Stdio) -> Watched {
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(name)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .expect("sh, for a test server's watchdog");
        let stdin = watchdog.stdin.take();
        Watched { watchdog, stdin }
    }

    /// Closes the pipe and waits for the watchdog to have done its work and exited.
    fn finish(&mut self) {
        drop(self.stdin.take());
        let _ = self.watchdog.wait();
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A running `redis-server` of our own.
pub struct RedisServer {
    server: Option<(Watched, Pid)>,
    port: u16,
    /// Declared after `server`: the server stops before its directory goes.
    dir: tempfile::TempDir,
    _dir_watch: Watched,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let dir_watch =
            Watched::start(WATCH_DIR, "redis-test-dir", &[dir.path().as_os_str()], Stdio::null());
        let mut server = RedisServer { server: None, port: 0, dir, _dir_watch: dir_watch };
        for _ in 0..10 {
            server.port = free_port();
            if server.launch() {
                return server;
            }
        }
        panic!("redis-server did not start: see scripts/ensure-redis.sh");
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id.
    pub fn pid(&self) -> Pid {
        self.server.as_ref().expect("running").1
    }

    /// Its working directory (removed with it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some((mut watched, _)) = self.server.take() {
            watched.finish();
        }
    }

    /// Starts the server again on the same port and in the same directory (after `kill`).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.launch() {
            assert!(Instant::now() < deadline, "redis-server did not restart on its port");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGSTOP: the server holds its connections but answers nothing.
    pub fn pause(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP");
    }

    /// SIGCONT after `pause`.
    pub fn resume(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT");
    }

    /// A plain blocking connection, for setting up and inspecting keys.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url()).unwrap().get_connection().unwrap()
    }

    fn launch(&mut self) -> bool {
        let binary = redis_server_binary();
        let port = self.port.to_string();
        let log = self.dir.path().join("redis.log");
        let args: Vec<&std::ffi::OsStr> = [
            binary.as_os_str(),
            "--port".as_ref(),
            port.as_ref(),
            "--bind".as_ref(),
            "127.0.0.1".as_ref(),
            "--save".as_ref(),
            "".as_ref(),
            "--appendonly".as_ref(),
            "no".as_ref(),
            "--protected-mode".as_ref(),
            "no".as_ref(),
            "--dir".as_ref(),
            self.dir.path().as_os_str(),
            "--logfile".as_ref(),
            log.as_os_str(),
        ]
        .into();
        let mut watched = Watched::start(WATCH_SERVER, "redis-test-server", &args, Stdio::piped());
        let mut line = String::new();
        let stdout = watched.watchdog.stdout.take().expect("piped");
        let _ = BufReader::new(stdout).read_line(&mut line);
        let Ok(pid) = line.trim().parse::<i32>() else {
            panic!("cannot run {binary:?} under sh: see scripts/ensure-redis.sh");
        };
        let pid = Pid::from_raw(pid);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if has_exited(pid) {
                return false; // the port was taken; dropping `watched` reaps it
            }
            if ping(self.port) {
                self.server = Some((watched, pid));
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some((_, pid)) = &self.server {
            // A paused server dies of SIGKILL too; this only makes its end ordinary.
            let _ = kill(*pid, Signal::SIGCONT);
        }
        self.kill();
    }
}

/// Whether process `pid` has ended (a zombie not yet reaped counts as ended).
pub fn has_exited(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
        Err(_) => true,
    }
}

fn redis_server_binary() -> PathBuf {
    for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if Path::new(candidate).exists() {
            return candidate.into();
        }
    }
    "redis-server".into()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}
