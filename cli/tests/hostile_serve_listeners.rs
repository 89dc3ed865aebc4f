//! `leakgate serve`'s listeners against hostile clients, as a process: the accept loops back
//! off when descriptors run out (the review's reproducer, `hostile/`), the connection caps fit
//! the open-files limit (`ulimit -n 128`: 32 RESP connections of 128 descriptors, the 33rd told
//! `-ERR max number of clients reached`), and the secret comes from a file, never the command
//! line.

mod common;

use common::{leakgate, text};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `leakgate serve` started by `sh -c SCRIPT` (`$L` is the binary), killed when dropped.
struct Serve {
    child: Child,
    lines: Vec<String>,
}

impl Serve {
    fn start(script: &str, listeners: usize, envs: &[(&str, &str)]) -> Serve {
        let mut child = Command::new("bash")
            .args(["-c", script])
            .env("L", env!("CARGO_BIN_EXE_leakgate"))
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("bash runs");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let lines = (0..listeners)
            .map(|_| {
                let mut line = String::new();
                stdout.read_line(&mut line).unwrap();
                line.trim().to_string()
            })
            .collect();
        Serve { child, lines }
    }

    /// The address the `name` listener announced.
    fn addr(&self, name: &str) -> String {
        let line = self.lines.iter().find(|l| l.starts_with(name)).expect("announced");
        line.split_once(' ').unwrap().1.to_string()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rules() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, "\"\" = \"1000/s\"\n").unwrap();
    let path = path.to_str().unwrap().to_string();
    (dir, path)
}

/// Sends PING on a new connection: its answer (up to the first line end), and the connection,
/// kept open so that it holds its slot.
fn ping(addr: &str) -> (String, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(b"PING\r\n");
    let mut got = Vec::new();
    let mut byte = [0u8];
    while !got.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => break,
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), s)
}

#[test]
fn serve_accept_loops_back_off_when_descriptors_run_out() {
    let script =
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hostile/serve_accept_spins_on_emfile.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_leakgate"))
        .output()
        .expect("bash runs the reproducer");
    let said = text(&out.stdout);
    eprintln!("{said}");
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
}

#[test]
fn serve_caps_fit_the_open_files_limit() {
    let (_dir, rules) = rules();
    // (128 - 64 reserved) / 2 listeners = 32 connections each.
    let script = format!(
        "ulimit -n 128; exec \"$L\" serve --rules {rules} --resp 127.0.0.1:0 --grpc 127.0.0.1:0"
    );
    let served = Serve::start(&script, 2, &[]);
    let addr = served.addr("resp");
    let (answers, _open): (Vec<String>, Vec<TcpStream>) = (0..40).map(|_| ping(&addr)).unzip();
    let served_count = answers.iter().filter(|a| *a == "+PONG\r\n").count();
    let refused = answers.iter().filter(|a| *a == "-ERR max number of clients reached\r\n").count();
    assert_eq!((served_count, refused), (32, 8), "{answers:?}");
}

#[test]
fn serve_reads_its_secret_from_a_file_or_the_environment() {
    let (dir, rules) = rules();
    let out = leakgate()
        .args([
            "serve",
            "--rules",
            &rules,
            "--resp",
            "127.0.0.1:0",
            "--auth-file",
            "/no/such/secret",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("auth file /no/such/secret: cannot read it"),
        "{}",
        text(&out.stderr)
    );
    let empty = leakgate()
        .args(["serve", "--rules", &rules, "--resp", "127.0.0.1:0"])
        .env("LEAKGATE_AUTH_FILE", "")
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(1));
    assert!(text(&empty.stderr).contains("LEAKGATE_AUTH_FILE is set but empty"));
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "from-the-environment\n").unwrap();
    let script = format!("exec \"$L\" serve --rules {rules} --resp 127.0.0.1:0");
    let served = Serve::start(&script, 1, &[("LEAKGATE_AUTH_FILE", secret.to_str().unwrap())]);
    let addr = served.addr("resp");
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"LG.RULE x\r\nAUTH from-the-environment\r\n").unwrap();
    let mut got = [0u8; 37];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got[..], b"-NOAUTH Authentication required.\r\n+OK");
}
