//! What the serve tests share: a rules file in a temporary folder, an in-process service on free
//! loopback ports (on a `ManualClock` or the real clock) stopped when dropped, and the exact
//! model of `CL.THROTTLE`; a real `redis-server`, headless Chromium, free ports and the seeded
//! PRNG are `leakgate-test-support`'s, re-exported.
#![allow(dead_code, unreachable_pub)]

pub mod cell_model;

#[allow(unused_imports)] // each test file uses its own part
pub use leakgate_test_support::{chromium, free_port, RedisServer, Rng};

use leakgate::{Clock, ManualClock};
use leakgate_serve::{Config, Running};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

/// A rules file in a temporary folder of its own (removed when dropped).
pub struct RulesFile {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl RulesFile {
    pub fn new(name: &str, text: &str) -> RulesFile {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write the rules file");
        RulesFile { dir, path }
    }

    pub fn toml(text: &str) -> RulesFile {
        RulesFile::new("rules.toml", text)
    }

    /// Replaces the file's text (by renaming a new file onto it, as editors do).
    pub fn write(&self, text: &str) {
        let next = self.dir.path().join("next");
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, &self.path).unwrap();
    }
}

/// Any free loopback address.
pub fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A service running in this test process on its own runtime; shut down when dropped.
pub struct Served<C: Clock + 'static> {
    pub runtime: tokio::runtime::Runtime,
    running: Option<Running<C>>,
    pub rules: RulesFile,
}

impl<C: Clock + Clone + 'static> Served<C> {
    pub fn from_parts(
        runtime: tokio::runtime::Runtime,
        running: Running<C>,
        rules: RulesFile,
    ) -> Self {
        Served { runtime, running: Some(running), rules }
    }

    pub fn running(&self) -> &Running<C> {
        self.running.as_ref().expect("running")
    }

    pub fn resp(&self) -> SocketAddr {
        self.running().resp_addr().expect("a RESP listener")
    }

    pub fn grpc(&self) -> SocketAddr {
        self.running().grpc_addr().expect("a gRPC listener")
    }

    pub fn http(&self) -> SocketAddr {
        self.running().http_addr().expect("an HTTP listener")
    }

    /// Shuts the service down gracefully now.
    pub fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            self.runtime.block_on(running.shutdown());
        }
    }
}

impl<C: Clock + 'static> Drop for Served<C> {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            // Bounded: a test that failed mid-call must not hang its binary here.
            let _ = self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), running.shutdown()).await
            });
        }
    }
}

/// A runtime of two worker threads, for one service.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Serves `rules` (a file named `name`) with `config` (its rules path is set here) on `clock`.
pub fn serve_with<C: Clock + Clone + 'static>(
    name: &str,
    rules: &str,
    clock: C,
    config: impl FnOnce(Config) -> Config,
) -> Served<C> {
    let rules = RulesFile::new(name, rules);
    let runtime = runtime();
    let config = config(Config::new(&rules.path));
    let running = runtime
        .block_on(leakgate_serve::start_with_clock(config, clock))
        .unwrap_or_else(|e| panic!("the service did not start: {e}"));
    Served { runtime, running: Some(running), rules }
}

/// Serves TOML `rules` on every listener, on a manual clock.
pub fn serve_manual(rules: &str, clock: &ManualClock) -> Served<ManualClock> {
    serve_with("rules.toml", rules, clock.clone(), |c| {
        c.resp(any_port()).grpc(any_port()).http(any_port())
    })
}

/// A raw TCP connection to a RESP listener, with a read deadline.
pub fn raw(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads `len` bytes (or what arrived before the read deadline) and returns them as text.
pub fn read_exact_text(stream: &mut TcpStream, len: usize) -> String {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match stream.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    String::from_utf8_lossy(&buf[..got]).into_owned()
}

/// Reads one whole RESP2 or RESP3 reply (nested arrays and maps included) and returns its
/// text.
pub fn read_reply(stream: &mut TcpStream) -> String {
    fn line(stream: &mut TcpStream, out: &mut Vec<u8>) -> Vec<u8> {
        let start = out.len();
        let mut byte = [0u8];
        while !out[start..].ends_with(b"\r\n") {
            assert_eq!(stream.read(&mut byte).expect("a reply"), 1, "the connection closed");
            out.push(byte[0]);
        }
        out[start..out.len() - 2].to_vec()
    }
    fn value(stream: &mut TcpStream, out: &mut Vec<u8>) {
        let head = line(stream, out);
        let n: i64 = std::str::from_utf8(&head[1..]).unwrap_or("0").parse().unwrap_or(0);
        match head[0] {
            b'*' => (0..n.max(0)).for_each(|_| value(stream, out)),
            b'%' => (0..2 * n.max(0)).for_each(|_| value(stream, out)),
            b'$' if n >= 0 => {
                let mut body = vec![0u8; n as usize + 2];
                stream.read_exact(&mut body).unwrap();
                out.extend_from_slice(&body);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    value(stream, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Sends `bytes`, then reads the reply of exactly the length of `want` and compares.
pub fn exchange(stream: &mut TcpStream, bytes: &[u8], want: &str) {
    stream.write_all(bytes).unwrap();
    let got = read_exact_text(stream, want.len());
    assert_eq!(got, want, "after sending {:?}", String::from_utf8_lossy(bytes));
}

/// `GET path` over HTTP/1.1 on a plain socket; the body (panics unless 200).
pub fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = raw(addr);
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).expect("an HTTP response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

/// `GET path` over HTTP/1.1 on a plain socket: the status and the body, whatever the status.
pub fn http_get_any(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = raw(addr);
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).expect("an HTTP response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status");
    (status, body.to_string())
}
