//! `leakgate serve` as a process: it announces its listeners, reloads on SIGHUP, stops
//! gracefully on SIGTERM, and refuses a bad start with a clear message.

mod common;

use common::{leakgate, text};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A `leakgate serve` process, killed when dropped.
struct Serve {
    child: Child,
    addrs: Vec<(String, String)>,
}

impl Serve {
    fn start(args: &[&str]) -> Serve {
        let mut child = leakgate()
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the leakgate binary runs");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut addrs = Vec::new();
        let listeners =
            args.iter().filter(|a| matches!(**a, "--grpc" | "--resp" | "--http")).count();
        for _ in 0..listeners {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            let (name, addr) =
                line.trim().split_once(' ').unwrap_or_else(|| panic!("announced {line:?}"));
            addrs.push((name.to_string(), addr.to_string()));
        }
        Serve { child, addrs }
    }

    fn addr(&self, name: &str) -> &str {
        &self.addrs.iter().find(|(n, _)| n == name).unwrap().1
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, signal).unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ask(stream: &mut TcpStream, command: &str) -> String {
    stream.write_all(format!("{command}\r\n").as_bytes()).unwrap();
    let mut reply = [0u8; 256];
    let n = stream.read(&mut reply).unwrap();
    String::from_utf8_lossy(&reply[..n]).into_owned()
}

#[test]
fn serves_reloads_on_sighup_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("leakgate-cli-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, "api = \"10/s\"\n").unwrap();
    let serve = Serve::start(&[
        "--rules",
        rules.to_str().unwrap(),
        "--resp",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--poll",
        "0",
    ]);
    let mut s = TcpStream::connect(serve.addr("resp")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(ask(&mut s, "PING"), "+PONG\r\n");
    assert!(ask(&mut s, "LG.RULE api/x").contains("10/s"));
    std::fs::write(&rules, "api = \"3/s\"\n").unwrap();
    serve.signal(rustix::process::Signal::HUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ask(&mut s, "LG.RULE api/x").contains("3/s") {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGTERM: a graceful stop, exit 0, the port closed.
    let mut serve = serve;
    serve.signal(rustix::process::Signal::TERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "SIGTERM did not stop the service");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(TcpStream::connect(serve.addr("resp")).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_start_exits_1_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("leakgate-cli-serve-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, "api = \"10/fortnight\"\n").unwrap();
    let out = leakgate()
        .args(["serve", "--rules", rules.to_str().unwrap(), "--resp", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("fortnight"), "{}", text(&out.stderr));
    let out = leakgate().args(["serve", "--rules", rules.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("nothing to serve"), "{}", text(&out.stderr));
    let out =
        leakgate().args(["serve", "--rules", "x.toml", "--resp", "nowhere"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rules_push_stores_a_version_for_the_fleet() {
    // A redis-server of this test's own, on a free port, killed at the end.
    let redis = leakgate_test_support::RedisServer::start();
    let url = redis.url();
    let dir = std::env::temp_dir().join(format!("leakgate-cli-push-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, "api = \"10/s\"\n").unwrap();
    let serve = Serve::start(&[
        "--rules",
        rules.to_str().unwrap(),
        "--resp",
        "127.0.0.1:0",
        "--redis",
        &url,
    ]);
    let pushed = dir.join("pushed.toml");
    std::fs::write(&pushed, "api = \"2/s\"\n\"\" = \"1/min\"\n").unwrap();
    for version in 1..=2 {
        let out = leakgate()
            .args(["rules", "push", "--redis", &url, pushed.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).ends_with(&format!("2 rules pushed as version {version}\n")),
            "{}",
            text(&out.stdout)
        );
    }
    let mut s = TcpStream::connect(serve.addr("resp")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while !ask(&mut s, "LG.RULE api/x").contains("2/s") {
        assert!(Instant::now() < deadline, "the pushed rules never came into force");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A bad file is refused before anything is stored.
    std::fs::write(&pushed, "api = \"2/fortnight\"\n").unwrap();
    let out = leakgate()
        .args(["rules", "push", "--redis", &url, pushed.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("fortnight"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rules_push_to_a_cluster_needs_one_target_and_says_why_it_failed() {
    let dir =
        std::env::temp_dir().join(format!("leakgate-cli-push-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, "api = \"10/s\"\n").unwrap();
    let file = rules.to_str().unwrap();
    // Neither target, or both: a usage error.
    let out = leakgate().args(["rules", "push", file]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let both = ["rules", "push", "--redis", "redis://127.0.0.1:1/", "--redis-cluster"];
    let out = leakgate().args(both).args(["redis://127.0.0.1:1/", file]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // serve takes one Redis or one cluster, not both.
    let out = leakgate()
        .args(["serve", "--rules", file, "--redis", "redis://127.0.0.1:1/"])
        .args(["--redis-cluster", "redis://127.0.0.1:1/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // Seeds that do not answer: exit 1 with the reason, within the connect timeouts.
    let seeds = "redis://127.0.0.1:1/,redis://127.0.0.1:2/";
    let out = leakgate().args(["rules", "push", "--redis-cluster", seeds, file]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).starts_with("leakgate rules push: "), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_and_rules_push_explain_themselves() {
    let out = leakgate().args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    for says in [
        "--rules",
        "--grpc",
        "--resp",
        "--http",
        "--redis",
        "CL.THROTTLE",
        "LG.CHECK",
        "SIGHUP",
        "Exit status",
    ] {
        assert!(text(&out.stdout).contains(says), "serve --help lacks {says:?}");
    }
    let out = leakgate().args(["rules", "push", "--help"]).output().unwrap();
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("--redis <URL>"));
    for (args, says) in [
        (&["serve", "--resp", "127.0.0.1:0"][..], "--rules"),
        (&["serve", "--rules", "r.toml", "--redis-deadline", "5ms"], "--redis"),
        (&["serve", "--rules", "r.toml", "--poll", "soon"], "\"soon\" is not a duration"),
        (&["rules", "push", "r.toml"], "--redis"),
    ] {
        let out = leakgate().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains(says), "{args:?}: {}", text(&out.stderr));
    }
}
