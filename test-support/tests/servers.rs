//! The test servers themselves: a server a test starts is gone, with its folder, when the test
//! lets go of it, when the test panics, when it was kept in a `static` whose drop never runs, and
//! when the whole test binary is killed (`redis-server`, PostgreSQL and Chromium alike). Each case runs this test binary again as a child
//! (`child_entry_point`), which starts a server, reports it, and then ends as the case says.

use leakgate_test_support::watchdog::has_exited;
use leakgate_test_support::{Postgres, RedisServer};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The entry point of the children; does nothing unless started by a case below.
#[test]
fn child_entry_point() {
    let Ok(role) = std::env::var("LEAKGATE_SERVER_ROLE") else { return };
    // Reports the server, and waits until the parent has seen it running.
    let report = |server: &RedisServer| {
        println!("SERVER {} {}", server.pid(), server.dir().display());
        let _ = std::io::stdin().read_line(&mut String::new());
    };
    match role.as_str() {
        "panic" => {
            let server = RedisServer::start();
            report(&server);
            panic!("a failing test, holding its server");
        }
        "static" => {
            static SERVER: OnceLock<RedisServer> = OnceLock::new();
            report(SERVER.get_or_init(RedisServer::start));
        }
        "hold" => {
            let server = RedisServer::start();
            report(&server);
            std::thread::sleep(Duration::from_secs(120));
        }
        "hold_postgres" => {
            let server = Postgres::start();
            println!("SERVER {} {}", server.pid(), server.dir().display());
            let _ = std::io::stdin().read_line(&mut String::new());
            std::thread::sleep(Duration::from_secs(120));
        }
        "panic_postgres" => {
            static SERVER: OnceLock<Postgres> = OnceLock::new();
            let server = SERVER.get_or_init(Postgres::start);
            println!("SERVER {} {}", server.pid(), server.dir().display());
            let _ = std::io::stdin().read_line(&mut String::new());
            panic!("a failing test, its server in a static");
        }
        _ => panic!("unknown role {role}"),
    }
}

/// Starts a child in `role`; returns it with its server's pid and folder.
fn child(role: &str) -> (Child, Pid, PathBuf) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_entry_point", "--exact", "--nocapture", "--test-threads=1"])
        .env("LEAKGATE_SERVER_ROLE", role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = out.next() {
        let line = line.unwrap();
        // libtest may print "test child_entry_point ... " before the child's own line.
        if let Some(at) = line.find("SERVER ") {
            let mut fields = line[at + 7..].split(' ');
            let pid = Pid::from_raw(fields.next().unwrap().parse().unwrap());
            let dir = PathBuf::from(fields.next().unwrap());
            assert!(!has_exited(pid) && dir.is_dir(), "the child's server runs");
            // Let the child go on to its end.
            let _ = child.stdin.take().unwrap().write_all(b"seen\n");
            // Read the rest, so that the child's harness can print its summary.
            std::thread::spawn(move || out.for_each(drop));
            return (child, pid, dir);
        }
    }
    let status = child.wait();
    panic!("the child reported no server ({status:?})");
}

/// Waits (at most 10 s) until the server process and its folder are gone.
fn assert_gone(pid: Pid, dir: &std::path::Path) {
    let start = Instant::now();
    while !has_exited(pid) || dir.exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "server {pid} or {dir:?} left behind");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_is_stopped_and_its_folder_removed_when_dropped() {
    let server = RedisServer::start();
    let (pid, dir) = (server.pid(), server.dir().to_owned());
    drop(server);
    // Drop waits for the watchdog, so the server is gone at once.
    assert!(has_exited(pid), "server {pid} still runs");
    assert_gone(pid, &dir);
}

#[test]
fn a_panicking_test_leaves_no_server_behind() {
    let (mut child, pid, dir) = child("panic");
    assert!(!child.wait().unwrap().success(), "the child's test failed");
    assert_gone(pid, &dir);
}

#[test]
fn a_server_in_a_static_is_stopped_when_the_test_binary_exits() {
    let (mut child, pid, dir) = child("static");
    assert!(child.wait().unwrap().success());
    assert_gone(pid, &dir);
}

#[test]
fn a_killed_test_binary_leaves_no_server_behind() {
    let (mut child, pid, dir) = child("hold");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let _ = child.wait();
    assert_gone(pid, &dir);
}

#[test]
fn a_paused_server_is_stopped_too() {
    let server = RedisServer::start();
    let (pid, dir) = (server.pid(), server.dir().to_owned());
    server.pause();
    drop(server);
    assert_gone(pid, &dir);
}

#[test]
fn a_killed_test_binary_leaves_no_postgres_behind() {
    let (mut child, pid, dir) = child("hold_postgres");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let _ = child.wait();
    assert_gone(pid, &dir);
}

#[test]
fn a_postgres_in_a_static_is_stopped_when_a_test_panics() {
    let (mut child, pid, dir) = child("panic_postgres");
    assert!(!child.wait().unwrap().success(), "the child's test failed");
    assert_gone(pid, &dir);
}

#[test]
fn a_stopped_postgres_leaves_nothing_behind() {
    let mut server = Postgres::start();
    let (pid, dir) = (server.pid(), server.dir().to_owned());
    server.stop();
    assert!(has_exited(pid), "postgres {pid} still runs");
    assert!(!dir.exists(), "{dir:?} left behind");
}
