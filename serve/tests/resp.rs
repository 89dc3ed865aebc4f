//! The Redis protocol listener against real clients: the `redis` crate and `redis-cli`, replies
//! compared with the exact model of `CL.THROTTLE`; pipelining; malformed frames; huge claimed
//! lengths; many connections.

mod support;

use leakgate::ManualClock;
use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;
use support::cell_model::CellModel;
use support::{exchange, raw, serve_manual, Rng};

/// Quotas whose emission interval is a whole number of nanoseconds (where every reported time
/// matches the model exactly): (max_burst, count, period_s).
const QUOTAS: [(u64, u64, u64); 6] =
    [(15, 30, 60), (0, 1, 1), (4, 10, 1), (2, 5, 30), (9, 3, 3), (0, 2, 5)];

fn cell(con: &mut redis::Connection, key: &str, q: (u64, u64, u64), n: Option<u64>) -> Vec<i64> {
    let mut cmd = redis::cmd("CL.THROTTLE");
    cmd.arg(key).arg(q.0).arg(q.1).arg(q.2);
    if let Some(n) = n {
        cmd.arg(n);
    }
    cmd.query(con).expect("CL.THROTTLE")
}

#[test]
fn cl_throttle_matches_the_exact_model_through_the_redis_crate() {
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_000));
    let served = serve_manual("", &clock);
    let client = redis::Client::open(format!("redis://{}/", served.resp())).unwrap();
    let mut con = client.get_connection().expect("a connection");
    let mut model = CellModel::default();
    let mut rng = Rng::new(19);
    let keys = ["user123", "user/7", "caf\u{e9}"];
    for step in 0..1500 {
        match rng.below(4) {
            0 => clock.advance(Duration::from_millis(rng.below(4000))),
            1 => clock.advance(Duration::from_nanos(rng.below(2_000_000_000))),
            _ => {}
        }
        let key = keys[rng.below(3) as usize];
        let q = QUOTAS[rng.below(QUOTAS.len() as u64) as usize];
        let n = match rng.below(6) {
            0 => None,
            1 => Some(0),
            2 => Some(q.0 + 2), // above the bucket: never conforms
            _ => Some(rng.below(3) + 1),
        };
        let got = cell(&mut con, key, q, n);
        let now = clock.now_ns_for_tests();
        let want = model.throttle(now, key, q.0, q.1, q.2, n.unwrap_or(1));
        assert_eq!(got, want, "step {step}: CL.THROTTLE {key} {q:?} {n:?} at {now} ns");
    }
}

/// `ManualClock`'s reading, as the server sees it.
trait Now {
    fn now_ns_for_tests(&self) -> u64;
}

impl Now for ManualClock {
    fn now_ns_for_tests(&self) -> u64 {
        leakgate::Clock::now_ns(self)
    }
}

#[test]
fn redis_cells_readme_example_answers_as_documented_but_exact() {
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    let client = redis::Client::open(format!("redis://{}/", served.resp())).unwrap();
    let mut con = client.get_connection().unwrap();
    // 16 at once, then one every 2 s.
    assert_eq!(cell(&mut con, "user123", (15, 30, 60), None), [0, 16, 15, -1, 2]);
    for _ in 0..15 {
        assert_eq!(cell(&mut con, "user123", (15, 30, 60), None)[0], 0);
    }
    assert_eq!(cell(&mut con, "user123", (15, 30, 60), None), [1, 16, 0, 2, 32]);
    clock.advance(Duration::from_millis(1100)); // 0.9 s left: redis-cell would say 0
    assert_eq!(cell(&mut con, "user123", (15, 30, 60), None), [1, 16, 0, 1, 31]);
    clock.advance(Duration::from_millis(900));
    assert_eq!(cell(&mut con, "user123", (15, 30, 60), None), [0, 16, 0, -1, 32]);
    assert_eq!(cell(&mut con, "user123", (15, 30, 60), Some(0)), [0, 16, 0, -1, 32]);
    assert_eq!(cell(&mut con, "user123", (15, 30, 60), Some(17)), [1, 16, 0, -1, 32]);
}

/// redis-cli's raw output (one value per line when stdout is not a terminal).
fn redis_cli(port: u16, args: &[&str]) -> Vec<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli (Debian package redis-tools; scripts/ensure-redis.sh installs it)");
    assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn redis_cli_gets_the_models_answers() {
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    let port = served.resp().port();
    assert_eq!(redis_cli(port, &["PING"]), ["PONG"]);
    let mut model = CellModel::default();
    let mut rng = Rng::new(7);
    for step in 0..40 {
        clock.advance(Duration::from_millis(rng.below(1500)));
        let q = QUOTAS[rng.below(QUOTAS.len() as u64) as usize];
        let n = rng.below(3);
        let args = [q.0.to_string(), q.1.to_string(), q.2.to_string(), n.to_string()];
        let mut argv = vec!["CL.THROTTLE", "cli-key"];
        argv.extend(args.iter().map(String::as_str));
        let got: Vec<i64> = redis_cli(port, &argv).iter().map(|l| l.parse().unwrap()).collect();
        let want = model.throttle(clock.now_ns_for_tests(), "cli-key", q.0, q.1, q.2, n);
        assert_eq!(got, want, "step {step}: {argv:?}");
    }
    // A file of commands through --pipe-like stdin: replies in order.
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(
                b"CL.THROTTLE piped 1 1 60\nCL.THROTTLE piped 1 1 60\nCL.THROTTLE piped 1 1 60\n",
            )?;
            child.wait_with_output()
        })
        .unwrap();
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(
        lines,
        ["0", "2", "1", "-1", "60", "0", "2", "0", "-1", "120", "1", "2", "0", "60", "120"]
    );
}

#[test]
fn pipelined_commands_are_answered_in_order() {
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    // 1,000 commands in one write: the first 5 admitted, the others refused, each in order,
    // interleaved with PINGs whose replies must sit between them.
    let mut stream = raw(served.resp());
    let mut request = Vec::new();
    let mut want = String::new();
    let mut model = CellModel::default();
    for i in 0..1000 {
        if i % 10 == 0 {
            request.extend_from_slice(b"*2\r\n$4\r\nPING\r\n$3\r\nn\xc2\xb0\r\n");
            want.push_str("$3\r\nn\u{b0}\r\n");
        }
        request.extend_from_slice(b"*6\r\n$11\r\nCL.THROTTLE\r\n$2\r\nkp\r\n$1\r\n4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n1\r\n");
        let r = model.throttle(0, "kp", 4, 1, 10, 1);
        want.push_str(&format!(
            "*5\r\n:{}\r\n:{}\r\n:{}\r\n:{}\r\n:{}\r\n",
            r[0], r[1], r[2], r[3], r[4]
        ));
    }
    exchange(&mut stream, &request, &want);
    // The same through the redis crate's pipeline.
    let client = redis::Client::open(format!("redis://{}/", served.resp())).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut pipe = redis::pipe();
    for _ in 0..50 {
        pipe.cmd("CL.THROTTLE").arg("kq").arg(2).arg(3).arg(3).arg(1);
    }
    let replies: Vec<Vec<i64>> = pipe.query(&mut con).unwrap();
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(*reply, model.throttle(0, "kq", 2, 3, 3, 1), "pipelined call {i}");
    }
}

#[test]
fn malformed_frames_get_errors_and_the_connection_stays() {
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    let mut s = raw(served.resp());
    let cases: [(&[u8], &str); 10] = [
        (b"*x\r\n", "-Protocol error: invalid multibulk length\r\n"),
        (
            b"*2\r\n$4\r\nPING\r\nPING\r\n",
            "-Protocol error: expected '$' for a bulk string\r\n+PONG\r\n",
        ),
        (b"*1\r\n$-7\r\n", "-Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$2\r\nabcd\r\n", "-Protocol error: expected CRLF after a bulk string\r\n"),
        (b"NOSUCH a b\r\n", "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b'\r\n"),
        (b"CL.THROTTLE k 1 1\r\n", "-ERR wrong number of arguments for 'cl.throttle' command\r\n"),
        (b"CL.THROTTLE k 1 x 1\r\n", "-ERR value is not an integer or out of range\r\n"),
        (b"CL.THROTTLE k -1 1 1\r\n", "-ERR max_burst must be 0 or more\r\n"),
        (
            b"CL.THROTTLE k 1 0 1\r\n",
            "-ERR invalid CL.THROTTLE quota: count and period must be at least 1\r\n",
        ),
        (
            b"CL.THROTTLE k 1 1 1 99999999999999999999\r\n",
            "-ERR value is not an integer or out of range\r\n",
        ),
    ];
    for (bytes, want) in cases {
        exchange(&mut s, bytes, want);
        exchange(&mut s, b"PING\r\n", "+PONG\r\n");
    }
    // The rest of a bad frame's line is dropped; bytes it still sends are read as commands.
    exchange(
        &mut s,
        b"*1\r\n$3\r\nab\r\n\r\nPING\r\n",
        "-Protocol error: expected CRLF after a bulk string\r\n+PONG\r\n",
    );
    // A quota beyond what leakgate can keep exact: an error, not a panic.
    s.write_all(b"CL.THROTTLE big 9223372036854775807 1 31536000\r\n").unwrap();
    let line = read_line(&mut s);
    assert!(line.starts_with("-ERR invalid CL.THROTTLE quota"), "{line}");
    exchange(&mut s, b"PING\r\n", "+PONG\r\n");
}

/// One reply line, CRLF included.
fn read_line(s: &mut std::net::TcpStream) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8];
    while !line.ends_with(b"\r\n") && s.read(&mut byte).unwrap() == 1 {
        line.push(byte[0]);
    }
    String::from_utf8_lossy(&line).into_owned()
}

/// This process's resident memory, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn huge_claimed_lengths_are_refused_and_never_reserved() {
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    let mut s = raw(served.resp());
    exchange(&mut s, b"*99999999999\r\n", "-Protocol error: too many arguments in one command\r\n");
    exchange(&mut s, b"*1\r\n$99999999999\r\n", "-Protocol error: argument too long\r\n");
    exchange(&mut s, b"*1\r\n$999999999999999999999999\r\n", "-Protocol error: line too long\r\n");
    exchange(&mut s, b"PING\r\n", "+PONG\r\n");
    // 300 connections each claim 1,024 arguments of 512 KiB (150 GiB in all) and send a few
    // bytes: the server holds only what arrived.
    let before = rss();
    let mut claimants = Vec::new();
    for _ in 0..300 {
        let mut c = raw(served.resp());
        c.write_all(b"*1024\r\n$524288\r\nonly these bytes").unwrap();
        claimants.push(c);
    }
    // Every claimant has been read: a PING on each of a few fresh connections goes through.
    std::thread::sleep(Duration::from_millis(300));
    let grown = rss().saturating_sub(before);
    assert!(grown < 96 << 20, "the server grew by {} MiB on claims alone", grown >> 20);
    exchange(&mut s, b"PING\r\n", "+PONG\r\n");
}

fn raise_fd_limit(want: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < want {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, want.min(hard), hard);
    }
}

#[test]
fn a_thousand_connections_opened_and_dropped() {
    raise_fd_limit(4096);
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    for round in 0..2 {
        let t0 = std::time::Instant::now();
        let mut open = Vec::new();
        for _ in 0..1000 {
            open.push(raw(served.resp()));
        }

        for (i, s) in open.iter_mut().enumerate() {
            s.write_all(b"CL.THROTTLE many 0 1 60\r\n")
                .unwrap_or_else(|e| panic!("{round}/{i}: {e}"));
        }
        let mut admitted = 0;
        for s in open.iter_mut() {
            let mut reply = [0u8; 64];
            let n = s.read(&mut reply).unwrap();
            admitted += usize::from(reply[..n].starts_with(b"*5\r\n:0\r\n"));
        }
        eprintln!("1,000 connections opened and answered in {:?}", t0.elapsed());
        // One key, a burst of 1, no time passing: one of the two thousand calls is admitted.
        assert_eq!(admitted, usize::from(round == 0), "round {round}");
        drop(open);
    }
    let mut s = raw(served.resp());
    exchange(&mut s, b"PING\r\n", "+PONG\r\n");
}

#[test]
fn multi_queues_at_most_a_mebibyte_and_a_spoiled_transaction_is_discarded() {
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    let mut s = raw(served.resp());
    let big = "x".repeat(400 * 1024);
    let echo = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{big}\r\n", big.len());
    exchange(&mut s, b"MULTI\r\n", "+OK\r\n");
    exchange(&mut s, echo.as_bytes(), "+QUEUED\r\n");
    exchange(&mut s, echo.as_bytes(), "+QUEUED\r\n");
    // The third would pass 1 MiB: refused, and everything queued is dropped.
    exchange(&mut s, echo.as_bytes(), "-ERR MULTI may queue at most 1048576 bytes of commands\r\n");
    exchange(&mut s, b"CL.THROTTLE tx2 0 1 60\r\n", "+QUEUED\r\n");
    exchange(
        &mut s,
        b"EXEC\r\n",
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    // Nothing of it ran: the bucket is whole.
    exchange(&mut s, b"CL.THROTTLE tx2 0 1 60\r\n", "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n");
    // As in Redis: an unknown command, or a wrong number of arguments, spoils it too.
    exchange(&mut s, b"MULTI\r\n", "+OK\r\n");
    exchange(&mut s, b"ECHO\r\n", "-ERR wrong number of arguments for 'echo' command\r\n");
    exchange(
        &mut s,
        b"NOSUCH a\r\n",
        "-ERR unknown command 'NOSUCH', with args beginning with: 'a'\r\n",
    );
    exchange(
        &mut s,
        b"EXEC\r\n",
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    exchange(&mut s, b"EXEC\r\n", "-ERR EXEC without MULTI\r\n");
}

#[test]
fn what_common_clients_send_on_connect_is_answered() {
    let clock = ManualClock::new();
    let served = serve_manual("", &clock);
    let mut s = raw(served.resp());
    exchange(&mut s, b"HELLO 4\r\n", "-NOPROTO unsupported protocol version\r\n");
    // RESP3 (redis-py 8 asks for it by default): a map, then RESP3's null.
    s.write_all(b"HELLO 3\r\n").unwrap();
    let hello = support::read_reply(&mut s);
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n$8\r\nleakgate\r\n"), "{hello}");
    assert!(hello.contains("$5\r\nproto\r\n:3\r\n"), "{hello}");
    exchange(&mut s, b"CLIENT GETNAME\r\n", "_\r\n");
    exchange(&mut s, b"CL.THROTTLE r3 1 1 1\r\n", "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n");
    s.write_all(b"HELLO 2 SETNAME app\r\n").unwrap();
    let mut reply = vec![0u8; 4096];
    let n = s.read(&mut reply).unwrap();
    let text = String::from_utf8_lossy(&reply[..n]);
    assert!(text.starts_with("*14\r\n$6\r\nserver\r\n$8\r\nleakgate\r\n"), "{text}");
    exchange(&mut s, b"CLIENT GETNAME\r\n", "$3\r\napp\r\n");
    exchange(&mut s, b"CLIENT SETINFO LIB-NAME redis-py\r\n", "+OK\r\n");
    exchange(&mut s, b"SELECT 0\r\n", "+OK\r\n");
    exchange(&mut s, b"SELECT 99\r\n", "-ERR DB index is out of range\r\n");
    exchange(
        &mut s,
        b"AUTH secret\r\n",
        "-ERR no password is set on this server: AUTH is not needed\r\n",
    );
    exchange(&mut s, b"COMMAND COUNT\r\n", ":22\r\n");
    // Pipelines that client libraries wrap in MULTI/EXEC by default (redis-py's pipeline()).
    exchange(&mut s, b"MULTI\r\n", "+OK\r\n");
    exchange(&mut s, b"CL.THROTTLE tx 0 1 60\r\n", "+QUEUED\r\n");
    exchange(&mut s, b"CL.THROTTLE tx 0 1 60\r\n", "+QUEUED\r\n");
    exchange(
        &mut s,
        b"EXEC\r\n",
        "*2\r\n*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n*5\r\n:1\r\n:1\r\n:0\r\n:60\r\n:60\r\n",
    );
    exchange(&mut s, b"EXEC\r\n", "-ERR EXEC without MULTI\r\n");
    exchange(&mut s, b"MULTI\r\n", "+OK\r\n");
    exchange(&mut s, b"PING\r\n", "+QUEUED\r\n");
    exchange(&mut s, b"DISCARD\r\n", "+OK\r\n");
    exchange(&mut s, b"COMMAND DOCS\r\n", "*0\r\n");
    exchange(&mut s, b"CONFIG GET databases\r\n", "*0\r\n");
    exchange(&mut s, b"ECHO hi\r\n", "$2\r\nhi\r\n");
    s.write_all(b"INFO\r\n").unwrap();
    let n = s.read(&mut reply).unwrap();
    assert!(String::from_utf8_lossy(&reply[..n]).contains("loading:0\r\n"));
    exchange(&mut s, b"QUIT\r\n", "+OK\r\n");
    assert_eq!(s.read(&mut reply).unwrap(), 0, "QUIT closes the connection");
    // The redis crate's async client, as applications use it.
    served.runtime.block_on(async {
        let client = redis::Client::open(format!("redis://{}/", served.resp())).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.expect("async connection");
        let reply: Vec<i64> = redis::cmd("CL.THROTTLE")
            .arg("async")
            .arg(1)
            .arg(1)
            .arg(1)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(reply, [0, 2, 1, -1, 1]);
        // And over RESP3, as the crate speaks it when asked.
        let resp3 =
            redis::Client::open(format!("redis://{}/?protocol=resp3", served.resp())).unwrap();
        let mut con = resp3.get_multiplexed_async_connection().await.expect("a RESP3 connection");
        let reply: Vec<i64> = redis::cmd("CL.THROTTLE")
            .arg("async")
            .arg(1)
            .arg(1)
            .arg(1)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(reply, [0, 2, 0, -1, 2]);
        let name: Option<String> =
            redis::cmd("CLIENT").arg("GETNAME").query_async(&mut con).await.unwrap();
        assert_eq!(name, None);
    });
}

#[test]
fn lg_commands_check_keys_against_the_rules_file() {
    let clock = ManualClock::new();
    let rules = "\"\" = \"100/s\"\napi = \"2/s\"\n\"api/beta\" = { quota = \"1/s\", shadow = true }\ntenant = \"3/s\"\n";
    let served = serve_manual(rules, &clock);
    let mut s = raw(served.resp());
    exchange(&mut s, b"LG.CHECK api/alice\r\n", "*5\r\n:0\r\n:1\r\n:-1\r\n:500\r\n$3\r\napi\r\n");
    exchange(&mut s, b"LG.CHECK api/alice\r\n", "*5\r\n:0\r\n:0\r\n:-1\r\n:1000\r\n$3\r\napi\r\n");
    exchange(&mut s, b"LG.CHECK api/alice\r\n", "*5\r\n:1\r\n:0\r\n:500\r\n:1000\r\n$3\r\napi\r\n");
    exchange(
        &mut s,
        b"LG.CHECK api/alice 3\r\n",
        "*5\r\n:1\r\n:0\r\n:-2\r\n:1000\r\n$3\r\napi\r\n",
    );
    // A shadow rule never refuses; one that would is left out of the figures (here: none).
    exchange(
        &mut s,
        b"LG.CHECK api/beta/x 1\r\n",
        "*5\r\n:0\r\n:0\r\n:-1\r\n:1000\r\n$8\r\napi/beta\r\n",
    );
    exchange(
        &mut s,
        b"LG.CHECK api/beta/x 1\r\n",
        "*5\r\n:0\r\n:-1\r\n:-1\r\n:0\r\n$8\r\napi/beta\r\n",
    );
    // All or nothing: tenant/a has room, api/bob would too, but api/alice refuses.
    exchange(
        &mut s,
        b"LG.CHECKALL 1 tenant/a api/alice\r\n",
        "*5\r\n:1\r\n:0\r\n:500\r\n:1000\r\n*2\r\n$6\r\ntenant\r\n$3\r\napi\r\n",
    );
    exchange(&mut s, b"LG.CHECK tenant/a 0\r\n", "*5\r\n:0\r\n:3\r\n:-1\r\n:0\r\n$6\r\ntenant\r\n");
    exchange(&mut s, b"LG.RULE api/beta/y\r\n", "*2\r\n$8\r\napi/beta\r\n$12\r\n1/s (shadow)\r\n");
    exchange(&mut s, b"LG.RULE other\r\n", "*2\r\n$0\r\n\r\n$5\r\n100/s\r\n");
    exchange(&mut s, b"LG.CHECK\r\n", "-ERR wrong number of arguments for 'lg.check' command\r\n");
}
