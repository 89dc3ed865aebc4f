//! A real `redis-server` for one test: on a free 127.0.0.1 port, in a temporary folder, gone
//! with its folder when the test lets go of it, also when the test panics or the whole test
//! binary is killed (both under a [`watchdog`](crate::watchdog)).
//!
//! A Redis Cluster of such servers is [`cluster`](crate::cluster)'s.
//!
//! ```
//! let mut server = leakgate_test_support::RedisServer::start();
//! server.kill();
//! server.restart(); // on the same port, in the same folder
//! assert!(leakgate_test_support::ports::answers_ping(server.port()));
//! ```

use crate::ports::{answers_ping, free_port};
use crate::watchdog::{has_exited, Program, Watched};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A running `redis-server` of the test's own; killed, and its folder removed, when dropped.
///
/// ```
/// let server = leakgate_test_support::RedisServer::start();
/// assert!(server.dir().exists());
/// ```
#[derive(Debug)]
pub struct RedisServer {
    server: Option<Watched>,
    /// Settings after the defaults (kept for `restart`).
    extra: Vec<String>,
    port: u16,
    /// Declared after `server`: the server stops before its folder goes.
    dir: tempfile::TempDir,
    _dir_watch: Watched,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING` (panics,
    /// naming `scripts/ensure-redis.sh`, when it cannot).
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// assert!(server.port() > 0);
    /// ```
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server as [`start`](Self::start) does, with more settings (`redis-server`'s
    /// own arguments, kept across [`restart`](Self::restart)).
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start_with(&["--maxmemory", "10mb"]);
    /// assert!(leakgate_test_support::ports::answers_ping(server.port()));
    /// ```
    pub fn start_with(settings: &[&str]) -> RedisServer {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let dir_watch = Watched::remove_dir(dir.path());
        let extra = settings.iter().map(|s| s.to_string()).collect();
        let mut server = RedisServer { server: None, extra, port: 0, dir, _dir_watch: dir_watch };
        for _ in 0..10 {
            server.port = free_port();
            if server.launch() {
                return server;
            }
        }
        panic!("redis-server did not start: see scripts/ensure-redis.sh");
    }

    /// `redis://127.0.0.1:<port>/`.
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// assert_eq!(server.url(), format!("redis://127.0.0.1:{}/", server.port()));
    /// ```
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port it listens on.
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// assert!(leakgate_test_support::ports::answers_ping(server.port()));
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id (panics after [`kill`](Self::kill)).
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// assert!(!leakgate_test_support::watchdog::has_exited(server.pid()));
    /// ```
    pub fn pid(&self) -> Pid {
        self.server.as_ref().expect("running").pid()
    }

    /// Its working folder (removed with it).
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// assert!(server.dir().join("redis.log").exists());
    /// ```
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `SIGKILL`, and wait for the process to be gone.
    ///
    /// ```
    /// let mut server = leakgate_test_support::RedisServer::start();
    /// let pid = server.pid();
    /// server.kill();
    /// assert!(leakgate_test_support::watchdog::has_exited(pid));
    /// ```
    pub fn kill(&mut self) {
        if let Some(mut watched) = self.server.take() {
            watched.finish();
        }
    }

    /// Starts the server again on the same port and in the same folder (after `kill`, or
    /// killing it first).
    ///
    /// ```
    /// let mut server = leakgate_test_support::RedisServer::start();
    /// server.restart();
    /// assert!(leakgate_test_support::ports::answers_ping(server.port()));
    /// ```
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.launch() {
            assert!(Instant::now() < deadline, "redis-server did not restart on its port");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `SIGSTOP`: the server holds its connections but answers nothing.
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// server.pause();
    /// assert!(!leakgate_test_support::ports::answers_ping(server.port()));
    /// server.resume();
    /// ```
    pub fn pause(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP");
    }

    /// `SIGCONT` after [`pause`](Self::pause).
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// server.pause();
    /// server.resume();
    /// assert!(leakgate_test_support::ports::answers_ping(server.port()));
    /// ```
    pub fn resume(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT");
    }

    /// A plain blocking connection, for setting up and inspecting keys (feature `redis`).
    ///
    /// ```
    /// let server = leakgate_test_support::RedisServer::start();
    /// let pong: String = redis::cmd("PING").query(&mut server.connection()).unwrap();
    /// assert_eq!(pong, "PONG");
    /// ```
    #[cfg(feature = "redis")]
    pub fn connection(&self) -> ::redis::Connection {
        ::redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("a connection to the test's redis-server")
    }

    fn launch(&mut self) -> bool {
        let binary = redis_server_binary();
        let watched = Watched::start(
            Program::new(&binary)
                .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
                .arg("--dir")
                .arg(self.dir.path())
                .arg("--logfile")
                .arg(self.dir.path().join("redis.log"))
                .args(&self.extra),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if has_exited(watched.pid()) {
                return false; // the port was taken; dropping `watched` reaps it
            }
            if answers_ping(self.port) {
                self.server = Some(watched);
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(watched) = &self.server {
            // A paused server dies of SIGKILL too; this only makes its end ordinary.
            let _ = kill(watched.pid(), Signal::SIGCONT);
        }
        self.kill();
    }
}

/// Debian's `redis-server`, else the one on the `PATH`.
fn redis_server_binary() -> PathBuf {
    binary("redis-server")
}

/// Debian's `program` (`redis-server`, `redis-cli`), else the one on the `PATH`.
pub(crate) fn binary(program: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin"] {
        let candidate = Path::new(dir).join(program);
        if candidate.exists() {
            return candidate;
        }
    }
    program.into()
}
