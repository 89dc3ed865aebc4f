//! A real Redis Cluster for one test: six `redis-server --cluster-enabled yes` nodes on free
//! 127.0.0.1 ports (three masters, a replica each, `cluster-node-timeout` 2 s), made one cluster
//! by `redis-cli --cluster create`, in a temporary directory; gone with the directory when the
//! test lets go of it, also when the test panics or the test binary is killed.
//!
//! Self-contained (it shares nothing with `server.rs`), so that it can move to a test-support
//! crate as it is. One watchdog, a small `sh`, starts the six servers, prints their pids and holds
//! the read end of a pipe whose write end only this process holds; when the pipe closes (the
//! `RedisCluster` is dropped, or this process ends in any way, `SIGKILL` included), it kills every
//! server (a stopped one too), reaps them and removes the directory.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// `sh -c WATCH name BINARY DIR PORT...`: starts one cluster node per port, prints each pid,
/// then on the end of standard input kills them all and removes `DIR`.
const WATCH: &str = r#"bin=$1; dir=$2; shift 2
pids=""
for port in "$@"; do
  "$bin" --port "$port" --bind 127.0.0.1 --protected-mode no --save "" --appendonly no \
    --cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" \
    --cluster-node-timeout 2000 --dir "$dir" --logfile "$dir/redis-$port.log" \
    </dev/null >/dev/null 2>&1 &
  pids="$pids $!"
  echo "$!"
done
read -r _
kill -KILL $pids 2>/dev/null
wait
rm -rf -- "$dir"
exit 0"#;

/// How many nodes: three masters and one replica each.
pub const NODES: usize = 6;

/// A running six-node Redis Cluster.
pub struct RedisCluster {
    watchdog: Child,
    stdin: Option<ChildStdin>,
    ports: Vec<u16>,
    pids: Vec<Pid>,
    dir: PathBuf,
}

impl RedisCluster {
    /// Starts the nodes, joins them and waits until every node reports `cluster_state:ok` with
    /// all 16384 slots served and each master has its replica (a few seconds). Panics, leaving
    /// nothing behind, if that fails three times.
    pub fn start() -> RedisCluster {
        for _ in 0..3 {
            if let Some(cluster) = RedisCluster::try_start() {
                return cluster;
            }
        }
        panic!("cannot start a Redis Cluster: see scripts/ensure-redis.sh");
    }

    fn try_start() -> Option<RedisCluster> {
        let dir = tempfile::Builder::new().prefix("leakgate-cluster").tempdir().ok()?.keep();
        let ports = free_ports(NODES)?;
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCH)
            .arg("redis-test-cluster")
            .arg(binary("redis-server"))
            .arg(&dir)
            .args(ports.iter().map(u16::to_string))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh, for the test cluster's watchdog");
        let stdin = watchdog.stdin.take();
        let mut lines = BufReader::new(watchdog.stdout.take().expect("piped")).lines();
        let pids: Vec<Pid> = (0..NODES)
            .map_while(|_| lines.next()?.ok()?.trim().parse::<i32>().ok().map(Pid::from_raw))
            .collect();
        // Dropped unless whole: the watchdog then stops whatever started and removes `dir`.
        let cluster = RedisCluster { watchdog, stdin, ports, pids, dir };
        (cluster.pids.len() == NODES && cluster.create()).then_some(cluster)
    }

    /// `redis-cli --cluster create`, then waits for the cluster to be whole.
    fn create(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.ports.iter().all(|&p| self.query(p, &["PING"]).is_some()) {
            if Instant::now() > deadline || self.pids.iter().any(|&p| has_exited(p)) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let nodes: Vec<String> = self.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let created = Command::new(binary("redis-cli"))
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        created && self.wait_whole(Duration::from_secs(30))
    }

    /// Waits until every live node reports the cluster ok, all slots served, and three masters
    /// each with a connected replica.
    pub fn wait_whole(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let live: Vec<u16> = self.live_ports();
            let ok = live.iter().all(|&p| {
                self.query(p, &["CLUSTER", "INFO"]).is_some_and(|info| {
                    info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
                })
            });
            if ok && self.masters().len() == 3 && self.replicated() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Waits until every live node reports the cluster ok with all slots served by three
    /// masters (after a failover: the replica promoted), replicas or not.
    pub fn wait_ok(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let ok = self.live_ports().iter().all(|&p| {
                self.query(p, &["CLUSTER", "INFO"]).is_some_and(|info| {
                    info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
                })
            });
            if ok && self.masters().len() == 3 && self.masters().iter().all(|&m| self.is_live(m)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Whether the node on `port` is running.
    pub fn is_live(&self, port: u16) -> bool {
        !has_exited(self.pid(port))
    }

    /// Whether every master that serves slots has a replica that is up and in sync.
    fn replicated(&self) -> bool {
        self.masters().iter().all(|&p| {
            self.query(p, &["INFO", "replication"]).is_some_and(|info| {
                info.contains("connected_slaves:1") && info.contains(",state=online")
            })
        })
    }

    /// The seed URLs: every node's.
    pub fn seeds(&self) -> Vec<String> {
        self.ports.iter().map(|p| format!("redis://127.0.0.1:{p}/")).collect()
    }

    /// The ports of the nodes still running.
    pub fn live_ports(&self) -> Vec<u16> {
        self.ports
            .iter()
            .zip(&self.pids)
            .filter(|(_, pid)| !has_exited(**pid))
            .map(|(p, _)| *p)
            .collect()
    }

    /// The ports of the masters that serve slots, as the first live node sees them.
    pub fn masters(&self) -> Vec<u16> {
        let Some(&port) = self.live_ports().first() else { return Vec::new() };
        let nodes = self.query(port, &["CLUSTER", "NODES"]).unwrap_or_default();
        let mut masters: Vec<u16> = nodes
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                f.len() > 8 && f[2].contains("master") && !f[2].contains("fail")
            })
            .filter_map(|l| l.split(' ').nth(1)?.split(['@', ':']).nth(1)?.parse().ok())
            .collect();
        masters.sort_unstable();
        masters
    }

    /// The port of the master that serves `key`'s slot, as the first live node sees it.
    pub fn master_of(&self, key: &[u8]) -> u16 {
        let port = self.live_ports()[0];
        let mut con = self.connection(port);
        let slot: u16 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut con).unwrap();
        let slots: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con).unwrap();
        let redis::Value::Array(ranges) = slots else { panic!("CLUSTER SLOTS: {slots:?}") };
        for range in ranges {
            let redis::Value::Array(r) = range else { continue };
            let (Ok(lo), Ok(hi)) = (
                redis::from_redis_value::<u16>(r[0].clone()),
                redis::from_redis_value::<u16>(r[1].clone()),
            ) else {
                continue;
            };
            if (lo..=hi).contains(&slot) {
                let redis::Value::Array(master) = &r[2] else { continue };
                return redis::from_redis_value::<u16>(master[1].clone()).unwrap();
            }
        }
        panic!("no master serves slot {slot}");
    }

    /// The cluster node id of the node on `port`.
    pub fn node_id(&self, port: u16) -> String {
        self.query(port, &["CLUSTER", "MYID"]).expect("CLUSTER MYID")
    }

    /// Moves `slots` hash slots from the master on `from` to the master on `to`, keys included
    /// (`redis-cli --cluster reshard`: `MIGRATE`, clients see `ASK` and then `MOVED`); whether
    /// it succeeded.
    pub fn reshard(&self, from: u16, to: u16, slots: u32) -> bool {
        Command::new(binary("redis-cli"))
            .args(["--cluster", "reshard", &format!("127.0.0.1:{from}")])
            .args(["--cluster-from", &self.node_id(from), "--cluster-to", &self.node_id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .args(["--cluster-pipeline", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The pid of the node on `port`.
    pub fn pid(&self, port: u16) -> Pid {
        self.pids[self.ports.iter().position(|&p| p == port).expect("a node's port")]
    }

    /// `kill -9` of the node on `port`.
    pub fn kill(&self, port: u16) {
        let _ = kill(self.pid(port), Signal::SIGKILL);
    }

    /// Freezes (`SIGSTOP`) or thaws (`SIGCONT`) the node on `port`.
    pub fn freeze(&self, port: u16, frozen: bool) {
        let _ = kill(self.pid(port), if frozen { Signal::SIGSTOP } else { Signal::SIGCONT });
    }

    /// A plain blocking connection to the node on `port`.
    pub fn connection(&self, port: u16) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        client.get_connection_with_timeout(Duration::from_secs(2)).unwrap()
    }

    /// Every key of every master (`KEYS pattern`), for tests that inspect what was written.
    pub fn keys(&self, pattern: &str) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for port in self.masters() {
            let mut con = self.connection(port);
            let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg(pattern).query(&mut con).unwrap();
            all.extend(keys);
        }
        all
    }

    /// The directory the nodes write in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A command's reply on `port` as text, `None` if the node does not answer within a second.
    fn query(&self, port: u16, args: &[&str]) -> Option<String> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
        let mut con = client.get_connection_with_timeout(Duration::from_secs(1)).ok()?;
        con.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        match cmd.query::<redis::Value>(&mut con).ok()? {
            redis::Value::SimpleString(s) => Some(s),
            redis::Value::BulkString(b) => String::from_utf8(b).ok(),
            redis::Value::VerbatimString { text, .. } => Some(text),
            redis::Value::Okay => Some("OK".into()),
            _ => None,
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for &pid in &self.pids {
            let _ = kill(pid, Signal::SIGCONT);
        }
        drop(self.stdin.take());
        let _ = self.watchdog.wait();
    }
}

/// Whether process `pid` has ended (a zombie not yet reaped counts as ended).
fn has_exited(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
        Err(_) => true,
    }
}

fn binary(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin"] {
        let candidate = Path::new(dir).join(name);
        if candidate.exists() {
            return candidate;
        }
    }
    name.into()
}

/// `n` free ports whose cluster bus ports (`port + 10000`) are free too.
fn free_ports(n: usize) -> Option<Vec<u16>> {
    let mut held = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").ok()?;
        let port = l.local_addr().ok()?.port();
        if port <= 55_000 {
            if let Ok(bus) = TcpListener::bind(("127.0.0.1", port + 10_000)) {
                ports.push(port);
                held.push((l, bus));
                if ports.len() == n {
                    return Some(ports);
                }
            }
        }
    }
    None
}
