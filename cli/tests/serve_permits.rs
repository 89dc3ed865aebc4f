//! `LG.ACQUIRE` / `LG.RELEASE` against real `leakgate serve` processes: the exact reply shapes,
//! argument errors, auth, a permit that returns after its TTL, and, with `--redis`, never more
//! than `max` held across two instances sharing one real redis-server.

mod common;

use common::leakgate;
use leakgate_test_support::RedisServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A `leakgate serve --resp` process, killed when dropped.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(rules: &str, extra: &[&str]) -> Serve {
        let mut child = leakgate()
            .args(["serve", "--rules", rules, "--resp", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the leakgate binary runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().split_once(' ').expect("announced").1.to_string();
        Serve { child, addr }
    }

    fn client(&self) -> Client {
        let s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client { reader: BufReader::new(s.try_clone().unwrap()), writer: s }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// A RESP reply, written flat: integers and bulk strings as they are, arrays as `[a, b]`, a
/// simple string `+x`, an error `-x`.
impl Client {
    fn ask(&mut self, args: &[&str]) -> String {
        let mut cmd = format!("*{}\r\n", args.len());
        for a in args {
            cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.writer.write_all(cmd.as_bytes()).unwrap();
        self.value()
    }

    fn value(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            ":" => rest.to_string(),
            "*" => {
                let n: usize = rest.parse().unwrap();
                let items: Vec<String> = (0..n).map(|_| self.value()).collect();
                format!("[{}]", items.join(", "))
            }
            "$" => {
                let n: usize = rest.parse().unwrap();
                let mut bytes = vec![0; n + 2];
                self.reader.read_exact(&mut bytes).unwrap();
                String::from_utf8(bytes[..n].to_vec()).unwrap()
            }
            _ => line.to_string(),
        }
    }
}

/// `[acquired, token, in_flight, max, retry_after_ms]`, split.
fn fields(reply: &str) -> Vec<String> {
    let inner = reply.strip_prefix('[').and_then(|r| r.strip_suffix(']')).expect(reply);
    inner.split(", ").map(str::to_string).collect()
}

fn rules_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.toml"), "api = \"10/s\"\n").unwrap();
    dir
}

fn path(dir: &tempfile::TempDir) -> String {
    dir.path().join("rules.toml").to_str().unwrap().to_string()
}

#[test]
fn acquire_and_release_in_memory() {
    let dir = rules_file();
    let serve = Serve::start(&path(&dir), &[]);
    let mut c = serve.client();
    let a = fields(&c.ask(&["LG.ACQUIRE", "db", "2", "60000"]));
    assert_eq!((a[0].as_str(), a[2].as_str(), a[3].as_str(), a[4].as_str()), ("1", "1", "2", "0"));
    assert_eq!(a[1].len(), 32);
    assert!(a[1].bytes().all(|b| b.is_ascii_hexdigit()));
    let b = fields(&c.ask(&["LG.ACQUIRE", "db", "2", "60000"]));
    assert_eq!(b[0], "1");
    assert_eq!(b[2], "2");
    assert_ne!(a[1], b[1]);
    let no = fields(&c.ask(&["lg.acquire", "db", "2", "60000"]));
    assert_eq!(&no[..4], ["0", "", "2", "2"]);
    let retry: u64 = no[4].parse().unwrap();
    assert!(retry > 0 && retry <= 60_000, "{retry}");
    // Another client, another key.
    assert_eq!(fields(&serve.client().ask(&["LG.ACQUIRE", "other", "1", "60000"]))[0], "1");
    assert_eq!(c.ask(&["LG.RELEASE", "db", &a[1]]), "1");
    assert_eq!(c.ask(&["LG.RELEASE", "db", &a[1]]), "0");
    assert_eq!(c.ask(&["LG.RELEASE", "db", "nonsense"]), "0");
    assert_eq!(c.ask(&["LG.RELEASE", "other", &b[1]]), "0", "a token of another key");
    assert_eq!(fields(&c.ask(&["LG.ACQUIRE", "db", "2", "60000"]))[0], "1");
    // A permit not released comes back after its TTL.
    let short = fields(&c.ask(&["LG.ACQUIRE", "short", "1", "200"]));
    assert_eq!(short[0], "1");
    assert_eq!(fields(&c.ask(&["LG.ACQUIRE", "short", "1", "200"]))[0], "0");
    let until = Instant::now() + Duration::from_secs(20);
    while fields(&c.ask(&["LG.ACQUIRE", "short", "1", "200"]))[0] != "1" {
        assert!(Instant::now() < until, "the permit returns by its TTL");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.ask(&["LG.RELEASE", "short", &short[1]]), "0", "expired");
}

#[test]
fn argument_errors() {
    let dir = rules_file();
    let serve = Serve::start(&path(&dir), &[]);
    let mut c = serve.client();
    let cases: [(&[&str], &str); 9] = [
        (&["LG.ACQUIRE", "k", "0", "100"], "-ERR max must be between 1 and 4294967295"),
        (&["LG.ACQUIRE", "k", "4294967296", "100"], "-ERR max must be between 1 and 4294967295"),
        (&["LG.ACQUIRE", "k", "-1", "100"], "-ERR max must be between 1 and 4294967295"),
        (&["LG.ACQUIRE", "k", "1", "0"], "-ERR ttl_ms must be between 1 and 4294967295"),
        (&["LG.ACQUIRE", "k", "x", "100"], "-ERR value is not an integer or out of range"),
        (
            &["LG.ACQUIRE", "k", "1", "99999999999999999999"],
            "-ERR value is not an integer or out of range",
        ),
        (&["LG.ACQUIRE", "k", "1"], "-ERR wrong number of arguments for 'lg.acquire' command"),
        (&["LG.RELEASE", "k"], "-ERR wrong number of arguments for 'lg.release' command"),
        (&["LG.RELEASE", "k", "t", "x"], "-ERR wrong number of arguments for 'lg.release' command"),
    ];
    for (args, want) in cases {
        assert_eq!(c.ask(args), want, "{args:?}");
    }
    let long = "k".repeat(5000);
    assert!(c.ask(&["LG.ACQUIRE", &long, "1", "100"]).starts_with("-ERR "));
    // Nothing was taken by the refusals.
    let first = fields(&c.ask(&["LG.ACQUIRE", "k", "1", "100"]));
    assert_eq!((first[0].as_str(), first[2].as_str()), ("1", "1"));
}

#[test]
fn auth_applies() {
    let dir = rules_file();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let serve = Serve::start(&path(&dir), &["--auth-file", secret.to_str().unwrap()]);
    let mut c = serve.client();
    assert!(c.ask(&["LG.ACQUIRE", "k", "1", "100"]).starts_with("-NOAUTH"));
    assert!(c.ask(&["LG.RELEASE", "k", "t"]).starts_with("-NOAUTH"));
    assert_eq!(c.ask(&["AUTH", "s3cret"]), "+OK");
    assert_eq!(fields(&c.ask(&["LG.ACQUIRE", "k", "1", "100"]))[0], "1");
}

#[test]
fn with_redis_two_instances_share_the_permits() {
    let dir = rules_file();
    let redis = RedisServer::start();
    let url = redis.url();
    let one = Serve::start(&path(&dir), &["--redis", &url]);
    let two = Serve::start(&path(&dir), &["--redis", &url]);
    let (mut a, mut b) = (one.client(), two.client());
    let first = fields(&a.ask(&["LG.ACQUIRE", "gpu", "2", "60000"]));
    assert_eq!((first[0].as_str(), first[2].as_str(), first[3].as_str()), ("1", "1", "2"));
    assert_eq!(first[1].len(), 32);
    let second = fields(&b.ask(&["LG.ACQUIRE", "gpu", "2", "60000"]));
    assert_eq!((second[0].as_str(), second[2].as_str()), ("1", "2"));
    for c in [&mut a, &mut b] {
        let no = fields(&c.ask(&["LG.ACQUIRE", "gpu", "2", "60000"]));
        assert_eq!(&no[..4], ["0", "", "2", "2"]);
    }
    // Released through the other instance.
    assert_eq!(b.ask(&["LG.RELEASE", "gpu", &first[1]]), "1");
    assert_eq!(a.ask(&["LG.RELEASE", "gpu", &first[1]]), "0");
    assert_eq!(a.ask(&["LG.RELEASE", "gpu", "not-a-token"]), "0");
    assert_eq!(fields(&a.ask(&["LG.ACQUIRE", "gpu", "2", "60000"]))[0], "1");
    assert_eq!(
        a.ask(&["LG.ACQUIRE", "gpu", "0", "60000"]),
        "-ERR max must be between 1 and 4294967295"
    );
}
