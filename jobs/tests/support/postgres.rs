//! A real PostgreSQL server of our own for one test binary: `initdb` in a temporary directory,
//! `postgres` on a free 127.0.0.1 port with password authentication, stopped when dropped.
//!
//! Run as root (CI), the server runs as the `postgres` user (PostgreSQL refuses root). A small
//! watchdog process stops the server and removes its directory if the test process dies without
//! dropping the guard (killed, or `exit` while tests run), so no server outlives the test run.
//! Shared by the tests of `leakgate-jobs`, its benchmark, and the CLI's tests (by `#[path]`).
#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The superuser's password on test servers.
pub const PASSWORD: &str = "leakgate-test";

/// A running server; stopped and removed when dropped.
pub struct Postgres {
    server: Option<Child>,
    watchdog: Option<Child>,
    port: u16,
    bin: PathBuf,
    dir: PathBuf,
    /// Databases made so far (for unique names).
    made: AtomicU64,
}

impl Postgres {
    /// Starts a server for tests: durability off (`fsync = off`), which changes no answer.
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
    pub fn start_durable() -> Postgres {
        Postgres::start_with(&[])
    }

    fn start_with(settings: &[&str]) -> Postgres {
        let bin = bin_dir();
        let dir = std::env::temp_dir().join(format!(
            "leakgate-pg-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let user = server_user();
        if let Some((uid, gid)) = user {
            chown(&dir, Some(uid), Some(gid)).expect("chown the server's directory");
        }
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if let Some((uid, gid)) = user {
            chown(&pwfile, Some(uid), Some(gid)).unwrap();
        }
        let out = as_server_user(Command::new(bin.join("initdb")), user)
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
        let mut pg =
            Postgres { server: None, watchdog: None, port: 0, bin, dir, made: AtomicU64::new(0) };
        for _ in 0..10 {
            pg.port = free_port();
            if pg.launch(settings, user) {
                pg.watch();
                return pg;
            }
        }
        panic!("postgres did not start: see {}", pg.dir.join("log").display());
    }

    fn launch(&mut self, settings: &[&str], user: Option<(u32, u32)>) -> bool {
        let log = std::fs::File::create(self.dir.join("log")).unwrap();
        let child = as_server_user(Command::new(self.bin.join("postgres")), user)
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.display()))
            .args(["-c", "max_connections=300", "-c", "shared_buffers=64MB"])
            .args(settings)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("postgres runs");
        self.server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.server.as_mut().map(|c| c.try_wait()) {
                self.server = None; // exited: the port was taken
                return false;
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop();
        false
    }

    /// A process that stops the server and removes its directory once this process is gone.
    fn watch(&mut self) {
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 1; done; kill -QUIT {pg} 2>/dev/null; sleep 1; rm -rf '{dir}'",
            me = std::process::id(),
            pg = self.server.as_ref().unwrap().id(),
            dir = self.dir.display()
        );
        let watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("sh runs");
        self.watchdog = Some(watchdog);
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres:{PASSWORD}@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a new, empty database and answers its URL.
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

    /// Stops the server (fast shutdown), waiting for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where PostgreSQL's programs are: `LEAKGATE_PG_BIN`, then Debian's
/// `/usr/lib/postgresql/<newest>/bin`, then the directory of `initdb` on the `PATH`.
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
    let me = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("postgres:"))
        .expect("running as root, the server needs the `postgres` user (Debian's postgresql package makes it)");
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields[2].parse().ok()?, fields[3].parse().ok()?))
}

fn as_server_user(mut cmd: Command, user: Option<(u32, u32)>) -> Command {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid).env("HOME", "/tmp");
    }
    cmd
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
