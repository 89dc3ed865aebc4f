//! Child processes of a test binary: the test re-runs its own binary with only
//! `worker_entry_point` selected and a role in the environment, then reads what the child prints
//! (`HELD ...` for a holder, `HAMMER peak got busy` for a hammering worker).

use super::RedisServer;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Starts this test binary as a child that runs `worker_entry_point` alone, with the variables
/// `env` set (its role and the server's URL) and its stdout piped back.
pub fn spawn_worker(env: &[(&str, &str)]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["worker_entry_point", "--exact", "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads `child`'s stdout up to its first line that contains `tag`, and returns that line.
pub fn line_with(child: &mut Child, tag: &str) -> String {
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    lines.map_while(Result::ok).find(|l| l.contains(tag)).expect("the child's line")
}

/// Runs `workers` hammering children with `env` to the end, each printing
/// `HAMMER peak got busy`: the highest peak, and the acquires and refusals of all together.
pub fn hammers(workers: usize, env: &[(&str, &str)]) -> (i64, i64, i64) {
    let children: Vec<_> = (0..workers).map(|_| spawn_worker(env)).collect();
    let (mut peak, mut got, mut busy) = (0, 0, 0);
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a worker failed");
        let text = String::from_utf8(out.stdout).unwrap();
        let line = text.lines().find_map(|l| l.find("HAMMER ").map(|at| &l[at + 7..])).unwrap();
        let v: Vec<i64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        peak = peak.max(v[0]);
        got += v[1];
        busy += v[2];
    }
    println!("peak {peak}, acquired {got}, busy {busy}");
    (peak, got, busy)
}

/// After the hammers: the holders counter back at 0 and every permit of `shared` released.
pub fn assert_hammers_left_nothing(server: &RedisServer) {
    let mut con = server.connection();
    let holders: i64 = redis::cmd("GET").arg("holders").query(&mut con).unwrap();
    assert_eq!(holders, 0);
    let left: u64 = redis::cmd("ZCARD").arg("leakgate:permits1:shared").query(&mut con).unwrap();
    assert_eq!(left, 0, "every permit released");
}
