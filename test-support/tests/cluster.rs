//! The Redis Cluster for tests: six real nodes make three masters with a replica each, a killed
//! or paused master is replaced by its replica, and no node outlives the cluster.

use leakgate_test_support::watchdog::has_exited;
use leakgate_test_support::Cluster;

#[test]
fn six_nodes_make_three_masters_with_a_replica_each() {
    let cluster = Cluster::start();
    assert_eq!(cluster.masters().len(), 3);
    for i in 0..6 {
        let info = cluster.info(i);
        assert!(info.contains("cluster_state:ok"), "node {i}: {info}");
        assert!(info.contains("cluster_known_nodes:6"), "node {i}: {info}");
        assert!(info.contains("cluster_slots_assigned:16384"), "node {i}: {info}");
    }
}

#[test]
fn a_killed_master_is_replaced_by_its_replica() {
    let mut cluster = Cluster::start();
    let master = cluster.masters()[0];
    let pid = cluster.nodes()[master].pid();
    cluster.node_mut(master).kill();
    assert!(has_exited(pid));
    cluster.wait_ok();
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "{masters:?}");
    assert!(!masters.contains(&master), "{masters:?}");
}

#[test]
fn a_paused_master_is_replaced_and_every_node_stops_with_the_cluster() {
    let mut cluster = Cluster::start();
    let master = cluster.masters()[1];
    cluster.node_mut(master).pause();
    cluster.wait_ok();
    assert!(!cluster.masters().contains(&master));
    let pids: Vec<_> = cluster.nodes().iter().map(|n| n.pid()).collect();
    let dirs: Vec<_> = cluster.nodes().iter().map(|n| n.dir().to_owned()).collect();
    drop(cluster);
    for (pid, dir) in pids.into_iter().zip(dirs) {
        assert!(has_exited(pid), "node {pid} outlived its cluster");
        assert!(!dir.exists(), "{dir:?} left behind");
    }
}

#[test]
fn a_test_that_panics_leaves_no_node_running_and_no_folder() {
    let (tx, rx) = std::sync::mpsc::channel();
    let test = std::thread::spawn(move || {
        let cluster = Cluster::start();
        let nodes: Vec<_> = cluster.nodes().iter().map(|n| (n.pid(), n.dir().to_owned())).collect();
        tx.send(nodes).unwrap();
        panic!("the test fails with its cluster running");
    });
    assert!(test.join().is_err());
    let nodes = rx.recv().unwrap();
    assert_eq!(nodes.len(), 6);
    for (pid, dir) in nodes {
        assert!(has_exited(pid), "node {pid} outlived the panic");
        assert!(!dir.exists(), "{dir:?} left behind");
    }
}

#[cfg(feature = "redis")]
#[test]
fn keys_are_found_on_their_master_and_follow_a_reshard() {
    let cluster = Cluster::start();
    let key = b"leakgate-test:k";
    let from = cluster.master_of(key);
    assert!(cluster.masters().contains(&from));
    let _: () =
        redis::cmd("SET").arg(key).arg(1).query(&mut cluster.nodes()[from].connection()).unwrap();
    assert_eq!(cluster.keys("leakgate-test:*"), vec![key.to_vec()]);
    assert_eq!(cluster.node_id(from).len(), 40);
    let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();
    // 5461 of `from`'s 5461 or 5462 slots, from its first: the key's among them.
    assert!(cluster.reshard(from, to, 5461), "redis-cli --cluster reshard failed");
    assert_eq!(cluster.master_of(key), to);
    let value: u32 =
        redis::cmd("GET").arg(key).query(&mut cluster.nodes()[to].connection()).unwrap();
    assert_eq!(value, 1, "the key moved with its slot");
}
