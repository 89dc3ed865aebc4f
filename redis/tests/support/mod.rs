//! A real `redis-server` for one test: on a free 127.0.0.1 port, in a temporary directory,
//! killed when dropped. Shared by the tests, the benchmark and the examples.
#![allow(dead_code, unreachable_pub)]

pub mod float;
pub mod model;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A limiter on `url` with the contract's defaults, except a deadline long enough that a test
/// machine busy with other tests never makes a call miss it (a missed deadline is the failure
/// policy's business, tested on its own in `faults.rs`).
pub fn patient_limiter(url: &str, quota: leakgate::Quota) -> leakgate_redis::RedisLimiter {
    leakgate_redis::RedisLimiter::builder(url)
        .quota(quota)
        .deadline(Duration::from_secs(5))
        .connect()
        .expect("a local redis-server")
}

/// Redis's clock (`TIME`), in µs.
pub fn redis_time_us(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1_000_000 + us
}

/// A manual clock at a realistic Unix time (November 2023), for limiters on the caller's clock.
pub fn epoch() -> leakgate::ManualClock {
    let clock = leakgate::ManualClock::new();
    clock.set(Duration::from_secs(1_700_000_000));
    clock
}

/// A rules limiter on `server` deciding on the caller's `clock`, patient as
/// [`patient_limiter`], whose buckets outlive an hour of clock moves.
pub fn manual_rules(
    server: &RedisServer,
    rules: leakgate::Rules,
    clock: &leakgate::ManualClock,
) -> leakgate_redis::RedisRuleLimiter {
    leakgate_redis::RedisRuleLimiter::builder(&server.url())
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600))
        .connect_rules(rules)
        .unwrap()
}

/// A running `redis-server` of our own.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut server = RedisServer { child: None, port: 0, dir };
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

    /// The server's process id.
    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("running").id() as i32)
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (after `kill`).
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
        let child = Command::new(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {binary:?} ({e}): see scripts/ensure-redis.sh"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None; // exited: the port was taken
                return false;
            }
            if ping(self.port) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = kill(self.pid(), Signal::SIGCONT);
        }
        self.kill();
    }
}

fn redis_server_binary() -> PathBuf {
    for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if std::path::Path::new(candidate).exists() {
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
