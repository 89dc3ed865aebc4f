//! Rules reloaded while serving: when the file changes and on demand (what SIGHUP does), each
//! key keeping its level; a bad file keeps the rules in force and says why.

mod support;

use leakgate::ManualClock;
use std::time::{Duration, Instant};
use support::{any_port, http_get, raw, read_reply, serve_with};

fn check(s: &mut std::net::TcpStream, key: &str) -> String {
    std::io::Write::write_all(s, format!("LG.CHECK {key}\r\n").as_bytes()).unwrap();
    read_reply(s)
}

/// Waits (at most 10 s) until `key`'s rule, as LG.RULE reports it, is `want`.
fn wait_for_rule(s: &mut std::net::TcpStream, key: &str, want: &str) -> Duration {
    let start = Instant::now();
    loop {
        std::io::Write::write_all(s, format!("LG.RULE {key}\r\n").as_bytes()).unwrap();
        let reply = read_reply(s);
        if reply.contains(want) {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "still {reply:?}, not {want:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_changed_file_is_in_force_within_a_second_and_levels_are_kept() {
    let clock = ManualClock::new();
    let served = serve_with("rules.toml", "api = \"10/s\"\n", clock.clone(), |c| {
        c.resp(any_port()).http(any_port()).watch_every(Duration::from_millis(50))
    });
    let mut s = raw(served.resp());
    assert!(check(&mut s, "api/alice 6").starts_with("*5\r\n:0\r\n:4\r\n"));
    served.rules.write("api = \"1/s burst 8\"\n");
    let took = wait_for_rule(&mut s, "api/alice", "1/s burst 8");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    // The 4 units available carried over, one more: 3 left of 8.
    assert!(check(&mut s, "api/alice").starts_with("*5\r\n:0\r\n:3\r\n"));
    // A bad file: refused, the rules in force stay, and /metrics counts it.
    served.rules.write("api = \"1/fortnight\"\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !http_get(served.http(), "/metrics")
        .contains("leakgate_rules_reloads_total{outcome=\"refused\"} 1")
    {
        assert!(Instant::now() < deadline, "the bad file was never refused");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(check(&mut s, "api/alice").starts_with("*5\r\n:0\r\n:2\r\n"));
    std::io::Write::write_all(&mut s, b"LG.RULE api/alice\r\n").unwrap();
    assert!(read_reply(&mut s).contains("1/s burst 8"));
    let error = served.running().reload().unwrap_err().to_string();
    assert!(error.contains("fortnight") && error.contains("rules.toml"), "{error}");
}

#[test]
fn reload_on_demand_reads_the_file_again() {
    let clock = ManualClock::new();
    // No polling: only reload() (SIGHUP in the CLI) reads the file.
    let served = serve_with("rules.toml", "api = \"10/s\"\n", clock.clone(), |c| {
        c.resp(any_port()).watch_every(Duration::ZERO)
    });
    let mut s = raw(served.resp());
    served.rules.write("api = \"2/s\"\nweb = \"5/s\"\n");
    std::thread::sleep(Duration::from_millis(200));
    std::io::Write::write_all(&mut s, b"LG.RULE api/x\r\n").unwrap();
    assert!(read_reply(&mut s).contains("10/s"), "not reloaded without being asked");
    assert_eq!(served.running().reload().unwrap(), 2);
    std::io::Write::write_all(&mut s, b"LG.RULE web/x\r\n").unwrap();
    assert!(read_reply(&mut s).contains("5/s"));
}

#[test]
fn a_rules_file_may_not_use_reserved_paths() {
    let clock = ManualClock::new();
    let served = serve_with("rules.toml", "api = \"10/s\"\n", clock.clone(), |c| {
        c.resp(any_port()).watch_every(Duration::ZERO)
    });
    served.rules.write("\"~override/1/second\" = \"1000/s\"\n");
    let error = served.running().reload().unwrap_err().to_string();
    assert!(error.contains("reserved"), "{error}");
}

/// The value of the `/metrics` line that starts with `name`.
fn metric(served: &support::Served<ManualClock>, name: &str) -> u64 {
    let text = http_get(served.http(), "/metrics");
    let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

const APPLIED: &str = "leakgate_rules_reloads_total{outcome=\"applied\"}";
const REFUSED: &str = "leakgate_rules_reloads_total{outcome=\"refused\"}";

/// Waits (at most 10 s) until the metric `name` is at least `want`.
fn wait_for_metric(served: &support::Served<ManualClock>, name: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(served, name) < want {
        assert!(Instant::now() < deadline, "{name} never reached {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_file_written_in_two_halves_between_polls_is_never_applied_half() {
    let every = Duration::from_millis(100);
    let full = ["a = \"1/s\"\nb = \"1/s\"\n# one\n", "a = \"1/s\"\nb = \"1/s\"\n# two\n"];
    let served = serve_with("rules.toml", full[1], ManualClock::new(), |c| {
        c.resp(any_port()).http(any_port()).watch_every(every)
    });
    let path = served.rules.path.clone();
    for i in 0..10u64 {
        // At another moment between two polls each time (the last one just applied a file).
        std::thread::sleep(every * ((i * 37) % 100) as u32 / 100);
        // Written in place, in two halves less than a poll apart: a poll may read the first
        // half (which parses, and drops b's limit), but two polls in a row never do.
        std::fs::write(&path, "a = \"1/s\"\n").unwrap();
        std::thread::sleep(every * 7 / 10);
        std::fs::write(&path, full[(i % 2) as usize]).unwrap();
        wait_for_metric(&served, APPLIED, i + 1);
    }
    std::thread::sleep(every * 4);
    assert_eq!(metric(&served, APPLIED), 10, "a half was applied");
    let mut s = raw(served.resp());
    std::io::Write::write_all(&mut s, b"LG.RULE b/x\r\n").unwrap();
    assert!(read_reply(&mut s).contains("1/s"));
}

#[test]
fn an_empty_file_is_never_applied() {
    let every = Duration::from_millis(50);
    let served = serve_with("rules.toml", "a = \"1/s\"\n", ManualClock::new(), |c| {
        c.resp(any_port()).http(any_port()).watch_every(every)
    });
    // Truncated and left so (a writer that stopped between truncating and writing).
    std::fs::write(&served.rules.path, "").unwrap();
    wait_for_metric(&served, REFUSED, 1);
    std::thread::sleep(every * 4);
    assert_eq!((metric(&served, APPLIED), metric(&served, REFUSED)), (0, 1));
    let error = served.running().reload().unwrap_err().to_string();
    assert!(error.contains("empty"), "{error}");
    let mut s = raw(served.resp());
    std::io::Write::write_all(&mut s, b"LG.RULE a/x\r\n").unwrap();
    assert!(read_reply(&mut s).contains("1/s"), "the rules in force stay");
    // A file with only a comment is how to lift every limit.
    served.rules.write("# nothing is limited\n");
    wait_for_metric(&served, APPLIED, 1);
    std::io::Write::write_all(&mut s, b"LG.RULE a/x\r\n").unwrap();
    assert_eq!(read_reply(&mut s), "*2\r\n$-1\r\n$-1\r\n");
}
