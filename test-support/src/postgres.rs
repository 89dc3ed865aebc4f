//! A real PostgreSQL server of the test's own: `initdb` in a temporary folder, `postgres` on a
//! free 127.0.0.1 port with password authentication, under a [`watchdog`](crate::watchdog)
//! that ends it (`SIGQUIT`, PostgreSQL's immediate shutdown, which releases its shared memory)
//! and removes its folder when the guard is dropped or the test process ends in any way.
//!
//! Run as root (CI), `initdb` and the server run as the `postgres` user (PostgreSQL refuses
//! root), the watchdog too.
//!
//! ```
//! let pg = leakgate_test_support::Postgres::start();
//! assert!(pg.database().starts_with("postgres://postgres:"));
//! ```

use crate::ports::free_port;
use crate::watchdog::{has_exited, Program, Watched};
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The superuser's password on test servers.
///
/// ```no_run
/// assert!(!leakgate_test_support::postgres::PASSWORD.is_empty());
/// ```
pub const PASSWORD: &str = "leakgate-test";

/// A running server; stopped, and its folder removed, when dropped.
///
/// ```no_run
/// let pg = leakgate_test_support::Postgres::start();
/// assert!(pg.port() > 0);
/// ```
#[derive(Debug)]
pub struct Postgres {
    server: Option<Watched>,
    port: u16,
    bin: PathBuf,
    dir: PathBuf,
    /// Databases made so far (for unique names; `Relaxed`: only the count matters).
    made: AtomicU64,
}

impl Postgres {
    /// Starts a server for tests: durability off (`fsync = off`), which changes no answer.
    ///
    /// ```no_run
    /// let _pg = leakgate_test_support::Postgres::start();
    /// ```
    pub fn start() -> Postgres {
        Postgres::start_with(&[
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
    }

    /// Starts a server with PostgreSQL's defaults (durable commits), for benchmarks.
    ///
    /// ```no_run
    /// let _pg = leakgate_test_support::Postgres::start_durable();
    /// ```
    pub fn start_durable() -> Postgres {
        Postgres::start_with(&[])
    }

    fn start_with(settings: &[&str]) -> Postgres {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("leakgate-pg-")
            .tempdir()
            .expect("a temporary folder")
            .keep();
        // From here on the folder goes when this process does, even before the server runs.
        let mut dir_watch = Some(Watched::remove_dir(&dir));
        let user = server_user();
        if let Some((uid, gid)) = user {
            chown(&dir, Some(uid), Some(gid)).expect("chown the server's folder");
        }
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("write the password file");
        if let Some((uid, gid)) = user {
            chown(&pwfile, Some(uid), Some(gid)).expect("chown the password file");
        }
        let mut initdb = Command::new(bin.join("initdb"));
        if let Some((uid, gid)) = user {
            initdb.uid(uid).gid(gid).env("HOME", "/tmp");
        }
        let out = initdb
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-U", "postgres", "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run {}/initdb ({e}): see scripts/ensure-postgres.sh", bin.display())
            });
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        let mut pg = Postgres { server: None, port: 0, bin, dir, made: AtomicU64::new(0) };
        for _ in 0..10 {
            pg.port = free_port();
            if pg.launch(settings, user) {
                // The server's watchdog removes the folder after the server has ended.
                if let Some(watch) = dir_watch.take() {
                    watch.keep_folder();
                }
                return pg;
            }
        }
        panic!("postgres did not start: see {}", pg.dir.join("log").display());
    }

    fn launch(&mut self, settings: &[&str], user: Option<(u32, u32)>) -> bool {
        let mut program = Program::new(self.bin.join("postgres"))
            .signal("QUIT")
            .log(self.dir.join("log"))
            .remove(&self.dir)
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.display()))
            .args(["-c", "max_connections=300", "-c", "shared_buffers=64MB"])
            .args(settings);
        if let Some((uid, gid)) = user {
            program = program.user(uid, gid);
        }
        let watched = Watched::start(program);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if has_exited(watched.pid()) {
                // The port was taken: keep the folder for the next try.
                watched.keep_folder();
                return false;
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                self.server = Some(watched);
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        watched.keep_folder();
        false
    }

    /// The server's port.
    ///
    /// ```no_run
    /// let pg = leakgate_test_support::Postgres::start();
    /// std::net::TcpStream::connect(("127.0.0.1", pg.port())).unwrap();
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id (the postmaster's; panics after [`stop`](Self::stop)).
    ///
    /// ```no_run
    /// let pg = leakgate_test_support::Postgres::start();
    /// assert!(!leakgate_test_support::watchdog::has_exited(pg.pid()));
    /// ```
    pub fn pid(&self) -> nix::unistd::Pid {
        self.server.as_ref().expect("running").pid()
    }

    /// Its folder (the cluster's data, its log and its socket; removed with it).
    ///
    /// ```no_run
    /// let pg = leakgate_test_support::Postgres::start();
    /// assert!(pg.dir().join("data").is_dir());
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A URL for database `db`.
    ///
    /// ```no_run
    /// let pg = leakgate_test_support::Postgres::start();
    /// assert!(pg.url("postgres").ends_with("/postgres"));
    /// ```
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres:{PASSWORD}@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a new, empty database and answers its URL.
    ///
    /// ```no_run
    /// let pg = leakgate_test_support::Postgres::start();
    /// assert_ne!(pg.database(), pg.database());
    /// ```
    pub fn database(&self) -> String {
        let name = format!("t{}", self.made.fetch_add(1, Ordering::Relaxed));
        let out = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", &name])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .expect("createdb runs");
        assert!(out.status.success(), "createdb: {}", String::from_utf8_lossy(&out.stderr));
        self.url(&name)
    }

    /// Stops the server and removes its folder, waiting for both (also done when dropped).
    ///
    /// ```no_run
    /// let mut pg = leakgate_test_support::Postgres::start();
    /// pg.stop();
    /// assert!(std::net::TcpStream::connect(("127.0.0.1", pg.port())).is_err());
    /// ```
    pub fn stop(&mut self) {
        if let Some(mut watched) = self.server.take() {
            watched.finish();
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where PostgreSQL's programs are: `LEAKGATE_PG_BIN`, then Debian's
/// `/usr/lib/postgresql/<newest>/bin`, then the folder of `initdb` on the `PATH`.
///
/// ```no_run
/// assert!(leakgate_test_support::postgres::bin_dir().join("initdb").exists());
/// ```
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LEAKGATE_PG_BIN") {
        return dir.into();
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin): &(u32, PathBuf)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        if Path::new(dir).join("initdb").exists() {
            return dir.into();
        }
    }
    panic!("PostgreSQL is not installed (no initdb): run scripts/ensure-postgres.sh")
}

/// `(uid, gid)` of the `postgres` user when running as root, else `None` (run as ourselves).
fn server_user() -> Option<(u32, u32)> {
    if !nix::unistd::Uid::effective().is_root() {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("postgres:")).expect(
        "running as root, the server needs the `postgres` user (Debian's postgresql package makes it)",
    );
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields[2].parse().ok()?, fields[3].parse().ok()?))
}
