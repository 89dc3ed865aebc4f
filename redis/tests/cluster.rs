//! A limiter on a real six-node Redis Cluster decides exactly as the same limiter on one Redis
//! and as the exact model, on the same manual clock, for keys spread over every master: plain
//! limiters with several quotas, `check_all_n` over one `{tag}`, peeks, reservations, and rules
//! limiters (shadow rules, several quotas, a reload). The cluster is started by the test and
//! stopped with it (`leakgate_test_support::Cluster`).

mod support;

use leakgate::{ManualClock, Quota, Rules};
use leakgate_redis::{Builder, RedisLimiter, RedisRuleLimiter};
use leakgate_test_support::Cluster;
use std::collections::BTreeSet;
use std::time::Duration;
use support::model::{observed, Model};
use support::RedisServer;

/// A small seeded generator (xorshift), so every run plays the same sequence.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn quotas() -> Vec<Quota> {
    vec!["7/s burst 5".parse().unwrap(), "100/min burst 12".parse().unwrap()]
}

/// A plain limiter on `builder`'s target with the test's quotas, on the caller's `clock`.
fn plain(builder: Builder, clock: &ManualClock) -> RedisLimiter {
    quotas()
        .into_iter()
        .fold(builder, Builder::quota)
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600))
        .connect()
        .expect("a limiter")
}

/// Keys over many slots (so over every master), and two that share a tag.
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..12).map(|i| format!("user/{i}").into_bytes()).collect();
    keys.push(b"{acme}/tenant".to_vec());
    keys.push(b"{acme}/user/7".to_vec());
    keys
}

#[test]
fn plain_limiter_on_a_cluster_decides_as_on_one_node_and_as_the_model() {
    let cluster = Cluster::start();
    let server = RedisServer::start();
    let clock = support::epoch();
    let on_cluster = plain(Builder::cluster(cluster.seeds()), &clock);
    let on_one = plain(Builder::new(server.url()), &clock);
    let mut model = Model::new(quotas());
    let keys = keys();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for step in 0..600 {
        let key = keys[rng.below(keys.len() as u64) as usize].as_slice();
        let n = rng.below(4);
        let t = u64::try_from(clock.now().as_nanos()).unwrap();
        let (a, b, expected) = match rng.below(10) {
            0..=5 => {
                (on_cluster.check_n(key, n), on_one.check_n(key, n), model.request(&[key], n, t, 0))
            }
            6 => (on_cluster.peek(key), on_one.peek(key), model.request(&[key], 0, t, 0)),
            _ => {
                let both: [&[u8]; 2] = [b"{acme}/tenant", b"{acme}/user/7"];
                (
                    on_cluster.check_all_n(&both, n),
                    on_one.check_all_n(&both, n),
                    model.request(&both, n, t, 0),
                )
            }
        };
        assert_eq!(a, b, "step {step}: cluster and one node differ");
        assert_eq!(observed(a.map(|ok| (ok, 0))), expected, "step {step}: not the model's");
        clock.advance(Duration::from_millis(rng.below(400)));
    }
    let stats = on_cluster.stats();
    assert_eq!((stats.timeouts, stats.unavailable, stats.rejected), (0, 0, 0), "{stats:?}");
    assert_eq!(stats.policy_admitted + stats.policy_denied, 0, "{stats:?}");
    // The keys live on every master: the calls were routed by slot.
    let holders: BTreeSet<usize> =
        keys.iter().map(|k| cluster.master_of(&on_cluster.redis_key(k))).collect();
    assert_eq!(holders.len(), 3, "the test's keys should cover all three masters");
    assert!(cluster.keys("leakgate:*").len() >= 10, "buckets written on the masters");
}

#[test]
fn reservations_on_a_cluster_queue_as_on_one_node() {
    let cluster = Cluster::start();
    let server = RedisServer::start();
    let clock = support::epoch();
    let on_cluster = plain(Builder::cluster(cluster.seeds()), &clock);
    let on_one = plain(Builder::new(server.url()), &clock);
    let mut rng = Rng(7);
    for step in 0..200 {
        let key = format!("queue/{}", rng.below(6));
        let (n, wait) = (rng.below(4), Duration::from_millis(rng.below(3_000)));
        let a = on_cluster.reserve_n(&key, n, wait).map(|r| r.ready_at());
        let b = on_one.reserve_n(&key, n, wait).map(|r| r.ready_at());
        assert_eq!(a, b, "step {step}");
        clock.advance(Duration::from_millis(rng.below(300)));
    }
}

fn rules(api_burst: u64) -> Rules {
    let mut rules = Rules::new();
    rules.insert("", ["2/s burst 3".parse().unwrap()]);
    rules.insert(
        "api",
        [format!("10/s burst {api_burst}").parse().unwrap(), "600/min".parse().unwrap()],
    );
    rules.insert("api/beta", ["1/s burst 2".parse().unwrap()]).shadow(true);
    rules.insert("tenant", ["5/s burst 4".parse().unwrap()]);
    rules
}

fn rules_limiter(builder: Builder, clock: &ManualClock) -> RedisRuleLimiter {
    builder
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600))
        .connect_rules(rules(8))
        .expect("a rules limiter")
}

#[test]
fn rules_limiter_on_a_cluster_decides_as_on_one_node() {
    let cluster = Cluster::start();
    let server = RedisServer::start();
    let clock = support::epoch();
    let on_cluster = rules_limiter(Builder::cluster(cluster.seeds()), &clock);
    let on_one = rules_limiter(Builder::new(server.url()), &clock);
    let single = ["api/a", "api/b/{x}", "api/beta/1", "other/9", "tenant/{acme}", "zzz"];
    let mut rng = Rng(12345);
    for step in 0..600 {
        if step == 300 {
            // A reload that changes quotas only: both carry every key over the same way.
            on_cluster.reload(rules(4)).unwrap();
            on_one.reload(rules(4)).unwrap();
        }
        let n = rng.below(4);
        let (a, b) = match rng.below(8) {
            0..=5 => {
                let key = single[rng.below(single.len() as u64) as usize];
                (on_cluster.check_n(key, n), on_one.check_n(key, n))
            }
            6 => {
                let key = single[rng.below(single.len() as u64) as usize];
                (on_cluster.peek(key), on_one.peek(key))
            }
            _ => {
                let tagged = ["api/{acme}", "tenant/{acme}", "api/beta/{acme}"];
                (on_cluster.check_all_n(&tagged, n), on_one.check_all_n(&tagged, n))
            }
        };
        assert_eq!(a, b, "step {step}: cluster and one node differ");
        clock.advance(Duration::from_millis(rng.below(300)));
    }
    assert_eq!(on_cluster.rule_stats(), on_one.rule_stats());
    let stats = on_cluster.stats();
    assert_eq!((stats.timeouts, stats.unavailable, stats.rejected), (0, 0, 0), "{stats:?}");
}

/// A decision by Redis: the shorthands keep the 5 ms default deadline, which a machine busy with
/// other tests may miss (the policy then answers, `Err` here): ask again, for up to 10 s.
fn by_redis<D, E: std::fmt::Debug>(mut ask: impl FnMut() -> Result<D, E>) -> D {
    let start = std::time::Instant::now();
    loop {
        match ask() {
            Ok(decision) => return decision,
            Err(e) if start.elapsed() > Duration::from_secs(10) => panic!("no decision: {e:?}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[test]
fn the_shorthands_connect_to_a_cluster() {
    let cluster = Cluster::start();
    let seeds = cluster.seeds();
    // One seed is enough: the client reads the slot map from it.
    let lim = RedisLimiter::connect_cluster(&seeds[..1], "1/h burst 2".parse().unwrap()).unwrap();
    assert!(by_redis(|| lim.try_check_n("a", 1)).is_ok());
    assert!(by_redis(|| lim.try_check_n("a", 1)).is_ok());
    assert!(by_redis(|| lim.try_check_n("a", 1)).is_err());
    let mut r = Rules::new();
    r.insert("x", ["1/h burst 1".parse().unwrap()]);
    let rl = RedisRuleLimiter::connect_cluster(&seeds, r).unwrap();
    assert!(by_redis(|| rl.try_check_n("x/1", 1)).is_ok());
    assert!(by_redis(|| rl.try_check_n("x/1", 1)).is_err());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let q = "1/h burst 1".parse().unwrap();
    let a = rt.block_on(leakgate_redis::AsyncRedisLimiter::connect_cluster(&seeds, q)).unwrap();
    assert!(by_redis(|| rt.block_on(a.try_check_n("b", 1))).is_ok());
    assert!(by_redis(|| rt.block_on(a.try_check_n("b", 1))).is_err());
    // No seed at all is a configuration error, not a hang.
    let none: [&str; 0] = [];
    assert!(RedisLimiter::connect_cluster(none, "1/s".parse().unwrap()).is_err());
}

#[test]
fn a_reload_that_moves_keys_to_another_slot_keeps_them_decidable() {
    let cluster = Cluster::start();
    let clock = support::epoch();
    let lim = rules_limiter(Builder::cluster(cluster.seeds()), &clock);
    // "api/x/1" is under "api"; a new override "api/x" moves it to another path, whose Redis key
    // hashes elsewhere (no tag): the old path is not carried there, and nothing fails.
    for _ in 0..3 {
        lim.check("api/x/1").unwrap();
        lim.check("api/x/{t}").unwrap();
    }
    let mut moved = rules(8);
    moved.insert("api/x", ["1/s burst 1".parse().unwrap()]);
    lim.reload(moved).unwrap();
    assert!(lim.try_check_n("api/x/1", 1).unwrap().is_ok(), "starts afresh under api/x");
    assert!(lim.try_check_n("api/x/1", 1).unwrap().is_err());
    // A tagged key's old and new Redis keys share a slot: carried over as on one node.
    let carried = lim.try_check_n("api/x/{t}", 1).unwrap();
    assert!(carried.is_ok());
    let stats = lim.stats();
    assert_eq!((stats.rejected, stats.unavailable, stats.timeouts), (0, 0, 0), "{stats:?}");
}

#[test]
fn rules_pushed_to_a_cluster_are_fetched_from_it() {
    let cluster = Cluster::start();
    let seeds = cluster.seeds();
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    assert_eq!(leakgate_redis::fetch_rules_cluster(&seeds, "p:").unwrap(), None);
    let pushed = rules(8);
    assert_eq!(leakgate_redis::push_rules_cluster(&seeds, "p:", &pushed).unwrap(), 1);
    assert_eq!(leakgate_redis::push_rules_cluster(&seeds[1..2], "p:", &pushed).unwrap(), 2);
    // Read back through any other node: the key lives on one master, the client finds it.
    let got = leakgate_redis::fetch_rules_cluster(&seeds[4..], "p:").unwrap().unwrap();
    assert_eq!((got.version, got.rules), (2, pushed));
    assert!(leakgate_redis::push_rules_cluster(&[], "p:", &rules(8)).is_err());
    // A follower on the cluster hands over the version in force, then each new push.
    let (tx, rx) = std::sync::mpsc::channel();
    let every = Duration::from_millis(20);
    let _follower =
        leakgate_redis::RulesFollower::start_cluster(&seeds[2..3], "p:", every, move |e| {
            if let leakgate_redis::FollowEvent::Pushed(p) = e {
                let _ = tx.send(p.version);
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2));
    leakgate_redis::push_rules_cluster(&seeds, "p:", &rules(4)).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(3));
}

#[test]
fn leases_and_the_cell_work_on_a_cluster() {
    let cluster = Cluster::start();
    let clock = support::epoch();
    // Leases: a hot key served mostly from leased units, never past burst + W / T.
    let lim = Builder::cluster(cluster.seeds())
        .quota("100/s burst 20".parse().unwrap())
        .caller_clock(clock.clone())
        .expiry_slack(Duration::from_secs(3600))
        .deadline(Duration::from_secs(5))
        .leases(leakgate_redis::LeaseConfig::new(16))
        .connect()
        .unwrap();
    let mut admitted = 0u64;
    for _ in 0..2_000 {
        admitted += u64::from(lim.check("hot").is_ok());
        clock.advance(Duration::from_micros(500));
    }
    // 2000 checks over 1 s of the clock: at most 20 + 100 units (one more for the last slot).
    assert!(admitted <= 20 + 100 + 1, "admitted {admitted}");
    assert!(admitted >= 100, "admitted only {admitted}");
    let stats = lim.stats();
    assert!(stats.round_trips < 2_000 / 2, "leases saved no round trip: {stats:?}");
    // redis-cell's bucket (serve's CL.THROTTLE with --redis) on the cluster.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let cell = Builder::cluster(cluster.seeds()).deadline(Duration::from_secs(5));
        let cell = cell.connect_cell_async().await.unwrap();
        let q: Quota = "1/h burst 2".parse().unwrap();
        assert!(cell.try_check_n(b"c", q, 1).await.unwrap().is_ok());
        assert!(cell.try_check_n(b"c", q, 1).await.unwrap().is_ok());
        assert!(cell.try_check_n(b"c", q, 1).await.unwrap().is_err());
    });
}

#[test]
fn wait_for_replicas_answers_once_a_replica_has_the_charge() {
    let cluster = Cluster::start();
    let server = RedisServer::start();
    let clock = support::epoch();
    let with_wait = |b: Builder, replicas| {
        b.quota("1/h burst 3".parse().unwrap())
            .caller_clock(clock.clone())
            .expiry_slack(Duration::from_secs(3600))
            .deadline(Duration::from_secs(2))
            .wait_for_replicas(replicas)
            .connect()
            .unwrap()
    };
    // Each master has one replica: its charges reach it, and the limiter decides as without WAIT.
    let durable = with_wait(Builder::cluster(cluster.seeds()), 1);
    for i in 0..12 {
        assert!(durable.check(format!("w{i}")).is_ok(), "w{i}");
    }
    let stats = durable.stats();
    assert_eq!(
        (stats.timeouts, stats.policy_denied, stats.redis_admitted),
        (0, 0, 12),
        "{stats:?}"
    );
    assert_eq!(stats.round_trips, 24, "one WAIT per admission: {stats:?}");
    // A refusal charges nothing and waits for nothing.
    for _ in 0..3 {
        let _ = durable.check("full");
    }
    let before = durable.stats().round_trips;
    assert!(durable.check("full").is_err());
    assert_eq!(durable.stats().round_trips, before + 1);
    // Two replicas never ack (there is one): the policy (deny) answers, the charge stays.
    let too_many = with_wait(Builder::cluster(cluster.seeds()), 2);
    assert!(too_many.check("x").is_err());
    assert_eq!(too_many.stats().timeouts, 1);
    assert!(durable.check("x").is_ok(), "x was charged once: two units left");
    assert!(durable.check("x").is_ok());
    assert!(durable.check("x").is_err());
    // One node without replicas: the same.
    let alone = with_wait(Builder::new(server.url()), 1);
    assert!(alone.check("y").is_err());
    assert_eq!(alone.stats().policy_denied, 1);
}
