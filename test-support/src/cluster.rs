//! A real Redis Cluster for one test: six `redis-server`s (each a
//! [`RedisServer`] under its watchdog, `--cluster-enabled yes`, a node
//! timeout of one second), joined by `redis-cli --cluster create ... --cluster-replicas 1` into
//! three masters with a replica each, and ready once every node reports `cluster_state:ok`. A
//! test may kill or pause any node ([`Cluster::node_mut`]) and wait for a replica to take over
//! ([`Cluster::wait_ok`]); all six stop, and their folders go, when the cluster is dropped or the
//! test process ends.
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

/// How long a node may be unreachable before the others fail it over (ms).
const NODE_TIMEOUT_MS: &str = "1000";

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
            NODE_TIMEOUT_MS,
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
    /// `cluster_state:ok`, three of them are masters, and every replica that answers has its
    /// link to its master up (a replica that never synced would not take over): after a master
    /// was killed, until a replica has taken its place.
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
                && answers.iter().all(|i| i.contains("cluster_state:ok"))
                && self.masters().len() == 3
                && (0..self.nodes.len()).all(|i| self.replica_linked_or_not_replica(i));
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster is not ok: {answers:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Cluster {
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
