//! Two `serve` instances on one real Redis Cluster (three masters, a replica each): one limit per
//! key shared across the instances whatever the key's slot, `/buckets` listing the buckets of
//! every master, and rules pushed to the cluster reaching both.

mod support;

use leakgate::TscClock;
use leakgate_test_support::Cluster;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{any_port, http_get, raw, read_reply, Served};

fn instance(cluster: &Cluster, rules: &str) -> Served<TscClock> {
    let rules = support::RulesFile::toml(rules);
    let runtime = support::runtime();
    let config = leakgate_serve::Config::new(&rules.path)
        .resp(any_port())
        .http(any_port())
        .redis_cluster(cluster.seeds())
        .redis_deadline(Duration::from_secs(2));
    let running = runtime.block_on(leakgate_serve::start(config)).expect("an instance");
    Served::from_parts(runtime, running, rules)
}

fn ask(s: &mut TcpStream, command: &str) -> String {
    s.write_all(format!("{command}\r\n").as_bytes()).unwrap();
    read_reply(s)
}

#[test]
fn instances_on_a_cluster_share_each_key_list_every_master_and_follow_pushes() {
    let cluster = Cluster::start();
    let rules = "view = \"1/h burst 3\"\n";
    let a = instance(&cluster, rules);
    let b = instance(&cluster, rules);
    let (mut sa, mut sb) = (raw(a.resp()), raw(b.resp()));
    // Twelve keys, over every master: each admits its burst of 3 across both instances.
    let users: Vec<String> = (0..12).map(|i| format!("view/u{i}")).collect();
    for user in &users {
        for i in 0..3 {
            let s = if i == 1 { &mut sb } else { &mut sa };
            let reply = ask(s, &format!("LG.CHECK {user} 1"));
            assert!(reply.starts_with("*5\r\n:0\r\n"), "{user} #{i}: {reply:?}");
        }
        assert!(ask(&mut sb, &format!("LG.CHECK {user} 1")).starts_with("*5\r\n:1\r\n"), "{user}");
    }
    let masters: std::collections::BTreeSet<usize> = users
        .iter()
        .map(|u| cluster.master_of(format!("leakgate:gcra1@view:{u}").as_bytes()))
        .collect();
    assert_eq!(masters.len(), 3, "the keys should live on every master");
    // Either instance lists all twelve, found on the three masters.
    let page: serde_json::Value = serde_json::from_str(&http_get(a.http(), "/buckets")).unwrap();
    let keys: Vec<&str> =
        page["buckets"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    let mut expected: Vec<&str> = users.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(keys, expected);
    // Rules pushed to the cluster reach both instances.
    let mut pushed = leakgate::Rules::new();
    pushed.insert("view", ["7/min".parse().unwrap()]);
    let seeds = cluster.seeds();
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    assert_eq!(leakgate_redis::push_rules_cluster(&seeds, "leakgate:", &pushed).unwrap(), 1);
    let pushed_at = Instant::now();
    for s in [&mut sa, &mut sb] {
        while !ask(s, "LG.RULE view/x").contains("7/min") {
            assert!(pushed_at.elapsed() < Duration::from_secs(10), "never picked up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_request_over_keys_in_several_slots_is_admitted_or_refused_whole() {
    let cluster = Cluster::start();
    let served = instance(&cluster, "view = \"1/h burst 3\"\n");
    let mut s = raw(served.resp());
    let on = |user: &str| cluster.master_of(format!("leakgate:gcra1@view:{user}").as_bytes());
    assert_ne!(on("view/u0"), on("view/u1"), "two slots on two masters");
    // Both keys charged, in two slots.
    let reply = ask(&mut s, "LG.CHECKALL 1 view/u0 view/u1");
    assert!(reply.starts_with("*5\r\n:0\r\n:2\r\n"), "{reply:?}");
    assert!(ask(&mut s, "LG.CHECK view/u1 2").starts_with("*5\r\n:0\r\n:0\r\n"));
    // view/u1 is full: refused whole, and view/u0 keeps its two units.
    let reply = ask(&mut s, "LG.CHECKALL 1 view/u0 view/u1");
    assert!(reply.starts_with("*5\r\n:1\r\n"), "{reply:?}");
    assert!(ask(&mut s, "LG.CHECK view/u0 2").starts_with("*5\r\n:0\r\n:0\r\n"), "not charged");
    for key in cluster.keys("*") {
        let mut con = cluster.nodes()[cluster.master_of(&key)].connection();
        let value: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        assert!(!value.contains(';'), "a hold was left: {value}");
    }
}
