//! `CL.THROTTLE`'s buckets through the Redis protocol: one bucket per key whatever quota each
//! call brings (against the exact model, awkward quotas included), bounded in bytes, empty ones
//! swept, keys of at most 4 KiB.

mod support;

use leakgate::{Clock, ManualClock};
use proptest::prelude::*;
use std::io::Write;
use std::time::{Duration, Instant};
use support::cell_model::{CellModel, Ns};
use support::{any_port, exchange, http_get, raw, read_reply, serve_manual, serve_with};

/// `CL.THROTTLE key max_burst count period n` over a raw connection, its five numbers.
fn throttle(s: &mut std::net::TcpStream, key: &str, q: (u64, u64, u64), n: u64) -> [i64; 5] {
    let line = format!("CL.THROTTLE {key} {} {} {} {n}\r\n", q.0, q.1, q.2);
    s.write_all(line.as_bytes()).unwrap();
    let reply = read_reply(s);
    let numbers: Vec<i64> =
        reply.lines().filter_map(|l| l.strip_prefix(':')).map(|n| n.parse().unwrap()).collect();
    numbers.try_into().unwrap_or_else(|_| panic!("{reply:?}"))
}

/// Gcd, for each quota's units (`count / gcd(count, period in ns)`).
fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Quotas with any count up to 1,000 (emission intervals of fractions of a nanosecond),
    /// changing on every call of one key: the replies are the model's while the key's TAT is in
    /// the units it was written in; once a call in other units rounded it up (under 1 ns each
    /// time), never more admitted than the model, a different decision only that close to a
    /// boundary, and times at most a second later (they are rounded up to whole seconds).
    #[test]
    fn replies_follow_the_model_with_a_quota_per_call(
        quotas in prop::collection::vec((0u64..6, 1u64..=1000, 1u64..=30), 1..=3),
        calls in prop::collection::vec((0usize..3, 0usize..2, 0u64..=4, 0u64..3_000_000_000), 1..40),
    ) {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(1_000));
        let served = serve_manual("", &clock);
        let mut s = raw(served.resp());
        let mut model = CellModel::default();
        let mut ahead = [0u64; 2];
        let mut units: [Option<u128>; 2] = [None; 2];
        for (step, &(qi, key, n, advance)) in calls.iter().enumerate() {
            clock.advance(Duration::from_nanos(advance));
            let q = quotas[qi % quotas.len()];
            let d = u128::from(q.1) / gcd(u128::from(q.1), u128::from(q.2) * 1_000_000_000);
            if units[key].is_some_and(|u| u != d) {
                ahead[key] += 1;
            }
            let name = format!("k{key}");
            let now = clock.now_ns();
            let slack = model.slack(now, &name, (q.0, q.1, q.2, n));
            let want = model.throttle(now, &name, q.0, q.1, q.2, n);
            let got = throttle(&mut s, &name, q, n);
            if ahead[key] == 0 {
                prop_assert_eq!(got, want, "step {}", step);
            } else if got != want {
                prop_assert!(got[0] >= want[0], "step {}: admitted what the model refuses", step);
                if got[0] != want[0] {
                    let fit = slack.expect("the model admitted");
                    prop_assert!(fit < Ns::whole(ahead[key]), "step {}", step);
                    break;
                }
                prop_assert!(want[2] - got[2] <= 1 && got[4] - want[4] <= 1, "step {}", step);
            }
            if got[0] == 0 && n > 0 {
                units[key] = Some(d);
            }
        }
    }
}

/// The value of the `/metrics` line that starts with `name`.
fn metric(http: std::net::SocketAddr, name: &str) -> u64 {
    let text = http_get(http, "/metrics");
    let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn new_keys_past_the_key_budget_are_refused_until_buckets_empty() {
    let clock = ManualClock::new();
    let served = serve_with("rules.toml", "", clock.clone(), |c| {
        c.resp(any_port()).http(any_port()).key_memory(1 << 20)
    });
    let mut s = raw(served.resp());
    let key = |i: usize| format!("{i:0>4000}");
    // Each key of 4,000 bytes is charged 4,194: 250 fit in 1 MiB.
    let mut admitted = 0;
    for i in 0..300 {
        let reply = throttle(&mut s, &key(i), (9, 1, 60), 1);
        if reply[0] == 0 {
            admitted += 1;
        } else {
            // As from a full bucket: nothing left, empty in tau, ask again in an interval.
            assert_eq!(reply, [1, 10, 0, 60, 600], "key {i}");
        }
    }
    assert_eq!(admitted, 250);
    assert_eq!(throttle(&mut s, &key(7), (9, 1, 60), 1)[0..3], [0, 10, 8]);
    assert_eq!(metric(served.http(), "leakgate_keys_refused_total"), 50);
    let used = metric(served.http(), "leakgate_key_memory_bytes ");
    assert!(used <= 1 << 20 && used > (1 << 20) - 4194, "{used}");
    // Once their buckets are empty, the sweeper (every second) gives their room back.
    clock.advance(Duration::from_secs(121));
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(served.http(), "leakgate_key_memory_bytes ") > 0 {
        assert!(Instant::now() < deadline, "empty buckets were never swept");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(throttle(&mut s, &key(299), (9, 1, 60), 1)[0], 0);
}

#[test]
fn keys_of_more_than_4_kib_are_refused_on_every_command() {
    let clock = ManualClock::new();
    let served = serve_manual("api = \"1/s\"\n", &clock);
    let mut s = raw(served.resp());
    let longest = "k".repeat(4096);
    assert_eq!(throttle(&mut s, &longest, (0, 1, 1), 1)[0], 0);
    let error = "-ERR the key is 4097 bytes long: keys may have at most 4096 bytes\r\n";
    let long = format!("api/{}", "k".repeat(4093));
    for command in [
        format!("CL.THROTTLE {long} 0 1 1\r\n"),
        format!("LG.CHECK {long}\r\n"),
        format!("LG.CHECKALL 1 api/x {long}\r\n"),
        format!("LG.RULE {long}\r\n"),
    ] {
        exchange(&mut s, command.as_bytes(), error);
    }
}
