//! A real Redis Cluster for one test: six `redis-server`s (each a
//! [`RedisServer`] under its watchdog, `--cluster-enabled yes`, a node
//! timeout of two seconds), joined by `redis-cli --cluster create ... --cluster-replicas 1` into
//! three masters with a replica each, and ready once every node reports `cluster_state:ok`
//! with all slots served and every replica synced. Nodes are named by their index in
//! [`Cluster::nodes`]. A test may kill or pause any node ([`Cluster::node_mut`]) and wait for a
//! replica to take over ([`Cluster::wait_ok`]), or move slots ([`Cluster::reshard`]); all six
//! stop, and their folders go, when the cluster is dropped, the test panics or the test process
//! ends.
//!
//! ```
//! let cluster = leakgate_test_support::Cluster::start();
//! assert_eq!(cluster.seeds().len(), 6);
//! assert_eq!(cluster.masters().len(), 3);
//! ```

use crate::redis::binary;
use crate::RedisServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may be unreachable before the others fail it over (ms): a pause shorter
/// than this is a freeze, not a failover (tests rely on a 1 s freeze staying one).
///
/// ```
/// assert!(leakgate_test_support::cluster::NODE_TIMEOUT_MS > 1_000);
/// ```
pub const NODE_TIMEOUT_MS: u64 = 2000;

/// Six nodes of a Redis Cluster: three masters, three replicas.
///
/// ```no_run
/// let cluster = leakgate_test_support::Cluster::start();
/// assert!(cluster.info(0).contains("cluster_state:ok"));
/// ```
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Starts six nodes, makes them a cluster, and waits (30 s at most) until every node says
    /// `cluster_state:ok` (panics, naming `scripts/ensure-redis.sh`, when it cannot).
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert_eq!(cluster.nodes().len(), 6);
    /// ```
    pub fn start() -> Cluster {
        let settings = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &NODE_TIMEOUT_MS.to_string(),
            // A replica syncs at once (not after the default 5 s), so that it can take over.
            "--repl-diskless-sync-delay",
            "0",
        ];
        let nodes: Vec<RedisServer> = (0..6).map(|_| RedisServer::start_with(&settings)).collect();
        let out = Command::new(binary("redis-cli"))
            .arg("--cluster")
            .arg("create")
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run redis-cli ({e}): see scripts/ensure-redis.sh"));
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        cluster.wait_ok();
        cluster
    }

    /// The nodes, in the order they were started (the first three the first masters).
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert!(cluster.nodes().iter().all(|n| n.port() > 0));
    /// ```
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Node `i`, to kill, pause, resume or restart.
    ///
    /// ```no_run
    /// let mut cluster = leakgate_test_support::Cluster::start();
    /// cluster.node_mut(5).kill(); // a replica: the cluster stays whole
    /// ```
    pub fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.nodes[i]
    }

    /// Every node's URL (`redis://127.0.0.1:PORT/`), to seed a cluster client with.
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert!(cluster.seeds()[0].starts_with("redis://127.0.0.1:"));
    /// ```
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The indexes of the nodes that are masters now, by their own `ROLE` (a node that does
    /// not answer is left out).
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert_eq!(cluster.masters(), vec![0, 1, 2]);
    /// ```
    pub fn masters(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                query(self.nodes[i].port(), "ROLE").is_some_and(|r| r.starts_with("master"))
            })
            .collect()
    }

    /// Node `i`'s `CLUSTER INFO` (empty when it does not answer within a second).
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert!(cluster.info(3).contains("cluster_known_nodes:6"));
    /// ```
    pub fn info(&self, i: usize) -> String {
        query(self.nodes[i].port(), "CLUSTER INFO").unwrap_or_default()
    }

    /// Waits (30 s at most, else panics) until every node that answers says
    /// `cluster_state:ok` with all 16384 slots served, three of them are masters, and every
    /// replica that answers has its link to its master up (a replica that never synced would
    /// not take over): after a master was killed, until a replica has taken its place.
    ///
    /// ```no_run
    /// let mut cluster = leakgate_test_support::Cluster::start();
    /// cluster.node_mut(0).kill();
    /// cluster.wait_ok();
    /// assert_eq!(cluster.masters().len(), 3);
    /// ```
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answers: Vec<String> =
                (0..self.nodes.len()).map(|i| self.info(i)).filter(|i| !i.is_empty()).collect();
            let ok = !answers.is_empty()
                && answers.iter().all(|i| {
                    i.contains("cluster_state:ok") && i.contains("cluster_slots_ok:16384")
                })
                && self.masters().len() == 3
                && (0..self.nodes.len()).all(|i| self.replica_linked_or_not_replica(i));
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster is not ok: {answers:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Node `i`'s cluster node id (`CLUSTER MYID`; panics when it does not answer).
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert_eq!(cluster.node_id(0).len(), 40);
    /// ```
    pub fn node_id(&self, i: usize) -> String {
        query(self.nodes[i].port(), "CLUSTER MYID").expect("CLUSTER MYID")
    }

    /// Moves `slots` hash slots from master `from` to master `to`, keys included
    /// (`redis-cli --cluster reshard`: `MIGRATE`, clients see `ASK` and then `MOVED`); whether
    /// it succeeded.
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// let m = cluster.masters();
    /// assert!(cluster.reshard(m[0], m[1], 100));
    /// ```
    pub fn reshard(&self, from: usize, to: usize, slots: u32) -> bool {
        let entry = format!("127.0.0.1:{}", self.nodes[from].port());
        Command::new(binary("redis-cli"))
            .args(["--cluster", "reshard", &entry])
            .args(["--cluster-from", &self.node_id(from), "--cluster-to", &self.node_id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .args(["--cluster-pipeline", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The index of the master that serves `key`'s slot, as the first node that answers
    /// sees it (`CLUSTER KEYSLOT`, `CLUSTER SLOTS`; feature `redis`). Panics when no node
    /// answers or no master serves the slot.
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert!(cluster.masters().contains(&cluster.master_of(b"some key")));
    /// ```
    #[cfg(feature = "redis")]
    pub fn master_of(&self, key: &[u8]) -> usize {
        use ::redis::{cmd, from_redis_value, Value};
        let mut con = self.any_connection();
        let slot: u16 = cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut con).unwrap();
        let slots: Value = cmd("CLUSTER").arg("SLOTS").query(&mut con).unwrap();
        let Value::Array(ranges) = slots else { panic!("CLUSTER SLOTS: {slots:?}") };
        for range in ranges {
            let Value::Array(r) = range else { continue };
            let (Some(lo), Some(hi), Some(Value::Array(master))) = (r.first(), r.get(1), r.get(2))
            else {
                continue;
            };
            let (Ok(lo), Ok(hi)) =
                (from_redis_value::<u16>(lo.clone()), from_redis_value::<u16>(hi.clone()))
            else {
                continue;
            };
            if (lo..=hi).contains(&slot) {
                let port: u16 = from_redis_value(master[1].clone()).expect("a master's port");
                return self.index_of(port);
            }
        }
        panic!("no master serves slot {slot}");
    }

    /// Every key matching `pattern` on every master (`KEYS`; feature `redis`), for tests that
    /// inspect what was written.
    ///
    /// ```no_run
    /// let cluster = leakgate_test_support::Cluster::start();
    /// assert!(cluster.keys("*").is_empty());
    /// ```
    #[cfg(feature = "redis")]
    pub fn keys(&self, pattern: &str) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for i in self.masters() {
            let mut con = self.nodes[i].connection();
            let keys: Vec<Vec<u8>> = ::redis::cmd("KEYS").arg(pattern).query(&mut con).unwrap();
            all.extend(keys);
        }
        all
    }
}

impl Cluster {
    /// The index of the node on `port` (panics for a port not the cluster's).
    #[cfg(feature = "redis")]
    fn index_of(&self, port: u16) -> usize {
        self.nodes.iter().position(|n| n.port() == port).expect("a node's port")
    }

    /// A connection to the first node that answers within a second (one killed or paused is
    /// passed over), with reads bounded by a second too.
    #[cfg(feature = "redis")]
    fn any_connection(&self) -> ::redis::Connection {
        let second = Some(Duration::from_secs(1));
        self.nodes
            .iter()
            .filter(|n| crate::ports::answers_ping(n.port()))
            .find_map(|n| {
                let client = ::redis::Client::open(n.url()).ok()?;
                let con = client.get_connection_with_timeout(Duration::from_secs(1)).ok()?;
                con.set_read_timeout(second).ok()?;
                Some(con)
            })
            .expect("a node of the cluster that answers")
    }

    /// Whether node `i` is not a replica (or does not answer), or is one whose link to its
    /// master is up.
    fn replica_linked_or_not_replica(&self, i: usize) -> bool {
        let info = query(self.nodes[i].port(), "INFO replication").unwrap_or_default();
        !info.contains("role:slave") || info.contains("master_link_status:up")
    }
}

/// Sends `command` (inline, words split on spaces) to the node on `port` and reads one reply:
/// a bulk string's text, or an array's first element's. `None` when the node does not answer
/// within a second.
fn query(port: u16, command: &str) -> Option<String> {
    let stream =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500))
            .ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    (&stream).write_all(format!("{command}\r\n").as_bytes()).ok()?;
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    reader.read_line(&mut head).ok()?;
    if head.starts_with('*') {
        // An array (`ROLE`): its first element, a bulk string.
        head.clear();
        reader.read_line(&mut head).ok()?;
    }
    let len: usize = head.strip_prefix('$')?.trim().parse().ok()?;
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}
